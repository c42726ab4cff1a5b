// Prefix caching must not change what a request generates: on the real CPU backend
// with a tiny random model and adapter, requests that reuse cached K/V (a shared
// prompt prefix, an earlier turn of their conversation, their own prefix after a
// preemption) produce exactly what Generate() produces for them alone with no cache,
// in every decoding mode; sampled outputs keep AR's distribution (χ²), and a planted
// verification bug is still caught with the cache on.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/decoding/exactness_fault.h"
#include "engine/cpu/cpu_backend.h"
#include "scheduler/generate.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/random_model.h"
#include "gtest/gtest.h"
#include "tests/testing/cpu_engine.h"
#include "scheduler/scheduler.h"
#include "tests/scheduler/event_recorder.h"
#include "tests/testing/chi_square.h"
#include "tests/testing/exact_probabilities.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

using testing::EventRecorder;

constexpr int kPrefixBlock = 4;

KvCacheConfig Kv(int num_blocks, bool caching) {
  return {.block_size = kPrefixBlock, .num_blocks = num_blocks, .prefix_caching = caching};
}

using testing::CpuEngine;
using testing::MakeCpuEngine;

// Request i's decoding: every mode, forked refill and n-gram assist, a truly lossy
// one, some sampled; `adaptive` turns on adaptive γ for the greedy exact ones.
void SetDecoding(GenerationRequest& s, int i, bool adaptive) {
  static const DecodingMode kModes[] = {DecodingMode::kAutoregressive, DecodingMode::kLossless,
                                        DecodingMode::kLossy, DecodingMode::kNgram};
  s.stop_at_eos = false;
  s.decoding.mode = kModes[i % 4];
  s.decoding.gamma = 1 + i % 5;
  if (s.decoding.mode == DecodingMode::kLossy && i % 8 == 2) s.decoding.tau = -1.0f;
  if (s.decoding.mode == DecodingMode::kLossless && i % 3 != 0) {
    s.decoding.fork_outcomes = std::min(s.decoding.gamma, 1 + i % 3);
    s.decoding.fork_depth = i % 2 == 0 ? 0 : 2;
    s.decoding.ngram_assist = i % 3 == 2;
  }
  if (i % 6 == 5) {
    s.sampling.temperature = 0.8f;
    s.sampling.seed = 100 + static_cast<uint64_t>(i);
  }
  const bool truly_lossy = s.decoding.tau < 0.0f;
  if (adaptive && s.decoding.mode != DecodingMode::kAutoregressive && !truly_lossy && s.sampling.greedy()) {
    s.decoding.adaptive_gamma = true;
  }
}

class PrefixCacheExactnessTest : public ::testing::Test {
 protected:
  static constexpr int32_t kPlaceholder = 47;
  void SetUp() override {
    model_ = MakeRandomModel(testing::TinyConfig(48), {DType::kF32, 7, 2.0f});
    RandomLoraOptions lo;
    lo.magnitude = 0.5f;
    lo.seed = 17;
    lo.placeholder_token_id = kPlaceholder;
    adapter_ = MakeRandomLoraAdapter(model_->config, lo);
    alone_ = MakeCpuEngine(*model_, *adapter_, Kv(512, false));
  }

  DecodingEnvironment Env() const {
    return {.model = &model_->config, .has_adapter = true, .placeholder_token = kPlaceholder, .cost_curve = curve_};
  }
  // Generate()'s output on an engine without prefix caching.
  std::vector<int32_t> Alone(const GenerationRequest& spec) {
    auto r = Generate(*alone_.backend, *alone_.kv, spec, Env());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->ids : std::vector<int32_t>{};
  }
  SchedulerOptions Options() const {
    SchedulerOptions o;
    o.max_batch_tokens = 40;  // chunked prefill next to decode rows
    o.decoding.has_adapter = true;
    o.decoding.placeholder_token = kPlaceholder;
    o.decoding.cost_curve = curve_;
    return o;
  }
  // Submits `specs` at once and waits for them; returns each one's final event and
  // checks its tokens against `expected`.
  std::vector<RequestEvent> RunWave(Scheduler& scheduler, const std::vector<GenerationRequest>& specs,
                                    const std::vector<std::vector<int32_t>>& expected) {
    EventRecorder rec;
    for (const GenerationRequest& s : specs) EXPECT_TRUE(scheduler.Submit(s, rec.HandlerFor(s.request_id)).ok());
    EXPECT_TRUE(rec.WaitForFinals(specs.size(), std::chrono::seconds(300)));
    std::vector<RequestEvent> finals;
    for (size_t i = 0; i < specs.size(); ++i) {
      const auto r = rec.Get(specs[i].request_id);
      SCOPED_TRACE(specs[i].request_id + " mode " + DecodingModeName(specs[i].decoding.mode));
      if (!r.final_event.has_value()) {
        ADD_FAILURE() << "no final event";
        finals.emplace_back();
        continue;
      }
      EXPECT_EQ(r.final_event->kind, RequestEvent::Kind::kFinished) << r.final_event->error;
      EXPECT_EQ(r.tokens, expected[i]);
      finals.push_back(*r.final_event);
    }
    return finals;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<LoraAdapter> adapter_;
  CpuEngine alone_;
  const ForwardCostCurve* curve_ = nullptr;
};

TEST_F(PrefixCacheExactnessTest, SharedPrefixRequestsEqualRunningAloneInEveryMode) {
  auto curve = ForwardCostCurve::FromPoints({{1, 1e-3}, {32, 1.1e-3}, {64, 2e-2}});
  ASSERT_TRUE(curve.ok());
  for (const bool adaptive : {false, true}) {
    SCOPED_TRACE(adaptive ? "adaptive gamma" : "fixed gamma");
    curve_ = adaptive ? &*curve : nullptr;
    // 18 shared tokens (4 full blocks and 2 more), then a tail that starts with a token
    // of its own, so only the shared blocks can hit.
    const std::vector<int32_t> shared = {3, 9, 27, 1, 4, 12, 36, 8, 24, 2, 6, 18, 7, 21, 13, 39, 5, 15};
    std::vector<GenerationRequest> specs;
    std::vector<std::vector<int32_t>> expected;
    for (int i = 0; i < 24; ++i) {
      GenerationRequest s;
      s.request_id = "shared" + std::to_string(i);
      s.prompt_ids = shared;
      s.prompt_ids.push_back(static_cast<int32_t>(i));
      for (int t = 0; t < i % 7; ++t) s.prompt_ids.push_back(static_cast<int32_t>((i * 13 + t * 7) % 40));
      s.max_new_tokens = 12 + (i * 3) % 10;
      SetDecoding(s, i, adaptive);
      expected.push_back(Alone(s));
      specs.push_back(std::move(s));
    }
    CpuEngine engine = MakeCpuEngine(*model_, *adapter_, Kv(512, true));
    Scheduler scheduler(Options(), *engine.backend, *engine.kv);
    scheduler.Start();
    // The first request fills the cache; the rest run together on its blocks.
    const auto first = RunWave(scheduler, {specs[0]}, {expected[0]});
    EXPECT_EQ(first[0].cached_prompt_tokens, 0);
    const auto rest = RunWave(scheduler, std::vector<GenerationRequest>(specs.begin() + 1, specs.end()),
                              std::vector<std::vector<int32_t>>(expected.begin() + 1, expected.end()));
    int64_t prompt_tokens = 0;
    for (const GenerationRequest& s : specs) prompt_tokens += static_cast<int64_t>(s.prompt_ids.size());
    for (const RequestEvent& e : rest) EXPECT_EQ(e.cached_prompt_tokens, 16);
    scheduler.Shutdown(std::chrono::seconds(10));
    const SchedulerStats stats = scheduler.Stats();
    EXPECT_EQ(stats.prefix_cache_queries, prompt_tokens);
    EXPECT_EQ(stats.prefix_cache_hits, 16 * 23);
    EXPECT_EQ(engine.kv->Stats().used_blocks, 0);
    EXPECT_GT(engine.kv->Stats().cached_blocks, 4);
  }
}

TEST_F(PrefixCacheExactnessTest, MultiTurnConversationsReuseTheWholeEarlierTurn) {
  CpuEngine engine = MakeCpuEngine(*model_, *adapter_, Kv(512, true));
  Scheduler scheduler(Options(), *engine.backend, *engine.kv);
  scheduler.Start();
  constexpr int kConversations = 8, kTurns = 3;
  std::vector<GenerationRequest> turn(kConversations);
  std::vector<std::vector<int32_t>> out(kConversations);
  for (int c = 0; c < kConversations; ++c) {
    turn[c].prompt_ids = {static_cast<int32_t>(c), 40, 41};  // distinct first tokens: no cross-talk
    for (int t = 0; t < 4 + c; ++t) turn[c].prompt_ids.push_back(static_cast<int32_t>((c * 11 + t * 5) % 40));
  }
  for (int k = 0; k < kTurns; ++k) {
    std::vector<GenerationRequest> specs;
    std::vector<std::vector<int32_t>> expected;
    std::vector<int64_t> reusable;  // committed positions of the previous turn
    for (int c = 0; c < kConversations; ++c) {
      GenerationRequest s = turn[c];
      if (k > 0) {
        reusable.push_back(static_cast<int64_t>(s.prompt_ids.size() + out[c].size()) - 1);
        s.prompt_ids.insert(s.prompt_ids.end(), out[c].begin(), out[c].end());
        for (int t = 0; t < 3; ++t) s.prompt_ids.push_back(static_cast<int32_t>((c + k * 7 + t) % 40));
      }
      s.request_id = absl::StrCat("conv", c, "-turn", k);
      s.max_new_tokens = 9 + c % 4;
      SetDecoding(s, c, false);
      expected.push_back(Alone(s));
      specs.push_back(s);
    }
    const auto finals = RunWave(scheduler, specs, expected);
    for (int c = 0; c < kConversations; ++c) {
      if (k > 0) {
        // Every full block of what the previous turn committed, up to the last prompt
        // token (which is always computed).
        const int64_t cacheable = static_cast<int64_t>(specs[c].prompt_ids.size()) - 1;
        const int64_t want = std::min(reusable[c], cacheable) / kPrefixBlock * kPrefixBlock;
        EXPECT_EQ(finals[c].cached_prompt_tokens, want) << specs[c].request_id;
      }
      turn[c] = specs[c];
      out[c] = expected[c];
    }
  }
  scheduler.Shutdown(std::chrono::seconds(10));
  EXPECT_EQ(engine.kv->Stats().used_blocks, 0);
}

TEST_F(PrefixCacheExactnessTest, PreemptedRequestsReHitTheirOwnPrefixWithoutChangingOutputs) {
  std::vector<GenerationRequest> specs;
  std::vector<std::vector<int32_t>> expected;
  for (int i = 0; i < 16; ++i) {
    GenerationRequest s;
    s.request_id = "tight" + std::to_string(i);
    for (int t = 0; t < 9 + (i * 5) % 11; ++t) s.prompt_ids.push_back(static_cast<int32_t>((i * 13 + t * 7) % 40));
    s.max_new_tokens = 14 + (i * 3) % 10;
    SetDecoding(s, i, false);
    expected.push_back(Alone(s));
    specs.push_back(std::move(s));
  }
  // 80 positions: about two requests at a time.
  CpuEngine engine = MakeCpuEngine(*model_, *adapter_, Kv(20, true));
  Scheduler scheduler(Options(), *engine.backend, *engine.kv);
  scheduler.Start();
  RunWave(scheduler, specs, expected);
  scheduler.Shutdown(std::chrono::seconds(10));
  const SchedulerStats stats = scheduler.Stats();
  EXPECT_GT(stats.preemptions, 0);
  EXPECT_GT(stats.prefix_cache_hits, 0) << "resumed requests found their own blocks";
  EXPECT_EQ(engine.kv->Stats().used_blocks, 0);
}

TEST_F(PrefixCacheExactnessTest, PreemptionOfSequencesSharingBlocksKeepsOutputsAndFreesEverything) {
  // Every prompt starts with the same 12 tokens (3 blocks): the running sequences share
  // them while the tiny cache preempts some of them and resumes them later.
  std::vector<GenerationRequest> specs;
  std::vector<std::vector<int32_t>> expected;
  for (int i = 0; i < 12; ++i) {
    GenerationRequest s;
    s.request_id = "shared-tight" + std::to_string(i);
    s.prompt_ids = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    for (int t = 0; t < 3 + (i * 5) % 9; ++t) s.prompt_ids.push_back(static_cast<int32_t>((i * 13 + t * 7) % 40));
    s.max_new_tokens = 14 + (i * 3) % 10;
    SetDecoding(s, i, false);
    expected.push_back(Alone(s));
    specs.push_back(std::move(s));
  }
  CpuEngine engine = MakeCpuEngine(*model_, *adapter_, Kv(22, true));
  Scheduler scheduler(Options(), *engine.backend, *engine.kv);
  scheduler.Start();
  RunWave(scheduler, {specs[0]}, {expected[0]});  // the shared blocks are cached first
  RunWave(scheduler, std::vector<GenerationRequest>(specs.begin() + 1, specs.end()),
          std::vector<std::vector<int32_t>>(expected.begin() + 1, expected.end()));
  scheduler.Shutdown(std::chrono::seconds(10));
  const SchedulerStats stats = scheduler.Stats();
  EXPECT_GT(stats.preemptions, 0);
  EXPECT_GE(stats.prefix_cache_hits, 12 * 11);
  EXPECT_EQ(engine.kv->Stats().used_blocks, 0);
}

TEST_F(PrefixCacheExactnessTest, CachedBlocksNobodyHoldsGoBeforeAnyPreemption) {
  CpuEngine engine = MakeCpuEngine(*model_, *adapter_, Kv(24, true));
  Scheduler scheduler(Options(), *engine.backend, *engine.kv);
  scheduler.Start();
  // Fill the cache with blocks of finished requests.
  for (int i = 0; i < 6; ++i) {
    GenerationRequest s;
    s.request_id = "fill" + std::to_string(i);
    for (int t = 0; t < 13; ++t) s.prompt_ids.push_back(static_cast<int32_t>((i * 17 + t * 3) % 40));
    s.max_new_tokens = 4;
    SetDecoding(s, 0, false);
    RunWave(scheduler, {s}, {Alone(s)});
  }
  EXPECT_GT(engine.kv->Stats().evictable_blocks, 12);
  // Two requests that together need nearly the whole cache: they run side by side.
  std::vector<GenerationRequest> specs;
  std::vector<std::vector<int32_t>> expected;
  for (int i = 0; i < 2; ++i) {
    GenerationRequest s;
    s.request_id = "big" + std::to_string(i);
    for (int t = 0; t < 30; ++t) s.prompt_ids.push_back(static_cast<int32_t>((i * 19 + t * 11 + 1) % 40));
    s.max_new_tokens = 12;
    SetDecoding(s, 0, false);
    expected.push_back(Alone(s));
    specs.push_back(std::move(s));
  }
  RunWave(scheduler, specs, expected);
  scheduler.Shutdown(std::chrono::seconds(10));
  EXPECT_EQ(scheduler.Stats().preemptions, 0);
  EXPECT_EQ(engine.kv->Stats().used_blocks, 0);
}

// The χ² harness of cross_regression_exactness_test.cc, through the scheduler with
// the prefix cache on: every sample after the first wave reads the prompt's K/V from
// blocks another request computed.
class PrefixCacheDistributionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = MakeRandomModel(testing::TinyConfig(6), {DType::kF32, 21, 4.0f});
    RandomLoraOptions lo;
    lo.magnitude = 8.0f;  // q far from p: many rejections, residuals and carried drafts
    lo.seed = 22;
    lo.placeholder_token_id = 5;
    adapter_ = MakeRandomLoraAdapter(model_->config, lo);
  }

  testing::ChiSquareResult SampleAndTest(ExactnessFault fault, const char* label,
                                         SampledVerification rule = SampledVerification::kSeedExact) {
    constexpr int kSamples = 20000, kDepth = 4, kWave = 200;
    const std::vector<int32_t> prompt = {2, 5, 1, 3, 0, 4, 2, 2, 5};  // two full blocks cacheable
    SamplingParams sampling;
    sampling.temperature = 1.0f;
    // The exact walk truncates its sequence back to the prompt, which a cached block
    // refuses: it runs on an engine of its own without the cache.
    CpuEngine reference = MakeCpuEngine(*model_, *adapter_, Kv(64, false));
    const auto exact = testing::ExactSequenceProbabilities(*reference.backend, *reference.kv,
                                                           model_->config.vocab_size, prompt, kDepth, sampling);
    CpuEngine engine = MakeCpuEngine(*model_, *adapter_, Kv(2048, true));
    SchedulerOptions options;
    options.decoding.has_adapter = true;
    options.decoding.placeholder_token = 5;
    Scheduler scheduler(options, *engine.backend, *engine.kv);
    scheduler.Start();
    std::vector<int64_t> counts(exact.size(), 0);
    int64_t cached = 0;
    const ScopedExactnessFault planted(fault);  // the samples' verifications, not the exact walk's
    for (int w = 0; w < kSamples / kWave; ++w) {
      EventRecorder rec;
      for (int i = w * kWave; i < (w + 1) * kWave; ++i) {
        GenerationRequest req;
        req.request_id = absl::StrCat("s", i);
        req.prompt_ids = prompt;
        req.max_new_tokens = kDepth;
        req.decoding.mode = DecodingMode::kLossless;
        req.decoding.gamma = 4;
        req.decoding.sampled_verification = rule;
        req.sampling = sampling;
        req.sampling.seed = 1000003ull * static_cast<uint64_t>(i) + 17;
        req.stop_at_eos = false;
        EXPECT_TRUE(scheduler.Submit(req, rec.HandlerFor(req.request_id)).ok());
      }
      EXPECT_TRUE(rec.WaitForFinals(kWave, std::chrono::seconds(300)));
      for (int i = w * kWave; i < (w + 1) * kWave; ++i) {
        const auto r = rec.Get(absl::StrCat("s", i));
        if (!r.final_event.has_value() || r.tokens.size() != kDepth) {
          ADD_FAILURE() << "sample " << i << " did not finish with " << kDepth << " tokens";
          continue;
        }
        cached += r.final_event->cached_prompt_tokens;
        int64_t cell = 0;
        for (int32_t t : r.tokens) cell = cell * model_->config.vocab_size + t;
        ++counts[static_cast<size_t>(cell)];
      }
    }
    scheduler.Shutdown(std::chrono::seconds(10));
    EXPECT_GE(cached, int64_t{8} * (kSamples - kWave)) << "samples after the first wave hit the cache";
    const auto r = testing::ChiSquareTest(counts, exact);
    std::printf("[%s] %d sequences of %d tokens over V=%d, %lld prompt tokens from the cache: chi2 %.1f, df %d, "
                "p = %.3g, total variation %.4f\n",
                label, kSamples, kDepth, model_->config.vocab_size, static_cast<long long>(cached), r.statistic,
                r.degrees_of_freedom, r.p_value, r.total_variation);
    return r;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<LoraAdapter> adapter_;
};

TEST_F(PrefixCacheDistributionTest, LosslessWithCacheHitsMatchesExactProbabilitiesAtT1) {
  const auto r = SampleAndTest(ExactnessFault::kNone, "lossless T=1, prefix cache on");
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

TEST_F(PrefixCacheDistributionTest, HarnessCatchesAPlantedBugWithCacheHits) {
  // The bug is in how speculative sampling reads q (seed-exact verification reads none).
  const auto r = SampleAndTest(ExactnessFault::kVerifyCarriedDraftsWithCurrentQ,
                               "planted bug: carried drafts vs current Q, prefix cache on",
                               SampledVerification::kSpeculativeSampling);
  EXPECT_LT(r.p_value, 0.001) << "the planted bug went undetected";
}

}  // namespace
}  // namespace crossreg
