// Scheduling behaviour over the fake engine: admission order, queue limits,
// cancellation, deadlines, shutdown, metrics. Outputs are checked against the
// fake's closed-form greedy continuation.
#include "scheduler/scheduler.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"
#include "gtest/gtest.h"
#include "scheduler/cancel_cause.h"
#include "tests/scheduler/event_recorder.h"
#include "tests/scheduler/fake_backend.h"

namespace crossreg {
namespace {

using testing::EventRecorder;
using testing::FakeBackend;
using testing::FakeGreedyContinuation;
using testing::FakeModelConfig;
using std::chrono::milliseconds;

constexpr int kVocab = 32;

GenerationRequest Spec(const std::string& id, std::vector<int32_t> prompt, int max_new,
                       DecodingMode mode = DecodingMode::kAutoregressive, int gamma = 4) {
  GenerationRequest s;
  s.request_id = id;
  s.prompt_ids = std::move(prompt);
  s.max_new_tokens = max_new;
  s.decoding.mode = mode;
  s.decoding.gamma = gamma;
  s.stop_at_eos = false;
  return s;
}

// The fake engine plus a scheduler over it.
struct FakeRig {
  explicit FakeRig(SchedulerOptions options = {}, KvCacheConfig kv_config = {4, 256}, MetricsSink* metrics = nullptr)
      : config(FakeModelConfig(kVocab)), backend(config, kv_config), kv(kv_config) {
    options.decoding.has_adapter = true;
    scheduler = std::make_unique<Scheduler>(options, backend, kv, metrics);
  }
  ModelConfig config;
  FakeBackend backend;
  PagedKvCache kv;
  std::unique_ptr<Scheduler> scheduler;
};

TEST(SchedulerTest, CompletesARequestWithTheExpectedTokensAndEvents) {
  FakeRig rig;
  EventRecorder rec;
  rig.scheduler->Start();
  ASSERT_TRUE(rig.scheduler->Submit(Spec("a", {1, 2, 3, 4, 5}, 12), rec.HandlerFor("a")).ok());
  ASSERT_TRUE(rec.WaitForFinal("a"));
  const auto r = rec.Get("a");
  ASSERT_EQ(r.final_event->kind, RequestEvent::Kind::kFinished) << r.final_event->error;
  EXPECT_EQ(r.tokens, FakeGreedyContinuation({1, 2, 3, 4, 5}, 12, kVocab));
  EXPECT_EQ(r.token_events, 12);  // AR: one token per forward
  EXPECT_EQ(r.final_event->finish_reason, FinishReason::kLength);
  EXPECT_EQ(r.final_event->prompt_tokens, 5);
  EXPECT_EQ(r.final_event->stats.committed, 12);
  EXPECT_GE(r.final_event->timings.total_seconds, r.final_event->timings.time_to_first_token);
  EXPECT_GE(r.final_event->timings.time_to_first_token, r.final_event->timings.queue_seconds);
  rig.scheduler->Shutdown(milliseconds(1000));
  EXPECT_EQ(r.events_after_final, 0);
  EXPECT_EQ(rig.kv.Stats().used_blocks, 0);
  EXPECT_EQ(rig.scheduler->Stats().forwards, rig.backend.forwards());
}

// Greedy requests get row summaries and sampled ones whole rows, in the same forwards:
// each request reads its own slice of both and produces what it produces alone.
TEST(SchedulerTest, GreedyAndSampledRequestsShareForwardsOfSummariesAndWholeRows) {
  FakeRig rig;
  EventRecorder rec;
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  GenerationRequest sampled = Spec("sampled", prompt, 16, DecodingMode::kLossless, 4);
  sampled.sampling.temperature = 0.25f;  // the fake's one-hot logit of 10 leaves the rest ~e^-40
  sampled.sampling.seed = 3;
  ASSERT_TRUE(rig.scheduler->Submit(Spec("greedy", prompt, 16, DecodingMode::kLossless, 4), rec.HandlerFor("greedy")).ok());
  ASSERT_TRUE(rig.scheduler->Submit(sampled, rec.HandlerFor("sampled")).ok());
  ASSERT_TRUE(rig.scheduler->Submit(Spec("ar", {7, 8}, 16), rec.HandlerFor("ar")).ok());
  rig.scheduler->Start();
  ASSERT_TRUE(rec.WaitForFinals(3));
  EXPECT_EQ(rec.Get("greedy").tokens, FakeGreedyContinuation(prompt, 16, kVocab));
  EXPECT_EQ(rec.Get("sampled").tokens, FakeGreedyContinuation(prompt, 16, kVocab));
  EXPECT_EQ(rec.Get("ar").tokens, FakeGreedyContinuation({7, 8}, 16, kVocab));
  int mixed = 0;
  for (const auto& shape : rig.backend.shapes()) {
    mixed += shape.summary_rows > 0 && shape.summary_rows < shape.logit_rows ? 1 : 0;
  }
  EXPECT_GT(mixed, 2);
  rig.scheduler->Shutdown(milliseconds(1000));
}

TEST(SchedulerTest, AdmitsInFifoOrder) {
  SchedulerOptions options;
  options.max_running = 1;
  FakeRig rig(options);
  EventRecorder rec;
  const std::vector<std::string> ids = {"r0", "r1", "r2", "r3", "r4"};
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE(rig.scheduler->Submit(Spec(ids[i], {static_cast<int32_t>(i + 1), 3}, 4), rec.HandlerFor(ids[i])).ok());
  }
  rig.scheduler->Start();
  ASSERT_TRUE(rec.WaitForFinals(ids.size()));
  EXPECT_EQ(rec.first_token_order(), ids);
  EXPECT_EQ(rec.completion_order(), ids);
}

TEST(SchedulerTest, SubmitRefusals) {
  SchedulerOptions options;
  options.max_queue = 2;
  FakeRig rig(options, {4, 8});  // 32 KV positions
  EventRecorder rec;
  // Not started: requests stay queued.
  ASSERT_TRUE(rig.scheduler->Submit(Spec("a", {1}, 4), rec.HandlerFor("a")).ok());
  EXPECT_EQ(rig.scheduler->Submit(Spec("a", {1}, 4), rec.HandlerFor("a")).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(rig.scheduler->Submit(Spec("b", {1}, 4), rec.HandlerFor("b")).ok());
  const absl::Status full = rig.scheduler->Submit(Spec("c", {1}, 4), rec.HandlerFor("c"));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(rig.scheduler->Stats().waiting, 2);

  // 28 prompt tokens + gamma 4 + 1 > 32 positions.
  const absl::Status too_big = rig.scheduler->Submit(
      Spec("d", std::vector<int32_t>(28, 1), 4, DecodingMode::kLossless, 4), rec.HandlerFor("d"));
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_big.message().find("32"), std::string::npos) << too_big;
  EXPECT_EQ(rig.scheduler->Submit(Spec("e", {}, 4), nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rig.scheduler->Submit(Spec("f", {kVocab}, 4), nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rig.scheduler->Submit(Spec("", {1}, 4), nullptr).code(), absl::StatusCode::kInvalidArgument);

  // Shutdown before Start cancels what is queued and refuses the rest.
  rig.scheduler->Shutdown(milliseconds(0));
  EXPECT_EQ(rec.Get("a").final_event->error.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(rec.Get("b").final_event->error.code(), absl::StatusCode::kCancelled);
  // The cause travels as data, for the front doors' end reasons.
  EXPECT_EQ(CancelCauseOf(rec.Get("a").final_event->error), CancelCause::kShutdown);
  EXPECT_EQ(rig.scheduler->Submit(Spec("g", {1}, 4), nullptr).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SchedulerTest, AbortOfQueuedAndRunningRequestsFreesTheirKv) {
  SchedulerOptions options;
  options.max_running = 2;
  FakeRig rig(options);
  EventRecorder rec;
  rig.backend.CloseGate();
  rig.scheduler->Start();
  ASSERT_TRUE(rig.scheduler->Submit(Spec("run0", {1, 2, 3, 4, 5, 6, 7, 8, 9}, 50), rec.HandlerFor("run0")).ok());
  // run1's final event closes the gate again, so run0 is still running when aborted.
  auto record_run1 = rec.HandlerFor("run1");
  ASSERT_TRUE(rig.scheduler
                  ->Submit(Spec("run1", {1, 2, 3, 4, 5, 6, 7, 8, 9}, 50),
                           [&](const RequestEvent& e) {
                             if (e.kind == RequestEvent::Kind::kError) rig.backend.CloseGate();
                             record_run1(e);
                           })
                  .ok());
  ASSERT_TRUE(rig.scheduler->Submit(Spec("queued", {1, 2, 3}, 50), rec.HandlerFor("queued")).ok());
  rig.backend.WaitForForwardsStarted(1);  // run0 and run1 are running, "queued" waits
  EXPECT_TRUE(rig.scheduler->Abort("queued"));
  EXPECT_TRUE(rig.scheduler->Abort("run1", absl::CancelledError("client went away")));
  EXPECT_FALSE(rig.scheduler->Abort("nobody"));
  rig.backend.OpenGate();
  ASSERT_TRUE(rec.WaitForFinal("run1"));
  ASSERT_TRUE(rec.WaitForFinal("queued"));
  EXPECT_EQ(rec.Get("queued").final_event->error.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(rec.Get("queued").tokens.empty());
  EXPECT_EQ(rec.Get("run1").final_event->error.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(rec.Get("run1").final_event->error.message(), "client went away");
  EXPECT_TRUE(rig.scheduler->Abort("run0"));
  rig.backend.OpenGate();
  ASSERT_TRUE(rec.WaitForFinal("run0"));
  rig.scheduler->Shutdown(milliseconds(1000));
  EXPECT_EQ(rec.Get("run0").final_event->error.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(rig.kv.Stats().used_blocks, 0);
  EXPECT_EQ(rig.kv.Stats().num_sequences, 0);
  EXPECT_FALSE(rig.scheduler->Abort("run0"));  // finished ids are unknown
}

TEST(SchedulerTest, AHandlerMayAbortItsOwnRequest) {
  FakeRig rig;
  EventRecorder rec;
  auto record = rec.HandlerFor("self");
  Scheduler* scheduler = rig.scheduler.get();
  rig.scheduler->Start();
  ASSERT_TRUE(rig.scheduler
                  ->Submit(Spec("self", {1, 2}, 100),
                           [&, scheduler](const RequestEvent& e) {
                             record(e);
                             if (e.kind == RequestEvent::Kind::kTokens) scheduler->Abort("self");
                           })
                  .ok());
  ASSERT_TRUE(rec.WaitForFinal("self"));
  const auto r = rec.Get("self");
  EXPECT_EQ(r.final_event->error.code(), absl::StatusCode::kCancelled);
  EXPECT_LT(r.tokens.size(), 100u);
  rig.scheduler->Shutdown(milliseconds(1000));
  EXPECT_EQ(rig.kv.Stats().used_blocks, 0);
}

TEST(SchedulerTest, DeadlineCancelsQueuedAndRunningRequests) {
  SchedulerOptions options;
  options.max_running = 1;
  FakeRig rig(options);
  EventRecorder rec;
  rig.backend.CloseGate();
  rig.scheduler->Start();
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(50);
  GenerationRequest running = Spec("running", {1, 2, 3, 4, 5, 6}, 50);
  running.deadline = deadline;
  GenerationRequest queued = Spec("queued", {1, 2, 3}, 50);
  queued.deadline = deadline;
  ASSERT_TRUE(rig.scheduler->Submit(running, rec.HandlerFor("running")).ok());
  ASSERT_TRUE(rig.scheduler->Submit(queued, rec.HandlerFor("queued")).ok());
  ASSERT_TRUE(rig.scheduler->Submit(Spec("free", {4, 5}, 3), rec.HandlerFor("free")).ok());
  rig.backend.WaitForForwardsStarted(1);
  std::this_thread::sleep_until(deadline + milliseconds(10));
  rig.backend.OpenGate();
  ASSERT_TRUE(rec.WaitForFinals(3));
  EXPECT_EQ(rec.Get("running").final_event->error.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(rec.Get("queued").final_event->error.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(rec.Get("free").final_event->kind, RequestEvent::Kind::kFinished);
  EXPECT_EQ(rec.Get("free").tokens, FakeGreedyContinuation({4, 5}, 3, kVocab));
  rig.scheduler->Shutdown(milliseconds(1000));
  EXPECT_EQ(rig.kv.Stats().used_blocks, 0);
}

TEST(SchedulerTest, ShutdownDrainsInFlightRequestsAndRefusesNewOnes) {
  FakeRig rig;
  EventRecorder rec;
  rig.scheduler->Start();
  for (int i = 0; i < 6; ++i) {
    const std::string id = absl::StrCat("d", i);
    ASSERT_TRUE(rig.scheduler->Submit(Spec(id, {static_cast<int32_t>(i), 1, 2}, 20), rec.HandlerFor(id)).ok());
  }
  rig.scheduler->Shutdown(std::chrono::seconds(60));
  EXPECT_EQ(rec.completion_order().size(), 6u);  // Shutdown returned after the drain
  for (int i = 0; i < 6; ++i) {
    const auto r = rec.Get(absl::StrCat("d", i));
    ASSERT_TRUE(r.final_event.has_value());
    EXPECT_EQ(r.final_event->kind, RequestEvent::Kind::kFinished) << r.final_event->error;
    EXPECT_EQ(r.tokens, FakeGreedyContinuation({i, 1, 2}, 20, kVocab));
  }
  EXPECT_EQ(rig.scheduler->Submit(Spec("late", {1}, 4), nullptr).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(rig.kv.Stats().used_blocks, 0);
}

TEST(SchedulerTest, ShutdownTimeoutCancelsWhatIsLeft) {
  SchedulerOptions options;
  options.max_running = 1;
  FakeRig rig(options);
  EventRecorder rec;
  rig.backend.CloseGate();
  rig.scheduler->Start();
  ASSERT_TRUE(rig.scheduler->Submit(Spec("a", {1, 2}, 30), rec.HandlerFor("a")).ok());
  ASSERT_TRUE(rig.scheduler->Submit(Spec("b", {1, 2}, 30), rec.HandlerFor("b")).ok());
  rig.backend.WaitForForwardsStarted(1);
  std::thread opener([&] {
    std::this_thread::sleep_for(milliseconds(100));
    rig.backend.OpenGate();
  });
  rig.scheduler->Shutdown(milliseconds(20));
  opener.join();
  ASSERT_EQ(rec.completion_order().size(), 2u);
  EXPECT_EQ(rec.Get("a").final_event->error.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(rec.Get("b").final_event->error.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(rig.kv.Stats().used_blocks, 0);
}

TEST(SchedulerTest, RequestThatOutgrowsTheWholeCacheFailsInsteadOfLooping) {
  FakeRig rig({}, {4, 4});  // 16 positions
  EventRecorder rec;
  rig.scheduler->Start();
  ASSERT_TRUE(rig.scheduler->Submit(Spec("big", {1, 2, 3}, 40), rec.HandlerFor("big")).ok());
  ASSERT_TRUE(rec.WaitForFinal("big"));
  const auto r = rec.Get("big");
  EXPECT_EQ(r.final_event->error.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.final_event->error.message().find("4 blocks of 4"), std::string::npos) << r.final_event->error;
  EXPECT_FALSE(r.tokens.empty());  // it ran until the cache was full
  rig.scheduler->Shutdown(milliseconds(1000));
  EXPECT_EQ(rig.kv.Stats().used_blocks, 0);
}

TEST(SchedulerTest, BatchesStayWithinTheTokenBudget) {
  SchedulerOptions options;
  options.max_batch_tokens = 24;
  FakeRig rig(options);
  EventRecorder rec;
  for (int i = 0; i < 5; ++i) {
    const std::string id = absl::StrCat("b", i);
    ASSERT_TRUE(rig.scheduler->Submit(Spec(id, std::vector<int32_t>(40, i + 1), 8), rec.HandlerFor(id)).ok());
  }
  rig.scheduler->Start();
  ASSERT_TRUE(rec.WaitForFinals(5));
  bool mixed = false;
  for (const auto& s : rig.backend.shapes()) {
    EXPECT_LE(s.rows, 24);
    EXPECT_GE(s.rows, 1);
    mixed |= s.logit_rows > 0 && s.rows > s.logit_rows;  // decode rows with a prefill chunk
  }
  EXPECT_TRUE(mixed);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(rec.Get(absl::StrCat("b", i)).tokens, FakeGreedyContinuation(std::vector<int32_t>(40, i + 1), 8, kVocab));
  }
}

TEST(SchedulerTest, TinyCachePreemptsAndStillProducesIdenticalOutputs) {
  SchedulerOptions options;
  FakeRig rig(options, {4, 12});  // 48 positions: about two requests at once
  EventRecorder rec;
  const DecodingMode modes[] = {DecodingMode::kAutoregressive, DecodingMode::kLossless, DecodingMode::kLossy,
                                DecodingMode::kNgram};
  // All queued before the scheduler starts: submitted to a running one, each request
  // could run alone whenever the test thread is descheduled between submissions, and
  // nothing would compete for the cache (a loaded CI machine can then run the test
  // without a single preemption).
  for (int i = 0; i < 16; ++i) {
    const std::string id = absl::StrCat("t", i);
    std::vector<int32_t> prompt = {static_cast<int32_t>(i % kVocab), 3, 5, 7, 3, 5};
    ASSERT_TRUE(rig.scheduler->Submit(Spec(id, prompt, 16, modes[i % 4], 3), rec.HandlerFor(id)).ok());
  }
  rig.scheduler->Start();
  ASSERT_TRUE(rec.WaitForFinals(16));
  for (int i = 0; i < 16; ++i) {
    const auto r = rec.Get(absl::StrCat("t", i));
    ASSERT_EQ(r.final_event->kind, RequestEvent::Kind::kFinished) << r.final_event->error;
    EXPECT_EQ(r.tokens, FakeGreedyContinuation({i % kVocab, 3, 5, 7, 3, 5}, 16, kVocab)) << "request " << i;
  }
  rig.scheduler->Shutdown(milliseconds(1000));
  EXPECT_GT(rig.scheduler->Stats().preemptions, 0);
  EXPECT_EQ(rig.kv.Stats().used_blocks, 0);
}

// Records the largest queues the scheduler reported.
class QueuePeakSink final : public MetricsSink {
 public:
  void OnForward(const ForwardReport&) override {}
  void OnTokensCommitted(DecodingMode, int, double) override {}
  void OnRequestFinished(DecodingMode, const RequestEvent&) override {}
  void OnQueueState(const QueueState& state) override {
    max_waiting = std::max(max_waiting.load(), state.waiting);
    max_preempted = std::max(max_preempted.load(), state.preempted);
  }
  std::atomic<int> max_waiting{0}, max_preempted{0};
};

TEST(SchedulerTest, QueueLimitHoldsUnderPreemption) {
  // 48 KV positions for up to 8 running sequences: they keep preempting each other,
  // and the preempted ones must not count against (or overflow) max_queue.
  SchedulerOptions options;
  options.max_queue = 3;
  options.max_running = 8;
  QueuePeakSink sink;
  FakeRig rig(options, {4, 12}, &sink);
  EventRecorder rec;
  // Held at the first forward until the queue has refused a request: on a fast run the
  // scheduler could otherwise admit each request as it arrives, and nothing would queue
  // up or compete for the cache. Once open, the queued ones run together and preempt.
  rig.backend.CloseGate();
  rig.scheduler->Start();
  int accepted = 0, refused = 0;
  for (int attempt = 0; attempt < 2000 && accepted < 24; ++attempt) {
    const std::string id = absl::StrCat("p", accepted);
    const absl::Status s = rig.scheduler->Submit(
        Spec(id, {static_cast<int32_t>(accepted % kVocab), 3, 5, 7, 3, 5}, 16), rec.HandlerFor(id));
    if (s.ok()) {
      ++accepted;
    } else {
      ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
      if (++refused == 1) rig.backend.OpenGate();
      std::this_thread::sleep_for(milliseconds(1));
    }
    const SchedulerStats stats = rig.scheduler->Stats();
    ASSERT_LE(stats.waiting, options.max_queue) << "after " << accepted << " submissions";
  }
  ASSERT_EQ(accepted, 24);
  ASSERT_TRUE(rec.WaitForFinals(24));
  rig.scheduler->Shutdown(milliseconds(1000));
  for (int i = 0; i < 24; ++i) {
    const auto r = rec.Get(absl::StrCat("p", i));
    ASSERT_EQ(r.final_event->kind, RequestEvent::Kind::kFinished) << r.final_event->error;
    EXPECT_EQ(r.tokens, FakeGreedyContinuation({i % kVocab, 3, 5, 7, 3, 5}, 16, kVocab)) << "request " << i;
  }
  EXPECT_GT(rig.scheduler->Stats().preemptions, 0);
  EXPECT_GT(refused, 0);
  EXPECT_LE(sink.max_waiting.load(), options.max_queue);
  EXPECT_GT(sink.max_preempted.load(), 0);
  EXPECT_EQ(rig.kv.Stats().used_blocks, 0);
}

TEST(SchedulerTest, OwnersKeepTheirRequestsApart) {
  FakeRig rig;
  EventRecorder rec;
  GenerationRequest alice = Spec("job", {1, 2, 3}, 6);
  alice.owner = "token:alice";
  GenerationRequest bob = Spec("job", {4, 5, 6}, 6);
  bob.owner = "token:bob";
  // Not started: both stay queued. The same id under two owners is two requests.
  ASSERT_TRUE(rig.scheduler->Submit(alice, rec.HandlerFor("alice")).ok());
  ASSERT_TRUE(rig.scheduler->Submit(bob, rec.HandlerFor("bob")).ok());
  EXPECT_EQ(rig.scheduler->Submit(alice, rec.HandlerFor("alice2")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(rig.scheduler->Abort("job", absl::CancelledError("x"), "token:mallory"));
  EXPECT_FALSE(rig.scheduler->Abort("job"));  // the empty owner is an owner too
  EXPECT_TRUE(rig.scheduler->Abort("job", absl::CancelledError("by bob"), "token:bob"));
  rig.scheduler->Start();
  ASSERT_TRUE(rec.WaitForFinal("alice"));
  ASSERT_TRUE(rec.WaitForFinal("bob"));
  EXPECT_EQ(rec.Get("alice").final_event->kind, RequestEvent::Kind::kFinished);
  EXPECT_EQ(rec.Get("alice").tokens, FakeGreedyContinuation({1, 2, 3}, 6, kVocab));
  EXPECT_EQ(rec.Get("bob").final_event->error.code(), absl::StatusCode::kCancelled);
  rig.scheduler->Shutdown(milliseconds(1000));
}

// Sums what the sink hears; checked against the requests' own stats.
class CountingSink final : public MetricsSink {
 public:
  void OnForward(const ForwardReport& f) override {
    ++forwards;
    rows += f.rows;
    EXPECT_GT(f.seconds, 0);
    int sequence_rows = 0;
    for (const SequenceForward& s : f.sequences) {
      sequence_rows += s.rows;
      forward_committed[s.mode] += s.committed;
      if (!s.speculative) continue;
      EXPECT_NE(s.mode, DecodingMode::kAutoregressive);
      EXPECT_FALSE(s.prefill);
      spec_forwards[s.mode] += 1;
      drafted[s.mode] += s.drafted;
      accepted[s.mode] += s.accepted;
      int at = 0;
      for (size_t k = 0; k < s.accepted_at.size(); ++k) {
        at += s.accepted_at[k];
        EXPECT_LE(s.accepted_at[k], s.drafted_at[k]);
        auto& drafted_k = drafted_per_position[s.mode];
        auto& accepted_k = accepted_per_position[s.mode];
        if (drafted_k.size() <= k) drafted_k.resize(k + 1, 0), accepted_k.resize(k + 1, 0);
        drafted_k[k] += s.drafted_at[k];
        accepted_k[k] += s.accepted_at[k];
      }
      EXPECT_EQ(at, s.accepted);
    }
    EXPECT_EQ(sequence_rows, f.rows);
  }
  void OnTokensCommitted(DecodingMode mode, int tokens, double seconds_since_last) override {
    committed[mode] += tokens;
    EXPECT_GT(tokens, 0);
    EXPECT_GE(seconds_since_last, 0);
  }
  void OnRequestFinished(DecodingMode mode, const RequestEvent& finished) override {
    ++finished_requests[mode];
    finished_committed[mode] += finished.stats.committed;
  }
  void OnQueueState(const QueueState& state) override {
    ++queue_reports;
    // Every request the test submitted is running, waiting or done; one runs at most
    // max_running at a time.
    EXPECT_LE(state.running + state.waiting + state.preempted, submitted);
    EXPECT_LE(state.running, max_running);
    EXPECT_LE(state.kv_usage, 1);
    busiest = std::max(busiest, state.running);
    if (state.running > 0) {
      EXPECT_GT(state.kv_usage, 0) << "running requests hold KV blocks";
    }
  }
  int submitted = 0, max_running = 0, busiest = 0;
  // Only the scheduler thread writes; read after Shutdown.
  int64_t forwards = 0, rows = 0, queue_reports = 0;
  std::map<DecodingMode, int64_t> committed, finished_requests, finished_committed, forward_committed;
  std::map<DecodingMode, int64_t> spec_forwards, drafted, accepted;
  std::map<DecodingMode, std::vector<int64_t>> drafted_per_position, accepted_per_position;
};

// Two accounts of the same work: the per-forward reports (from each forward's
// verdicts) and each request's final statistics (kept by its decoder).
TEST(SchedulerTest, MetricsSinkCountersEqualThePerRequestSums) {
  CountingSink sink;
  sink.submitted = 9;
  sink.max_running = SchedulerOptions{}.max_running;
  FakeRig rig({}, {4, 256}, &sink);
  EventRecorder rec;
  const DecodingMode modes[] = {DecodingMode::kAutoregressive, DecodingMode::kLossless, DecodingMode::kNgram};
  rig.scheduler->Start();
  for (int i = 0; i < 9; ++i) {
    const std::string id = absl::StrCat("m", i);
    ASSERT_TRUE(rig.scheduler->Submit(Spec(id, {static_cast<int32_t>(i), 2, 4}, 10 + i, modes[i % 3]), rec.HandlerFor(id)).ok());
  }
  ASSERT_TRUE(rec.WaitForFinals(9));
  rig.scheduler->Shutdown(milliseconds(1000));
  std::map<DecodingMode, int64_t> committed, count, spec_forwards, drafted, accepted;
  std::map<DecodingMode, std::vector<int64_t>> drafted_per_position, accepted_per_position;
  for (int i = 0; i < 9; ++i) {
    const auto r = rec.Get(absl::StrCat("m", i));
    const DecodingMode mode = modes[i % 3];
    committed[mode] += r.final_event->stats.committed;
    count[mode] += 1;
    if (mode != DecodingMode::kAutoregressive) {
      spec_forwards[mode] += r.final_event->stats.forwards;
      drafted[mode] += r.final_event->stats.drafted;
      accepted[mode] += r.final_event->stats.accepted;
      const SpeculativeStats& stats = r.final_event->stats;
      auto& drafted_k = drafted_per_position[mode];
      auto& accepted_k = accepted_per_position[mode];
      for (size_t k = 0; k < stats.drafted_per_position.size(); ++k) {
        if (stats.drafted_per_position[k] == 0) continue;  // depths no forward reached
        if (drafted_k.size() <= k) drafted_k.resize(k + 1, 0), accepted_k.resize(k + 1, 0);
        drafted_k[k] += stats.drafted_per_position[k];
        accepted_k[k] += stats.accepted_per_position[k];
      }
    }
    EXPECT_EQ(static_cast<int64_t>(r.tokens.size()), r.final_event->stats.committed);
  }
  // The per-forward reports add up to each mode's per-request statistics.
  EXPECT_EQ(sink.forward_committed, committed);
  EXPECT_EQ(sink.spec_forwards, spec_forwards);
  EXPECT_EQ(sink.drafted, drafted);
  EXPECT_EQ(sink.accepted, accepted);
  EXPECT_EQ(sink.drafted_per_position, drafted_per_position);
  EXPECT_EQ(sink.accepted_per_position, accepted_per_position);
  EXPECT_GT(drafted[DecodingMode::kLossless], 0);
  EXPECT_GT(drafted[DecodingMode::kNgram], 0);
  EXPECT_GT(sink.busiest, 0);
  EXPECT_EQ(sink.committed, committed);
  EXPECT_EQ(sink.finished_committed, committed);
  EXPECT_EQ(sink.finished_requests, count);
  EXPECT_EQ(sink.forwards, rig.scheduler->Stats().forwards);
  EXPECT_EQ(sink.forwards, rig.backend.forwards());
  int64_t rows = 0;
  for (const auto& s : rig.backend.shapes()) rows += s.rows;
  EXPECT_EQ(sink.rows, rows);
  EXPECT_GT(sink.queue_reports, 0);
}

// The scheduler times its forwards against the cost curve, per kind (decode-only,
// carrying prefill), and reports the scales with each forward. The fake's forwards take
// microseconds against a curve of seconds: both kinds read the clamp, 1/4.
class ScaleSink final : public MetricsSink {
 public:
  void OnForward(const ForwardReport& f) override {
    bool prefill = false;
    for (const SequenceForward& s : f.sequences) prefill = prefill || s.prefill;
    reports.push_back({f.sequences.size(), f.decode_cost_scale, f.prefill_cost_scale, f.fixed_seconds,
                       f.per_row_seconds, f.rows, prefill, f.ar_step_scale, f.drafting_step_scale});
    prefill_seen = prefill_seen || prefill;
  }
  void OnTokensCommitted(DecodingMode, int, double) override {}
  void OnRequestFinished(DecodingMode, const RequestEvent&) override {}
  void OnQueueState(const QueueState&) override {}
  struct Seen {
    size_t sequences;
    double decode, prefill;
    double fixed, per_row;  // the cost model the accounting charges by
    int rows;
    bool carries_prefill;
    double ar_step, drafting_step;  // the single-sequence step shape's anchors (0: not known)
  };
  std::vector<Seen> reports;  // scheduler thread; read after Shutdown
  bool prefill_seen = false;
};

TEST(SchedulerTest, ForwardsCalibrateTheCostCurvePerKind) {
  auto curve = ForwardCostCurve::FromPoints({{1, 1.0}, {64, 2.0}});
  ASSERT_TRUE(curve.ok());
  for (const bool with_curve : {false, true}) {
    ScaleSink sink;
    SchedulerOptions options;
    options.decoding.cost_curve = with_curve ? &*curve : nullptr;
    FakeRig rig(options, {4, 256}, &sink);
    EventRecorder rec;
    rig.scheduler->Start();
    ASSERT_TRUE(rig.scheduler->Submit(Spec("a", {1, 2, 3, 4, 5}, 6), rec.HandlerFor("a")).ok());
    ASSERT_TRUE(rec.WaitForFinal("a"));
    rig.scheduler->Shutdown(milliseconds(1000));
    ASSERT_GE(sink.reports.size(), 6u);
    EXPECT_TRUE(sink.prefill_seen);
    // The first forward is the prompt's: only the prefill kind has been timed.
    EXPECT_DOUBLE_EQ(sink.reports.front().decode, 1.0);
    EXPECT_NEAR(sink.reports.front().prefill, with_curve ? 0.25 : 1.0, 1e-12);
    EXPECT_NEAR(sink.reports.back().decode, with_curve ? 0.25 : 1.0, 1e-12) << "with curve " << with_curve;
    EXPECT_NEAR(sink.reports.back().prefill, with_curve ? 0.25 : 1.0, 1e-12);
    // The accounting reads the same model as the draft lengths: the curve's line
    // (1 s + 1/63 s a row past the first) at the kind's scale; nothing without a curve.
    for (const auto& r : sink.reports) {
      const double scale = r.carries_prefill ? r.prefill : r.decode;
      EXPECT_NEAR(r.per_row, with_curve ? scale / 63 : 0.0, 1e-12);
      EXPECT_NEAR(r.fixed + r.per_row * r.rows, with_curve ? scale * (1.0 + (r.rows - 1) / 63.0) : 0.0, 1e-12);
    }
  }
}

// Adaptive γ's step shape (forward_cost_calibration.h) learns from the steps of one
// sequence decoding alone, AR and drafting, and from nothing else: after an AR request
// alone, drafting steps of two sequences side by side leave it unknown. Against a curve
// of seconds the fake's steps read the clamp, 1/4.
TEST(SchedulerTest, OnlyASequenceDecodingAloneTeachesTheStepShape) {
  auto curve = ForwardCostCurve::FromPoints({{1, 1.0}, {64, 2.0}});
  ASSERT_TRUE(curve.ok());
  for (const bool alone : {true, false}) {
    SCOPED_TRACE(alone ? "alone" : "side by side");
    ScaleSink sink;
    SchedulerOptions options;
    options.decoding.cost_curve = &*curve;
    FakeRig rig(options, {4, 256}, &sink);
    EventRecorder rec;
    rig.scheduler->Start();
    ASSERT_TRUE(rig.scheduler->Submit(Spec("ar", {7, 8}, 8), rec.HandlerFor("ar")).ok());
    ASSERT_TRUE(rec.WaitForFinal("ar"));
    // The opener holds a forward, so the requests after it are admitted together and,
    // alike, decode in lockstep.
    rig.backend.CloseGate();
    ASSERT_TRUE(rig.scheduler->Submit(Spec("opener", {9}, 1), rec.HandlerFor("opener")).ok());
    rig.backend.WaitForForwardsStarted(rig.backend.forwards() + 1);
    const std::vector<std::string> ids = alone ? std::vector<std::string>{"x"} : std::vector<std::string>{"x", "y"};
    for (const std::string& id : ids) {
      ASSERT_TRUE(rig.scheduler->Submit(Spec(id, {1, 2, 3, 4, 5}, 40, DecodingMode::kNgram), rec.HandlerFor(id)).ok());
    }
    rig.backend.OpenGate();
    ASSERT_TRUE(rec.WaitForFinals(2 + static_cast<int>(ids.size())));
    rig.scheduler->Shutdown(milliseconds(1000));
    int drafting = 0;
    for (const auto& r : sink.reports) drafting += r.rows > static_cast<int>(r.sequences) ? 1 : 0;
    ASSERT_GE(drafting, 3);
    if (alone) {
      EXPECT_NEAR(sink.reports.back().ar_step, 0.25, 1e-12);
      EXPECT_NEAR(sink.reports.back().drafting_step, 0.25, 1e-12);
    } else {
      for (const auto& r : sink.reports) {
        EXPECT_EQ(r.ar_step, 0.0);
        if (r.rows > static_cast<int>(r.sequences)) {
          EXPECT_EQ(r.sequences, 2u);
        }
      }
    }
  }
}

// A tokenizer over the fake's vocabulary: one letter a token ("a".."z", then "A"..).
std::unique_ptr<Tokenizer> LetterTokenizer() {
  TokenizerSpec spec;
  for (int i = 0; i < kVocab; ++i) spec.tokens.push_back(std::string(1, static_cast<char>(i < 26 ? 'a' + i : 'A' + i - 26)));
  spec.scores.assign(spec.tokens.size(), 0.0f);
  spec.add_bos = false;
  spec.add_space_prefix = false;
  auto tokenizer = Tokenizer::Create(std::move(spec));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

// The scheduler decodes the text and ends a request at its first stop string, next to
// the forward that completed it (no round trip through a front door): the request
// finishes with kStop / kStopString and the decoder's statistics, its text stops short
// of the stop string, its tokens end with the one that completed it, its KV is freed.
TEST(SchedulerTest, AStopStringEndsTheRequestWhereItAppears) {
  const std::unique_ptr<Tokenizer> tokenizer = LetterTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const std::vector<int32_t> continuation = FakeGreedyContinuation({1, 2, 3}, 40, kVocab);
  std::string text;
  for (int32_t id : continuation) text += tokenizer->TokenBytes(id);
  const std::string stop = text.substr(12, 3);
  const size_t at = text.find(stop);
  for (const DecodingMode mode : {DecodingMode::kAutoregressive, DecodingMode::kNgram}) {
    SCOPED_TRACE(DecodingModeName(mode));
    SchedulerOptions options;
    options.tokenizer = tokenizer.get();
    FakeRig rig(options);
    EventRecorder rec;
    rig.scheduler->Start();
    GenerationRequest request = Spec("s", {1, 2, 3}, 40, mode);
    request.stop_strings = {"never-there", stop};
    ASSERT_TRUE(rig.scheduler->Submit(request, rec.HandlerFor("s")).ok());
    ASSERT_TRUE(rec.WaitForFinal("s"));
    rig.scheduler->Shutdown(milliseconds(1000));
    const auto r = rec.Get("s");
    ASSERT_EQ(r.final_event->kind, RequestEvent::Kind::kFinished);
    EXPECT_EQ(r.final_event->finish_reason, FinishReason::kStop);
    EXPECT_EQ(r.final_event->stop_reason, StopReason::kStopString);
    EXPECT_EQ(r.text, text.substr(0, at));
    EXPECT_EQ(r.tokens, std::vector<int32_t>(continuation.begin(), continuation.begin() + at + stop.size()));
    EXPECT_GT(r.final_event->stats.forwards, 0);
    EXPECT_EQ(rig.kv.Stats().used_blocks, 0);
  }
  // Without a stop string the text is the whole continuation, ended by its length.
  SchedulerOptions options;
  options.tokenizer = tokenizer.get();
  FakeRig rig(options);
  EventRecorder rec;
  rig.scheduler->Start();
  ASSERT_TRUE(rig.scheduler->Submit(Spec("all", {1, 2, 3}, 40), rec.HandlerFor("all")).ok());
  ASSERT_TRUE(rec.WaitForFinal("all"));
  rig.scheduler->Shutdown(milliseconds(1000));
  EXPECT_EQ(rec.Get("all").text, text);
  EXPECT_EQ(rec.Get("all").final_event->finish_reason, FinishReason::kLength);
  // A scheduler without a tokenizer refuses stop strings, naming the field.
  FakeRig bare;
  GenerationRequest request = Spec("x", {1, 2, 3}, 4);
  request.stop_strings = {"z"};
  const absl::Status refused = bare.scheduler->Submit(request, nullptr);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ViolatedField(refused), "stop_strings");
}

TEST(CancelCauseTest, TheCauseTravelsOnTheStatusAndOnlyOnCancellations) {
  for (CancelCause cause : {CancelCause::kClient, CancelCause::kOwnerAbort, CancelCause::kShutdown}) {
    const absl::Status status = CancelledBecause(cause, "why");
    EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
    EXPECT_EQ(status.message(), "why");
    EXPECT_EQ(CancelCauseOf(status), cause);
  }
  // Message text says nothing: only the payload does.
  EXPECT_EQ(CancelCauseOf(absl::CancelledError("scheduler shut down")), std::nullopt);
  EXPECT_EQ(CancelCauseOf(absl::DeadlineExceededError("late")), std::nullopt);
  absl::Status odd = absl::CancelledError("x");
  odd.SetPayload("type.crossreg/CancelCause", absl::Cord("9"));
  EXPECT_EQ(CancelCauseOf(odd), std::nullopt);
}

}  // namespace
}  // namespace crossreg
