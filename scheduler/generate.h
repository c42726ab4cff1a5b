// Generation of one request, start to end, through the scheduler that serves requests:
// a one-request Scheduler driven on the caller's thread (Scheduler::RunUntilIdle). The
// engine-only path of crossreg-generate, the benchmarks and the tests, so that what they
// run and time is the server's step (planning, the KV transaction, verification, stop
// strings), not a copy of it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/decoding/forward_cost_calibration.h"
#include "engine/decoding/generation_request.h"
#include "engine/decoding/sequence_decoder.h"
#include "engine/kv/paged_kv_cache.h"
#include "engine/tokenizer/tokenizer.h"

namespace crossreg {

struct GenerationResult {
  std::vector<int32_t> ids;          // generated ids (a stop id included; none past a stop string)
  std::vector<TokenLogprob> logprobs;  // one per id when the request asks (GenerationRequest::logprobs)
  // The output as text, up to a stop string (left out), when GenerateOptions::tokenizer
  // is given; else empty.
  std::string text;
  FinishReason finish_reason = FinishReason::kLength;
  SpeculativeStats stats;            // decode forwards, drafted/accepted, TPF
  int64_t prefill_forwards = 0;
  int64_t cached_prompt_tokens = 0;  // prompt positions read from the prefix cache
  double prefill_seconds = 0;        // admission -> the prompt's K/V all cached
  double decode_seconds = 0;         // the rest
};

struct GenerateOptions {
  int prefill_chunk = 512;  // rows per forward (the scheduler's max_batch_tokens)
  // What adaptive draft lengths learn of the forwards' real cost
  // (forward_cost_calibration.h), kept across calls as a server keeps it across
  // requests. Not owned; null: each call learns alone, and takes no AR probe steps.
  ForwardCostCalibration* calibration = nullptr;
  // Detokenizes the output for stop strings (GenerationRequest::stop_strings); null:
  // requests with stop strings are refused.
  const Tokenizer* tokenizer = nullptr;
};

// Validates the request (the scheduler's Submit), then runs it in a fresh sequence of
// `kv`, freed at the end; a cache with prefix caching serves the prompt's cached blocks
// and keeps the sequence's full blocks for later calls. `on_tokens` sees the tokens each
// forward commits, as they are committed.
absl::StatusOr<GenerationResult> Generate(Backend& backend, PagedKvCache& kv, const GenerationRequest& request,
                                          const DecodingEnvironment& env,
                                          const std::function<void(const std::vector<int32_t>&)>& on_tokens = nullptr,
                                          const GenerateOptions& options = {});

}  // namespace crossreg
