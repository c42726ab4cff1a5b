#include "engine/decoding/generate.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace crossreg {
namespace {

// Frees the sequence however generation ends.
struct SequenceGuard {
  PagedKvCache& kv;
  SequenceId seq;
  ~SequenceGuard() { kv.Free(seq); }
};

}  // namespace

absl::StatusOr<GenerationResult> Generate(Backend& backend, PagedKvCache& kv, const GenerationRequest& request,
                                          const DecodingEnvironment& env,
                                          const std::function<void(const std::vector<int32_t>&)>& on_tokens,
                                          const GenerateOptions& options) {
  if (auto s = ValidateGenerationRequest(request, env); !s.ok()) return s;
  if (options.prefill_chunk < 1) return absl::InvalidArgumentError("prefill_chunk: must be >= 1");
  const SequenceId seq = kv.CreateSequence();
  SequenceGuard guard{kv, seq};
  SequenceDecoder decoder(request, env, seq);
  GenerationResult result;
  // With prefix caching the prompt's cached blocks are read, not computed (all but
  // the last prompt token at most: its row gives the first logits).
  const int64_t cacheable = static_cast<int64_t>(request.prompt_ids.size()) - 1;
  absl::StatusOr<int64_t> cached = kv.AttachCachedPrefix(seq, request.prompt_ids, cacheable);
  if (!cached.ok()) return cached.status();
  if (auto s = decoder.OnKvAttached(seq, *cached); !s.ok()) return s;
  result.cached_prompt_tokens = *cached;

  ForwardBatch batch;
  ForwardOutput out;
  const DraftCost cost{env.cost_curve, 1};
  const auto t0 = std::chrono::steady_clock::now();
  auto t_decode = t0;
  while (!decoder.finished()) {
    const StepPlan plan = decoder.Plan(decoder.Choose(&cost), options.prefill_chunk);
    batch.rows = plan.rows;
    if (auto s = backend.Execute(batch, kv, out); !s.ok()) return s;
    absl::StatusOr<LogitRows> logits = out.RowsOf(seq, env.model->vocab_size);
    if (!logits.ok()) return logits.status();
    absl::StatusOr<StepOutcome> step = decoder.OnForward(plan, *logits);
    if (!step.ok()) return step.status();
    if (auto s = kv.Commit(seq, step->kv_length); !s.ok()) return s;
    if (plan.prefill()) {
      ++result.prefill_forwards;
      t_decode = std::chrono::steady_clock::now();
      continue;
    }
    if (on_tokens && !step->tokens.empty()) on_tokens(step->tokens);
    result.logprobs.insert(result.logprobs.end(), step->logprobs.begin(), step->logprobs.end());
  }
  result.prefill_seconds = std::chrono::duration<double>(t_decode - t0).count();
  result.decode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_decode).count();
  const auto& tokens = decoder.tokens();
  result.ids.assign(tokens.begin() + static_cast<std::ptrdiff_t>(request.prompt_ids.size()), tokens.end());
  result.prompt_logits = decoder.first_logits();
  result.finish_reason = decoder.finish_reason();
  result.stats = decoder.stats();
  return result;
}

}  // namespace crossreg
