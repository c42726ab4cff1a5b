// Row summaries (engine/forward_output.h): the reduction every backend must match, and
// the greedy decoding that reads them giving exactly what whole rows of logits give.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/ops.h"
#include "scheduler/generate.h"
#include "engine/decoding/sequence_decoder.h"
#include "engine/decoding/verify.h"
#include "engine/logit_argmax.h"
#include "engine/forward_output.h"
#include "engine/model/random_model.h"
#include "gtest/gtest.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

TEST(SummarizeLogitRowTest, TiesGoToTheLowestIndexAndTheTokenIsOptional) {
  const std::vector<float> z = {1.0f, 3.5f, -2.0f, 3.5f, 0.25f};
  const RowSummary s = SummarizeLogitRow(z.data(), 5, 4);
  EXPECT_EQ(s.argmax, 1);
  EXPECT_EQ(s.max_logit, 3.5f);
  EXPECT_EQ(s.token_logit, 0.25f);
  const RowSummary none = SummarizeLogitRow(z.data(), 5, -1);
  EXPECT_EQ(none.argmax, 1);
  EXPECT_EQ(none.token_logit, 3.5f);  // no token: the max itself, a gap of 0
}

TEST(SummarizeLogitRowTest, FollowsTheSequentialScanAtNanAndInfinities) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> nan_first = {nan, 1.0f, 2.0f};
  EXPECT_EQ(SummarizeLogitRow(nan_first.data(), 3, -1).argmax, 0);  // nothing beats a NaN at 0
  const std::vector<float> nan_later = {0.0f, nan, 2.0f, nan};
  EXPECT_EQ(SummarizeLogitRow(nan_later.data(), 4, -1).argmax, 2);  // later NaNs never win
  const std::vector<float> all_minus_inf = {-inf, -inf, -inf};
  EXPECT_EQ(SummarizeLogitRow(all_minus_inf.data(), 3, -1).argmax, 0);
  const std::vector<float> plus_inf = {0.0f, inf, inf};
  EXPECT_EQ(SummarizeLogitRow(plus_inf.data(), 3, -1).argmax, 1);
}

// The vectorised argmax returns the sequential scan's index on every input: ties
// across lanes and vectors, tails of every length, NaN (first or later), ±inf, ±0.
TEST(ArgmaxTest, EverySimdPathReturnsTheSequentialScansIndex) {
  if (cpu::DetectedSimdLevel() < cpu::SimdLevel::kAvx2) GTEST_SKIP() << "no SIMD path on this CPU (or forced off)";
  const bool avx512 = cpu::DetectedSimdLevel() >= cpu::SimdLevel::kAvx512;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(7);
  int checked = 0;
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 70; ++n) lengths.push_back(n);
  for (int64_t n : {16384, 32000, 128256}) lengths.push_back(n);
  for (int64_t n : lengths) {
    for (int pattern = 0; pattern < 8; ++pattern) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 7) - 3);  // many ties
      const size_t at = rng() % static_cast<size_t>(n);
      switch (pattern) {
        case 1: x[0] = nan; break;
        case 2: for (size_t i = 1; i < x.size(); i += 2) x[i] = nan; break;
        case 3: std::fill(x.begin(), x.end(), -inf); break;
        case 4: x[at] = inf; x[x.size() - 1] = inf; break;
        case 5: std::fill(x.begin(), x.end(), 0.0f); x[at] = -0.0f; break;
        case 6: std::fill(x.begin(), x.end(), -inf); x[at] = nan; break;
        case 7: std::fill(x.begin(), x.end(), nan); x[at] = 2.0f; break;
        default: break;
      }
      SCOPED_TRACE(::testing::Message() << "n " << n << " pattern " << pattern);
      const int32_t want = cpu::internal::ArgmaxScalar(x.data(), n);
      EXPECT_EQ(cpu::internal::ArgmaxAvx2(x.data(), n), want);
      EXPECT_EQ(LogitArgmax(x.data(), n), want);
      if (avx512) {
        EXPECT_EQ(cpu::internal::ArgmaxAvx512(x.data(), n), want);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 73 * 8);
}

// A decode plan with rows laid out as SequenceDecoder lays them out: control rows
// [x_last, d_1..d_m], the main predictive chain of g rows, then the forks.
StepPlan LaidOutPlan(DecodingMode mode, int m, int g, const std::vector<int>& forks, const DraftBuffer& drafts) {
  StepPlan plan;
  plan.kind = StepPlan::Kind::kDecode;
  plan.committed = 10;
  plan.decoding.mode = mode;
  plan.decoding.gamma = g;
  plan.decoding.beta = mode == DecodingMode::kLossy ? 0.5f : 0.0f;
  plan.decoding.tau = mode == DecodingMode::kLossy ? -2.0f : 0.0f;
  plan.decoding.fork_outcomes = static_cast<int>(forks.size());
  plan.decoding.fork_depth = forks.empty() ? 0 : 2;
  plan.drafts = m;
  plan.main_chain = g;
  plan.fork_sizes = forks;
  for (int k = 0; k <= m; ++k) {
    plan.rows.push_back({.seq = 1, .position = 9 + k, .token = k == 0 ? 5 : drafts[static_cast<size_t>(k - 1)].token,
                         .want_logits = true});
  }
  for (int k = 0; k < g; ++k) plan.rows.push_back({.seq = 1, .position = 9 + k, .token = 0, .want_logits = true, .predictive = true});
  for (size_t b = 0; b < forks.size(); ++b) {
    for (int j = 0; j < forks[b]; ++j) {
      plan.rows.push_back({.seq = 1, .position = 10 + static_cast<int>(b) + j, .token = 0, .want_logits = true,
                           .predictive = true, .branch = static_cast<int>(b) + 1});
    }
  }
  return plan;
}

// Verify at T = 0 reads the same argmaxes and gaps from summaries as from whole rows.
// Logits are small integers so ties (decided by the lowest index) are frequent, and
// each case marks a random subset of rows as summaries.
TEST(RowSummaryVerifyTest, SummariesGiveTheOutcomeOfWholeRows) {
  constexpr int kVocab = 6;
  std::mt19937 rng(20261124);
  int cases = 0, partial = 0, lossy_accepts = 0;
  for (DecodingMode mode : {DecodingMode::kLossless, DecodingMode::kLossy}) {
    for (int trial = 0; trial < 400; ++trial) {
      const int m = static_cast<int>(rng() % 5);
      const int g = m + 1 + static_cast<int>(rng() % 3);
      std::vector<int> forks;
      if (trial % 2 == 1) {
        for (int n = 0; n < std::min(m, 2); ++n) forks.push_back(1 + static_cast<int>(rng() % 2));
      }
      DraftBuffer drafts;
      for (int k = 0; k < m; ++k) drafts.push_back(Draft{static_cast<int32_t>(rng() % kVocab), {}, k > 0});
      StepPlan plan = LaidOutPlan(mode, m, g, forks, drafts);
      std::vector<float> whole;
      for (int i = 0; i < plan.logit_rows() * kVocab; ++i) whole.push_back(static_cast<float>(rng() % 4) * 0.75f);

      // The same plan with summaries, as a backend returns it for these rows.
      StepPlan summarized = plan;
      std::vector<float> full_rows;
      std::vector<RowSummary> summaries;
      int row = 0;
      for (size_t r = 0; r < summarized.rows.size(); ++r) {
        BatchRow& b = summarized.rows[r];
        const float* z = whole.data() + static_cast<size_t>(row++) * kVocab;
        if (rng() % 4 == 0) {  // stays whole
          full_rows.insert(full_rows.end(), z, z + kVocab);
          continue;
        }
        b.summary = true;
        const bool control = !b.predictive;
        b.summary_token = control && static_cast<int>(r) < m ? summarized.rows[r + 1].token : -1;
        summaries.push_back(SummarizeLogitRow(z, kVocab, b.summary_token));
      }
      partial += full_rows.empty() ? 0 : 1;
      const SamplingParams greedy;  // T = 0
      const VerifyOutcome expected =
          Verify(plan, whole, kVocab, drafts, greedy, EnergyAcceptor(plan.decoding.beta, plan.decoding.tau, g));
      const VerifyOutcome got = Verify(summarized, LogitRows(full_rows, summaries), kVocab, drafts, greedy,
                                       EnergyAcceptor(plan.decoding.beta, plan.decoding.tau, g));
      SCOPED_TRACE(::testing::Message() << "mode " << static_cast<int>(mode) << " trial " << trial << " m " << m
                                        << " g " << g << " forks " << forks.size());
      EXPECT_EQ(got.accepted, expected.accepted);
      EXPECT_EQ(got.tokens, expected.tokens);
      EXPECT_EQ(got.verdicts, expected.verdicts);
      EXPECT_EQ(got.kv_keep, expected.kv_keep);
      ASSERT_EQ(got.next_drafts.size(), expected.next_drafts.size());
      for (size_t i = 0; i < got.next_drafts.size(); ++i) {
        EXPECT_EQ(got.next_drafts[i].token, expected.next_drafts[i].token);
        EXPECT_EQ(got.next_drafts[i].carried, expected.next_drafts[i].carried);
      }
      for (int k = 1; k <= expected.accepted; ++k) {  // accepted though not the argmax: a gap decided it
        const float* pk = whole.data() + static_cast<size_t>(k - 1) * kVocab;
        lossy_accepts += drafts[static_cast<size_t>(k - 1)].token != Argmax(pk, kVocab) ? 1 : 0;
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 800);
  EXPECT_GT(partial, 400);        // most cases mix whole rows and summaries
  EXPECT_GT(lossy_accepts, 50);  // and the lossy gaps decide many verdicts
}

struct TinyXr {
  std::unique_ptr<Model> model;
  std::unique_ptr<LoraAdapter> adapter;
  testing::EngineUnderTest engine;
};
TinyXr MakeTinyXr() {
  TinyXr t;
  t.model = MakeRandomModel(testing::TinyConfig(48), {DType::kF32, 5, 2.0f});
  RandomLoraOptions lo;
  lo.magnitude = 0.5f;  // mostly right drafts: long accepted runs and carried drafts
  lo.seed = 15;
  lo.placeholder_token_id = 47;
  t.adapter = MakeRandomLoraAdapter(t.model->config, lo);
  t.engine = testing::MakeEngine(*t.model, t.adapter.get());
  return t;
}

// Greedy requests read summaries end to end (Generate → backend → Verify); switching
// them off must change nothing: tokens, acceptance, forwards and the prompt logits.
TEST(RowSummaryDecodingTest, GreedyDecodingIsTheSameWithAndWithoutSummaries) {
  TinyXr t = MakeTinyXr();
  std::vector<DecodingConfig> modes;
  for (DecodingMode mode : {DecodingMode::kAutoregressive, DecodingMode::kLossless, DecodingMode::kLossy,
                            DecodingMode::kNgram}) {
    DecodingConfig d;
    d.mode = mode;
    d.gamma = mode == DecodingMode::kAutoregressive ? 1 : 6;
    if (mode == DecodingMode::kLossy) {
      d.beta = 0.3f;  // energies from the logit gaps: the summaries' token_logit
      d.tau = -1.5f;
    }
    modes.push_back(d);
  }
  DecodingConfig forked;
  forked.mode = DecodingMode::kLossless;
  forked.gamma = 6;
  forked.fork_outcomes = 2;
  forked.fork_depth = 3;
  forked.ngram_assist = true;
  modes.push_back(forked);
  for (const DecodingConfig& d : modes) {
    SCOPED_TRACE(::testing::Message() << "mode " << static_cast<int>(d.mode) << " forked " << d.forked());
    GenerationRequest req;
    req.prompt_ids = {3, 4, 5, 3, 4, 9};
    req.max_new_tokens = 60;
    req.decoding = d;
    req.stop_at_eos = false;
    DecodingEnvironment with = t.engine.env, without = t.engine.env;
    with.summarize_greedy_rows = true;
    without.summarize_greedy_rows = false;
    auto a = Generate(*t.engine.backend, *t.engine.kv, req, with);
    auto b = Generate(*t.engine.backend, *t.engine.kv, req, without);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->ids.size(), 60u);
    EXPECT_EQ(a->ids, b->ids);
    EXPECT_EQ(a->stats.forwards, b->stats.forwards);
    EXPECT_EQ(a->stats.accepted, b->stats.accepted);
  }
}

// Which rows a decoder asks to summarise: every logit row of a greedy request except
// its first decode forward's P_1 (the prompt logits); P_k names d_k, the bonus row
// none; sampled requests and a switched-off environment ask for none.
TEST(RowSummaryDecodingTest, OnlyGreedyRowsAskForSummariesAndEachControlRowNamesItsDraft) {
  TinyXr t = MakeTinyXr();
  auto run = [&](float temperature, bool summarize) {
    GenerationRequest req;
    req.prompt_ids = {3, 4, 5};
    req.max_new_tokens = 30;
    req.sampling.temperature = temperature;
    req.decoding.mode = DecodingMode::kLossless;
    req.decoding.gamma = 4;
    req.stop_at_eos = false;
    DecodingEnvironment env = t.engine.env;
    env.summarize_greedy_rows = summarize;
    const SequenceId seq = t.engine.kv->CreateSequence();
    SequenceDecoder decoder(req, env, seq);
    std::vector<StepPlan> plans;
    ForwardBatch batch;
    ForwardOutput out;
    while (!decoder.finished()) {
      StepPlan plan = decoder.Plan(decoder.Choose(), 64);
      batch.rows = plan.rows;
      KvTransaction transaction(*t.engine.kv);
      EXPECT_TRUE(t.engine.backend->Execute(batch, transaction, out).ok());
      EXPECT_EQ(out.summaries.size(), static_cast<size_t>(plan.summary_rows()));
      absl::StatusOr<StepOutcome> step = decoder.OnForward(plan, LogitRows(out.logits, out.summaries));
      if (!step.ok() || !transaction.Commit(decoder.sequence(), step->kv_length).ok()) {
        ADD_FAILURE() << "the forward's outcome could not be applied";
        break;
      }
      if (!plan.prefill()) plans.push_back(std::move(plan));
    }
    t.engine.kv->Free(seq);
    return plans;
  };
  const std::vector<StepPlan> greedy = run(0.0f, true);
  ASSERT_GE(greedy.size(), 3u);
  for (size_t f = 0; f < greedy.size(); ++f) {
    const StepPlan& p = greedy[f];
    for (size_t r = 0; r < p.rows.size(); ++r) {
      const BatchRow& row = p.rows[r];
      SCOPED_TRACE(::testing::Message() << "forward " << f << " row " << r);
      EXPECT_EQ(row.summary, !(f == 0 && r == 0));
      const bool control_with_draft = !row.predictive && static_cast<int>(r) < p.drafts;
      if (row.summary) {
        EXPECT_EQ(row.summary_token, control_with_draft ? p.rows[r + 1].token : -1);
      }
    }
    EXPECT_EQ(p.summary_rows(), p.logit_rows() - (f == 0 ? 1 : 0));
  }
  for (const StepPlan& p : run(0.8f, true)) EXPECT_EQ(p.summary_rows(), 0);
  for (const StepPlan& p : run(0.0f, false)) EXPECT_EQ(p.summary_rows(), 0);
}

}  // namespace
}  // namespace crossreg
