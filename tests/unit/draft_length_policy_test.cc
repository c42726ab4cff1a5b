// Adaptive draft length: the cost curve's interpolation and measurement, the
// acceptance tracker, and the choice of γ' (ALGORITHM.md, PERFORMANCE).
#include "engine/decoding/draft_length_policy.h"

#include <algorithm>
#include <random>

#include "engine/model/random_model.h"
#include "gtest/gtest.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

ForwardCostCurve Curve(std::vector<std::pair<int, double>> points) {
  auto c = ForwardCostCurve::FromPoints(std::move(points));
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

DecodingConfig Lossless(int gamma) {
  DecodingConfig d;
  d.mode = DecodingMode::kLossless;
  d.gamma = gamma;
  d.adaptive_gamma = true;
  return d;
}

TEST(ForwardCostCurveTest, InterpolatesAndExtrapolatesLinearly) {
  const ForwardCostCurve c = Curve({{4, 3.0}, {1, 1.0}, {8, 5.0}});
  EXPECT_DOUBLE_EQ(c.Seconds(1), 1.0);
  EXPECT_DOUBLE_EQ(c.Seconds(2), 1.0 + 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(c.Seconds(6), 4.0);
  EXPECT_DOUBLE_EQ(c.Seconds(16), 9.0);  // slope of the last two points
  EXPECT_DOUBLE_EQ(Curve({{2, 7.0}}).Seconds(40), 7.0);
}

TEST(ForwardCostCurveTest, RefusesBadPoints) {
  EXPECT_FALSE(ForwardCostCurve::FromPoints({}).ok());
  EXPECT_FALSE(ForwardCostCurve::FromPoints({{0, 1.0}}).ok());
  EXPECT_FALSE(ForwardCostCurve::FromPoints({{1, 0.0}}).ok());
  const auto twice = ForwardCostCurve::FromPoints({{2, 1.0}, {2, 2.0}});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("two Cross-Regression points for 2 rows"), std::string::npos);
  const auto bad_control = ForwardCostCurve::FromPoints({{1, 1.0}}, {{3, -1.0}});
  ASSERT_FALSE(bad_control.ok());
  EXPECT_NE(bad_control.status().message().find("control-only point (3 rows"), std::string::npos);
}

// n-gram steps are control rows only: they read the control-only points, every other
// mode the Cross-Regression ones; without control points n-gram falls back to those.
TEST(ForwardCostCurveTest, NgramStepsReadTheControlOnlyPoints) {
  auto c = ForwardCostCurve::FromPoints({{1, 1.0}, {8, 3.0}}, {{1, 1.0}, {8, 1.5}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->Seconds(DecodingMode::kNgram, 8), 1.5);
  EXPECT_DOUBLE_EQ(c->Seconds(DecodingMode::kLossless, 8), 3.0);
  EXPECT_DOUBLE_EQ(c->Seconds(DecodingMode::kLossy, 8), 3.0);
  EXPECT_DOUBLE_EQ(c->Seconds(8), 3.0);
  EXPECT_DOUBLE_EQ(Curve({{1, 1.0}, {8, 3.0}}).Seconds(DecodingMode::kNgram, 8), 3.0);
  // The same acceptance pays for n-gram drafts on the cheap curve, not on the dear one.
  AcceptanceTracker fair(4, 1.0);
  for (int i = 0; i < 20; ++i) {
    for (int k = 1; k <= 4; ++k) fair.Record(k, i % 5 == 0);  // about 1 in 4.4 accepted
  }
  DecodingConfig ngram;
  ngram.mode = DecodingMode::kNgram;
  ngram.gamma = 4;
  ngram.adaptive_gamma = true;
  EXPECT_GT(ChooseGamma(ngram, fair, {&*c, 1}), 0);
  const ForwardCostCurve xr_only = Curve({{1, 1.0}, {8, 3.0}});
  EXPECT_EQ(ChooseGamma(ngram, fair, {&xr_only, 1}), 0);
}

TEST(ForwardCostCurveTest, MeasuresANonDecreasingCurveAndFreesItsSequence) {
  auto model = MakeRandomModel(testing::TinyConfig(64), {DType::kF32, 1, 1.0f});
  auto e = testing::MakeEngine(*model, nullptr, 256);
  auto c = ForwardCostCurve::Measure(*e.backend, *e.kv, model->config, 20, 32, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<int> rows;
  for (const auto& [r, t] : c->points()) rows.push_back(r);
  EXPECT_EQ(rows, (std::vector<int>{1, 2, 4, 8, 16, 20}));
  for (size_t i = 1; i < c->points().size(); ++i) EXPECT_GE(c->points()[i].second, c->points()[i - 1].second);
  // The control-only shape at the same sizes; one row is the same forward in both.
  ASSERT_EQ(c->control_points().size(), c->points().size());
  for (size_t i = 0; i < c->points().size(); ++i) EXPECT_EQ(c->control_points()[i].first, rows[i]);
  for (size_t i = 1; i < c->control_points().size(); ++i) {
    EXPECT_GE(c->control_points()[i].second, c->control_points()[i - 1].second);
  }
  EXPECT_EQ(c->control_points()[0].second, c->points()[0].second);
  EXPECT_EQ(e.kv->Stats().used_blocks, 0);
  EXPECT_FALSE(ForwardCostCurve::Measure(*e.backend, *e.kv, model->config, 20, model->config.max_position).ok());
}

TEST(AcceptanceTrackerTest, ExpectedTokensFollowPerDepthRates) {
  AcceptanceTracker t(4, 1.0);  // no forgetting: plain counts
  EXPECT_DOUBLE_EQ(t.Rate(1), 0.5);  // Beta(1, 1) prior
  for (int i = 0; i < 8; ++i) t.Record(1, i < 6);  // 6 of 8 accepted at depth 1
  for (int i = 0; i < 6; ++i) t.Record(2, i < 2);  // 2 of 6 at depth 2
  EXPECT_DOUBLE_EQ(t.Rate(1), 0.7);
  EXPECT_DOUBLE_EQ(t.Rate(2), (2 + 2 * 0.7) / 8.0);  // the prior centred on depth 1's rate
  EXPECT_DOUBLE_EQ(t.Rate(3), t.Rate(2));          // never reached: the depth above
  EXPECT_DOUBLE_EQ(t.ExpectedTokens(0), 1.0);
  EXPECT_DOUBLE_EQ(t.ExpectedTokens(2), 1.0 + 0.7 + 0.7 * 0.425);
  EXPECT_DOUBLE_EQ(t.ExpectedTokens(6), 1.0 + 0.7 * (1 + 0.425 * (1 + 0.425 * (1 + 0.425 * (1 + 0.425 * (1 + 0.425))))));
}

// An AR forward ages the tracker's own counts and lends the freed weight to a pooled
// estimate: geometric reversion to the seed a new request would get from that pool.
TEST(AcceptanceTrackerTest, ArForwardsRevertTheEstimateTowardThePooledSeed) {
  AcceptanceTracker pooled(4, 1.0);
  for (int i = 0; i < 100; ++i) pooled.Record(1, i % 5 < 3);  // α1 = 0.6 over 100 verdicts
  for (int i = 0; i < 60; ++i) pooled.Record(2, true);        // deeper drafts accepted
  AcceptanceTracker seed(4);
  seed.SeedFrom(pooled, 8.0);

  AcceptanceTracker own(4);  // decay 0.95: a burst of failures after a good start
  for (int i = 0; i < 20; ++i) own.Record(1, i < 6);
  const double low = own.Rate(1);
  ASSERT_LT(low, 0.4);
  double previous = low;
  for (int n = 1; n <= 30; ++n) {
    own.RevertToward(pooled, 8.0);
    EXPECT_GT(own.Rate(1), previous) << "AR forward " << n;  // each step moves it up
    EXPECT_LT(own.Rate(1), seed.Rate(1));                     // never past the seed
    previous = own.Rate(1);
  }
  EXPECT_GT(own.Rate(1), low + 0.6 * (seed.Rate(1) - low));  // most of the way in 30 (0.95^30 = 0.21)
  EXPECT_GT(own.Rate(2), 0.85);  // a depth the request never reached takes the pool's
  for (int n = 0; n < 2000; ++n) own.RevertToward(pooled, 8.0);
  EXPECT_NEAR(own.Rate(1), seed.Rate(1), 1e-9);
  EXPECT_NEAR(own.Reached(1), seed.Reached(1), 1e-9);
  EXPECT_NEAR(own.Rate(2), seed.Rate(2), 1e-9);

  // A pool that never reached a depth: the request's counts there age toward the prior.
  AcceptanceTracker empty(4);
  AcceptanceTracker rejected(4);
  for (int i = 0; i < 20; ++i) rejected.Record(1, false);
  for (int n = 0; n < 2000; ++n) rejected.RevertToward(empty, 8.0);
  EXPECT_NEAR(rejected.Rate(1), 0.5, 1e-9);
}

TEST(DraftLengthPolicyTest, FlatCurveSpeculatesFullyAndSteepCurveFallsBackToAr) {
  AcceptanceTracker good(8), bad(8);
  for (int i = 0; i < 50; ++i) {
    for (int k = 1; k <= 8; ++k) good.Record(k, i % 10 != 0);
    bad.Record(1, i % 20 == 0);
  }
  const ForwardCostCurve flat = Curve({{1, 1e-3}, {64, 1.05e-3}});        // GPU at batch 1
  const ForwardCostCurve steep = Curve({{1, 1e-3}, {2, 1.1e-3}, {64, 12e-3}});  // two CPU cores, small model
  EXPECT_EQ(ChooseGamma(Lossless(8), good, {&flat, 1}), 8);
  EXPECT_EQ(ChooseGamma(Lossless(8), bad, {&steep, 1}), 0);
  EXPECT_EQ(ChooseGamma(Lossless(8), good, {nullptr, 1}), 8);  // no curve: γ as asked
  // Good drafts on the steep curve: something in between.
  const int mid = ChooseGamma(Lossless(8), good, {&steep, 1});
  EXPECT_GT(mid, 0);
  EXPECT_LT(mid, 8);
}

TEST(DraftLengthPolicyTest, LoadShrinksTheDraftLength) {
  AcceptanceTracker fair(8);
  for (int i = 0; i < 50; ++i) {
    for (int k = 1; k <= 8; ++k) fair.Record(k, i % 3 != 0);
  }
  const ForwardCostCurve curve = Curve({{1, 10e-3}, {64, 14e-3}, {512, 80e-3}});  // memory-bound, then not
  int previous = 9;
  for (int sequences : {1, 8, 64, 256}) {
    const int g = ChooseGamma(Lossless(8), fair, {&curve, sequences});
    EXPECT_LE(g, previous) << sequences << " sequences";
    previous = g;
  }
  EXPECT_EQ(ChooseGamma(Lossless(8), fair, {&curve, 1}), 8);
  EXPECT_LT(previous, 8);
}

// Under load a sequence's draft rows are priced at the margin of the forward as
// planned so far, against the all-AR forward's tokens per second.
TEST(DraftLengthPolicyTest, DraftsArePricedAtTheForwardsMargin) {
  AcceptanceTracker fair(8);
  for (int i = 0; i < 50; ++i) {
    for (int k = 1; k <= 8; ++k) fair.Record(k, i % 3 != 0);
  }
  // A GPU at batch 8: flat until 32 rows, then each row costs as much as a one-row forward.
  const ForwardCostCurve knee = Curve({{1, 1e-3}, {32, 1.1e-3}, {64, 33e-3}});
  const DraftCost empty{&knee, 8, 8, 0};
  EXPECT_NEAR(empty.ArShare(DecodingMode::kLossless), knee.Seconds(8) / 8, 1e-15);
  EXPECT_NEAR(empty.MarginalSeconds(DecodingMode::kLossless, 9), knee.Seconds(17) - knee.Seconds(8), 1e-15);
  EXPECT_GE(ChooseGamma(Lossless(8), fair, empty), 4);  // rows below the knee are nearly free
  // The same sequence planned after others filled the forward to the knee: AR.
  EXPECT_EQ(ChooseGamma(Lossless(8), fair, {&knee, 8, 8, 24}), 0);
  // Prefill rows sharing the forward count in R0 as well.
  EXPECT_EQ(ChooseGamma(Lossless(8), fair, {&knee, 8, 40, 0}), 0);
  // One sequence, nothing planned: T(rows) against T(1), the single-request rule.
  const DraftCost alone{&knee, 1};
  EXPECT_NEAR(alone.ArShare(DecodingMode::kLossless) + alone.MarginalSeconds(DecodingMode::kLossless, 16),
              knee.Seconds(17), 1e-15);
  // On a linear curve, 8 sequences' all-AR forward costs 1.7 (T(1) = 1, 0.1 a row): an
  // extra row must bring 0.1 · 8 / 1.7 = 0.47 expected tokens. (Priced against a
  // one-row forward it would need 0.8, which keeps such sequences in AR.)
  const ForwardCostCurve linear = Curve({{1, 1.0}, {64, 7.3}});
  DecodingConfig ngram;
  ngram.mode = DecodingMode::kNgram;
  ngram.gamma = 1;
  ngram.adaptive_gamma = true;
  for (const auto& [alpha, drafts] : std::vector<std::pair<double, int>>{{0.6, 1}, {0.4, 0}}) {
    AcceptanceTracker tracker(1, 1.0);
    for (int i = 0; i < 1000; ++i) tracker.Record(1, i % 100 < alpha * 100);
    EXPECT_EQ(ChooseGamma(ngram, tracker, {&linear, 8, 8, 0}), drafts) << "acceptance " << alpha;
  }
}

// Prefill rows in the forward raise a draft's margin but not what a token is worth:
// a token is valued at an AR token of a decode-only forward, T(B) / B. Valued at
// T(R0) / B with R0 counting a 353-row prefill chunk, a token would "cost" ~5.9 ms
// on this curve (the Zen 4 host's, default model) against 0.34 ms in the decode
// forwards around it, and a weak adapter would draft in every prefill-carrying forward.
TEST(DraftLengthPolicyTest, PrefillRowsDoNotMakeDraftsLookCheap) {
  const ForwardCostCurve cpu = Curve(
      {{1, 1.277e-3}, {2, 1.482e-3}, {4, 2.047e-3}, {8, 3.032e-3}, {16, 3.032e-3}, {32, 5.197e-3}, {64, 9.845e-3}});
  AcceptanceTracker weak(8, 1.0);
  for (int i = 0; i < 1000; ++i) {
    for (int k = 1; k <= 8; ++k) weak.Record(k, i % 10 < 4);
  }
  const DraftCost decode_only{&cpu, 9, 9, 0};
  const DraftCost with_prefill{&cpu, 9, 9 + 353, 0};
  EXPECT_DOUBLE_EQ(with_prefill.ArShare(DecodingMode::kLossless), cpu.Seconds(9) / 9);
  EXPECT_DOUBLE_EQ(with_prefill.ArShare(DecodingMode::kLossless), decode_only.ArShare(DecodingMode::kLossless));
  // Past the curve's last point each row costs 0.145 ms; 40% acceptance does not pay it.
  EXPECT_EQ(ChooseGamma(Lossless(8), weak, with_prefill), 0);
  // Nothing else in the forward: the first extra rows fall in the curve's flat stretch
  // (8 to 16 rows) and cost nothing, so the same sequence drafts.
  EXPECT_GT(ChooseGamma(Lossless(8), weak, decode_only), 0);
}

// The guarantee behind the rule: planning the sequences in turn, each draft earns its
// margin at the all-AR rate, so the margins telescope and the forward as planned
// expects at least the all-AR forward's tokens per second, for any curve and any mix of
// acceptance rates, prefill rows and load.
TEST(DraftLengthPolicyTest, ChosenDraftsKeepTheForwardAtLeastAsFastAsAllAr) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int drafted = 0, declined = 0, shaped = 0;
  for (int trial = 0; trial < 400; ++trial) {
    ForwardCostCurve::Points points{{1, 1.0}};
    for (int rows = 2; rows <= 128; rows *= 2) {
      points.emplace_back(rows, points.back().second + unit(rng) * (unit(rng) < 0.5 ? 0.02 : 0.5) * rows);
    }
    const ForwardCostCurve curve = Curve(points);
    const int b = unit(rng) < 0.25 ? 1 : 1 + static_cast<int>(unit(rng) * 24);
    const int prefill = unit(rng) < 0.3 ? static_cast<int>(unit(rng) * 40) : 0;
    DraftCost cost{&curve, b, b + prefill, 0};
    if (unit(rng) < 0.5) {  // the live correction's scales (forward_cost_calibration.h)
      cost.decode_scale = 0.4 + 2.6 * unit(rng);
      cost.forward_scale = 0.4 + 2.6 * unit(rng);
    }
    if (unit(rng) < 0.4) {  // ... and its step shape, which prices one sequence decoding alone
      cost.decode_shape.anchors = {{1, 0.4 + 2.6 * unit(rng)}};
      for (int rows = 2; rows < 64; rows += 1 + static_cast<int>(unit(rng) * 30)) {
        cost.decode_shape.anchors.push_back({rows, 0.4 + 2.6 * unit(rng)});
      }
    }
    shaped += cost.Shaped() ? 1 : 0;
    // What the forward costs as DraftCost prices it: with the shape, one sequence and no
    // prefill rows, the curve times the shape's scale at its rows; otherwise the all-AR
    // forward at the forward's scale, and the rows above it at the curve's margin,
    // shrunk but never stretched by that scale.
    auto priced = [&](int rows) {
      if (cost.Shaped()) return cost.decode_shape.At(rows) * curve.Seconds(rows);
      const double r0 = curve.Seconds(b + prefill);
      return cost.forward_scale * r0 + std::min(1.0, cost.forward_scale) * (curve.Seconds(rows) - r0);
    };
    double expected = 0.0;
    for (int s = 0; s < b; ++s) {
      AcceptanceTracker acceptance(8, 1.0);
      const double alpha = unit(rng);
      for (int i = 0; i < 40; ++i) {
        for (int k = 1; k <= 8; ++k) acceptance.Record(k, unit(rng) < alpha);
      }
      const DecodingConfig config = unit(rng) < 0.5 ? Lossless(8) : [] {
        DecodingConfig d;
        d.mode = DecodingMode::kNgram;
        d.gamma = 8;
        d.adaptive_gamma = true;
        return d;
      }();
      const int g = ChooseGamma(config, acceptance, cost);
      const int extra = MaxDecodeRows(WithGamma(config, g)) - 1;
      const double tokens = acceptance.ExpectedTokens(DraftCapacity(config, g));
      if (g > 0) {
        ++drafted;
        // This draft's extra tokens pay for its margin at a decode-only AR token's cost,
        // T(B) / B, no more than the all-AR forward's T(R0) / B.
        const bool timed = cost.TimedAlone();
        EXPECT_GE((tokens - 1.0) * cost.ArShare(config.mode, timed),
                  cost.MarginalSeconds(config.mode, extra, timed) * 0.9999);
      } else {
        ++declined;
      }
      expected += tokens;
      cost.planned_extra_rows += extra;
    }
    // Lossless and n-gram rows are costed on one curve here (no control-only points).
    const double all_ar_rate = b / priced(b + prefill);
    const double planned_rate = expected / priced(b + prefill + cost.planned_extra_rows);
    EXPECT_GE(planned_rate, all_ar_rate * 0.9999) << "trial " << trial;
  }
  EXPECT_GT(drafted, 200);
  EXPECT_GT(declined, 200);
  EXPECT_GT(shaped, 20);
}

TEST(DraftLengthPolicyTest, WithGammaCapsForksAndZeroMeansAr) {
  DecodingConfig d = Lossless(8);
  d.fork_outcomes = 4;
  d.fork_depth = 6;
  const DecodingConfig three = WithGamma(d, 3);
  EXPECT_EQ(three.gamma, 3);
  EXPECT_EQ(three.fork_outcomes, 3);
  EXPECT_EQ(three.fork_depth, 3);
  EXPECT_EQ(DraftCapacity(d, 3), 3);
  EXPECT_EQ(DraftCapacity(Lossless(8), 3), 2);  // ALGORITHM.md rows verify gamma - 1 drafts
  EXPECT_EQ(WithGamma(d, 0).mode, DecodingMode::kAutoregressive);
  EXPECT_EQ(MaxDecodeRows(WithGamma(d, 0)), 1);
}

}  // namespace
}  // namespace crossreg
