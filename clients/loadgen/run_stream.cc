#include "clients/loadgen/run_stream.h"

#include <chrono>

#include <grpcpp/client_context.h>

#include "clients/common/names.h"
#include "clients/common/request_flags.h"

namespace crossreg::clients {

StreamResult RunStream(crossreg::v1::Generation::Stub& stub, const crossreg::v1::GenerateRequest& request,
                       std::vector<int32_t>* output_ids) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };

  StreamResult result;
  result.mode = DecodingModeName(request.decoding().mode());
  grpc::ClientContext context;
  ApplyDeadlineFromFlags(context);

  const Clock::time_point start = Clock::now();
  Clock::time_point previous;
  auto reader = stub.Generate(&context, request);
  crossreg::v1::GenerateResponse response;
  while (reader->Read(&response)) {
    const Clock::time_point now = Clock::now();
    if (response.has_chunk()) {
      const int n = response.chunk().token_ids_size();
      if (n == 0) continue;
      if (result.ttft_s < 0) {
        result.ttft_s = seconds(now - start);
      } else {
        const double per_token = seconds(now - previous) / n;
        result.itl_s.insert(result.itl_s.end(), n, per_token);
      }
      previous = now;
      result.tokens_received += n;
      if (output_ids != nullptr) {
        output_ids->insert(output_ids->end(), response.chunk().token_ids().begin(), response.chunk().token_ids().end());
      }
    } else if (response.has_complete()) {
      const auto& c = response.complete();
      result.completed = true;
      result.completion_tokens = c.usage().completion_tokens();
      result.prompt_tokens = c.usage().prompt_tokens();
      result.cached_prompt_tokens = c.usage().cached_prompt_tokens();
      result.forwards = c.spec().forwards();
      result.drafted = c.spec().drafted();
      result.accepted = c.spec().accepted();
      result.tokens_per_forward = c.spec().tokens_per_forward();
      result.server_queue_s = c.timings().queue_seconds();
      result.server_ttft_s = c.timings().time_to_first_token_seconds();
    } else if (response.has_error()) {
      // The final status normally repeats this; keep it in case the status is OK.
      result.code = static_cast<grpc::StatusCode>(response.error().code());
      result.error_message = response.error().message();
    }
  }
  const grpc::Status status = reader->Finish();
  result.e2e_s = seconds(Clock::now() - start);
  if (!status.ok()) {
    result.code = status.error_code();
    result.error_message = status.error_message();
  } else if (result.code == grpc::StatusCode::OK && !result.completed) {
    result.code = grpc::StatusCode::INTERNAL;
    result.error_message = "stream ended without a Complete message";
  }
  return result;
}

}  // namespace crossreg::clients
