#include "clients/loadgen/token_pool.h"

#include <algorithm>

#include <grpcpp/client_context.h>

#include "absl/strings/str_format.h"
#include "clients/common/request_flags.h"
#include "clients/common/status_text.h"
#include "clients/loadgen/prompts.h"
#include "clients/loadgen/run_stream.h"

namespace crossreg::clients {

absl::StatusOr<crossreg::v1::ModelInfo> FetchModelInfo(crossreg::v1::Generation::Stub& stub) {
  grpc::ClientContext context;
  ApplyDeadlineFromFlags(context);
  crossreg::v1::ModelInfo info;
  const grpc::Status status = stub.GetModelInfo(&context, crossreg::v1::GetModelInfoRequest(), &info);
  if (!status.ok()) return absl::UnavailableError("GetModelInfo failed: " + FormatStatus(status));
  return info;
}

absl::StatusOr<std::vector<int32_t>> FetchTokenPool(crossreg::v1::Generation::Stub& stub,
                                                    const crossreg::v1::ModelInfo& info, int tokens, uint64_t seed,
                                                    const std::string& request_id) {
  crossreg::v1::GenerateRequest request;
  request.set_request_id(request_id);
  request.set_text(BuiltinPrompts()[3]);
  request.mutable_decoding()->set_mode(crossreg::v1::DECODING_MODE_AR);
  // Sampled, not greedy: small models decode greedily into loops (the default model
  // repeats one line for hundreds of tokens), and prompts cut from a loop would make
  // n-gram drafting look far better than on real text. The seed keeps the pool, and
  // so the prompts, the same from run to run.
  auto* sampling = request.mutable_sampling();
  sampling->set_temperature(0.8f);
  sampling->set_top_p(0.95f);
  sampling->set_seed(seed);
  sampling->set_ignore_eos(true);
  // One more than asked: the first id is dropped below. No room is kept for the
  // opening itself: past the context the server ends the call (finish "context"),
  // which only makes the pool shorter.
  sampling->set_max_tokens(std::max(1, std::min(tokens + 1, info.context_length())));

  std::vector<int32_t> ids;
  const StreamResult result = RunStream(stub, request, &ids);
  if (result.code != grpc::StatusCode::OK) {
    return absl::UnavailableError(absl::StrFormat("the setup call (%s) failed: %s", request_id,
                                                  FormatStatus(grpc::Status(result.code, result.error_message))));
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= info.vocab_size()) {
      return absl::InternalError(absl::StrFormat(
          "the setup call returned token id %d, outside the model's vocabulary of %d", id, info.vocab_size()));
    }
  }
  // The setup must not pre-warm the prefix cache for the measured run. The server
  // keeps the setup sequence's full blocks (BOS, opening, then output), and a prompt
  // reuses a block only when its ids from position 0 through that block equal the
  // cached sequence's. Prompts from this pool begin inside the generated story, not
  // with the setup's opening, so they match none of its blocks. The pool starts at the
  // second generated id, so it is not even the setup output read from its start.
  if (!ids.empty()) ids.erase(ids.begin());
  return ids;
}

}  // namespace crossreg::clients
