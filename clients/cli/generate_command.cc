#include <chrono>
#include <cstdio>
#include <iostream>

#include <grpcpp/client_context.h>

#include "absl/strings/str_format.h"
#include "clients/cli/commands.h"
#include "clients/common/names.h"
#include "clients/common/proto_json.h"
#include "clients/common/request_flags.h"
#include "clients/common/status_text.h"
#include "crossreg/v1/generation.grpc.pb.h"

namespace crossreg::clients {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

// One line a person can read at a glance: the server's own accounting first, then
// what this client measured (which adds the network and the client's scheduling).
void PrintStatsLine(const crossreg::v1::GenerateRequest& request, const crossreg::v1::Complete& done,
                    double client_ttft_ms, double client_total_ms) {
  const auto& spec = done.spec();
  const auto& t = done.timings();
  std::string line = absl::StrFormat(
      "[crossreg] finish=%s id=%s mode=%s tokens=%d+%d forwards=%d tpf=%.2f drafted=%d accepted=%d",
      FinishReasonName(done.finish_reason()), done.request_id(), DecodingModeName(request.decoding().mode()),
      done.usage().prompt_tokens(), done.usage().completion_tokens(), spec.forwards(),
      spec.tokens_per_forward(), spec.drafted(), spec.accepted());
  if (spec.drafted() > 0) line += absl::StrFormat(" (%.1f%%)", 100.0 * spec.accepted() / spec.drafted());
  if (done.usage().cached_prompt_tokens() > 0) {
    line += absl::StrFormat(" cached_prompt=%d", done.usage().cached_prompt_tokens());
  }
  if (spec.ar_forwards() > 0) line += absl::StrFormat(" ar_forwards=%d", spec.ar_forwards());
  if (request.sampling().temperature() > 0) line += absl::StrFormat(" seed=%d", done.usage().seed());
  line += absl::StrFormat(" queue=%.1fms ttft=%.1fms total=%.1fms", t.queue_seconds() * 1e3,
                          t.time_to_first_token_seconds() * 1e3, t.total_seconds() * 1e3);
  if (client_ttft_ms >= 0) {
    line += absl::StrFormat(" | client ttft=%.1fms total=%.1fms", client_ttft_ms, client_total_ms);
  } else {
    line += absl::StrFormat(" | client total=%.1fms", client_total_ms);
  }
  std::cerr << line << "\n";
}

}  // namespace

int RunGenerate(const std::shared_ptr<grpc::Channel>& channel, const crossreg::v1::GenerateRequest& request,
                OutputFormat format, bool echo) {
  auto stub = crossreg::v1::Generation::NewStub(channel);
  grpc::ClientContext context;
  ApplyDeadlineFromFlags(context);
  const bool text = format == OutputFormat::kText;
  if (text && echo && request.has_text()) std::cout << request.text() << std::flush;

  const Clock::time_point start = Clock::now();
  double ttft_ms = -1;
  bool printed_text = false;
  bool ends_with_newline = false;
  bool completed = false;
  bool stream_error = false;
  crossreg::v1::Complete done;

  auto reader = stub->Generate(&context, request);
  crossreg::v1::GenerateResponse response;
  while (reader->Read(&response)) {
    if (!text) std::cout << ToJsonLine(response) << "\n" << std::flush;
    switch (response.response_case()) {
      case crossreg::v1::GenerateResponse::kChunk: {
        const auto& chunk = response.chunk();
        if (ttft_ms < 0 && chunk.token_ids_size() > 0) ttft_ms = MsSince(start, Clock::now());
        if (text && !chunk.text().empty()) {
          // Flushed per chunk: the point of streaming is to see tokens as they come.
          std::cout << chunk.text() << std::flush;
          printed_text = true;
          ends_with_newline = chunk.text().back() == '\n';
        }
        break;
      }
      case crossreg::v1::GenerateResponse::kComplete:
        done = response.complete();
        completed = true;
        break;
      case crossreg::v1::GenerateResponse::kError:
        // The call's status (read below) repeats it; remember it in case it does not.
        stream_error = true;
        if (text && printed_text && !ends_with_newline) std::cout << "\n" << std::flush;
        std::cerr << "crossreg: server reported: "
                  << FormatStatus(grpc::Status(static_cast<grpc::StatusCode>(response.error().code()),
                                               response.error().message()))
                  << "\n";
        printed_text = false;
        break;
      default:
        break;
    }
  }
  const grpc::Status status = reader->Finish();
  const double total_ms = MsSince(start, Clock::now());
  if (text && printed_text && !ends_with_newline) std::cout << "\n" << std::flush;
  if (!status.ok()) {
    std::cerr << "crossreg: Generate failed: " << FormatStatus(status) << "\n";
    return 1;
  }
  if (stream_error) return 1;
  if (!completed) {
    std::cerr << "crossreg: the stream ended without a Complete message (server bug?)\n";
    return 1;
  }
  PrintStatsLine(request, done, ttft_ms, total_ms);
  return 0;
}

}  // namespace crossreg::clients
