// Generation of one sequence with any decoding mode, one forward at a time: the
// engine-only path used by crossreg-generate, tests and benchmarks. The server's
// scheduler drives the same SequenceDecoder for many sequences per forward.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/decoding/decoding_config.h"
#include "engine/decoding/forward_cost_curve.h"
#include "engine/decoding/sequence_decoder.h"
#include "engine/model/model_config.h"
#include "engine/paged_kv_cache.h"
#include "engine/sampler.h"

namespace crossreg {

struct GenerationRequest {
  std::vector<int32_t> prompt_ids;
  int max_new_tokens = 128;
  SamplingParams sampling;
  DecodingConfig decoding;         // default: AR
  bool stop_at_eos = true;         // the model's EOS ids end generation
  std::vector<int32_t> stop_ids;   // further ids that end it (kept in the output)
  int prefill_chunk = 512;         // rows per prefill forward
  int32_t placeholder_token = 0;   // predictive slots with no draft (from the adapter)
  ExactnessFault fault = ExactnessFault::kNone;  // tests only
  // Measured forward cost (needed by decoding.adaptive_gamma); not owned.
  const ForwardCostCurve* cost_curve = nullptr;
};

struct GenerationResult {
  std::vector<int32_t> ids;          // generated ids (a stop id included)
  std::vector<float> prompt_logits;  // logits that predicted the first generated id
  FinishReason finish_reason = FinishReason::kLength;
  SpeculativeStats stats;            // decode forwards, drafted/accepted, TPF
  int64_t prefill_forwards = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// Checks the prompt (non-empty, ids in range, shorter than the context), sampling
// and decoding parameters; messages name the field.
absl::Status ValidateGenerationRequest(const GenerationRequest& request, const ModelConfig& config,
                                       bool has_adapter);

// Runs the request in a fresh sequence of `kv`, freed at the end. `on_tokens` sees
// the tokens each forward commits, as they are committed.
absl::StatusOr<GenerationResult> Generate(Backend& backend, PagedKvCache& kv, const ModelConfig& config,
                                          const GenerationRequest& request, bool has_adapter,
                                          const std::function<void(const std::vector<int32_t>&)>& on_tokens = nullptr);

}  // namespace crossreg
