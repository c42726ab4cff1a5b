// A seed fixes the text whatever else is running (docs/algorithm.md "Seed-exact
// verification"): seeded sampled requests (temperatures 0.7-1.2, top-p, top-k, min-p,
// penalties, a grammar) served by the scheduler on stories260K with a random drafter,
// in AR, n-gram and lossless (forked chain with n-gram assist, outcome blocks), sixteen
// decoding at once with modes mixed in each forward, with adaptive γ and the prefix
// cache on or off, in a cache small enough to preempt and recompute, and one request
// at a time: every text is the one AR writes for the request alone. The n-gram drafts
// come from a table of the AR texts with every fourth continuation wrong, so that most
// forwards commit several tokens.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/decoding/acceptance_memory.h"
#include "scheduler/generate.h"
#include "gtest/gtest.h"
#include "tests/testing/cpu_engine.h"
#include "scheduler/scheduler.h"
#include "tests/scheduler/event_recorder.h"
#include "tests/testing/seeded_requests.h"

namespace crossreg {
namespace {

using testing::EventRecorder;

constexpr int kSeedBlock = 4;

using testing::CpuEngine;

CpuEngine MakeCpuEngine(const Model& model, const LoraAdapter& adapter, int blocks, bool prefix_caching) {
  return testing::MakeCpuEngine(model, adapter, {.block_size = kSeedBlock, .num_blocks = blocks, .prefix_caching = prefix_caching});
}

const ForwardCostCurve& SteepCurve() {
  static const ForwardCostCurve curve =
      *ForwardCostCurve::FromPoints({{1, 1e-3}, {2, 1.3e-3}, {16, 4e-3}, {64, 20e-3}});
  return curve;
}

// Request i's decoding in a run whose modes are rotated by `shift`: AR, n-gram, lossless
// on a forked chain with n-gram assist, lossless on outcome blocks.
DecodingConfig Decoding(int i, int shift, bool adaptive) {
  DecodingConfig d;
  switch ((i + shift) % 4) {
    case 0:
      return d;
    case 1:
      d.mode = DecodingMode::kNgram;
      d.gamma = 4;
      break;
    case 2:
      d.mode = DecodingMode::kLossless;
      d.gamma = 4;
      d.fork_outcomes = 2;
      d.fork_depth = 2;
      d.ngram_assist = true;
      break;
    default:
      d.mode = DecodingMode::kLossless;
      d.gamma = 1 + i % 5;
      d.draft_layout = DraftLayout::kBlocks;
      d.fork_outcomes = i % 2;
      d.fork_depth = 3;
      break;
  }
  d.adaptive_gamma = adaptive;
  return d;
}

class SeedIdentitySchedulerTest : public ::testing::Test {
 protected:
  static constexpr int kRequests = 64;
  static constexpr int kFirst = 300;  // request numbers apart from the unit test's

  void SetUp() override {
    m_ = testing::LoadSeedIdentityModel();
    ASSERT_NE(m_.model, nullptr);
    CpuEngine alone = MakeCpuEngine(*m_.model, *m_.drafter, 512, false);
    const DecodingEnvironment env{.model = &m_.model->config,
                                  .has_adapter = true,
                                  .placeholder_token = m_.drafter->placeholder_token_id};
    std::vector<std::vector<int32_t>> texts;  // prompt and AR's continuation
    for (int i = kFirst; i < kFirst + kRequests; ++i) {
      const GenerationRequest request = testing::SeededSampledRequest(m_, i);
      auto r = Generate(*alone.backend, *alone.kv, request, env);
      ASSERT_TRUE(r.ok()) << r.status();
      requests_.push_back(request);
      ar_.push_back(r->ids);
      texts.push_back(request.prompt_ids);
      texts.back().insert(texts.back().end(), r->ids.begin(), r->ids.end());
    }
    table_ = testing::TableOfTexts(texts, m_.model->config.vocab_size, 4);
  }

  struct Run {
    int shift = 0;              // rotates which request gets which mode
    bool adaptive = false;      // adaptive γ for the speculative ones
    bool prefix_caching = false;
    int blocks = 512;           // KV blocks of 4 positions
    int max_running = 16;
    int requests = kRequests;
  };

  // Every request of the run through one scheduler, all queued before it starts.
  // Returns its statistics; each text must be AR's.
  SchedulerStats Serve(const Run& run, SpeculativeStats* totals) {
    CpuEngine engine = MakeCpuEngine(*m_.model, *m_.drafter, run.blocks, run.prefix_caching);
    SchedulerOptions options;
    options.max_running = run.max_running;
    options.decoding.has_adapter = true;
    options.decoding.placeholder_token = m_.drafter->placeholder_token_id;
    options.decoding.cost_curve = &SteepCurve();
    options.decoding.acceptance_memory = &memory_;
    options.decoding.ngram_table = table_.get();
    Scheduler scheduler(options, *engine.backend, *engine.kv);
    EventRecorder rec;
    for (int k = 0; k < run.requests; ++k) {
      GenerationRequest request = requests_[static_cast<size_t>(k)];
      request.decoding = Decoding(k, run.shift, run.adaptive);
      EXPECT_TRUE(scheduler.Submit(request, rec.HandlerFor(request.request_id)).ok());
    }
    scheduler.Start();
    EXPECT_TRUE(rec.WaitForFinals(static_cast<size_t>(run.requests), std::chrono::seconds(300)));
    scheduler.Shutdown(std::chrono::seconds(10));
    for (int k = 0; k < run.requests; ++k) {
      const GenerationRequest& request = requests_[static_cast<size_t>(k)];
      const auto r = rec.Get(request.request_id);
      const DecodingConfig d = Decoding(k, run.shift, run.adaptive);
      SCOPED_TRACE(::testing::Message() << request.request_id << " " << DecodingModeName(d.mode)
                                        << (d.blocks() ? " blocks" : "") << " seed " << request.sampling.seed);
      if (!r.final_event.has_value()) {
        ADD_FAILURE() << "no final event";
        continue;
      }
      EXPECT_EQ(r.final_event->kind, RequestEvent::Kind::kFinished) << r.final_event->error;
      EXPECT_EQ(r.final_event->seed, request.sampling.seed);  // reported back, so that a text can be replayed
      EXPECT_EQ(r.tokens, ar_[static_cast<size_t>(k)]);
      if (d.mode != DecodingMode::kAutoregressive) {
        totals->drafted += r.final_event->stats.drafted;
        totals->accepted += r.final_event->stats.accepted;
        totals->forwards += r.final_event->stats.forwards;
        totals->committed += r.final_event->stats.committed;
      }
    }
    EXPECT_EQ(engine.kv->Stats().used_blocks, 0);
    return scheduler.Stats();
  }

  testing::SeedIdentityModel m_;
  std::vector<GenerationRequest> requests_;
  std::vector<std::vector<int32_t>> ar_;  // each request's AR text, decoded alone
  std::unique_ptr<NgramTable> table_;     // drafts mostly AR's tokens
  AcceptanceMemory memory_;
};

TEST_F(SeedIdentitySchedulerTest, BatchesOfSixteenWriteEachRequestsArText) {
  SpeculativeStats totals;
  Serve({.shift = 0}, &totals);
  Serve({.shift = 1, .adaptive = true, .prefix_caching = true}, &totals);
  // Several tokens a forward (the drafter's requests rarely, the n-gram ones often), or
  // the check would be AR's own batch invariance.
  EXPECT_GT(totals.accepted, totals.drafted / 5);
  EXPECT_GT(totals.committed - totals.forwards, 300);
}

TEST_F(SeedIdentitySchedulerTest, PreemptionAndRecomputationKeepEachRequestsArText) {
  SpeculativeStats totals;
  // 40 blocks of 4: about two requests fit at once, so requests are preempted and
  // recompute their K/V (and read it back from the prefix cache).
  const SchedulerStats stats = Serve({.shift = 2, .adaptive = true, .prefix_caching = true, .blocks = 40}, &totals);
  EXPECT_GT(stats.preemptions, 0);
}

TEST_F(SeedIdentitySchedulerTest, OneRequestAtATimeWritesItsArText) {
  SpeculativeStats totals;
  Serve({.shift = 3, .adaptive = true, .max_running = 1, .requests = 16}, &totals);
  EXPECT_GT(totals.accepted, 0);
}

}  // namespace
}  // namespace crossreg
