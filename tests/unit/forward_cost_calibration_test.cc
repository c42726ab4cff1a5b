// The cost curve's live correction (forward_cost_calibration.h) and how the adaptive
// draft length reads it (DraftCost's scales).
#include "engine/decoding/forward_cost_calibration.h"

#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "engine/decoding/draft_length_policy.h"
#include "gtest/gtest.h"

namespace crossreg {
namespace {

ForwardCostCurve Linear() {
  // 1 ms for one row, 0.1 ms a row after.
  auto c = ForwardCostCurve::FromPoints({{1, 1.0e-3}, {64, 7.3e-3}});
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(ForwardCostCalibrationTest, EachKindLearnsItsOwnScale) {
  const ForwardCostCurve curve = Linear();
  ForwardCostCalibration cal(0.05);
  EXPECT_DOUBLE_EQ(cal.Scale(false), 1.0);
  EXPECT_DOUBLE_EQ(cal.Scale(true), 1.0);
  // Decode-only forwards run at twice the curve, forwards carrying prefill at 0.7 of it.
  for (int i = 0; i < 200; ++i) {
    cal.Observe(curve, 16, 0, false, 2.0 * curve.Seconds(16));
    cal.Observe(curve, 480, 0, true, 0.7 * curve.Seconds(480));
  }
  EXPECT_NEAR(cal.Scale(false), 2.0, 1e-9);
  EXPECT_NEAR(cal.Scale(true), 0.7, 1e-9);
}

TEST(ForwardCostCalibrationTest, FirstForwardsAverageThenOldOnesFade) {
  const ForwardCostCurve curve = Linear();
  ForwardCostCalibration cal(0.1);
  cal.Observe(curve, 8, 0, false, 2.0 * curve.Seconds(8));
  EXPECT_NEAR(cal.Scale(false), 2.0, 1e-9);  // the first one counts fully
  cal.Observe(curve, 8, 0, false, 0.5 * curve.Seconds(8));
  EXPECT_NEAR(cal.Scale(false), 1.0, 1e-9);  // geometric mean of 2 and 1/2
  // A new regime takes over geometrically, at `weight` a forward.
  for (int i = 0; i < 100; ++i) cal.Observe(curve, 8, 0, false, 3.0 * curve.Seconds(8));
  EXPECT_NEAR(cal.Scale(false), 3.0, 3.0 * 1e-4);
}

TEST(ForwardCostCalibrationTest, OneOutlierMovesTheScaleABoundedStep) {
  const ForwardCostCurve curve = Linear();
  ForwardCostCalibration cal(0.05);
  for (int i = 0; i < 100; ++i) cal.Observe(curve, 16, 0, false, curve.Seconds(16));
  // A forward descheduled for a second reads as 4x at most.
  cal.Observe(curve, 16, 0, false, 1.0);
  EXPECT_NEAR(cal.Scale(false), std::exp(0.05 * std::log(4.0)), 1e-9);
  // Nothing measured, or a curve that cannot be read, teaches nothing.
  const double before = cal.Scale(false);
  cal.Observe(curve, 16, 0, false, 0.0);
  cal.Observe(curve, 16, 0, false, -1.0);
  EXPECT_DOUBLE_EQ(cal.Scale(false), before);
  EXPECT_DOUBLE_EQ(cal.Scale(true), 1.0);
}

TEST(ForwardCostCalibrationTest, EachForwardIsComparedWithTheCurveOfItsShape) {
  // Cross-Regression forwards (half predictive rows) cost 1.5x the control-only ones.
  auto curve = ForwardCostCurve::FromPoints({{1, 1.5e-3}, {64, 96e-3}}, {{1, 1.0e-3}, {64, 64e-3}});
  ASSERT_TRUE(curve.ok()) << curve.status();
  const double control_only = curve->Seconds(DecodingMode::kNgram, 16);
  const double half_predictive = curve->Seconds(16);
  ASSERT_NEAR(half_predictive, 1.5 * control_only, 1e-12);
  // An AR or n-gram forward that took the control-only curve's time is on the curve.
  ForwardCostCalibration ar;
  ar.Observe(*curve, 16, 0, false, control_only);
  EXPECT_NEAR(ar.Scale(false), 1.0, 1e-12);
  // So is a Cross-Regression forward at the other curve, with half (or more) of its rows predictive.
  ForwardCostCalibration xr;
  xr.Observe(*curve, 16, 8, false, half_predictive);
  xr.Observe(*curve, 16, 12, false, half_predictive);
  EXPECT_NEAR(xr.Scale(false), 1.0, 1e-12);
  // A quarter predictive: halfway between the two shapes.
  ForwardCostCalibration mixed;
  mixed.Observe(*curve, 16, 4, false, 0.5 * (control_only + half_predictive));
  EXPECT_NEAR(mixed.Scale(false), 1.0, 1e-12);
  // A control-only forward read against the Cross-Regression points would look fast.
  ForwardCostCalibration wrong;
  wrong.Observe(*curve, 16, 8, false, control_only);
  EXPECT_NEAR(wrong.Scale(false), 1.0 / 1.5, 1e-12);
}

// The scales in DraftCost. A scale above 1 raises what a token is worth but not what
// rows past the all-AR forward cost: under load a forward costs more per forward, not
// per row. A scale below 1 shrinks both (it cancels in a decode-only forward). In a
// forward carrying prefill a token is worth the decode-only scale and rows cost the
// forward's, and the token's worth never exceeds the all-AR forward's share, so the
// all-AR guarantee holds whatever the scales.
TEST(ForwardCostCalibrationTest, DraftCostReadsTheScales) {
  const ForwardCostCurve curve = Linear();
  AcceptanceTracker tracker(8, 1.0);
  for (int i = 0; i < 1000; ++i) {
    for (int k = 1; k <= 8; ++k) tracker.Record(k, i % 10 < 6);
  }
  DecodingConfig ngram;
  ngram.mode = DecodingMode::kNgram;
  ngram.gamma = 8;
  ngram.adaptive_gamma = true;

  // 16 decoding sequences, nothing else. Raw curve: a token is worth T(16)/16 = 0.16 ms
  // and a row costs 0.1 ms, so 60% acceptance does not pay.
  const DraftCost raw{&curve, 16, 16, 0};
  EXPECT_EQ(ChooseGamma(ngram, tracker, raw), 0);
  // Forwards under load at 1.8x the curve: a token is worth 0.29 ms, rows still cost
  // 0.1 ms, and it does.
  DraftCost loaded = raw;
  loaded.decode_scale = loaded.forward_scale = 1.8;
  EXPECT_NEAR(loaded.ArShare(DecodingMode::kNgram), 1.8 * raw.ArShare(DecodingMode::kNgram), 1e-15);
  EXPECT_NEAR(loaded.MarginalSeconds(DecodingMode::kNgram, 5), raw.MarginalSeconds(DecodingMode::kNgram, 5), 1e-15);
  EXPECT_GT(ChooseGamma(ngram, tracker, loaded), 0);
  // Forwards faster than the curve: both shrink alike and the choice is the raw one.
  DraftCost fast = raw;
  fast.decode_scale = fast.forward_scale = 0.6;
  EXPECT_NEAR(fast.ArShare(DecodingMode::kNgram), 0.6 * raw.ArShare(DecodingMode::kNgram), 1e-15);
  EXPECT_NEAR(fast.MarginalSeconds(DecodingMode::kNgram, 5), 0.6 * raw.MarginalSeconds(DecodingMode::kNgram, 5),
              1e-15);
  EXPECT_EQ(ChooseGamma(ngram, tracker, fast), ChooseGamma(ngram, tracker, raw));

  // 16 sequences and a 450-row prefill chunk: the raw curve as above. Measured scales
  // of 1.8 (decode-only) and 0.7 (this forward): 0.29 ms against 0.07 ms, and it pays.
  DraftCost prefill{&curve, 16, 16 + 450, 0};
  EXPECT_EQ(ChooseGamma(ngram, tracker, prefill), 0);
  prefill.decode_scale = 1.8;
  prefill.forward_scale = 0.7;
  EXPECT_NEAR(prefill.ArShare(DecodingMode::kNgram), 1.8 * curve.Seconds(16) / 16, 1e-15);
  EXPECT_GT(ChooseGamma(ngram, tracker, prefill), 0);

  // A forward whose few prefill rows run fast: the decode-only worth of a token would
  // exceed the whole forward's AR share, so the share caps it.
  DraftCost small{&curve, 16, 18, 0};
  small.decode_scale = 2.0;
  small.forward_scale = 0.5;
  EXPECT_NEAR(small.ArShare(DecodingMode::kNgram), 0.5 * curve.Seconds(18) / 16, 1e-15);
}

// The single-sequence step shape's anchors: AR steps (one row) and drafting steps at
// each row count, each its geometric-mean scale; an anchor once it has three steps, the
// scale interpolated in rows between anchors and held at the nearest outside.
TEST(ForwardCostCalibrationTest, SingleSequenceStepsLearnAScaleAtEachRowCount) {
  const ForwardCostCurve curve = Linear();
  ForwardCostCalibration cal;
  for (int i = 0; i < 3; ++i) cal.ObserveDecodeStep(curve, 1, 1, 0, 0.5 * curve.Seconds(1));
  for (int i = 0; i < 2; ++i) {
    cal.ObserveDecodeStep(curve, 1, 9, 4, 2.0 * curve.Seconds(9));
    cal.ObserveDecodeStep(curve, 1, 17, 8, 1.0 * curve.Seconds(17));
  }
  cal.ObserveDecodeStep(curve, 1, 13, 6, 4.0 * curve.Seconds(13));
  EXPECT_FALSE(cal.DecodeShape(1).known());  // no row count has three drafting steps
  cal.ObserveDecodeStep(curve, 1, 9, 4, 2.0 * curve.Seconds(9));
  ASSERT_EQ(cal.DecodeShape(1).anchors.size(), 2u);
  cal.ObserveDecodeStep(curve, 1, 17, 8, 1.0 * curve.Seconds(17));
  const DecodeScaleShape shape = cal.DecodeShape(1);
  ASSERT_TRUE(shape.known());
  ASSERT_EQ(shape.anchors.size(), 3u);  // 13 rows ran once: no anchor
  EXPECT_EQ(shape.anchors[1].rows, 9);
  EXPECT_NEAR(shape.ar_scale(), 0.5, 1e-9);
  EXPECT_NEAR(shape.At(1), 0.5, 1e-9);
  EXPECT_NEAR(shape.At(5), 1.25, 1e-9);
  EXPECT_NEAR(shape.At(9), 2.0, 1e-9);
  EXPECT_NEAR(shape.At(13), 1.5, 1e-9);
  EXPECT_NEAR(shape.At(100), 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(DecodeScaleShape{}.At(7), 1.0);
  // The drafting steps' scale for the dashboard: all of them, weighted by steps.
  EXPECT_NEAR(cal.DraftingStepScale(), std::exp((3 * std::log(2.0) + 3 * std::log(1.0) + std::log(4.0)) / 7), 1e-9);
  // The per-kind scales are the forwards' own, untouched by steps.
  EXPECT_DOUBLE_EQ(cal.Scale(false), 1.0);
  // AR steps are wanted only while drafting steps alone taught their anchor.
  ForwardCostCalibration drafting_only;
  EXPECT_FALSE(drafting_only.WantsArStep(1));
  for (int i = 0; i < ForwardCostCalibration::kMinAnchorForwards; ++i) {
    drafting_only.ObserveDecodeStep(curve, 1, 9, 4, curve.Seconds(9));
  }
  EXPECT_TRUE(drafting_only.WantsArStep(1));
  for (int i = 0; i < ForwardCostCalibration::kMinAnchorForwards; ++i) {
    EXPECT_TRUE(drafting_only.WantsArStep(1));
    drafting_only.ObserveDecodeStep(curve, 1, 1, 0, curve.Seconds(1));
  }
  EXPECT_FALSE(drafting_only.WantsArStep(1));
  EXPECT_TRUE(drafting_only.DecodeShape(1).known());
  EXPECT_FALSE(cal.WantsArStep(1));
  // Bad figures teach nothing.
  ForwardCostCalibration bad;
  for (int i = 0; i < 3; ++i) {
    bad.ObserveDecodeStep(curve, 1, 1, 0, 0.0);
    bad.ObserveDecodeStep(curve, 1, 5, 2, -1.0);
    bad.ObserveDecodeStep(curve, 1, 0, 0, 1e-3);
    bad.ObserveDecodeStep(curve, 1, 1, 0, 1e-3);
  }
  EXPECT_FALSE(bad.DecodeShape(1).known());
  // Only one sequence decoding alone is priced with the shape.
  DraftCost alone{&curve, 1, 1, 0};
  alone.decode_shape = shape;
  EXPECT_NEAR(alone.ArShare(DecodingMode::kNgram, true), 0.5 * curve.Seconds(1), 1e-15);
  EXPECT_NEAR(alone.MarginalSeconds(DecodingMode::kNgram, 8, true), shape.At(9) * curve.Seconds(9) - 0.5 * curve.Seconds(1),
              1e-15);
  DraftCost two = alone;
  two.batch_sequences = two.base_rows = 2;
  EXPECT_NEAR(two.ArShare(DecodingMode::kNgram), curve.Seconds(2) / 2, 1e-15);
  DraftCost prefill = alone;
  prefill.base_rows = 40;
  EXPECT_NEAR(prefill.MarginalSeconds(DecodingMode::kNgram, 6), curve.Seconds(46) - curve.Seconds(40), 1e-15);
}

// Decode-only steps of several sequences learn the shape of their own batch size, from
// their AR steps (rows == sequences) up; a drafting row count without the AR anchor asks
// for AR steps of that batch size. A four-sequence batch whose drafting steps cost far
// more than the curve's margin (per-sequence work the curve does not see) is priced by
// what they took, and the drafts the curve would buy are declined.
TEST(ForwardCostCalibrationTest, EachBatchSizeLearnsItsOwnStepShape) {
  const ForwardCostCurve curve = Linear();
  ForwardCostCalibration cal;
  for (int i = 0; i < 3; ++i) cal.ObserveDecodeStep(curve, 4, 7, 3, 2.0 * curve.Seconds(7));
  EXPECT_FALSE(cal.DecodeShape(4).known());
  EXPECT_TRUE(cal.WantsArStep(4));
  EXPECT_FALSE(cal.WantsArStep(1));
  EXPECT_FALSE(cal.WantsArStep(3));
  for (int i = 0; i < 3; ++i) cal.ObserveDecodeStep(curve, 4, 4, 0, curve.Seconds(4));
  EXPECT_FALSE(cal.WantsArStep(4));
  const DecodeScaleShape shape = cal.DecodeShape(4);
  ASSERT_TRUE(shape.known());
  EXPECT_EQ(shape.anchors.front().rows, 4);
  EXPECT_NEAR(shape.At(4), 1.0, 1e-9);
  EXPECT_NEAR(shape.At(7), 2.0, 1e-9);
  EXPECT_FALSE(cal.DecodeShape(1).known());
  EXPECT_FALSE(cal.DecodeShape(3).known());
  EXPECT_DOUBLE_EQ(cal.DraftingStepScale(), 1.0);  // the dashboard's: one sequence alone
  // Nearly every draft accepted.
  AcceptanceTracker acceptance(8, 1.0);
  for (int i = 0; i < 50; ++i) {
    for (int k = 1; k <= 8; ++k) acceptance.Record(k, true);
  }
  DecodingConfig ngram;
  ngram.mode = DecodingMode::kNgram;
  ngram.gamma = 3;
  ngram.adaptive_gamma = true;
  DraftCost by_curve{&curve, 4, 4, 0};
  EXPECT_EQ(ChooseGamma(ngram, acceptance, by_curve), 3);
  DraftCost by_steps = by_curve;
  by_steps.decode_shape = shape;
  ASSERT_TRUE(by_steps.Shaped());
  EXPECT_NEAR(by_steps.ArShare(DecodingMode::kNgram, true), curve.Seconds(4) / 4, 1e-15);
  EXPECT_NEAR(by_steps.MarginalSeconds(DecodingMode::kNgram, 3, true), 2.0 * curve.Seconds(7) - curve.Seconds(4), 1e-15);
  EXPECT_EQ(ChooseGamma(ngram, acceptance, by_steps), 0);
  // A draft in a batch pays by both pricings: where the steps read cheaper than the
  // model, the model's speedup counts. One sequence alone goes by its steps.
  const double tokens = acceptance.ExpectedTokens(3);
  const double modelled = tokens * by_curve.ArShare(DecodingMode::kNgram) /
                          (by_curve.ArShare(DecodingMode::kNgram) + by_curve.MarginalSeconds(DecodingMode::kNgram, 3));
  DraftCost cheap_steps = by_curve;
  cheap_steps.decode_shape.anchors = {{4, 1.0}, {7, 0.5}};
  EXPECT_NEAR(cheap_steps.Speedup(DecodingMode::kNgram, tokens, 3), modelled, 1e-12);
  EXPECT_GT(tokens, modelled);  // the steps alone would call those rows free
  DraftCost alone{&curve, 1, 1, 0};
  alone.decode_shape.anchors = {{1, 2.0}, {4, 1.0}};
  EXPECT_NEAR(alone.Speedup(DecodingMode::kNgram, tokens, 3), tokens, 1e-12);
  // Another batch size, or a forward with prefill rows, is not priced by this shape.
  DraftCost five = by_steps;
  five.batch_sequences = five.base_rows = 5;
  EXPECT_FALSE(five.Shaped());
  DraftCost prefill = by_steps;
  prefill.base_rows = 40;
  EXPECT_FALSE(prefill.Shaped());
}

// The two start-up curves of the wrong shape that docs/benchmarks.md records for the
// default model on two Zen 5 cores, one sequence drafting outcome blocks at γ 4 (rows
// 1 + γ' + 2 blocks of γ': 4, 7, 10, 13). Priced by the curve and one scale they
// choose the wrong way; priced by the decode steps as they ran, the right way.
struct WrongShape {
  ForwardCostCurve curve;
  double acceptance;                   // per depth
  std::function<double(int)> actual;  // a step's seconds by rows
  std::vector<int> drafting_rows;      // the drafting steps seen
};

std::pair<DraftCost, DraftCost> PricedWithoutAndWithShape(const WrongShape& w) {
  ForwardCostCalibration cal;
  for (int i = 0; i < 20; ++i) {
    cal.ObserveDecodeStep(w.curve, 1, 1, 0, w.actual(1));
    cal.Observe(w.curve, 1, 0, false, w.actual(1));
  }
  for (const int rows : w.drafting_rows) {
    cal.ObserveDecodeStep(w.curve, 1, rows, rows / 2, w.actual(rows));
    cal.Observe(w.curve, rows, rows / 2, false, w.actual(rows));
  }
  DraftCost cost{&w.curve, 1, 1, 0};
  cost.decode_scale = cost.forward_scale = cal.Scale(false);
  const DraftCost unshaped = cost;
  cost.decode_shape = cal.DecodeShape(1);
  EXPECT_TRUE(cost.decode_shape.known());
  return {unshaped, cost};
}

TEST(ForwardCostCalibrationTest, TheDecodeShapeCorrectsACurveOfTheWrongShape) {
  DecodingConfig blocks;
  blocks.mode = DecodingMode::kLossless;
  blocks.gamma = 4;
  blocks.adaptive_gamma = true;
  blocks.draft_layout = DraftLayout::kBlocks;
  blocks.fork_outcomes = 1;
  auto tracker = [](double alpha) {
    AcceptanceTracker t(4, 1.0);
    for (int i = 0; i < 1000; ++i) {
      for (int k = 1; k <= 4; ++k) t.Record(k, i % 100 < static_cast<int>(alpha * 100));
    }
    return t;
  };
  // "Flat": one row read 0.57 ms, so drafts looked nearly free. As they ran, one row
  // takes 0.46 ms and a γ' 1 step 0.63: its 1.25 tokens come slower than AR's.
  const WrongShape flat{*ForwardCostCurve::FromPoints({{1, 0.572e-3}, {2, 0.591e-3}, {4, 0.629e-3},
                                                       {8, 0.702e-3}, {16, 0.85e-3}}),
                        0.25, [](int rows) { return rows == 1 ? 0.46e-3 : 0.63e-3 + 0.05e-3 * (rows - 4); },
                        {4, 4, 4, 4, 7, 10}};
  const auto [flat_unshaped, flat_shaped] = PricedWithoutAndWithShape(flat);
  EXPECT_GT(ChooseGamma(blocks, tracker(flat.acceptance), flat_unshaped), 0);
  EXPECT_EQ(ChooseGamma(blocks, tracker(flat.acceptance), flat_shaped), 0);
  // "Steep": drafts looked dear. As they ran, a γ' 1 step takes 0.56 ms and commits
  // 1.45 tokens, a γ' 2 step 0.65 ms and 1.65.
  const WrongShape steep{*ForwardCostCurve::FromPoints({{1, 0.462e-3}, {2, 0.593e-3}, {4, 0.700e-3},
                                                        {8, 0.861e-3}, {16, 1.4e-3}}),
                         0.45, [](int rows) { return rows == 1 ? 0.46e-3 : 0.56e-3 + 0.03e-3 * (rows - 4); },
                         {4, 4, 4, 7, 10, 13, 13, 13}};
  const auto [steep_unshaped, steep_shaped] = PricedWithoutAndWithShape(steep);
  EXPECT_EQ(ChooseGamma(blocks, tracker(steep.acceptance), steep_unshaped), 0);
  EXPECT_GT(ChooseGamma(blocks, tracker(steep.acceptance), steep_shaped), 0);
}

}  // namespace
}  // namespace crossreg
