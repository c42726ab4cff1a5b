// Plain autoregressive generation on one sequence: the reference every speculative
// mode must reproduce.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/model/model_config.h"
#include "engine/paged_kv_cache.h"
#include "engine/sampler.h"

namespace crossreg {

struct GenerationRequest {
  std::vector<int32_t> prompt_ids;
  int max_new_tokens = 128;
  SamplingParams sampling;
  bool stop_at_eos = true;           // the model's EOS ids end generation
  std::vector<int32_t> stop_ids;     // further ids that end it (kept in the output)
  int prefill_chunk = 512;           // rows per prefill forward
};

enum class FinishReason { kStop, kLength, kContext };
const char* FinishReasonName(FinishReason r);

struct GenerationResult {
  std::vector<int32_t> ids;          // generated ids (a stop id included)
  std::vector<float> prompt_logits;  // logits that predicted the first generated id
  FinishReason finish_reason = FinishReason::kLength;
  int64_t forwards = 0;              // decode forwards (prefill excluded)
  int64_t prefill_forwards = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// Checks the prompt (non-empty, ids in range, shorter than the context) and the
// request's parameters; messages name the field.
absl::Status ValidateGenerationRequest(const GenerationRequest& request, const ModelConfig& config);

// Prefills the prompt into a fresh sequence of `kv`, then decodes one token per
// forward. `on_token` sees each id as it is committed. The sequence is freed at the end.
absl::StatusOr<GenerationResult> GenerateAutoregressive(
    Backend& backend, PagedKvCache& kv, const ModelConfig& config, const GenerationRequest& request,
    const std::function<void(int32_t)>& on_token = nullptr);

}  // namespace crossreg
