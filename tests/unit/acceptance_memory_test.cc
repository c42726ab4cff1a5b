// The engine's acceptance memory (engine/decoding/acceptance_memory.h): class keys,
// seeding a new request's tracker, the shared probe schedule, its bound, and what it
// changes for requests that follow one another on a model whose drafts do not pay.
#include "engine/decoding/acceptance_memory.h"

#include <thread>
#include <vector>

#include "scheduler/generate.h"
#include "engine/model/random_model.h"
#include "gtest/gtest.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

GenerationRequest Request(DecodingMode mode, int gamma = 4, float temperature = 0.0f) {
  GenerationRequest r;
  r.decoding.mode = mode;
  r.decoding.gamma = gamma;
  r.sampling.temperature = temperature;
  return r;
}

TEST(AcceptanceClassKeyTest, SeparatesWhatDecidesAcceptanceAndNothingElse) {
  const std::string lossless = AcceptanceClassKey(Request(DecodingMode::kLossless));
  EXPECT_EQ(lossless, "lossless/greedy");
  EXPECT_EQ(AcceptanceClassKey(Request(DecodingMode::kLossless, 16)), lossless);  // γ is only a ceiling
  GenerationRequest seeded = Request(DecodingMode::kLossless);
  seeded.sampling.seed = 99;
  seeded.max_new_tokens = 7;
  EXPECT_EQ(AcceptanceClassKey(seeded), lossless);
  EXPECT_EQ(AcceptanceClassKey(Request(DecodingMode::kLossless, 4, 0.8f)), "lossless/sampled");
  GenerationRequest residual = Request(DecodingMode::kLossless, 4, 0.8f);
  residual.decoding.sampled_verification = SampledVerification::kSpeculativeSampling;
  EXPECT_EQ(AcceptanceClassKey(residual), "lossless/sampled:speculative_sampling");
  GenerationRequest greedy_residual = Request(DecodingMode::kLossless);
  greedy_residual.decoding.sampled_verification = SampledVerification::kSpeculativeSampling;
  EXPECT_EQ(AcceptanceClassKey(greedy_residual), lossless);  // greedy drafts are argmax under every rule

  GenerationRequest lossy = Request(DecodingMode::kLossy);
  lossy.decoding.beta = 0.5f;
  lossy.decoding.tau = -2.0f;
  GenerationRequest lossier = lossy;
  lossier.decoding.tau = -3.0f;
  EXPECT_NE(AcceptanceClassKey(lossy), AcceptanceClassKey(lossier));

  GenerationRequest forked = Request(DecodingMode::kLossless);
  forked.decoding.fork_outcomes = 2;
  GenerationRequest assisted = Request(DecodingMode::kLossless);
  assisted.decoding.ngram_assist = true;
  EXPECT_NE(AcceptanceClassKey(forked), lossless);
  EXPECT_NE(AcceptanceClassKey(assisted), lossless);
  EXPECT_NE(AcceptanceClassKey(forked), AcceptanceClassKey(assisted));

  GenerationRequest ngram2 = Request(DecodingMode::kNgram);
  ngram2.decoding.ngram_max = 2;
  EXPECT_NE(AcceptanceClassKey(ngram2), AcceptanceClassKey(Request(DecodingMode::kNgram)));
}

TEST(AcceptanceMemoryTest, SeedsANewTrackerAsAFewVerdictsItsOwnOutcomesOutweigh) {
  AcceptanceMemory memory;
  for (int i = 0; i < 200; ++i) memory.Record("c", 0, {false});  // depth 1 always rejected
  for (int i = 0; i < 200; ++i) memory.Record("c", 3, {true, true});

  AcceptanceTracker fresh(8);
  memory.Seed("unknown", 0, fresh);
  EXPECT_DOUBLE_EQ(fresh.Rate(1), 0.5);  // nothing known: the Beta(1, 1) prior
  memory.Seed("c", 1, fresh);            // a slot never recorded: the same
  EXPECT_DOUBLE_EQ(fresh.Rate(1), 0.5);

  AcceptanceTracker seeded(8);
  memory.Seed("c", 0, seeded);
  EXPECT_LE(seeded.Reached(1), AcceptanceMemory::kPriorWeight + 1e-9);
  EXPECT_GT(seeded.Reached(1), AcceptanceMemory::kPriorWeight - 1e-9);
  EXPECT_LT(seeded.Rate(1), 0.15);
  EXPECT_DOUBLE_EQ(seeded.Rate(2), seeded.Rate(1));  // depth 2 never reached in the class: as depth 1

  AcceptanceTracker matched(8);
  memory.Seed("c", 3, matched);
  EXPECT_GT(matched.Rate(1), 0.85);
  EXPECT_GT(matched.Rate(2), 0.85);

  // The request's own acceptance takes over within a few tens of verdicts.
  for (int i = 0; i < 30; ++i) seeded.Record(1, true);
  EXPECT_GT(seeded.Rate(1), 0.8);
}

TEST(AcceptanceMemoryTest, RevertsARequestHeldInArTowardTheClassEstimate) {
  AcceptanceMemory memory;
  for (int i = 0; i < 200; ++i) memory.Record("pays", 0, {i % 5 < 3, true, true});  // α1 0.6, deeper all
  for (int i = 0; i < 200; ++i) memory.Record("fails", 0, {i % 10 == 0});            // α1 0.1
  AcceptanceTracker seed(8);
  memory.Seed("pays", 0, seed);

  auto burst = [] {  // a request that met eight failed first drafts in a row
    AcceptanceTracker t(8);
    for (int i = 0; i < 8; ++i) t.Record(1, false);
    return t;
  };
  AcceptanceTracker paying = burst(), failing = burst(), other_slot = burst();
  const double low = paying.Rate(1);
  for (int n = 0; n < 20; ++n) {
    memory.Revert("pays", 0, paying);
    memory.Revert("fails", 0, failing);
    memory.Revert("pays", 5, other_slot);  // nothing pooled there: toward the prior
  }
  EXPECT_GT(paying.Rate(1), low + 0.2);
  EXPECT_LT(paying.Rate(1), seed.Rate(1));
  EXPECT_GT(paying.ExpectedTokens(4), 2.0);  // the deeper depths come from the pool
  EXPECT_LT(failing.Rate(1), 0.25);         // a class whose drafts fail stays low
  EXPECT_GT(other_slot.Rate(1), low);
  EXPECT_LT(other_slot.Rate(1), 0.5);
}

TEST(AcceptanceMemoryTest, ProbesOnOneScheduleForTheClassBackingOffUntilDraftsPay) {
  AcceptanceMemory memory;
  auto ar_forwards_to_probe = [&](const std::string& cls) {
    for (int n = 1; n <= 10000; ++n) {
      const bool due = memory.ProbeDue(cls, 4);
      memory.CountArForward(cls, 4, due);
      if (due) return n;
    }
    return -1;
  };
  EXPECT_EQ(ar_forwards_to_probe("c"), 4);
  EXPECT_EQ(ar_forwards_to_probe("c"), 8);
  EXPECT_EQ(ar_forwards_to_probe("c"), 16);
  for (int i = 0; i < 10; ++i) ar_forwards_to_probe("c");
  EXPECT_EQ(ar_forwards_to_probe("c"), AcceptanceMemory::kMaxProbeInterval);  // the cap
  EXPECT_EQ(ar_forwards_to_probe("other"), 4);  // classes keep their own schedules
  memory.DraftsPay("c", 4);
  EXPECT_EQ(ar_forwards_to_probe("c"), 4);
  // Requests of a class share the count: two alternating requests probe at the 4th of
  // their AR forwards together, not at each one's 4th.
  memory.DraftsPay("c", 4);
  int due = 0;
  for (int n = 0; n < 4; ++n) {
    const bool probe = memory.ProbeDue("c", 4);
    memory.CountArForward("c", 4, probe);
    due += probe ? 1 : 0;
  }
  EXPECT_EQ(due, 1);
}

TEST(AcceptanceMemoryTest, ForgetsEverythingRatherThanGrowWithoutBound) {
  AcceptanceMemory memory;
  for (int i = 0; i < AcceptanceMemory::kMaxClasses + 10; ++i) memory.Record("lossy:" + std::to_string(i), 0, {true});
  EXPECT_LE(memory.classes(), AcceptanceMemory::kMaxClasses);
  EXPECT_GE(memory.classes(), 1);
  AcceptanceTracker t(4);
  memory.Seed("lossy:" + std::to_string(AcceptanceMemory::kMaxClasses + 9), 0, t);  // the newest is kept
  EXPECT_GT(t.Rate(1), 0.5);
}

TEST(AcceptanceMemoryTest, ManyThreadsShareOneMemory) {
  AcceptanceMemory memory;
  std::vector<std::thread> threads;
  std::vector<int> probes(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&memory, &probes, t] {
      const std::string cls = t % 2 ? "a" : "b";
      for (int i = 0; i < 5000; ++i) {
        memory.Record(cls, i % 3, {i % 2 == 0, false});
        // Another thread may count between the two calls: at most an extra probe or a late one.
        const bool due = memory.ProbeDue(cls, 8);
        memory.CountArForward(cls, 8, due);
        if (due) ++probes[static_cast<size_t>(t)];
        AcceptanceTracker tracker(4);
        memory.Seed(cls, 0, tracker);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(memory.classes(), 2);
  int total = 0;
  for (int p : probes) total += p;
  // 10,000 AR forwards per class at intervals 8, 16, ... 1024, 1024, ...: a handful of probes.
  EXPECT_GE(total, 2 * 7);
  EXPECT_LE(total, 2 * 20);
  AcceptanceTracker a(4);
  memory.Seed("a", 0, a);
  EXPECT_NEAR(a.Rate(1), (0.5 * AcceptanceMemory::kPriorWeight + 1) / (AcceptanceMemory::kPriorWeight + 2), 0.1);
}

// Requests one after another on a model whose drafts never pay (a wild adapter) on a
// curve where rows are cheap enough that the prior (α = 1/2) speculates: alone, each
// request pays again to learn that the drafts fail; with the memory, later ones start
// in AR and probe on the class's backed-off schedule.
TEST(AcceptanceMemoryTest, LaterRequestsSkipTheLessonEarlierOnesPaidFor) {
  auto model = MakeRandomModel(testing::TinyConfig(48), {DType::kF32, 5, 2.0f});
  RandomLoraOptions lo;
  lo.magnitude = 30.0f;  // drafts almost always wrong
  lo.seed = 6;
  lo.placeholder_token_id = 47;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  auto e = testing::MakeEngine(*model, adapter.get());
  const ForwardCostCurve curve = *ForwardCostCurve::FromPoints({{1, 1e-3}, {2, 1.1e-3}, {16, 2e-3}});

  auto speculative_forwards = [&](AcceptanceMemory* memory, int request) {
    GenerationRequest req;
    req.prompt_ids = {1, static_cast<int32_t>(2 + request % 40)};
    req.max_new_tokens = 60;
    req.stop_at_eos = false;
    req.decoding.mode = DecodingMode::kLossless;
    req.decoding.gamma = 4;
    req.decoding.adaptive_gamma = true;
    DecodingEnvironment env = e.env;
    env.has_adapter = true;
    env.cost_curve = &curve;
    env.acceptance_memory = memory;
    auto r = Generate(*e.backend, *e.kv, req, env);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->stats.forwards - r->stats.ar_forwards : -1;
  };
  int64_t alone = 0, shared = 0, shared_late = 0;
  AcceptanceMemory memory;
  for (int i = 0; i < 20; ++i) {
    alone += speculative_forwards(nullptr, i);
    const int64_t s = speculative_forwards(&memory, i);
    shared += s;
    if (i >= 10) shared_late += s;
  }
  std::printf("speculative forwards over 20 requests of 60 tokens: %lld alone, %lld with the memory "
              "(%lld in the last 10)\n",
              static_cast<long long>(alone), static_cast<long long>(shared), static_cast<long long>(shared_late));
  EXPECT_GT(alone, 0);
  EXPECT_LT(shared, alone);
  EXPECT_LE(2 * shared_late, alone / 2);  // the last half probe at most half as often as alone
  EXPECT_EQ(e.kv->Stats().used_blocks, 0);
}

}  // namespace
}  // namespace crossreg
