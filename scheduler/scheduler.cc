#include "scheduler/scheduler.h"

#include <algorithm>
#include <optional>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"
#include "absl/types/span.h"
#include "engine/decoding/forward_cost_calibration.h"
#include "engine/grammar/grammar_budget.h"
#include "scheduler/batch_planner.h"
#include "scheduler/cancel_cause.h"
#include "scheduler/mask_worker.h"
#include "scheduler/request_state.h"

namespace crossreg {
namespace {

using RequestPtr = std::shared_ptr<ScheduledRequest>;

double SecondsBetween(SteadyTime from, SteadyTime to) { return std::chrono::duration<double>(to - from).count(); }

// An event waiting to be delivered once the scheduler's lock is released.
struct Outgoing {
  RequestPtr request;
  RequestEvent event;
};

// The key of `live`: ids are unique per owner. '\0' cannot occur in a request id
// (validation refuses control characters), so no two (owner, id) pairs collide.
std::string LiveKey(const std::string& owner, const std::string& request_id) {
  std::string key = owner;
  key.push_back('\0');
  key += request_id;
  return key;
}
std::string LiveKey(const GenerationRequest& r) { return LiveKey(r.owner, r.request_id); }

// One sequence's part of a forward, from its plan and what the decoder reported.
SequenceForward DescribeForward(DecodingMode mode, const StepPlan& plan, const StepOutcome& outcome) {
  SequenceForward f;
  f.mode = mode;
  f.prefill = plan.prefill();
  f.rows = static_cast<int>(plan.rows.size());
  f.committed = static_cast<int>(outcome.tokens.size());
  if (f.prefill || mode == DecodingMode::kAutoregressive) return f;
  f.speculative = true;
  f.ar_fallback = plan.ar_fallback;
  f.drafted = outcome.drafted;
  f.accepted = outcome.accepted;
  for (bool accepted : outcome.verdicts) {
    f.drafted_at.push_back(1);
    f.accepted_at.push_back(accepted ? 1 : 0);
  }
  return f;
}

// One step's decisions, a value: Schedule makes it, Execute runs its batch, Apply
// reads it back with the forward's output.
struct SchedulerOutput {
  struct Sequence {
    RequestPtr request;
    bool prefill = false;
    int rows = 0;         // the planner's rows: a prefill chunk, or a decode bound
    StepPlan step;        // what its decoder planned for this forward
    double plan_seconds = 0;  // choosing and planning it (grammar masks included)
  };
  std::vector<Sequence> sequences;  // batch order: decode, then prefill chunks
  std::vector<RequestPtr> preempt;  // freed before the forward, most recent first
  RequestPtr fail;                  // cannot progress even alone in the cache
  ForwardBatch batch;
  bool carries_prefill = false;
  int predictive_rows = 0;
  // Sequences left out of this forward to wait for their grammar masks (MaskWorker).
  int waiting_for_masks = 0;
};

// What Execute reports back: the forward's status and its wall time.
struct ExecutedForward {
  absl::Status status;
  double seconds = 0;
  SteadyTime step_start;  // the step's, before Schedule
  SteadyTime end;
};

RequestEvent ErrorEvent(absl::Status status) {
  RequestEvent e;
  e.kind = RequestEvent::Kind::kError;
  e.error = std::move(status);
  return e;
}

// A request's last event when it ends well: its statistics and timings.
RequestEvent FinishedEvent(const ScheduledRequest& r, FinishReason reason, SteadyTime now) {
  RequestEvent done;
  done.kind = RequestEvent::Kind::kFinished;
  done.finish_reason = reason;
  if (r.decoder != nullptr) done.stats = r.decoder->stats();
  done.prompt_tokens = r.prompt_tokens;
  done.cached_prompt_tokens = r.cached_prompt_tokens;
  done.seed = r.request.sampling.seed;
  done.timings.queue_seconds = SecondsBetween(r.submitted, r.admitted.value_or(now));
  done.timings.prompt_seconds = SecondsBetween(r.submitted, r.prefilled.value_or(now));
  done.timings.time_to_first_token = SecondsBetween(r.submitted, r.first_token.value_or(now));
  done.timings.total_seconds = SecondsBetween(r.submitted, now);
  return done;
}

}  // namespace

struct Scheduler::Impl {
  Impl(const SchedulerOptions& o, Backend& b, PagedKvCache& k, MetricsSink* m)
      : options(o), backend(b), kv(k), config(b.model_config()), metrics(m) {
    // Options come from flags; nonsense values degrade to the smallest working ones.
    options.max_batch_tokens = std::max(1, options.max_batch_tokens);
    options.max_running = std::max(1, options.max_running);
    options.max_queue = std::max(0, options.max_queue);
    if (options.decoding.model == nullptr) options.decoding.model = &config;
    if (options.calibration == nullptr) options.calibration = &own_calibration;
  }

  absl::Status Submit(GenerationRequest request, EventHandler on_event);
  bool Abort(const std::string& owner, const std::string& request_id, absl::Status reason);
  void Shutdown(std::chrono::milliseconds timeout);
  void Loop();
  bool Idle() const { return running.empty() && !AnyoneWaiting() && to_abort.empty(); }
  // One pass of the loop over a busy scheduler, `lock` held on entry and exit.
  void Iterate(std::unique_lock<std::mutex>& lock, std::vector<Outgoing>& out);

  // Under `mu`, on the scheduling thread (or before it ever started).
  void DrainAbortsAndDeadlines(SteadyTime now, std::vector<Outgoing>& out);
  void Admit(SteadyTime now, std::vector<Outgoing>& out);
  void Cancel(RequestPtr r, absl::Status status,
              std::vector<Outgoing>& out);  // by value: r may live in the lists it edits
  void Publish();
  // The queue head: a preempted request resumes before any new one.
  bool AnyoneWaiting() const { return !preempted.empty() || !waiting.empty(); }
  const RequestPtr& NextWaiting() const { return preempted.empty() ? waiting.front() : preempted.front(); }
  void PopNextWaiting() { preempted.empty() ? waiting.pop_front() : preempted.pop_front(); }
  // Scheduling thread, without `mu`; takes it where shared state changes. A step is
  // Schedule (which sequences, how many rows each, preemptions, the decoders' plans),
  // Preempt, Execute (the forward) and Apply (commit, events, the forward's report).
  // False when no forward ran because every sequence waits for grammar masks.
  bool Step(std::vector<Outgoing>& out);
  SchedulerOutput Schedule();
  void PlanDecoders(SchedulerOutput& scheduled);
  void Preempt(const SchedulerOutput& scheduled, std::vector<Outgoing>& out);
  ExecutedForward Execute(const SchedulerOutput& scheduled, KvTransaction& transaction);
  void Apply(const SchedulerOutput& scheduled, const ExecutedForward& forward, KvTransaction& transaction,
             std::vector<Outgoing>& out);
  // One sequence's share of Apply; false when it finished.
  bool ApplySequence(const SchedulerOutput::Sequence& s, SteadyTime now, KvTransaction& transaction,
                     ForwardReport& report, std::vector<Outgoing>& out,
                     std::vector<std::pair<RequestPtr, absl::Status>>& failed);
  // Moves a request out of the running phases (or a queue) to `next`, freeing its
  // sequence if it held one.
  void Leave(ScheduledRequest& r, RequestPhase next);
  int64_t MasksFiled() const;
  void Dispatch(std::vector<Outgoing>& out);
  void ReportQueueState();

  SchedulerOptions options;
  Backend& backend;
  PagedKvCache& kv;
  const ModelConfig& config;
  MetricsSink* metrics;

  mutable std::mutex mu;
  std::condition_variable wake;  // the loop: work or aborts arrived, or stop
  std::condition_variable idle;  // Shutdown: the loop went idle
  // Guarded by mu.
  std::deque<RequestPtr> waiting;                    // never admitted, FIFO; at most max_queue
  std::deque<RequestPtr> preempted;                  // sent back for KV, admission order; resume first
  std::unordered_map<std::string, RequestPtr> live;  // LiveKey -> queued or running, not yet finalized
  std::vector<RequestPtr> to_abort;                  // Abort/shutdown requests for the loop
  bool accepting = true;
  bool started = false;
  bool stop = false;
  bool step_in_progress = false;
  SchedulerStats published;

  // Scheduling thread only.
  std::vector<RequestPtr> running;  // admission order
  int64_t step_count = 0;
  // When the last forward was reported, while the loop has been busy since: what the
  // speedup accounting charges runs from there (ForwardReport::step_seconds).
  std::optional<SteadyTime> last_report;
  int64_t admit_counter = 0;
  int64_t preemptions = 0;
  int64_t forwards = 0;
  int64_t prefix_cache_queries = 0;  // tokens looked up in the prefix cache at admission
  int64_t prefix_cache_hits = 0;     // of them, found cached
  // The cost curve's error on the forwards this scheduler ran, per kind (decode-only,
  // carrying prefill): the one cost model, for the adaptive draft length and the
  // speedup accounting's split of each forward. options.calibration points at it unless
  // the caller keeps one.
  ForwardCostCalibration own_calibration;
  ForwardCostCalibration& calibration() { return *options.calibration; }
  ForwardOutput output;
  // Grammar masks a step could not compute within its inline budget: computed here,
  // off this thread, while the sequences that need them sit forwards out. Each mask
  // filed bumps `masks_filed` (under mu) and wakes the loop.
  int64_t masks_filed = 0;
  MaskWorker mask_worker{[this] {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++masks_filed;
    }
    wake.notify_all();
  }};
  std::thread thread;
};

absl::Status Scheduler::Impl::Submit(GenerationRequest request, EventHandler on_event) {
  if (request.request_id.empty()) return FieldViolation("request_id", "empty");
  if (auto s = ValidateGenerationRequest(request, options.decoding); !s.ok()) return s;
  const int64_t headroom = DecodeHeadroom(request.decoding);
  const int64_t positions = static_cast<int64_t>(request.prompt_ids.size()) + headroom;
  const int64_t capacity = int64_t{kv.config().num_blocks} * kv.config().block_size;
  if (positions > capacity) {
    return FieldViolation("prompt_ids", absl::StrCat(request.prompt_ids.size(), " tokens plus ", headroom,
                                                     " decode positions (gamma + 1) need ", positions,
                                                     " KV positions, the whole KV cache holds ", capacity, " (",
                                                     kv.config().num_blocks, " blocks of ", kv.config().block_size,
                                                     ")"));
  }

  if (!request.stop_strings.empty() && options.tokenizer == nullptr) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "stop_strings",
                      "this scheduler has no tokenizer to find text stop sequences with");
  }
  auto r = std::make_shared<ScheduledRequest>();
  if (options.tokenizer != nullptr) {
    r->text.emplace(*options.tokenizer, request.stop_strings, !request.skip_special_tokens);
  }
  r->prompt_tokens = static_cast<int64_t>(request.prompt_ids.size());
  r->decode_headroom = headroom;
  r->on_event = std::move(on_event);
  r->submitted = r->last_commit = std::chrono::steady_clock::now();
  r->request = std::move(request);

  std::lock_guard<std::mutex> lock(mu);
  if (!accepting) return absl::FailedPreconditionError("scheduler is shutting down: no new requests");
  if (live.count(LiveKey(r->request)) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("request_id \"", r->request.request_id, "\" is already in flight"));
  }
  if (static_cast<int>(waiting.size()) >= options.max_queue) {
    return absl::ResourceExhaustedError(
        absl::StrCat("request queue full: ", waiting.size(), " waiting (max_queue ", options.max_queue, ")"));
  }
  live.emplace(LiveKey(r->request), r);
  waiting.push_back(r);
  published.waiting = static_cast<int>(waiting.size());
  wake.notify_one();
  return absl::OkStatus();
}

bool Scheduler::Impl::Abort(const std::string& owner, const std::string& request_id, absl::Status reason) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = live.find(LiveKey(owner, request_id));
  if (it == live.end()) return false;
  if (!it->second->abort_reason.has_value()) {
    it->second->abort_reason = std::move(reason);
    to_abort.push_back(it->second);
    wake.notify_one();
  }
  return true;
}

void Scheduler::Impl::Shutdown(std::chrono::milliseconds timeout) {
  std::vector<Outgoing> out;
  {
    std::unique_lock<std::mutex> lock(mu);
    accepting = false;
    if (!started) {
      // No loop will ever run them: cancel here, on the caller's thread.
      while (AnyoneWaiting())
        Cancel(NextWaiting(), CancelledBecause(CancelCause::kShutdown, "scheduler shut down"), out);
      to_abort.clear();
      Publish();
    } else {
      auto drained = [&] { return live.empty() && !step_in_progress; };
      idle.wait_for(lock, timeout, drained);
      for (auto& [id, r] : live) {
        if (r->abort_reason.has_value()) continue;
        r->abort_reason = CancelledBecause(CancelCause::kShutdown, "scheduler shut down before the request finished");
        to_abort.push_back(r);
      }
      wake.notify_one();
      idle.wait(lock, drained);
    }
  }
  Dispatch(out);
}

void Scheduler::Impl::Cancel(RequestPtr r, absl::Status status, std::vector<Outgoing>& out) {
  if (Queued(r->phase)) {
    std::deque<RequestPtr>& queue = r->phase == RequestPhase::kPreempted ? preempted : waiting;
    queue.erase(std::find(queue.begin(), queue.end(), r));
  } else {
    running.erase(std::find(running.begin(), running.end(), r));
  }
  Leave(*r, RequestPhase::kCancelled);
  live.erase(LiveKey(r->request));
  out.push_back({r, ErrorEvent(std::move(status))});
}

void Scheduler::Impl::Leave(ScheduledRequest& r, RequestPhase next) {
  if (Running(r.phase)) kv.Free(r.decoder->sequence());
  r.phase = next;
}

void Scheduler::Impl::DrainAbortsAndDeadlines(SteadyTime now, std::vector<Outgoing>& out) {
  std::vector<RequestPtr> aborts;
  aborts.swap(to_abort);
  for (const RequestPtr& r : aborts) {
    // It may have finished in the step that raced with Abort.
    if (Ended(r->phase)) continue;
    Cancel(r, *r->abort_reason, out);
  }
  std::vector<RequestPtr> expired;
  auto collect_expired = [&](const auto& requests) {
    for (const RequestPtr& r : requests) {
      if (r->request.deadline.has_value() && now >= *r->request.deadline) expired.push_back(r);
    }
  };
  collect_expired(waiting);
  collect_expired(preempted);
  collect_expired(running);
  for (const RequestPtr& r : expired) {
    r->abort_reason = absl::DeadlineExceededError(absl::StrCat(
        "request \"", r->request.request_id, "\" passed its deadline after ", SecondsBetween(r->submitted, now), " s"));
    Cancel(r, *r->abort_reason, out);
  }
}

void Scheduler::Impl::Admit(SteadyTime now, std::vector<Outgoing>& out) {
  const int block_size = kv.config().block_size;
  while (AnyoneWaiting() && static_cast<int>(running.size()) < options.max_running) {
    const RequestPtr r = NextWaiting();
    const std::vector<int32_t>& ids = r->decoder ? r->decoder->tokens() : r->request.prompt_ids;
    const int64_t tokens = static_cast<int64_t>(ids.size());
    const int64_t need = KvBlocksFor(tokens + r->decode_headroom, block_size);
    if (need > kv.config().num_blocks) {
      // Only a request resumed after growing can get here (Submit checked the prompt).
      Cancel(r,
             absl::ResourceExhaustedError(absl::StrCat(
                 "request \"", r->request.request_id, "\" needs ", tokens + r->decode_headroom, " KV positions (", need,
                 " blocks) to continue, the whole KV cache has ", kv.config().num_blocks, " blocks of ", block_size)),
             out);
      continue;
    }
    // Leave the running sequences the blocks their next steps need. Cached blocks of
    // this request's prefix cost nothing if a running sequence holds them already, one
    // block of the free pool each if nobody does.
    int64_t reserved = 0;
    for (const RequestPtr& s : running) {
      const SequenceDecoder& d = *s->decoder;
      const int64_t appended = d.PendingKvRows() + (d.prefilling() ? s->decode_headroom : 0);
      reserved += kv.BlocksNeeded(d.sequence(), kv.length(d.sequence()) + appended);
    }
    // The newest token is always computed: its row gives the next logits.
    const int64_t cacheable = tokens - 1;
    const PrefixMatch match = kv.MatchPrefix(ids, cacheable);
    const int64_t take = need - static_cast<int64_t>(match.blocks.size()) + match.evictable;
    if (take + reserved > kv.free_blocks()) break;  // FIFO: nobody overtakes the head

    PopNextWaiting();
    const SequenceId seq = kv.CreateSequence();
    absl::StatusOr<int64_t> cached = KvTransaction(kv).AttachCachedPrefix(seq, ids, cacheable);
    const bool first_admission = r->decoder == nullptr;
    if (first_admission) r->decoder = std::make_unique<SequenceDecoder>(r->request, options.decoding, seq);
    // A resumed request recomputes whatever of its KV the cache no longer holds.
    absl::Status attached = cached.ok() ? r->decoder->OnKvAttached(seq, *cached) : cached.status();
    r->phase = r->decoder->prefilling() ? RequestPhase::kPrefilling : RequestPhase::kDecoding;  // holds `seq`
    if (!attached.ok()) {
      running.push_back(r);  // Cancel takes it out of `running` and frees its sequence
      Cancel(r, absl::InternalError(absl::StrCat("prefix cache: ", attached.message())), out);
      continue;
    }
    if (kv.prefix_caching()) {
      prefix_cache_queries += tokens;
      prefix_cache_hits += *cached;
    }
    if (first_admission) r->cached_prompt_tokens = *cached;
    if (!r->decoder->prefilling() && !r->prefilled.has_value()) r->prefilled = now;
    r->admit_order = ++admit_counter;
    if (!r->admitted.has_value()) r->admitted = now;
    running.push_back(r);
  }
  if (running.empty() && AnyoneWaiting()) {
    // Nothing runs that could free blocks, so waiting would spin: the cache is held
    // by someone else.
    const RequestPtr r = NextWaiting();
    Cancel(r,
           absl::ResourceExhaustedError(absl::StrCat(
               "request \"", r->request.request_id, "\" cannot be admitted: the KV cache has ", kv.free_blocks(),
               " free blocks of ", kv.config().num_blocks, " and no running request to wait for")),
           out);
  }
}

void Scheduler::Impl::Publish() {
  published.running = static_cast<int>(running.size());
  published.waiting = static_cast<int>(waiting.size());
  published.preempted = static_cast<int>(preempted.size());
  published.kv = kv.Stats();
  published.preemptions = preemptions;
  published.forwards = forwards;
  published.prefix_cache_queries = prefix_cache_queries;
  published.prefix_cache_hits = prefix_cache_hits;
}

void Scheduler::Impl::Dispatch(std::vector<Outgoing>& out) {
  for (Outgoing& o : out) {
    if (o.event.kind == RequestEvent::Kind::kFinished && metrics != nullptr) {
      metrics->OnRequestFinished(o.request->request.decoding.mode, o.event);
    }
    if (o.request->on_event) o.request->on_event(o.event);
  }
  out.clear();
}

void Scheduler::Impl::ReportQueueState() {
  if (metrics == nullptr) return;
  QueueState state;
  {
    std::lock_guard<std::mutex> lock(mu);
    state.running = published.running;
    state.waiting = published.waiting;
    state.preempted = published.preempted;
    state.kv_usage = published.kv.usage();
    state.kv_cached_blocks = published.kv.cached_blocks;
    state.kv_evictable_blocks = published.kv.evictable_blocks;
    state.preemptions = published.preemptions;
    state.prefix_cache_queries = published.prefix_cache_queries;
    state.prefix_cache_hits = published.prefix_cache_hits;
  }
  metrics->OnQueueState(state);
}

void Scheduler::Impl::Loop() {
  std::vector<Outgoing> out;
  ReportQueueState();
  std::unique_lock<std::mutex> lock(mu);
  while (true) {
    if (Idle()) {
      step_in_progress = false;
      last_report.reset();  // time idle is no step's
      idle.notify_all();
      if (stop) return;
      wake.wait(lock, [&] { return stop || AnyoneWaiting() || !to_abort.empty(); });
      continue;
    }
    Iterate(lock, out);
  }
}

void Scheduler::Impl::Iterate(std::unique_lock<std::mutex>& lock, std::vector<Outgoing>& out) {
  step_in_progress = true;
  const SteadyTime now = std::chrono::steady_clock::now();
  DrainAbortsAndDeadlines(now, out);
  Admit(now, out);
  Publish();
  lock.unlock();
  Dispatch(out);
  const int64_t filed_before = MasksFiled();
  const bool stepped = running.empty() || Step(out);
  lock.lock();
  if (!stepped) {
    // Every running sequence waits for a mask: sleep until the worker files one, or
    // something else needs the loop (bounded, so that deadlines are still checked).
    wake.wait_for(lock, std::chrono::milliseconds(20),
                  [&] { return stop || !to_abort.empty() || masks_filed != filed_before; });
  }
  Publish();
  lock.unlock();
  Dispatch(out);
  ReportQueueState();
  lock.lock();
}

int64_t Scheduler::Impl::MasksFiled() const {
  std::lock_guard<std::mutex> lock(mu);
  return masks_filed;
}

bool Scheduler::Impl::Step(std::vector<Outgoing>& out) {
  ++step_count;
  const SteadyTime start = std::chrono::steady_clock::now();
  const SchedulerOutput scheduled = Schedule();
  Preempt(scheduled, out);
  if (scheduled.sequences.empty()) return scheduled.waiting_for_masks == 0;
  // The step's KV changes: reserved by the forward, committed per sequence by Apply;
  // whatever is left open (sequences cancelled meanwhile are freed) rolls back here.
  KvTransaction transaction(kv);
  ExecutedForward forward = Execute(scheduled, transaction);
  forward.step_start = start;
  Apply(scheduled, forward, transaction, out);
  return true;
}

SchedulerOutput Scheduler::Impl::Schedule() {
  std::vector<PlannerSequence> sequences;
  sequences.reserve(running.size());
  for (size_t i = 0; i < running.size(); ++i) {
    const ScheduledRequest& r = *running[i];
    const SequenceDecoder& d = *r.decoder;
    sequences.push_back({.id = static_cast<int>(i),
                         .admit_order = r.admit_order,
                         .last_served_step = r.last_served_step,
                         .prefilling = d.prefilling(),
                         .kv_length = kv.length(d.sequence()),
                         .kv_blocks = static_cast<int64_t>(kv.block_table(d.sequence()).size()),
                         .freeable_blocks = kv.FreeableBlocks(d.sequence()),
                         .pending_kv_rows = d.PendingKvRows(),
                         // Adaptive sequences reserve the rows their draft length can reach
                         // this forward, not the full γ's (sequence_decoder.h, DecodeRowsBound).
                         .max_decode_rows = d.DecodeRowsBound(options.decoding.cost_curve)});
  }
  const BatchPlan plan =
      PlanBatch(std::move(sequences), {options.max_batch_tokens, kv.free_blocks(), kv.config().block_size});
  // Indices refer to `running` as it is now; resolve them before anything changes it.
  SchedulerOutput scheduled;
  const auto request = [&](int id) { return running[static_cast<size_t>(id)]; };
  const auto add = [&](const PlannedRows& p, bool prefill) {
    SchedulerOutput::Sequence& s = scheduled.sequences.emplace_back();
    s.request = request(p.id);
    s.prefill = prefill;
    s.rows = p.rows;
  };
  for (const PlannedRows& p : plan.decode) add(p, false);
  for (const PlannedRows& p : plan.prefill) add(p, true);
  for (int id : plan.preempt) scheduled.preempt.push_back(request(id));
  if (plan.fail.has_value()) scheduled.fail = request(*plan.fail);
  PlanDecoders(scheduled);
  return scheduled;
}

void Scheduler::Impl::PlanDecoders(SchedulerOutput& scheduled) {
  // Adaptive draft lengths (draft_length_policy.h): each decoding sequence's draft
  // rows are costed at the margin of the forward as planned so far, and their expected
  // extra tokens must pay it at a decode-only forward's cost per token, both corrected
  // by what this scheduler's forwards of each kind took (forward_cost_calibration.h).
  // The decode sequences plan first, knowing the prefill rows that share the forward.
  DraftCost cost{options.decoding.cost_curve, 0, 0, 0};
  for (const SchedulerOutput::Sequence& s : scheduled.sequences) {
    cost.batch_sequences += s.prefill ? 0 : 1;
    cost.base_rows += s.prefill ? s.rows : 1;
    scheduled.carries_prefill = scheduled.carries_prefill || s.prefill;
  }
  cost.decode_scale = calibration().Scale(false);
  cost.forward_scale = calibration().Scale(scheduled.carries_prefill);
  cost.batch_sequences = std::max(1, cost.batch_sequences);
  if (cost.base_rows == cost.batch_sequences) {  // decode only: priced by its batch size's timed steps
    cost.decode_shape = calibration().DecodeShape(cost.batch_sequences);
    cost.ar_step_wanted = options.ar_probe_steps && calibration().WantsArStep(cost.batch_sequences);
  }
  cost.base_rows = std::max(1, cost.base_rows);
  std::vector<std::string> step_probes;  // one probe a step per acceptance class
  cost.step_probes = &step_probes;
  std::vector<BatchRow>& rows = scheduled.batch.rows;
  // Grammar masks the verifications will read: computed here within one budget for the
  // whole step, the rest by the mask worker while their sequences sit this forward out.
  grammar::MaskWork mask_work{.budget = std::max<int64_t>(0, options.inline_mask_work)};
  std::vector<grammar::GrammarMatcher> missing;
  std::vector<SchedulerOutput::Sequence> kept;
  kept.reserve(scheduled.sequences.size());
  for (SchedulerOutput::Sequence& s : scheduled.sequences) {
    SequenceDecoder& d = *s.request->decoder;
    const SteadyTime planning = std::chrono::steady_clock::now();
    s.step = d.Plan(d.Choose(&cost, s.prefill ? std::numeric_limits<int>::max() : s.rows), s.prefill ? s.rows : 1);
    s.plan_seconds = SecondsBetween(planning, std::chrono::steady_clock::now());
    if (d.constrained() && !d.PrepareGrammarMasks(s.step, mask_work, &missing)) {
      for (grammar::GrammarMatcher& state : missing) mask_worker.Post(d.request().grammar->masker, std::move(state));
      missing.clear();
      ++scheduled.waiting_for_masks;
      continue;
    }
    if (!s.prefill) cost.planned_extra_rows += std::max(0, static_cast<int>(s.step.rows.size()) - 1);
    rows.insert(rows.end(), s.step.rows.begin(), s.step.rows.end());
    s.plan_seconds = SecondsBetween(planning, std::chrono::steady_clock::now());
    kept.push_back(std::move(s));
  }
  scheduled.sequences = std::move(kept);
  scheduled.predictive_rows =
      static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const BatchRow& row) { return row.predictive; }));
}

void Scheduler::Impl::Preempt(const SchedulerOutput& scheduled, std::vector<Outgoing>& out) {
  if (scheduled.preempt.empty() && scheduled.fail == nullptr) return;
  std::lock_guard<std::mutex> lock(mu);
  // Most recent first; pushing each to the front leaves them in admission order.
  for (const RequestPtr& r : scheduled.preempt) {
    Leave(*r, RequestPhase::kPreempted);
    running.erase(std::find(running.begin(), running.end(), r));
    preempted.push_front(r);
    ++preemptions;
  }
  if (scheduled.fail == nullptr) return;
  const RequestPtr& failing = scheduled.fail;
  const SequenceDecoder& d = *failing->decoder;
  const int block_size = kv.config().block_size;
  const int64_t positions = kv.length(d.sequence()) + (d.prefilling() ? 1 : d.PendingKvRows());
  Cancel(failing,
         absl::ResourceExhaustedError(absl::StrCat("request \"", failing->request.request_id, "\" needs ", positions,
                                                   " KV positions (", KvBlocksFor(positions, block_size),
                                                   " blocks) to continue, the whole KV cache has ",
                                                   kv.config().num_blocks, " blocks of ", block_size)),
         out);
}

ExecutedForward Scheduler::Impl::Execute(const SchedulerOutput& scheduled, KvTransaction& transaction) {
  if (options.debug_forward_delay.count() > 0) std::this_thread::sleep_for(options.debug_forward_delay);
  ExecutedForward forward;
  const SteadyTime start = std::chrono::steady_clock::now();
  forward.status = backend.Execute(scheduled.batch, transaction, output);
  forward.end = std::chrono::steady_clock::now();
  forward.seconds = SecondsBetween(start, forward.end);
  return forward;
}

void Scheduler::Impl::Apply(const SchedulerOutput& scheduled, const ExecutedForward& forward,
                            KvTransaction& transaction, std::vector<Outgoing>& out) {
  if (!forward.status.ok()) {
    // Nothing was kept; the requests of this batch cannot trust their state.
    std::lock_guard<std::mutex> lock(mu);
    for (const SchedulerOutput::Sequence& s : scheduled.sequences) {
      Cancel(s.request, absl::Status(forward.status.code(), absl::StrCat("forward failed: ", forward.status.message())),
             out);
    }
    return;
  }
  ++forwards;
  // What the forward cost, for the one cost model: Apply is where a step's outcome is
  // observed; Schedule only reads the model.
  if (options.decoding.cost_curve != nullptr) {
    calibration().Observe(*options.decoding.cost_curve, static_cast<int>(scheduled.batch.rows.size()),
                          scheduled.predictive_rows, scheduled.carries_prefill, forward.seconds);
  }
  ForwardReport report;
  report.seconds = forward.seconds;
  report.rows = static_cast<int>(scheduled.batch.rows.size());
  report.decode_cost_scale = calibration().Scale(false);
  report.prefill_cost_scale = calibration().Scale(true);
  if (const DecodeScaleShape shape = calibration().DecodeShape(1); shape.known()) {
    report.ar_step_scale = shape.ar_scale();
    report.drafting_step_scale = calibration().DraftingStepScale();
    if (!scheduled.carries_prefill && scheduled.sequences.size() == 1 && options.decoding.cost_curve != nullptr) {
      report.lone_ar_step_seconds = shape.At(1) * options.decoding.cost_curve->Seconds(DecodingMode::kNgram, 1);
    }
  }
  if (options.decoding.cost_curve != nullptr) {
    const AffineCost cost =
        calibration().Affine(*options.decoding.cost_curve, report.rows, scheduled.predictive_rows, scheduled.carries_prefill);
    report.fixed_seconds = cost.fixed;
    report.per_row_seconds = cost.per_row;
  }
  std::vector<RequestPtr> finished;
  std::vector<std::pair<RequestPtr, absl::Status>> failed;
  for (const SchedulerOutput::Sequence& s : scheduled.sequences) {
    if (!ApplySequence(s, forward.end, transaction, report, out, failed)) finished.push_back(s.request);
  }
  const SteadyTime reported = std::chrono::steady_clock::now();
  report.step_seconds = SecondsBetween(last_report.value_or(forward.step_start), reported);
  report.gap_seconds = last_report.has_value() ? std::max(0.0, SecondsBetween(*last_report, forward.step_start)) : 0.0;
  last_report = reported;
  if (metrics != nullptr) metrics->OnForward(report);
  if (!finished.empty() || !failed.empty()) {
    std::lock_guard<std::mutex> lock(mu);
    for (const RequestPtr& r : finished) {
      running.erase(std::find(running.begin(), running.end(), r));
      live.erase(LiveKey(r->request));
    }
    for (auto& [r, status] : failed) Cancel(r, std::move(status), out);
  }
  if (options.decoding.cost_curve != nullptr && !scheduled.carries_prefill && !scheduled.sequences.empty()) {
    // A decode-only step: adaptive γ's step shape for its batch size (forward_cost_calibration.h).
    calibration().ObserveDecodeStep(*options.decoding.cost_curve, static_cast<int>(scheduled.sequences.size()),
                                    report.rows, scheduled.predictive_rows,
                                    SecondsBetween(forward.step_start, std::chrono::steady_clock::now()));
  }
}

bool Scheduler::Impl::ApplySequence(const SchedulerOutput::Sequence& s, SteadyTime now, KvTransaction& transaction,
                                    ForwardReport& report, std::vector<Outgoing>& out,
                                    std::vector<std::pair<RequestPtr, absl::Status>>& failed) {
  ScheduledRequest& r = *s.request;
  SequenceDecoder& d = *r.decoder;
  const SteadyTime applying = std::chrono::steady_clock::now();
  absl::StatusOr<LogitRows> logits = output.RowsOf(d.sequence(), config.vocab_size);
  absl::StatusOr<StepOutcome> outcome = logits.ok() ? d.OnForward(s.step, *logits) : logits.status();
  // The step's one KV change for this sequence: the positions it keeps.
  absl::Status committed = outcome.ok() ? transaction.Commit(d.sequence(), outcome->kv_length) : outcome.status();
  if (!committed.ok()) {
    failed.emplace_back(s.request, std::move(committed));
    return true;
  }
  SequenceForward* described = nullptr;
  if (metrics != nullptr) {
    described = &report.sequences.emplace_back(DescribeForward(r.request.decoding.mode, s.step, *outcome));
  }
  if (!s.prefill) r.last_served_step = step_count;
  RequestEvent tokens;
  tokens.kind = RequestEvent::Kind::kTokens;
  tokens.tokens = std::move(outcome->tokens);
  tokens.logprobs = std::move(outcome->logprobs);
  if (r.text.has_value() && !tokens.tokens.empty()) {
    // Tokens after a stop string are dropped: the request ends at it.
    size_t used = 0;
    tokens.text = r.text->Push(tokens.tokens, &used);
    tokens.tokens.resize(used);
    if (tokens.logprobs.size() > used) tokens.logprobs.resize(used);
  }
  if (!tokens.tokens.empty()) {
    if (!r.first_token.has_value()) r.first_token = now;
    if (metrics != nullptr) {
      metrics->OnTokensCommitted(r.request.decoding.mode, static_cast<int>(tokens.tokens.size()),
                                 SecondsBetween(r.last_commit, now));
    }
    r.last_commit = now;
  }
  if (!tokens.tokens.empty() || !tokens.text.empty()) out.push_back({s.request, std::move(tokens)});
  if (described != nullptr) {
    described->cpu_seconds = s.plan_seconds + SecondsBetween(applying, std::chrono::steady_clock::now());
  }
  const bool stop_string = r.text.has_value() && r.text->stopped();
  if (!d.finished() && !stop_string) {
    r.phase = d.prefilling() ? RequestPhase::kPrefilling : RequestPhase::kDecoding;
    if (!d.prefilling() && !r.prefilled.has_value()) r.prefilled = now;
    return true;
  }
  Leave(r, RequestPhase::kFinished);
  RequestEvent done = FinishedEvent(r, stop_string ? FinishReason::kStop : d.finish_reason(), now);
  done.stop_reason = stop_string ? StopReason::kStopString : d.stop_reason();
  if (r.text.has_value()) {
    done.text = r.text->Finish();  // what was held back; its last bytes may complete a stop string
    if (r.text->stopped()) done.finish_reason = FinishReason::kStop, done.stop_reason = StopReason::kStopString;
  }
  out.push_back({s.request, std::move(done)});
  return false;
}

// ---- Scheduler ----------------------------------------------------------------

Scheduler::Scheduler(const SchedulerOptions& options, Backend& backend, PagedKvCache& kv, MetricsSink* metrics)
    : impl_(std::make_unique<Impl>(options, backend, kv, metrics)) {}

Scheduler::~Scheduler() {
  impl_->Shutdown(std::chrono::milliseconds(0));
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void Scheduler::Start() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->started || !impl_->accepting) return;  // once, and never after Shutdown
  impl_->started = true;
  impl_->thread = std::thread([impl = impl_.get()] { impl->Loop(); });
}

void Scheduler::RunUntilIdle() {
  std::vector<Outgoing> out;
  std::unique_lock<std::mutex> lock(impl_->mu);
  if (impl_->started) return;  // the thread runs the loop
  impl_->last_report.reset();
  while (!impl_->Idle()) impl_->Iterate(lock, out);
  impl_->step_in_progress = false;
}

absl::Status Scheduler::Submit(GenerationRequest request, EventHandler on_event) {
  return impl_->Submit(std::move(request), std::move(on_event));
}

bool Scheduler::Abort(const std::string& request_id, absl::Status reason, const std::string& owner) {
  return impl_->Abort(owner, request_id, std::move(reason));
}

void Scheduler::Shutdown(std::chrono::milliseconds timeout) { impl_->Shutdown(timeout); }

SchedulerStats Scheduler::Stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  SchedulerStats stats = impl_->published;
  stats.waiting = static_cast<int>(impl_->waiting.size());
  stats.preempted = static_cast<int>(impl_->preempted.size());
  return stats;
}

}  // namespace crossreg
