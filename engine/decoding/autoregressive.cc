#include "engine/decoding/autoregressive.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"

namespace crossreg {
namespace {
double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Frees the sequence however generation ends.
struct SequenceGuard {
  PagedKvCache& kv;
  SequenceId seq;
  ~SequenceGuard() { kv.Free(seq); }
};
}  // namespace

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kContext: return "context";
  }
  return "?";
}

absl::Status ValidateGenerationRequest(const GenerationRequest& request, const ModelConfig& config) {
  if (request.prompt_ids.empty()) return absl::InvalidArgumentError("prompt: empty (it needs at least one token)");
  if (static_cast<int64_t>(request.prompt_ids.size()) >= config.max_position) {
    return absl::InvalidArgumentError(absl::StrCat("prompt: ", request.prompt_ids.size(),
                                                   " tokens, the model's context length is ",
                                                   config.max_position, " (the prompt must be shorter)"));
  }
  for (size_t i = 0; i < request.prompt_ids.size(); ++i) {
    const int32_t id = request.prompt_ids[i];
    if (id < 0 || id >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("prompt: token ", i, " is ", id,
                                                     ", outside the vocabulary [0, ", config.vocab_size, ")"));
    }
  }
  if (request.max_new_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_new_tokens must be >= 1, got ", request.max_new_tokens));
  }
  if (request.prefill_chunk < 1) return absl::InvalidArgumentError("prefill_chunk must be >= 1");
  return request.sampling.Validate();
}

absl::StatusOr<GenerationResult> GenerateAutoregressive(
    Backend& backend, PagedKvCache& kv, const ModelConfig& config, const GenerationRequest& request,
    const std::function<void(int32_t)>& on_token) {
  if (auto s = ValidateGenerationRequest(request, config); !s.ok()) return s;
  GenerationResult result;
  const SequenceId seq = kv.CreateSequence();
  SequenceGuard guard{kv, seq};
  Sampler sampler(request.sampling);
  std::vector<float> logits;
  ForwardBatch batch;

  // Prefill in chunks; only the prompt's last row needs logits.
  auto t0 = std::chrono::steady_clock::now();
  const int64_t n_prompt = static_cast<int64_t>(request.prompt_ids.size());
  for (int64_t start = 0; start < n_prompt; start += request.prefill_chunk) {
    const int64_t end = std::min<int64_t>(n_prompt, start + request.prefill_chunk);
    batch.rows.clear();
    for (int64_t p = start; p < end; ++p) {
      batch.rows.push_back(BatchRow{seq, static_cast<int32_t>(p), request.prompt_ids[p], p == n_prompt - 1});
    }
    if (auto s = backend.Forward(batch, kv, logits); !s.ok()) return s;
    ++result.prefill_forwards;
  }
  result.prompt_logits = logits;
  auto t1 = std::chrono::steady_clock::now();
  result.prefill_seconds = Seconds(t0, t1);

  auto is_stop = [&](int32_t id) {
    if (request.stop_at_eos &&
        std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), id) != config.eos_token_ids.end()) {
      return true;
    }
    return std::find(request.stop_ids.begin(), request.stop_ids.end(), id) != request.stop_ids.end();
  };

  int32_t position = static_cast<int32_t>(n_prompt);
  for (;;) {
    const int32_t next = sampler.Sample(logits.data(), config.vocab_size);
    result.ids.push_back(next);
    if (on_token) on_token(next);
    if (is_stop(next)) {
      result.finish_reason = FinishReason::kStop;
      break;
    }
    if (static_cast<int>(result.ids.size()) >= request.max_new_tokens) {
      result.finish_reason = FinishReason::kLength;
      break;
    }
    if (position >= config.max_position) {
      result.finish_reason = FinishReason::kContext;
      break;
    }
    batch.rows.assign(1, BatchRow{seq, position, next, true});
    if (auto s = backend.Forward(batch, kv, logits); !s.ok()) return s;
    ++result.forwards;
    ++position;
  }
  result.decode_seconds = Seconds(t1, std::chrono::steady_clock::now());
  return result;
}

}  // namespace crossreg
