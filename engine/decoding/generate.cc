#include "engine/decoding/generate.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/decoding/draft_length_policy.h"
#include "engine/decoding/forward_cost_calibration.h"

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
  absl::StatusOr<int64_t> cached = KvTransaction(kv).AttachCachedPrefix(seq, request.prompt_ids, cacheable);
  if (!cached.ok()) return cached.status();
  if (auto s = decoder.OnKvAttached(seq, *cached); !s.ok()) return s;
  result.cached_prompt_tokens = *cached;

  ForwardBatch batch;
  ForwardOutput out;
  // The adaptive draft length prices rows as the scheduler does: the start-up curve,
  // corrected by the decode forwards and steps timed as they ran (forward_cost_calibration.h).
  ForwardCostCalibration own;
  ForwardCostCalibration& calibration = options.calibration != nullptr ? *options.calibration : own;
  DraftCost cost{env.cost_curve, 1};
  const auto t0 = std::chrono::steady_clock::now();
  auto t_decode = t0;
  while (!decoder.finished()) {
    cost.decode_scale = cost.forward_scale = calibration.Scale(false);
    cost.decode_shape = calibration.DecodeShape();
    // Only a calibration kept across calls asks for AR steps: one call would pay them
    // every time.
    cost.ar_step_wanted = options.calibration != nullptr && calibration.WantsArStep();
    const auto t_step = std::chrono::steady_clock::now();
    const StepPlan plan = decoder.Plan(decoder.Choose(&cost), options.prefill_chunk);
    batch.rows = plan.rows;
    const auto t_forward = std::chrono::steady_clock::now();
    KvTransaction transaction(kv);  // closed by the Commit below, else rolled back
    if (auto s = backend.Execute(batch, transaction, out); !s.ok()) return s;
    const auto t_forwarded = std::chrono::steady_clock::now();
    absl::StatusOr<LogitRows> logits = out.RowsOf(seq, env.model->vocab_size);
    if (!logits.ok()) return logits.status();
    absl::StatusOr<StepOutcome> step = decoder.OnForward(plan, *logits);
    if (!step.ok()) return step.status();
    if (env.cost_curve != nullptr && !plan.prefill()) {
      const int rows = static_cast<int>(plan.rows.size());
      const int predictive = static_cast<int>(
          std::count_if(plan.rows.begin(), plan.rows.end(), [](const BatchRow& row) { return row.predictive; }));
      auto seconds = [](auto from, auto to) { return std::chrono::duration<double>(to - from).count(); };
      calibration.Observe(*env.cost_curve, rows, predictive, false, seconds(t_forward, t_forwarded));
      calibration.ObserveSingleDecodeStep(*env.cost_curve, rows, predictive,
                                          seconds(t_step, std::chrono::steady_clock::now()));
    }
    if (auto s = transaction.Commit(seq, step->kv_length); !s.ok()) return s;
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
