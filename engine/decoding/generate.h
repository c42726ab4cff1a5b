// Generation of one sequence with any decoding mode, one forward at a time: the
// engine-only path used by crossreg-generate, tests and benchmarks. The server's
// scheduler drives the same SequenceDecoder for many sequences per forward.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/decoding/forward_cost_calibration.h"
#include "engine/decoding/generation_request.h"
#include "engine/decoding/sequence_decoder.h"
#include "engine/kv/paged_kv_cache.h"

namespace crossreg {

struct GenerationResult {
  std::vector<int32_t> ids;          // generated ids (a stop id included)
  std::vector<TokenLogprob> logprobs;  // one per id when the request asks (GenerationRequest::logprobs)
  std::vector<float> prompt_logits;  // logits that predicted the first generated id
  FinishReason finish_reason = FinishReason::kLength;
  SpeculativeStats stats;            // decode forwards, drafted/accepted, TPF
  int64_t prefill_forwards = 0;
  int64_t cached_prompt_tokens = 0;  // prompt positions read from the prefix cache
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

struct GenerateOptions {
  int prefill_chunk = 512;  // rows per prefill forward
  // What adaptive draft lengths learn of the forwards' real cost
  // (forward_cost_calibration.h), kept across calls as a server keeps it across
  // requests. Not owned; null: each call learns alone.
  ForwardCostCalibration* calibration = nullptr;
};

// Validates the request (ValidateGenerationRequest), then runs it in a fresh sequence
// of `kv`, freed at the end; a cache with prefix caching serves the prompt's cached
// blocks and keeps the sequence's full blocks for later calls. `on_tokens` sees the tokens each forward commits, as they
// are committed.
absl::StatusOr<GenerationResult> Generate(Backend& backend, PagedKvCache& kv, const GenerationRequest& request,
                                          const DecodingEnvironment& env,
                                          const std::function<void(const std::vector<int32_t>&)>& on_tokens = nullptr,
                                          const GenerateOptions& options = {});

}  // namespace crossreg
