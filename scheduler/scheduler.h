// The continuous-batching scheduler: owns time. It queues requests, admits them on
// free KV blocks, builds one ragged batch per step across every running sequence
// (prefill chunks under a token budget + decode/verify rows), runs the engine, and
// turns results into per-request events. It knows nothing of gRPC or Prometheus:
// callbacks carry events out, a MetricsSink carries measurements out.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend.h"
#include "engine/decoding/decoding_config.h"
#include "engine/decoding/generation_request.h"
#include "engine/decoding/sequence_decoder.h"
#include "engine/grammar/grammar_budget.h"
#include "engine/model/model_config.h"
#include "engine/kv/paged_kv_cache.h"
#include "engine/tokenizer/tokenizer.h"
#include "scheduler/forward_report.h"

namespace crossreg {

using SteadyTime = std::chrono::steady_clock::time_point;

struct SchedulerOptions {
  int max_batch_tokens = 512;   // rows per forward (prefill chunks + decode/verify rows)
  int max_running = 64;         // sequences decoding at once
  // Requests waiting for their first admission; more -> RESOURCE_EXHAUSTED.
  // Preempted requests wait apart (they were admitted once, resume first and are
  // bounded by max_running), so this limit holds under preemption too.
  int max_queue = 256;
  // Debugging: a sleep before every forward, so that cancellation, deadlines and
  // queueing can be watched (and tested) on a model that is otherwise too fast.
  std::chrono::milliseconds debug_forward_delay{0};
  // Detokenizes every request's output for its events and ends a request at its first
  // stop string (GenerationRequest::stop_strings). Null: events carry no text, and
  // requests with stop strings are refused.
  const Tokenizer* tokenizer = nullptr;
  // What requests may do on the engine (adapter, gamma limit, whether they may adapt γ),
  // and its cost curve: the shape of the scheduler's one cost model, calibrated by the
  // forwards it runs. Its `model` may be left null: the backend's model is used.
  DecodingEnvironment decoding;
  // Grammar mask work a step does on the scheduler's thread, all sequences together
  // (engine/grammar/grammar_budget.h); the rest goes to the mask worker while the
  // sequences needing it sit forwards out. 0 sends every uncached mask to the worker.
  int64_t inline_mask_work = grammar::kInlineMaskWorkPerStep;
  // The cost model's calibration (forward_cost_calibration.h), kept by the caller across
  // schedulers (Generate keeps one across calls as a server keeps its own across
  // requests). Null: the scheduler's own. Not owned.
  ForwardCostCalibration* calibration = nullptr;
  // Adaptive sequences decoding alone may take an AR step now and then to learn the
  // decode step's shape. Off for a scheduler that lives for one request with its own
  // calibration: it would pay those steps every time and keep nothing of them.
  bool ar_probe_steps = true;
};

struct RequestTimings {
  double queue_seconds = 0;            // submit -> admitted
  double prompt_seconds = 0;           // submit -> the prompt's K/V all cached (prefill done)
  double time_to_first_token = 0;      // submit -> first token committed
  double total_seconds = 0;            // submit -> finished
};

// Events of one request, in order: zero or more kTokens, then exactly one of
// kFinished or kError. Delivered on the scheduler thread: handlers must not block.
struct RequestEvent {
  enum class Kind { kTokens, kFinished, kError };
  Kind kind = Kind::kTokens;
  std::vector<int32_t> tokens;          // kTokens: committed by one forward (none past a stop string)
  std::vector<TokenLogprob> logprobs;   // kTokens: one per token when the request asked (logprobs >= 0)
  // kTokens: the text those tokens complete, safe to send (text that may begin a stop
  // string is held back until it cannot); kFinished: what was still held back. The
  // chunks concatenate to the request's text. Empty when the scheduler has no tokenizer.
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;  // kFinished
  StopReason stop_reason = StopReason::kNone;        // kFinished with kStop: EOS, a stop id or a stop string
  SpeculativeStats stats;               // kFinished
  RequestTimings timings;               // kFinished
  int64_t prompt_tokens = 0;            // kFinished
  int64_t cached_prompt_tokens = 0;     // kFinished: of them, K/V reused from the prefix cache
  uint64_t seed = 0;                    // kFinished: the request's sampling seed, which replays its text
  absl::Status error;                   // kError: CANCELLED, DEADLINE_EXCEEDED, INTERNAL...
};
using EventHandler = std::function<void(const RequestEvent&)>;

// The scheduler's queues after a step.
struct QueueState {
  int running = 0;      // sequences admitted, holding KV
  int waiting = 0;      // never admitted yet (bounded by max_queue)
  int preempted = 0;    // admitted once, sent back for KV; resumed before `waiting`
  double kv_usage = 0;  // blocks held by running sequences / all blocks
  int kv_cached_blocks = 0;     // blocks in the prefix cache (held or not)
  int kv_evictable_blocks = 0;  // of them, held by no sequence
  int64_t preemptions = 0;  // since start
  // Since start, in tokens: looked up in the prefix cache at admissions (the prompt,
  // and on a resume the generated tokens too), and found there.
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
};

// Measurements leave through this interface (the server implements it with
// Prometheus); all calls come from the scheduler thread.
class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  // Every forward that ran, with what each sequence of its batch did.
  virtual void OnForward(const ForwardReport& forward) = 0;
  virtual void OnTokensCommitted(DecodingMode mode, int tokens, double seconds_since_last) = 0;
  virtual void OnRequestFinished(DecodingMode mode, const RequestEvent& finished) = 0;
  virtual void OnQueueState(const QueueState& state) = 0;
};

struct SchedulerStats {
  int running = 0;
  int waiting = 0;    // never admitted yet
  int preempted = 0;  // waiting to resume after preemption
  KvCacheStats kv;
  int64_t preemptions = 0;
  int64_t forwards = 0;
  int64_t prefix_cache_queries = 0;  // tokens, as in QueueState
  int64_t prefix_cache_hits = 0;
};

class Scheduler {
 public:
  // `backend` and `kv` (its paged cache) must outlive the scheduler.
  Scheduler(const SchedulerOptions& options, Backend& backend, PagedKvCache& kv, MetricsSink* metrics = nullptr);
  ~Scheduler();  // stops the loop, failing what is left with CANCELLED
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts the scheduling thread.
  void Start();
  // Runs the scheduling loop on the calling thread until no request is queued or
  // running (Generate: a one-request scheduler driven by its caller). Only for a
  // scheduler that was never started; the same steps the thread runs.
  void RunUntilIdle();
  // Queues a request after ValidateGenerationRequest. RESOURCE_EXHAUSTED when the
  // queue is full, ALREADY_EXISTS for a live request_id of the same owner
  // (GenerationRequest::owner), FAILED_PRECONDITION after
  // Shutdown, INVALID_ARGUMENT when the prompt plus gamma cannot ever fit in the KV
  // cache (and for whatever validation refuses).
  absl::Status Submit(GenerationRequest request, EventHandler on_event);
  // Cancels a queued or running request: its KV is freed before the next step and
  // it gets a kError event with `reason`. Only the owner that submitted it can:
  // returns false if `owner` has no live request with that id.
  bool Abort(const std::string& request_id, absl::Status reason = absl::CancelledError("aborted"),
             const std::string& owner = "");
  // Refuses new requests; waits up to `timeout` for running and queued ones to
  // finish, then aborts the rest with CANCELLED. Returns when the loop is idle.
  void Shutdown(std::chrono::milliseconds timeout);

  SchedulerStats Stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace crossreg
