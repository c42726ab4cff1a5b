#include "scheduler/generate.h"

#include <optional>

#include "scheduler/scheduler.h"

namespace crossreg {

absl::StatusOr<GenerationResult> Generate(Backend& backend, PagedKvCache& kv, const GenerationRequest& request,
                                          const DecodingEnvironment& env,
                                          const std::function<void(const std::vector<int32_t>&)>& on_tokens,
                                          const GenerateOptions& options) {
  if (options.prefill_chunk < 1) return absl::InvalidArgumentError("prefill_chunk: must be >= 1");
  SchedulerOptions so;
  so.max_batch_tokens = options.prefill_chunk;
  so.max_running = 1;
  so.max_queue = 1;
  so.tokenizer = options.tokenizer;
  so.decoding = env;
  so.calibration = options.calibration;
  so.ar_probe_steps = options.calibration != nullptr;
  Scheduler scheduler(so, backend, kv);

  GenerationResult result;
  std::optional<absl::Status> error;
  std::optional<RequestEvent> finished;
  GenerationRequest submitted = request;
  if (submitted.request_id.empty()) submitted.request_id = "generate";
  const absl::Status accepted = scheduler.Submit(std::move(submitted), [&](const RequestEvent& event) {
    switch (event.kind) {
      case RequestEvent::Kind::kTokens:
        result.ids.insert(result.ids.end(), event.tokens.begin(), event.tokens.end());
        result.logprobs.insert(result.logprobs.end(), event.logprobs.begin(), event.logprobs.end());
        result.text += event.text;
        if (on_tokens && !event.tokens.empty()) on_tokens(event.tokens);
        break;
      case RequestEvent::Kind::kFinished:
        result.text += event.text;
        finished = event;
        break;
      case RequestEvent::Kind::kError:
        error = event.error;
        break;
    }
  });
  if (!accepted.ok()) return accepted;
  scheduler.RunUntilIdle();
  if (error.has_value()) return *error;
  if (!finished.has_value()) return absl::InternalError("generate: the request ended without a final event");
  result.finish_reason = finished->finish_reason;
  result.stats = finished->stats;
  result.cached_prompt_tokens = finished->cached_prompt_tokens;
  result.prefill_forwards = scheduler.Stats().forwards - finished->stats.forwards;
  const RequestTimings& t = finished->timings;
  result.prefill_seconds = t.prompt_seconds - t.queue_seconds;
  result.decode_seconds = t.total_seconds - t.prompt_seconds;
  return result;
}

}  // namespace crossreg
