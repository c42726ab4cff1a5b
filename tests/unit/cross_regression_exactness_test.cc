// Lossless Cross-Regression and n-gram drafting reproduce AR exactly: token for
// token at T=0, in distribution when sampling (ALGORITHM.md "Required tests").
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "engine/decoding/exactness_fault.h"
#include "engine/decoding/acceptance_memory.h"
#include "scheduler/generate.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/model/model_loader.h"
#include "engine/model/random_model.h"
#include "gtest/gtest.h"
#include "tests/testing/chi_square.h"
#include "tests/testing/exact_probabilities.h"
#include "tests/testing/stories_reference.h"
#include "tests/testing/test_paths.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

using testing::MakeEngine;
using testing::TinyConfig;

std::vector<int32_t> GenerateIds(testing::EngineUnderTest& e, const Model& model, const std::vector<int32_t>& prompt,
                                 int max_new, DecodingConfig decoding, SamplingParams sampling = {},
                                 ExactnessFault fault = ExactnessFault::kNone, bool has_adapter = true,
                                 const ForwardCostCurve* curve = nullptr, AcceptanceMemory* memory = nullptr) {
  GenerationRequest req;
  req.prompt_ids = prompt;
  req.max_new_tokens = max_new;
  req.decoding = decoding;
  req.sampling = sampling;
  req.stop_at_eos = false;
  const ScopedExactnessFault planted(fault);
  DecodingEnvironment env = e.env;
  env.has_adapter = has_adapter;
  env.cost_curve = curve;
  env.acceptance_memory = memory;
  auto r = Generate(*e.backend, *e.kv, req, env);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->ids : std::vector<int32_t>{};
}

DecodingConfig Mode(DecodingMode mode, int gamma, float beta = 0, float tau = 0) {
  DecodingConfig d;
  d.mode = mode;
  d.gamma = gamma;
  d.beta = beta;
  d.tau = tau;
  return d;
}

// A CPU-like cost curve: an adaptive γ' moves between AR and speculation as
// acceptance changes.
const ForwardCostCurve& SteepCurve() {
  static const ForwardCostCurve curve =
      *ForwardCostCurve::FromPoints({{1, 1e-3}, {2, 1.3e-3}, {16, 4e-3}, {64, 20e-3}});
  return curve;
}

DecodingConfig Adaptive(DecodingConfig d) {
  d.adaptive_gamma = true;
  return d;
}

// Drafts drawn from q and verified by speculative sampling (min(1, P/q), residual):
// distributed as AR; the rule whose handling of q the q-faults break.
DecodingConfig WithSpeculativeSampling(DecodingConfig d) {
  d.sampled_verification = SampledVerification::kSpeculativeSampling;
  return d;
}

// Lossless with the forked refill (and optionally prompt-lookup assist).
DecodingConfig Forked(int gamma, int outcomes, int depth, bool assist = false) {
  DecodingConfig d = Mode(DecodingMode::kLossless, gamma);
  d.fork_outcomes = outcomes;
  d.fork_depth = depth;
  d.ngram_assist = assist;
  return d;
}

// Lossless with outcome blocks: `outcomes` 0 gives every outcome a block.
DecodingConfig Blocks(int gamma, int outcomes, int depth, bool assist = false) {
  DecodingConfig d = Forked(gamma, outcomes, depth, assist);
  d.draft_layout = DraftLayout::kBlocks;
  return d;
}

TEST(CrossRegressionExactnessTest, GreedyIdentityOnRandomModels) {
  const std::vector<std::vector<int32_t>> prompts = {{1}, {3, 4, 5, 3, 4}, {7, 7, 7, 7, 2, 9, 11, 30, 1, 0}};
  for (float adapter_magnitude : {0.5f, 30.0f}) {  // mostly right and mostly wrong drafts
    for (uint64_t seed : {1, 2}) {
      auto model = MakeRandomModel(TinyConfig(48), {DType::kF32, seed, 2.0f});
      RandomLoraOptions lo;
      lo.magnitude = adapter_magnitude;
      lo.seed = seed + 10;
      lo.placeholder_token_id = 47;
      auto adapter = MakeRandomLoraAdapter(model->config, lo);
      auto e = MakeEngine(*model, adapter.get());
      for (const auto& prompt : prompts) {
        const auto ar = GenerateIds(e, *model, prompt, 50, Mode(DecodingMode::kAutoregressive, 1));
        ASSERT_EQ(ar.size(), 50u);
        for (int gamma : {1, 4, 16}) {
          SCOPED_TRACE(::testing::Message()
                       << "magnitude " << adapter_magnitude << " seed " << seed << " gamma " << gamma);
          EXPECT_EQ(GenerateIds(e, *model, prompt, 50, Mode(DecodingMode::kLossless, gamma)), ar);
          EXPECT_EQ(GenerateIds(e, *model, prompt, 50, Mode(DecodingMode::kLossy, gamma)), ar);  // beta=0, tau=0
          EXPECT_EQ(GenerateIds(e, *model, prompt, 50, Mode(DecodingMode::kNgram, gamma)), ar);
          EXPECT_EQ(GenerateIds(e, *model, prompt, 50, Forked(gamma, 1, 0)), ar);
          EXPECT_EQ(GenerateIds(e, *model, prompt, 50, Forked(gamma, std::min(gamma, 3), 2, /*assist=*/true)), ar);
          EXPECT_EQ(GenerateIds(e, *model, prompt, 50, Blocks(gamma, 0, 0)), ar);
          EXPECT_EQ(GenerateIds(e, *model, prompt, 50, Blocks(gamma, 1, 3, /*assist=*/true)), ar);
          {
            DecodingConfig lossy = Blocks(gamma, 0, 2);
            lossy.mode = DecodingMode::kLossy;  // beta=0, tau=0
            EXPECT_EQ(GenerateIds(e, *model, prompt, 50, lossy), ar);
          }
          DecodingConfig assist = Mode(DecodingMode::kLossless, gamma);
          assist.ngram_assist = true;
          EXPECT_EQ(GenerateIds(e, *model, prompt, 50, assist), ar);
          for (const DecodingConfig& adaptive :
               {Adaptive(Mode(DecodingMode::kLossless, gamma)), Adaptive(Mode(DecodingMode::kNgram, gamma)),
                Adaptive(Forked(gamma, std::min(gamma, 2), 0, /*assist=*/true)), Adaptive(Blocks(gamma, 0, 0))}) {
            EXPECT_EQ(GenerateIds(e, *model, prompt, 50, adaptive, {}, ExactnessFault::kNone, true, &SteepCurve()), ar);
          }
        }
        EXPECT_EQ(e.kv->Stats().used_blocks, 0);
      }
    }
  }
}

// A model that drafts for itself (no adapter: its predictive rows run on the base
// weights) decodes lossless in every layout exactly as AR.
TEST(CrossRegressionExactnessTest, GreedyIdentityOfASelfDraftingModel) {
  auto model = MakeRandomModel(TinyConfig(48), {DType::kF32, 4, 2.0f});
  model->config.draft_placeholder = 47;
  model->config.draft_layout = "blocks";
  auto e = MakeEngine(*model, nullptr);
  e.env.placeholder_token = 47;
  for (const std::vector<int32_t>& prompt : {std::vector<int32_t>{1}, std::vector<int32_t>{3, 4, 5, 3, 4}}) {
    const auto ar = GenerateIds(e, *model, prompt, 40, Mode(DecodingMode::kAutoregressive, 1));
    ASSERT_EQ(ar.size(), 40u);
    for (int gamma : {1, 4}) {
      EXPECT_EQ(GenerateIds(e, *model, prompt, 40, Blocks(gamma, 0, 0)), ar);
      EXPECT_EQ(GenerateIds(e, *model, prompt, 40, Blocks(gamma, 1, 2)), ar);
      EXPECT_EQ(GenerateIds(e, *model, prompt, 40, Forked(gamma, 1, 2)), ar);
    }
  }
  EXPECT_EQ(e.kv->Stats().used_blocks, 0);
}

// Generate() on a cache with prefix caching: later prompts read the blocks earlier
// ones (their prompts and their outputs) left, and every mode still gives AR's ids.
TEST(CrossRegressionExactnessTest, GreedyIdentityWithPrefixCache) {
  auto model = MakeRandomModel(TinyConfig(48), {DType::kF32, 3, 2.0f});
  RandomLoraOptions lo;
  lo.magnitude = 0.5f;
  lo.seed = 13;
  lo.placeholder_token_id = 47;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  auto plain = MakeEngine(*model, adapter.get());
  auto cached = MakeEngine(*model, adapter.get());
  KvCacheConfig caching = cached.kv->config();
  caching.prefix_caching = true;
  cached.kv = std::make_unique<PagedKvCache>(caching);
  const int block = caching.block_size;
  const std::vector<int32_t> shared = {5, 9, 2, 44, 17, 3, 3, 8, 21, 30, 6, 1, 12, 40, 7, 7, 19, 2, 28, 33, 4};
  const std::vector<DecodingConfig> modes = {
      Mode(DecodingMode::kAutoregressive, 1), Mode(DecodingMode::kLossless, 4), Mode(DecodingMode::kLossy, 6),
      Mode(DecodingMode::kNgram, 4),          Forked(5, 2, 2, /*assist=*/true), Adaptive(Mode(DecodingMode::kLossless, 8))};
  for (size_t m = 0; m < modes.size(); ++m) {
    SCOPED_TRACE(::testing::Message() << "mode " << m);
    std::vector<int32_t> previous;  // the last prompt and its output: the next turn's start
    for (int turn = 0; turn < 3; ++turn) {
      std::vector<int32_t> prompt = turn == 0 ? shared : previous;
      prompt.push_back(static_cast<int32_t>(10 + m * 3 + turn));
      prompt.push_back(static_cast<int32_t>(m + turn));
      GenerationRequest req;
      req.prompt_ids = prompt;
      req.max_new_tokens = 20;
      req.decoding = modes[m];
      req.stop_at_eos = false;
      DecodingEnvironment env = plain.env;
      env.has_adapter = true;
      env.cost_curve = &SteepCurve();
      auto want = Generate(*plain.backend, *plain.kv, req, env);
      auto got = Generate(*cached.backend, *cached.kv, req, env);
      ASSERT_TRUE(want.ok() && got.ok());
      EXPECT_EQ(got->ids, want->ids) << "turn " << turn;
      if (turn == 0 && m == 0) {
        EXPECT_EQ(got->cached_prompt_tokens, 0);
      } else if (turn == 0) {
        EXPECT_EQ(got->cached_prompt_tokens, static_cast<int64_t>(shared.size()) / block * block);
      } else {
        // The whole earlier turn, to its last full block (its newest token was never computed).
        EXPECT_EQ(got->cached_prompt_tokens, static_cast<int64_t>(previous.size() - 1) / block * block);
      }
      previous = prompt;
      previous.insert(previous.end(), want->ids.begin(), want->ids.end());
    }
  }
  EXPECT_EQ(cached.kv->Stats().used_blocks, 0);
  EXPECT_GT(cached.kv->Stats().cached_blocks, 0);
}

// Penalties and biases: greedy ids in every mode equal AR's with the same settings
// (each draft judged after the drafts before it), and every committed token's
// log-probability and top 3, raw and processed, equal AR's.
TEST(CrossRegressionExactnessTest, GreedyIdentityAndLogprobsUnderPenaltiesAndBias) {
  auto model = MakeRandomModel(TinyConfig(48), {DType::kF32, 1, 2.0f});
  RandomLoraOptions lo;
  lo.magnitude = 0.5f;  // mostly right drafts: many accepted per forward
  lo.seed = 11;
  lo.placeholder_token_id = 47;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  auto e = MakeEngine(*model, adapter.get());
  std::vector<LogitAdjustments> settings(6);
  settings[1].presence_penalty = 0.8f;
  settings[2].frequency_penalty = 0.6f;
  settings[3].repetition_penalty = 1.3f;
  settings[4].logit_bias = {{5, 3.0f}, {7, -100.0f}};
  settings[5] = settings[1];
  settings[5].frequency_penalty = 0.5f;
  settings[5].repetition_penalty = 1.2f;
  settings[5].logit_bias = {{9, 2.0f}};
  const std::vector<DecodingConfig> modes = {
      Mode(DecodingMode::kLossless, 4), Mode(DecodingMode::kLossy, 6), Mode(DecodingMode::kNgram, 4),
      Forked(5, 2, 2, /*assist=*/true), Adaptive(Mode(DecodingMode::kLossless, 8))};
  int changed = 0;  // settings whose ids differ from the unadjusted run's
  for (const std::vector<int32_t>& prompt : {std::vector<int32_t>{3, 4, 5, 3, 4}, std::vector<int32_t>{7, 7, 7, 2, 9}}) {
    std::vector<int32_t> plain;
    for (size_t s = 0; s < settings.size(); ++s) {
      for (const LogprobsMode lp_mode : {LogprobsMode::kRaw, LogprobsMode::kProcessed}) {
        SCOPED_TRACE(::testing::Message() << "setting " << s << " logprobs " << LogprobsModeName(lp_mode));
        auto run = [&](DecodingConfig decoding) {
          GenerationRequest req;
          req.prompt_ids = prompt;
          req.max_new_tokens = 40;
          req.decoding = decoding;
          req.stop_at_eos = false;
          req.adjustments = settings[s];
          req.logprobs = 3;
          req.logprobs_mode = lp_mode;
          DecodingEnvironment env = e.env;
          env.has_adapter = true;
          env.cost_curve = &SteepCurve();
          auto r = Generate(*e.backend, *e.kv, req, env);
          EXPECT_TRUE(r.ok()) << r.status();
          return r.ok() ? *r : GenerationResult{};
        };
        const GenerationResult ar = run(Mode(DecodingMode::kAutoregressive, 1));
        ASSERT_EQ(ar.ids.size(), 40u);
        ASSERT_EQ(ar.logprobs.size(), 40u);
        if (s == 0) plain = ar.ids;
        if (lp_mode == LogprobsMode::kRaw && s > 0 && ar.ids != plain) ++changed;
        for (size_t i = 0; i < ar.logprobs.size(); ++i) {
          const TokenLogprob& lp = ar.logprobs[i];
          EXPECT_EQ(lp.token, ar.ids[i]);
          ASSERT_EQ(lp.top.size(), 3u);
          for (size_t j = 1; j < lp.top.size(); ++j) EXPECT_GE(lp.top[j - 1].second, lp.top[j].second) << "sorted";
          bool listed = false;
          for (const auto& [id, v] : lp.top) listed = listed || id == lp.token;
          if (lp.logprob >= lp.top.back().second && lp.logprob > -1e30f) {
            EXPECT_TRUE(listed) << "the chosen token ranks within k";
          }
        }
        for (size_t m = 0; m < modes.size(); ++m) {
          const GenerationResult xr = run(modes[m]);
          EXPECT_EQ(xr.ids, ar.ids) << "mode " << m;
          ASSERT_EQ(xr.logprobs.size(), ar.logprobs.size()) << "mode " << m;
          for (size_t i = 0; i < ar.logprobs.size(); ++i) {
            // Processed greedy rows are one-hot: the rest read -inf on both sides.
            auto close = [](float a, float b) { return a == b || std::abs(a - b) <= 1e-5f; };
            EXPECT_TRUE(close(xr.logprobs[i].logprob, ar.logprobs[i].logprob))
                << "mode " << m << " token " << i << ": " << xr.logprobs[i].logprob << " vs " << ar.logprobs[i].logprob;
            ASSERT_EQ(xr.logprobs[i].top.size(), ar.logprobs[i].top.size());
            for (size_t j = 0; j < ar.logprobs[i].top.size(); ++j) {
              EXPECT_EQ(xr.logprobs[i].top[j].first, ar.logprobs[i].top[j].first);
              EXPECT_TRUE(close(xr.logprobs[i].top[j].second, ar.logprobs[i].top[j].second));
            }
          }
        }
      }
    }
  }
  EXPECT_GE(changed, 6) << "the adjustments must change what greedy decoding writes";
  EXPECT_EQ(e.kv->Stats().used_blocks, 0);
}

// One acceptance memory across every request: later requests start from what earlier
// ones saw (fixed-γ ones included) and share their probe schedule; greedy output
// stays AR's whatever γ' path that gives.
TEST(CrossRegressionExactnessTest, GreedyIdentityWithSharedAcceptanceMemory) {
  const std::vector<std::vector<int32_t>> prompts = {{1}, {3, 4, 5, 3, 4}, {7, 7, 7, 7, 2, 9, 11, 30, 1, 0}};
  for (float adapter_magnitude : {0.5f, 30.0f}) {
    auto model = MakeRandomModel(TinyConfig(48), {DType::kF32, 3, 2.0f});
    RandomLoraOptions lo;
    lo.magnitude = adapter_magnitude;
    lo.seed = 13;
    lo.placeholder_token_id = 47;
    auto adapter = MakeRandomLoraAdapter(model->config, lo);
    auto e = MakeEngine(*model, adapter.get());
    AcceptanceMemory memory;
    for (int round = 0; round < 2; ++round) {
      for (const auto& prompt : prompts) {
        const auto ar = GenerateIds(e, *model, prompt, 40, Mode(DecodingMode::kAutoregressive, 1));
        for (int gamma : {2, 8}) {
          SCOPED_TRACE(::testing::Message() << "magnitude " << adapter_magnitude << " round " << round << " gamma "
                                            << gamma);
          EXPECT_EQ(GenerateIds(e, *model, prompt, 40, Mode(DecodingMode::kLossless, gamma), {}, ExactnessFault::kNone,
                                true, &SteepCurve(), &memory),
                    ar);
          for (const DecodingConfig& adaptive :
               {Adaptive(Mode(DecodingMode::kLossless, gamma)), Adaptive(Mode(DecodingMode::kLossy, gamma)),
                Adaptive(Mode(DecodingMode::kNgram, gamma)),
                Adaptive(Forked(gamma, std::min(gamma, 2), 0, /*assist=*/true)), Adaptive(Blocks(gamma, 0, 0))}) {
            EXPECT_EQ(GenerateIds(e, *model, prompt, 40, adaptive, {}, ExactnessFault::kNone, true, &SteepCurve(),
                                  &memory),
                      ar);
          }
        }
      }
    }
    EXPECT_GE(memory.classes(), 4);  // lossless, lossy, n-gram, forked + assist
    EXPECT_EQ(e.kv->Stats().used_blocks, 0);
  }
}

TEST(CrossRegressionExactnessTest, GreedyIdentityOnStories260KWithRandomAdapter) {
  auto model = LoadModel(testing::Stories260KGguf());
  ASSERT_TRUE(model.ok()) << model.status();
  RandomLoraOptions lo;
  lo.magnitude = 1.0f;
  auto adapter = MakeRandomLoraAdapter((*model)->config, lo);
  auto e = MakeEngine(**model, adapter.get(), 2048);
  for (const auto& ref : testing::LoadStoriesReference()) {
    const std::vector<int32_t> prompt(ref.prompt_ids.begin(), ref.prompt_ids.end());
    const std::vector<int32_t> expected(ref.greedy_ids.begin(), ref.greedy_ids.end());
    const int n = static_cast<int>(expected.size());
    for (int gamma : {1, 4, 16}) {
      SCOPED_TRACE(::testing::Message() << ref.prompt << " gamma " << gamma);
      EXPECT_EQ(GenerateIds(e, **model, prompt, n, Mode(DecodingMode::kLossless, gamma)), expected);
      EXPECT_EQ(GenerateIds(e, **model, prompt, n, Forked(gamma, std::min(gamma, 2), 0, /*assist=*/true)), expected);
      EXPECT_EQ(GenerateIds(e, **model, prompt, n, Mode(DecodingMode::kNgram, gamma), {}, ExactnessFault::kNone,
                            /*has_adapter=*/false),
                expected);
    }
  }
}

// A corpus n-gram table whose continuations are right half the time (taken from the
// reference's own greedy outputs, every other one replaced by a wrong token): n-gram
// mode, adaptive n-gram and n-gram assist keep AR's greedy output, and the table drafts
// (fewer forwards than without it).
TEST(CrossRegressionExactnessTest, GreedyIdentityWithCorpusNgramTable) {
  auto model = LoadModel(testing::Stories260KGguf());
  ASSERT_TRUE(model.ok()) << model.status();
  const int V = (*model)->config.vocab_size;
  const int bits = 32 - __builtin_clz(static_cast<unsigned>(V - 1));
  std::map<uint64_t, uint32_t> pairs, triples;
  const auto refs = testing::LoadStoriesReference();
  for (const auto& ref : refs) {
    std::vector<int32_t> text(ref.prompt_ids.begin(), ref.prompt_ids.end());
    text.insert(text.end(), ref.greedy_ids.begin(), ref.greedy_ids.end());
    for (size_t i = 2; i < text.size(); ++i) {
      const uint64_t pair = (static_cast<uint64_t>(text[i - 2]) << bits) | static_cast<uint64_t>(text[i - 1]);
      const uint32_t next = i % 2 == 0 ? static_cast<uint32_t>(text[i]) : static_cast<uint32_t>((text[i] + 7) % V);
      pairs.emplace(pair, next);
      if (i >= 3) triples.emplace((static_cast<uint64_t>(text[i - 3]) << (2 * bits)) | pair, next);
    }
  }
  std::vector<NgramTable::Order> orders(3);
  for (const auto& [key, next] : pairs) orders[1].keys.push_back(key), orders[1].next.push_back(next);
  for (const auto& [key, next] : triples) orders[2].keys.push_back(key), orders[2].next.push_back(next);
  auto table = NgramTable::FromOrders(V, bits, std::move(orders));
  ASSERT_TRUE(table.ok()) << table.status();
  RandomLoraOptions lo;
  lo.magnitude = 1.0f;
  auto adapter = MakeRandomLoraAdapter((*model)->config, lo);
  auto e = MakeEngine(**model, adapter.get(), 2048);
  int64_t forwards_with = 0, forwards_without = 0;
  for (const auto& ref : refs) {
    const std::vector<int32_t> prompt(ref.prompt_ids.begin(), ref.prompt_ids.end());
    const std::vector<int32_t> expected(ref.greedy_ids.begin(), ref.greedy_ids.end());
    const int n = static_cast<int>(expected.size());
    for (int gamma : {1, 4, 8}) {
      SCOPED_TRACE(::testing::Message() << ref.prompt << " gamma " << gamma);
      GenerationRequest req;
      req.prompt_ids = prompt;
      req.max_new_tokens = n;
      req.stop_at_eos = false;
      DecodingEnvironment env = e.env;
      env.has_adapter = true;
      env.cost_curve = &SteepCurve();
      for (DecodingConfig d : {Mode(DecodingMode::kNgram, gamma), Adaptive(Mode(DecodingMode::kNgram, gamma)),
                               Forked(gamma, std::min(gamma, 2), 0, /*assist=*/true)}) {
        req.decoding = d;
        env.ngram_table = table->get();
        auto with = Generate(*e.backend, *e.kv, req, env);
        ASSERT_TRUE(with.ok()) << with.status();
        EXPECT_EQ(with->ids, expected);
        env.ngram_table = nullptr;
        auto without = Generate(*e.backend, *e.kv, req, env);
        ASSERT_TRUE(without.ok()) << without.status();
        if (d.mode == DecodingMode::kNgram && !d.adaptive_gamma) {
          forwards_with += with->stats.forwards;
          forwards_without += without->stats.forwards;
        }
      }
    }
  }
  EXPECT_LT(forwards_with, forwards_without);
}

// The bf16 K/V cache rounds every control row's K/V the same way whether it was written
// in this forward or an earlier one, so the greedy identity holds there too; with bf16
// weights as well (the vdpbf16ps path), on a GQA model and on stories260K.
TEST(CrossRegressionExactnessTest, GreedyIdentityWithBf16KvCache) {
  for (DType weights : {DType::kF32, DType::kBF16}) {
    auto model = MakeRandomModel(TinyConfig(48), {weights, 3, 2.0f});
    RandomLoraOptions lo;
    lo.magnitude = 2.0f;
    lo.placeholder_token_id = 47;
    auto adapter = MakeRandomLoraAdapter(model->config, lo);
    auto e = MakeEngine(*model, adapter.get(), 1024, cpu::SimdLevel::kAvx512Bf16, KvDtype::kBf16);
    for (const std::vector<int32_t>& prompt : {std::vector<int32_t>{1}, std::vector<int32_t>{3, 4, 5, 3, 4, 9, 2}}) {
      const auto ar = GenerateIds(e, *model, prompt, 60, Mode(DecodingMode::kAutoregressive, 1));
      for (int gamma : {1, 4, 16}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(weights) << " gamma " << gamma);
        EXPECT_EQ(GenerateIds(e, *model, prompt, 60, Mode(DecodingMode::kLossless, gamma)), ar);
        EXPECT_EQ(GenerateIds(e, *model, prompt, 60, Mode(DecodingMode::kNgram, gamma)), ar);
        EXPECT_EQ(GenerateIds(e, *model, prompt, 60, Forked(gamma, std::min(gamma, 2), 0, /*assist=*/true)), ar);
      }
    }
  }
  auto stories = LoadModel(testing::Stories260KGguf());
  ASSERT_TRUE(stories.ok()) << stories.status();
  RandomLoraOptions lo;
  auto adapter = MakeRandomLoraAdapter((*stories)->config, lo);
  auto e = MakeEngine(**stories, adapter.get(), 2048, cpu::SimdLevel::kAvx512Bf16, KvDtype::kBf16);
  const auto ref = testing::LoadStoriesReference().front();
  const std::vector<int32_t> prompt(ref.prompt_ids.begin(), ref.prompt_ids.end());
  const auto ar = GenerateIds(e, **stories, prompt, 100, Mode(DecodingMode::kAutoregressive, 1));
  EXPECT_EQ(GenerateIds(e, **stories, prompt, 100, Mode(DecodingMode::kLossless, 4)), ar);
  EXPECT_EQ(GenerateIds(e, **stories, prompt, 100, Mode(DecodingMode::kNgram, 8)), ar);
}

// Greedy decoding under a grammar: the same ids in AR and every speculative mode, and
// the text is a sentence of the grammar (complete where the grammar ended it).
TEST(CrossRegressionExactnessTest, GreedyIdentityUnderAGrammar) {
  ModelConfig config = TinyConfig(48);
  config.eos_token_ids = {0};
  auto model = MakeRandomModel(config, {DType::kF32, 5, 2.0f});
  RandomLoraOptions lo;
  lo.magnitude = 0.5f;
  lo.seed = 12;
  lo.placeholder_token_id = 47;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  auto e = MakeEngine(*model, adapter.get());
  // Token 0 is EOS; the rest JSON pieces, single characters and pieces that span symbols.
  std::vector<std::string> pieces = {"<eos>", "{", "}", "[", "]", "\"", ":", ",", " ", "true", "false", "null",
                                     "\":", ", \"", "{\"", "\"}", "[1", "2]", "1", "2", "3", "0", "a", "b", "c", "ab",
                                     "ba", "abc", "\"a", "\"b", "e", "é", "\xc3", "\xa9", "-", ".", "1.", "5", "},",
                                     "],", "{}", "[]", "\"\"", "x", "y", "z", "\n", "  "};
  ASSERT_EQ(pieces.size(), 48u);
  auto vocab = std::make_shared<const grammar::GrammarVocabulary>(pieces, std::vector<int32_t>{0});
  const char* grammars[] = {
      R"(root ::= "{" (pair ("," " "? pair)*)? "}"
         pair ::= "\"" [a-cé]{1,4} "\":" " "? value
         value ::= "true" | "false" | "null" | "-"? [0-9]{1,3} | "[" (value ("," value)*)? "]" | root)",
      R"(root ::= [a-c]+ ("x" | "y" | "z") [0-9]?)",
  };
  const std::vector<DecodingConfig> modes = {
      Mode(DecodingMode::kLossless, 4), Mode(DecodingMode::kLossy, 6), Mode(DecodingMode::kNgram, 4),
      Forked(5, 2, 2, /*assist=*/true), Adaptive(Mode(DecodingMode::kLossless, 8))};
  for (const char* text : grammars) {
    auto constraint = grammar::MakeGrammarConstraint(text, "grammar", vocab);
    ASSERT_TRUE(constraint.ok()) << constraint.status();
    for (const std::vector<int32_t>& prompt : {std::vector<int32_t>{3, 4, 5, 3, 4}, std::vector<int32_t>{7, 7, 2, 9}}) {
      auto run = [&](DecodingConfig decoding) {
        GenerationRequest req;
        req.prompt_ids = prompt;
        req.max_new_tokens = 60;
        req.decoding = decoding;
        req.grammar = *constraint;
        DecodingEnvironment env = e.env;
        env.has_adapter = true;
        env.cost_curve = &SteepCurve();
        auto r = Generate(*e.backend, *e.kv, req, env);
        EXPECT_TRUE(r.ok()) << r.status();
        return r.ok() ? *r : GenerationResult{};
      };
      const GenerationResult ar = run(Mode(DecodingMode::kAutoregressive, 1));
      ASSERT_FALSE(ar.ids.empty());
      // The text so far is always a prefix of a sentence; complete when the grammar ended it.
      grammar::GrammarMatcher matcher((*constraint)->grammar);
      std::string out;
      for (int32_t id : ar.ids) {
        if (id == 0) break;
        out += pieces[static_cast<size_t>(id)];
      }
      EXPECT_TRUE(matcher.AcceptBytes(out)) << out;
      if (ar.ids.size() < 60u) {
        EXPECT_TRUE(matcher.CanEnd()) << out;
      }
      for (size_t m = 0; m < modes.size(); ++m) EXPECT_EQ(run(modes[m]).ids, ar.ids) << "mode " << m << ": " << out;
    }
  }
}

// Forwards of all samples, and those an adaptive draft length ran as plain AR.
struct ForwardCounts {
  int64_t forwards = 0;
  int64_t ar_forwards = 0;
};

testing::ChiSquareResult SampleAndTest(const Model& model, const LoraAdapter& adapter, const SamplingParams& base,
                                       DecodingConfig decoding, ExactnessFault fault, int samples, int depth,
                                       const char* label, const ForwardCostCurve* curve = nullptr,
                                       ForwardCounts* counted = nullptr, const NgramTable* table = nullptr,
                                       AcceptanceMemory* memory = nullptr, int memory_lifetime = 0,
                                       const LogitAdjustments* adjust = nullptr,
                                       std::shared_ptr<const grammar::GrammarConstraint> constraint = nullptr) {
  auto e = MakeEngine(model, &adapter);
  const std::vector<int32_t> prompt = {2, 5};
  grammar::GrammarState state;
  if (constraint != nullptr) state = grammar::GrammarState(constraint);
  const auto exact = testing::ExactSequenceProbabilities(*e.backend, *e.kv, model.config.vocab_size, prompt, depth,
                                                         base, adjust, constraint != nullptr ? &state : nullptr);
  const int V = model.config.vocab_size;
  std::vector<int64_t> counts(exact.size(), 0);
  ForwardCounts forwards;
  const ScopedExactnessFault planted(fault);  // the samples' verifications, not the exact walk's
  for (int i = 0; i < samples; ++i) {
    // A memory cleared every `memory_lifetime` samples: each run of samples learns
    // from the ones before it, from nothing to a settled estimate.
    if (memory != nullptr && memory_lifetime > 0 && i % memory_lifetime == 0) memory->Clear();
    GenerationRequest req;
    req.prompt_ids = prompt;
    req.max_new_tokens = depth;
    req.decoding = decoding;
    req.sampling = base;
    req.sampling.seed = 1000003ull * i + 17;
    req.stop_at_eos = false;
    if (adjust != nullptr) req.adjustments = *adjust;
    req.grammar = constraint;
    DecodingEnvironment env = e.env;
    env.has_adapter = true;
    env.cost_curve = curve;
    env.ngram_table = table;
    env.acceptance_memory = memory;
    auto r = Generate(*e.backend, *e.kv, req, env);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) break;
    int64_t cell = 0;
    for (int32_t t : r->ids) cell = cell * V + t;
    ++counts[static_cast<size_t>(cell)];
    forwards.forwards += r->stats.forwards;
    forwards.ar_forwards += r->stats.ar_forwards;
  }
  const auto r = testing::ChiSquareTest(counts, exact);
  std::printf("[%s] %d sequences of %d tokens over V=%d: chi2 %.1f, df %d, p = %.3g, total variation %.4f", label,
              samples, depth, V, r.statistic, r.degrees_of_freedom, r.p_value, r.total_variation);
  if (curve != nullptr) {
    std::printf("; %lld of %lld forwards ran as AR", static_cast<long long>(forwards.ar_forwards),
                static_cast<long long>(forwards.forwards));
  }
  std::printf("\n");
  if (counted != nullptr) *counted = forwards;
  return r;
}

class DistributionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = MakeRandomModel(TinyConfig(6), {DType::kF32, 21, 4.0f});
    RandomLoraOptions lo;
    lo.magnitude = 8.0f;  // q far from p: many rejections, residuals and carried drafts
    lo.seed = 22;
    lo.placeholder_token_id = 5;
    adapter_ = MakeRandomLoraAdapter(model_->config, lo);
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<LoraAdapter> adapter_;
  static constexpr int kSamples = 20000;
  static constexpr int kDepth = 4;
};

TEST_F(DistributionTest, LosslessMatchesExactProbabilitiesAtT1) {
  SamplingParams s;
  s.temperature = 1.0f;
  const auto r = SampleAndTest(*model_, *adapter_, s, Mode(DecodingMode::kLossless, 4), ExactnessFault::kNone, kSamples,
                               kDepth, "lossless T=1");
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

// The rules besides the default: speculative sampling (its residuals, carried drafts
// with their cached q) and argmax drafts under seed-exact verification.
TEST_F(DistributionTest, LosslessBySpeculativeSamplingMatchesExactProbabilitiesAtT1) {
  SamplingParams s;
  s.temperature = 1.0f;
  const auto r = SampleAndTest(*model_, *adapter_, s, WithSpeculativeSampling(Mode(DecodingMode::kLossless, 4)),
                               ExactnessFault::kNone, kSamples, kDepth, "lossless by speculative sampling T=1");
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

TEST_F(DistributionTest, OutcomeBlocksBySpeculativeSamplingMatchExactProbabilitiesAtT07TopP09) {
  SamplingParams s;
  s.temperature = 0.7f;
  s.top_p = 0.9f;
  const auto r = SampleAndTest(*model_, *adapter_, s, WithSpeculativeSampling(Blocks(3, 1, 3)), ExactnessFault::kNone,
                               kSamples, kDepth, "lossless outcome blocks R=1 by speculative sampling, T=0.7 top-p 0.9");
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

TEST_F(DistributionTest, LosslessWithArgmaxDraftsMatchesExactProbabilitiesAtT1) {
  SamplingParams s;
  s.temperature = 1.0f;
  DecodingConfig argmax = Forked(3, 2, 2);
  argmax.sampled_verification = SampledVerification::kSeedExactArgmax;
  const auto r = SampleAndTest(*model_, *adapter_, s, argmax, ExactnessFault::kNone, kSamples, kDepth,
                               "lossless forked, argmax drafts, seed-exact T=1");
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

TEST_F(DistributionTest, LosslessMatchesExactProbabilitiesAtT07TopP09) {
  SamplingParams s;
  s.temperature = 0.7f;
  s.top_p = 0.9f;
  const auto r = SampleAndTest(*model_, *adapter_, s, Mode(DecodingMode::kLossless, 4), ExactnessFault::kNone, kSamples,
                               kDepth, "lossless T=0.7 top-p 0.9");
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

TEST_F(DistributionTest, ForkedRefillMatchesExactProbabilitiesAtT1) {
  SamplingParams s;
  s.temperature = 1.0f;
  const auto r = SampleAndTest(*model_, *adapter_, s, Forked(3, 2, 2), ExactnessFault::kNone, kSamples, kDepth,
                               "lossless forked refill T=1");
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

TEST_F(DistributionTest, OutcomeBlocksMatchExactProbabilitiesAtT1) {
  SamplingParams s;
  s.temperature = 1.0f;
  const auto r = SampleAndTest(*model_, *adapter_, s, Blocks(3, 0, 2), ExactnessFault::kNone, kSamples, kDepth,
                               "lossless outcome blocks T=1");
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

// Blocks for outcomes 0 and m only: the others carry untested drafts.
TEST_F(DistributionTest, OutcomeBlocksWithCarriesMatchExactProbabilitiesAtT07TopP09) {
  SamplingParams s;
  s.temperature = 0.7f;
  s.top_p = 0.9f;
  const auto r = SampleAndTest(*model_, *adapter_, s, Blocks(3, 1, 3), ExactnessFault::kNone, kSamples, kDepth,
                               "lossless outcome blocks R=1, T=0.7 top-p 0.9");
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

TEST_F(DistributionTest, HarnessCatchesOutcomeBlockDraftsCachedWithAnotherRowsQ) {
  SamplingParams s;
  s.temperature = 1.0f;
  const auto r = SampleAndTest(*model_, *adapter_, s, WithSpeculativeSampling(Blocks(3, 0, 2)),
                               ExactnessFault::kBlockDraftsWithTheFirstRowsQ,
                               kSamples, kDepth, "planted bug: outcome-block drafts with the first row's q");
  EXPECT_LT(r.p_value, 0.001) << "the planted bug went undetected";
}

TEST_F(DistributionTest, ForkedRefillWithNgramAssistMatchesExactProbabilitiesAtT07TopP09) {
  SamplingParams s;
  s.temperature = 0.7f;
  s.top_p = 0.9f;
  const auto r = SampleAndTest(*model_, *adapter_, s, Forked(3, 1, 2, /*assist=*/true), ExactnessFault::kNone, kSamples,
                               kDepth, "lossless forked + n-gram assist T=0.7 top-p 0.9");
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

TEST_F(DistributionTest, AdaptiveGammaMatchesExactProbabilitiesAtT1) {
  SamplingParams s;
  s.temperature = 1.0f;
  // Depth 4 leaves the policy little history, so use a curve on which the choice
  // hinges on it: γ' = 1 at the prior (α = 1/2) or after an acceptance, AR after a
  // rejection (α = 1/3). Drafts then exist in some forwards and not in others.
  const ForwardCostCurve curve = *ForwardCostCurve::FromPoints({{1, 1e-3}, {17, 2.28e-3}});
  ForwardCounts counted;
  const auto r = SampleAndTest(*model_, *adapter_, s, Adaptive(Forked(3, 2, 0)), ExactnessFault::kNone, kSamples,
                               kDepth, "adaptive gamma, forked, T=1", &curve, &counted);
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
  EXPECT_GT(counted.ar_forwards, 0);                 // the policy did fall back to AR
  EXPECT_LT(counted.ar_forwards, counted.forwards);  // and did speculate
}

// With one acceptance memory across the samples, each sample's γ' path depends on the
// samples before it (their verdicts seed its tracker, their AR forwards time its
// probes): all of it is fixed before the sample's own drafts exist, so each sample is
// still distributed as AR. The memory is cleared every 40 samples, so each run of
// samples goes from the prior (which speculates on this curve) to the learnt
// acceptance (which does not): a settled memory alone would run nearly all AR.
TEST_F(DistributionTest, AdaptiveGammaWithSharedAcceptanceMemoryMatchesExactProbabilitiesAtT1) {
  SamplingParams s;
  s.temperature = 1.0f;
  const ForwardCostCurve curve = *ForwardCostCurve::FromPoints({{1, 1e-3}, {17, 1.6e-3}});
  ForwardCounts counted;
  AcceptanceMemory memory;
  const auto r = SampleAndTest(*model_, *adapter_, s, Adaptive(Forked(3, 2, 0)), ExactnessFault::kNone, kSamples,
                               kDepth, "adaptive gamma, forked, shared acceptance memory, T=1", &curve, &counted,
                               nullptr, &memory, /*memory_lifetime=*/40);
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
  EXPECT_GT(counted.ar_forwards, counted.forwards / 10);  // both kinds of forward, in earnest
  EXPECT_LT(counted.ar_forwards, counted.forwards * 9 / 10);
  EXPECT_EQ(memory.classes(), 1);
}

TEST_F(DistributionTest, AdaptiveNgramWithSharedAcceptanceMemoryMatchesExactProbabilitiesAtT1) {
  SamplingParams s;
  s.temperature = 1.0f;
  const ForwardCostCurve curve = *ForwardCostCurve::FromPoints({{1, 1e-3}, {17, 2.28e-3}}, {{1, 1e-3}, {17, 1.5e-3}});
  AcceptanceMemory memory;
  ForwardCounts counted;
  const auto r = SampleAndTest(*model_, *adapter_, s, Adaptive(Mode(DecodingMode::kNgram, 4)), ExactnessFault::kNone,
                               kSamples, kDepth, "adaptive n-gram, shared acceptance memory, T=1", &curve, &counted,
                               nullptr, &memory);
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

TEST_F(DistributionTest, NgramMatchesExactProbabilitiesAtT1) {
  SamplingParams s;
  s.temperature = 1.0f;
  const auto r = SampleAndTest(*model_, *adapter_, s, Mode(DecodingMode::kNgram, 4), ExactnessFault::kNone, kSamples,
                               kDepth, "ngram T=1");
  EXPECT_GT(r.p_value, 0.001);
}

// Adaptive n-gram drafts first and then picks γ' from the acceptance of drafts from
// matches of the same length: the count depends on earlier outcomes, the drafts on the
// committed tokens only, so the distribution stays AR's.
TEST_F(DistributionTest, AdaptiveNgramMatchesExactProbabilitiesAtT1) {
  SamplingParams s;
  s.temperature = 1.0f;
  const ForwardCostCurve curve = *ForwardCostCurve::FromPoints({{1, 1e-3}, {17, 2.28e-3}}, {{1, 1e-3}, {17, 1.5e-3}});
  const auto r = SampleAndTest(*model_, *adapter_, s, Adaptive(Mode(DecodingMode::kNgram, 4)), ExactnessFault::kNone,
                               kSamples, kDepth, "adaptive n-gram T=1", &curve);
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

// Every pair of tokens has a corpus-table continuation, so n-gram mode drafts from the
// table wherever the context has no 2-token match: still AR's distribution.
TEST_F(DistributionTest, NgramWithCorpusTableMatchesExactProbabilitiesAtT1) {
  const int V = model_->config.vocab_size;
  const int bits = 32 - __builtin_clz(static_cast<unsigned>(V - 1));
  std::vector<NgramTable::Order> orders(2);
  for (int a = 0; a < V; ++a) {
    for (int b = 0; b < V; ++b) {
      orders[1].keys.push_back((static_cast<uint64_t>(a) << bits) | static_cast<uint64_t>(b));
      orders[1].next.push_back(static_cast<uint32_t>((a + 3 * b + 1) % V));
    }
  }
  auto table = NgramTable::FromOrders(V, bits, std::move(orders));
  ASSERT_TRUE(table.ok()) << table.status();
  SamplingParams s;
  s.temperature = 1.0f;
  ForwardCounts counted;
  const auto r = SampleAndTest(*model_, *adapter_, s, Mode(DecodingMode::kNgram, 4), ExactnessFault::kNone, kSamples,
                               kDepth, "ngram + corpus table T=1", nullptr, &counted, table->get());
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

// OpenAI's presence and frequency penalties, sampled losslessly: distributed as the
// penalised AR, each draft judged after the drafts before it; judging them without
// the earlier drafts (the planted fault) is caught.
TEST_F(DistributionTest, LosslessWithPresenceAndFrequencyPenaltiesMatchesExactProbabilitiesAtT1) {
  SamplingParams s;
  s.temperature = 1.0f;
  LogitAdjustments adjust;
  adjust.presence_penalty = 1.0f;
  adjust.frequency_penalty = 1.0f;
  const auto r = SampleAndTest(*model_, *adapter_, s, Mode(DecodingMode::kLossless, 4), ExactnessFault::kNone,
                               kSamples, kDepth, "lossless T=1, presence 1 + frequency 1", nullptr, nullptr, nullptr,
                               nullptr, 0, &adjust);
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

TEST_F(DistributionTest, HarnessCatchesDraftsPenalisedWithoutTheDraftsBeforeThem) {
  SamplingParams s;
  s.temperature = 1.0f;
  LogitAdjustments adjust;
  adjust.presence_penalty = 1.0f;
  adjust.frequency_penalty = 1.0f;
  const auto r = SampleAndTest(*model_, *adapter_, s, Mode(DecodingMode::kLossless, 4),
                               ExactnessFault::kPenaliseDraftsWithoutEarlierDrafts, kSamples, kDepth,
                               "planted bug: penalties without the earlier drafts", nullptr, nullptr, nullptr, nullptr,
                               0, &adjust);
  EXPECT_LT(r.p_value, 0.001) << "the planted bug went undetected";
}

// A grammar over the six tokens "a", "b", "c", "ab", "ba", "bc" (tokens that span
// symbols): after an "a" only "b" or "c" may come, after a "b" only "a". Sampled
// losslessly it is distributed as the masked AR (the drafts, the adapter's, masked
// where they were proposed, each row masked after the drafts before it); masking
// every row in the committed state instead (the planted fault) is caught.
std::shared_ptr<const grammar::GrammarConstraint> SixTokenGrammar() {
  auto vocab = std::make_shared<const grammar::GrammarVocabulary>(
      std::vector<std::string>{"a", "b", "c", "ab", "ba", "bc"}, std::vector<int32_t>{});
  auto constraint = grammar::MakeGrammarConstraint(R"(root ::= ("a" [bc] | "b" "a" | "c")* ("a" | "b")?)",
                                                   "grammar", vocab);
  EXPECT_TRUE(constraint.ok()) << constraint.status();
  return constraint.ok() ? *constraint : nullptr;
}

TEST_F(DistributionTest, LosslessUnderAGrammarMatchesExactProbabilitiesAtT1) {
  SamplingParams s;
  s.temperature = 1.0f;
  // Every mode drafts what the grammar forces: after a "b", an "a" (GrammarState::ForcedTokens),
  // one-hot in the first slots in lossless, before the adapter's drafts.
  for (const DecodingConfig& mode :
       {Mode(DecodingMode::kLossless, 4), Forked(3, 2, 2, /*assist=*/true), Mode(DecodingMode::kNgram, 3)}) {
    const auto r = SampleAndTest(*model_, *adapter_, s, mode, ExactnessFault::kNone, kSamples, kDepth,
                                 mode.forked()                           ? "forked + assist under a grammar, T=1"
                                 : mode.mode == DecodingMode::kNgram ? "n-gram (forced drafts) under a grammar, T=1"
                                                                       : "lossless under a grammar, T=1",
                                 nullptr, nullptr, nullptr, nullptr, 0, nullptr, SixTokenGrammar());
    EXPECT_GT(r.p_value, 0.001);
    EXPECT_LT(r.total_variation, 0.05);
  }
}

TEST_F(DistributionTest, HarnessCatchesDraftsMaskedInTheCommittedState) {
  SamplingParams s;
  s.temperature = 1.0f;
  const auto r = SampleAndTest(*model_, *adapter_, s, Mode(DecodingMode::kLossless, 4),
                               ExactnessFault::kMaskDraftsInTheCommittedState, kSamples, kDepth,
                               "planted bug: rows masked without the drafts before them", nullptr, nullptr, nullptr,
                               nullptr, 0, nullptr, SixTokenGrammar());
  EXPECT_LT(r.p_value, 0.001) << "the planted bug went undetected";
}

TEST_F(DistributionTest, HarnessCatchesCarriedDraftsVerifiedWithCurrentQ) {
  SamplingParams s;
  s.temperature = 1.0f;
  const auto r = SampleAndTest(*model_, *adapter_, s, WithSpeculativeSampling(Mode(DecodingMode::kLossless, 4)),
                               ExactnessFault::kVerifyCarriedDraftsWithCurrentQ, kSamples, kDepth,
                               "planted bug: carried drafts vs current Q");
  EXPECT_LT(r.p_value, 0.001) << "the planted bug went undetected";
}

// The same harness over a model whose weights are Q8_0 blocks (every linear layer, the
// embedding and the output run through the integer kernels): lossless stays
// distributed as AR, and the planted bug is still caught there.
class QuantizedDistributionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelConfig c = TinyConfig(6);
    c.hidden_size = 64;  // whole Q8_0 blocks of 32
    c.intermediate_size = 96;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 16;
    model_ = MakeRandomModel(c, {DType::kQ8_0, 21, 4.0f});
    RandomLoraOptions lo;
    lo.magnitude = 8.0f;
    lo.seed = 22;
    lo.placeholder_token_id = 5;
    adapter_ = MakeRandomLoraAdapter(model_->config, lo);
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<LoraAdapter> adapter_;
};

TEST_F(QuantizedDistributionTest, LosslessOnAQ8_0ModelMatchesExactProbabilitiesAtT1) {
  SamplingParams s;
  s.temperature = 1.0f;
  // 40,000 samples: this model's continuations spread over more cells than the float
  // harness's, so 20,000 leave a sampling-noise total variation near the 0.05 bound.
  const auto r = SampleAndTest(*model_, *adapter_, s, Forked(4, 2, 1, /*assist=*/true), ExactnessFault::kNone, 40000,
                               4, "Q8_0 model, lossless forked + assist T=1");
  EXPECT_GT(r.p_value, 0.001);
  EXPECT_LT(r.total_variation, 0.05);
}

TEST_F(QuantizedDistributionTest, HarnessCatchesThePlantedBugOnAQ8_0Model) {
  SamplingParams s;
  s.temperature = 1.0f;
  const auto r = SampleAndTest(*model_, *adapter_, s, WithSpeculativeSampling(Mode(DecodingMode::kLossless, 4)),
                               ExactnessFault::kVerifyCarriedDraftsWithCurrentQ, 20000, 4,
                               "Q8_0 model, planted bug: carried drafts vs current Q");
  EXPECT_LT(r.p_value, 0.001) << "the planted bug went undetected";
}

}  // namespace
}  // namespace crossreg
