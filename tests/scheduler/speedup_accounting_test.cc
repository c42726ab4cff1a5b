// The speedup accounting (scheduler/speedup_accounting.h, docs/metrics.md): the cost
// model's affine form, and the per-forward attribution alone, mixed, with prefill, on
// made-up forwards whose true cost is known.
#include "scheduler/speedup_accounting.h"

#include <cmath>

#include "engine/decoding/forward_cost_calibration.h"
#include "gtest/gtest.h"

namespace crossreg {
namespace {

constexpr double kFixed = 0.010, kPerRow = 0.002;  // the "true" T(R) = 10 ms + 2 ms x R
double TrueSeconds(int rows) { return kFixed + kPerRow * rows; }

SequenceForward Decode(DecodingMode mode, int rows, int committed) {
  SequenceForward s;
  s.mode = mode;
  s.rows = rows;
  s.committed = committed;
  s.speculative = mode != DecodingMode::kAutoregressive;
  return s;
}

ForwardReport Forward(std::vector<SequenceForward> sequences) {
  ForwardReport f;
  for (const auto& s : sequences) f.rows += s.rows;
  f.seconds = TrueSeconds(f.rows);
  f.fixed_seconds = kFixed;  // the scheduler's cost model, here exact
  f.per_row_seconds = kPerRow;
  f.sequences = std::move(sequences);
  return f;
}

double Speedup(const SpeedupAccounting& a, DecodingMode mode) {
  const ModeSeconds& m = a.totals()[static_cast<size_t>(mode)];
  return m.actual > 0 ? m.ar_equivalent / m.actual : 0;
}

// The model the accounting reads: the cost curve times the calibrated scale, as an
// affine cost at the forward's shape. On an affine curve that is the curve's own line,
// scaled by what the forwards measured.
TEST(ForwardCostModelTest, TheCalibratedCurvesAffineFormAtAForwardsShape) {
  auto curve = ForwardCostCurve::FromPoints({{1, TrueSeconds(1)}, {2, TrueSeconds(2)}, {16, TrueSeconds(16)}},
                                            {{1, TrueSeconds(1)}, {2, TrueSeconds(2)}, {16, TrueSeconds(16)}});
  ASSERT_TRUE(curve.ok());
  ForwardCostCalibration model;
  for (int rows : {1, 9, 16}) {
    const AffineCost cost = model.Affine(*curve, rows, rows / 2, false);
    EXPECT_NEAR(cost.fixed, kFixed, 1e-12) << rows << " rows";
    EXPECT_NEAR(cost.per_row, kPerRow, 1e-12) << rows << " rows";
    EXPECT_NEAR(model.Predict(*curve, rows, rows / 2, false), TrueSeconds(rows), 1e-12);
  }
  // Decode forwards that take twice the curve double both terms; forwards carrying
  // prefill keep their own scale.
  for (int i = 0; i < 5; ++i) model.Observe(*curve, 8, 0, false, 2 * TrueSeconds(8));
  const AffineCost slow = model.Affine(*curve, 8, 0, false);
  EXPECT_NEAR(slow.fixed, 2 * kFixed, 1e-9);
  EXPECT_NEAR(slow.per_row, 2 * kPerRow, 1e-9);
  EXPECT_NEAR(model.Affine(*curve, 8, 0, true).fixed, kFixed, 1e-12);
  // A curve that falls short of its fixed part charges everything per row.
  auto steep = ForwardCostCurve::FromPoints({{1, 0.001}, {2, 0.010}});
  ASSERT_TRUE(steep.ok());
  const AffineCost all_rows = ForwardCostCalibration().Affine(*steep, 2, 0, false);
  EXPECT_EQ(all_rows.fixed, 0.0);
  EXPECT_NEAR(all_rows.per_row, 0.005, 1e-12);
}

TEST(SpeedupAccountingTest, ArIsExactlyOneAndChargesSumToTheMeasuredTime) {
  SpeedupAccounting a;
  std::array<ModeSeconds, kNumDecodingModes> charges;
  const ForwardReport f = Forward({Decode(DecodingMode::kAutoregressive, 1, 1), Decode(DecodingMode::kAutoregressive, 1, 1),
                                   Decode(DecodingMode::kLossless, 9, 3)});
  a.OnForward(f, &charges);
  double total = 0;
  for (const ModeSeconds& m : charges) total += m.actual;
  EXPECT_NEAR(total, f.seconds, 1e-12);
  EXPECT_NEAR(Speedup(a, DecodingMode::kAutoregressive), 1.0, 1e-12);
}

TEST(SpeedupAccountingTest, AlonePoorDraftsAreBelowOneAndGoodOnesAboveOne) {
  // Alone, one sequence: 9 rows (x_last + 8 drafts) cost T(9) = 28 ms, where AR pays
  // T(1) = 12 ms per token: 1.2 tokens per forward is a loss, 4 a win.
  for (const auto& [committed, expected] : {std::pair{1.2, 1.2 * 12.0 / 28.0}, std::pair{4.0, 4.0 * 12.0 / 28.0}}) {
    SpeedupAccounting a;
    for (int i = 0; i < 100; ++i) {
      // 1.2 tokens per forward on average: 1 four times, 2 once.
      const int j = committed == 4.0 ? 4 : (i % 5 == 0 ? 2 : 1);
      a.OnForward(Forward({Decode(DecodingMode::kLossless, 9, j)}));
    }
    EXPECT_NEAR(Speedup(a, DecodingMode::kLossless), expected, 1e-6) << committed << " tokens per forward";
  }
}

TEST(SpeedupAccountingTest, MixedWithArAPoorModeStaysBelowOneAndArStaysOne) {
  // Seven AR sequences share each batch with one lossless sequence that commits one
  // token per forward at 17 rows: the AR requests are slowed by its rows, and those
  // rows are charged to it, not to them.
  SpeedupAccounting a;
  for (int i = 0; i < 100; ++i) {
    std::vector<SequenceForward> batch(7, Decode(DecodingMode::kAutoregressive, 1, 1));
    batch.push_back(Decode(DecodingMode::kLossless, 17, 1));
    a.OnForward(Forward(batch));
  }
  // Per forward: lossless is charged 10/8 + 2*17 = 35.25 ms; AR would have paid 10/8 + 2.
  EXPECT_NEAR(Speedup(a, DecodingMode::kLossless), 3.25 / 35.25, 1e-6);
  EXPECT_NEAR(Speedup(a, DecodingMode::kAutoregressive), 1.0, 1e-9);
}

TEST(SpeedupAccountingTest, PrefillIsChargedButNotCounted) {
  SpeedupAccounting a;
  SequenceForward prefill = Decode(DecodingMode::kLossless, 100, 0);
  prefill.prefill = true;
  std::array<ModeSeconds, kNumDecodingModes> charges;
  a.OnForward(Forward({prefill, Decode(DecodingMode::kNgram, 5, 3)}), &charges);
  const ModeSeconds& ngram = charges[static_cast<size_t>(DecodingMode::kNgram)];
  EXPECT_NEAR(ngram.actual, kFixed / 2 + kPerRow * 5, 1e-12);  // not the prefill's 200 ms
  EXPECT_NEAR(ngram.ar_equivalent, 3 * (kFixed / 2 + kPerRow), 1e-12);
  EXPECT_EQ(charges[static_cast<size_t>(DecodingMode::kLossless)].actual, 0.0);
}

TEST(SpeedupAccountingTest, WithoutAnyCostKnowledgeTimeIsChargedByRows) {
  SpeedupAccounting a;
  std::array<ModeSeconds, kNumDecodingModes> charges;
  ForwardReport f = Forward({Decode(DecodingMode::kAutoregressive, 1, 1), Decode(DecodingMode::kLossy, 3, 2)});
  f.fixed_seconds = f.per_row_seconds = 0;  // a scheduler without a cost curve
  a.OnForward(f, &charges);
  EXPECT_NEAR(charges[static_cast<size_t>(DecodingMode::kLossy)].actual, f.seconds * 3 / 4, 1e-12);
  EXPECT_NEAR(charges[static_cast<size_t>(DecodingMode::kLossy)].ar_equivalent, f.seconds * 2 / 4, 1e-12);
}

TEST(SpeedupAccountingTest, TheStepAroundTheForwardIsChargedAsMeasured) {
  // One-row decode steps teach what AR pays per token around its forward: 1 ms.
  SpeedupAccounting a;
  SequenceForward ar = Decode(DecodingMode::kAutoregressive, 1, 1);
  ar.cpu_seconds = 0.001;
  for (int i = 0; i < 10; ++i) a.OnForward(Forward({ar}));
  EXPECT_NEAR(a.ar_cpu_seconds(), 0.001, 1e-12);
  // A lossless sequence whose drafts pay in the forward (3 tokens for 5 rows: 20 ms
  // against AR's 3 x 12 ms) but whose verification costs 30 ms reads below 1; the
  // charges sum to the step's measured time, its 4 ms of batch bookkeeping included.
  SequenceForward slow = Decode(DecodingMode::kLossless, 5, 3);
  slow.cpu_seconds = 0.030;
  ForwardReport f = Forward({slow});
  f.step_seconds = f.seconds + slow.cpu_seconds + 0.004;
  std::array<ModeSeconds, kNumDecodingModes> charges;
  SpeedupAccounting b = a;
  b.OnForward(f, &charges);
  const ModeSeconds& lossless = charges[static_cast<size_t>(DecodingMode::kLossless)];
  EXPECT_NEAR(lossless.actual, f.step_seconds, 1e-12);
  EXPECT_NEAR(lossless.ar_equivalent, 3 * (TrueSeconds(1) + 0.001 + 0.004), 1e-12);
  EXPECT_LT(lossless.ar_equivalent / lossless.actual, 1.0);
  // The same forward with cheap verification is a win.
  slow.cpu_seconds = 0.001;
  f = Forward({slow});
  f.step_seconds = f.seconds + slow.cpu_seconds;
  a.OnForward(f, &charges);
  EXPECT_GT(charges[static_cast<size_t>(DecodingMode::kLossless)].ar_equivalent /
                charges[static_cast<size_t>(DecodingMode::kLossless)].actual,
            1.5);
  // AR stays exactly 1 however its steps' time splits.
  EXPECT_NEAR(Speedup(a, DecodingMode::kAutoregressive), 1.0, 1e-12);
}

TEST(SpeedupAccountingTest, AModesLongerWaitsBetweenStepsAreNotCountedToArPerToken) {
  // AR steps spend 1 ms between forwards (events, admission); an n-gram step waits 6 ms
  // for its drafts' grammar masks. AR would have paid its own 1 ms per token, not 6.
  SpeedupAccounting a;
  SequenceForward ar = Decode(DecodingMode::kAutoregressive, 1, 1);
  ForwardReport f = Forward({ar, ar});
  f.step_seconds = f.seconds + 0.002;  // 1 ms a sequence
  for (int i = 0; i < 10; ++i) a.OnForward(f);
  SequenceForward ngram = Decode(DecodingMode::kNgram, 4, 3);
  ForwardReport g = Forward({ngram, ngram});
  g.step_seconds = g.seconds + 0.012;
  std::array<ModeSeconds, kNumDecodingModes> charges;
  a.OnForward(g, &charges);
  const ModeSeconds& m = charges[static_cast<size_t>(DecodingMode::kNgram)];
  EXPECT_NEAR(m.actual, g.step_seconds, 1e-12);
  EXPECT_NEAR(m.ar_equivalent, 2 * 3 * (kFixed / 2 + kPerRow + 0.001), 1e-9);
}

TEST(SpeedupAccountingTest, ALoneModesLongerWaitsAreNotCountedToArPerToken) {
  // Alone, once AR's steps are timed: AR's tokens cost a timed AR step plus the wait a
  // lone AR step had (1 ms), not the 4 ms an n-gram step waited before it to deliver its
  // tokens; a step that waited less than AR's is priced with its own wait.
  SpeedupAccounting a;
  ForwardReport ar = Forward({Decode(DecodingMode::kAutoregressive, 1, 1)});
  ar.gap_seconds = 0.001;
  ar.step_seconds = ar.seconds + ar.gap_seconds;
  for (int i = 0; i < 10; ++i) a.OnForward(ar);
  ForwardReport g = Forward({Decode(DecodingMode::kNgram, 4, 3)});
  g.lone_ar_step_seconds = 0.013;
  g.gap_seconds = 0.004;
  g.step_seconds = g.seconds + g.gap_seconds;
  std::array<ModeSeconds, kNumDecodingModes> charges;
  a.OnForward(g, &charges);
  EXPECT_NEAR(charges[static_cast<size_t>(DecodingMode::kNgram)].ar_equivalent, 3 * (0.013 + 0.001), 1e-12);
  g.gap_seconds = 0.0005;
  g.step_seconds = g.seconds + g.gap_seconds;
  a.OnForward(g, &charges);
  EXPECT_NEAR(charges[static_cast<size_t>(DecodingMode::kNgram)].ar_equivalent, 3 * (0.013 + 0.0005), 1e-12);
}

}  // namespace
}  // namespace crossreg
