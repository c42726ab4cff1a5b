// The loop-order chooser of verify-sized linear calls (engine/cpu/tile_order_chooser.h):
// it alternates, keeps the order with the lower median, serves it, and compares again.
#include "engine/cpu/tile_order_chooser.h"

#include "gtest/gtest.h"

namespace crossreg::cpu {
namespace {

// Runs one trial round on `shape`, `faster` taking 1 s a call and the other 2 s, with
// one 100 s outlier on `faster` (the median ignores it). Returns the orders handed out.
std::vector<TileOrder> TrialRound(TileOrderChooser& chooser, const LinearCallShape& shape, TileOrder faster) {
  std::vector<TileOrder> handed;
  for (int i = 0; i < 2 * TileOrderChooser::kTrials; ++i) {
    const TileOrderChooser::Decision d = chooser.Next(shape);
    EXPECT_TRUE(d.trial) << "call " << i;
    handed.push_back(d.order);
    const bool outlier = i == 1;
    chooser.Report(shape, d.order, d.order == faster ? (outlier ? 100.0 : 1.0) : 2.0);
  }
  return handed;
}

TEST(TileOrderChooserTest, AlternatesThenServesTheFasterOrderThenComparesAgain) {
  TileOrderChooser chooser;
  const LinearCallShape shape{.in = 768, .panels = 72, .rows = 16};
  EXPECT_FALSE(chooser.Chosen(shape).has_value());
  const auto handed = TrialRound(chooser, shape, TileOrder::kWholeK);
  for (size_t i = 0; i < handed.size(); ++i) {
    EXPECT_EQ(handed[i], i % 2 == 0 ? TileOrder::kBlocked : TileOrder::kWholeK) << "call " << i;
  }
  ASSERT_EQ(chooser.Chosen(shape), TileOrder::kWholeK);
  for (int i = 0; i < TileOrderChooser::kServeCalls; ++i) {
    const TileOrderChooser::Decision d = chooser.Next(shape);
    ASSERT_FALSE(d.trial) << "call " << i;
    ASSERT_EQ(d.order, TileOrder::kWholeK);
  }
  // The machine changed: the next round finds K-blocked faster and switches.
  TrialRound(chooser, shape, TileOrder::kBlocked);
  EXPECT_EQ(chooser.Chosen(shape), TileOrder::kBlocked);
  EXPECT_EQ(chooser.Next(shape).order, TileOrder::kBlocked);
  const auto decided = chooser.Decided();
  ASSERT_EQ(decided.size(), 1u);
  EXPECT_EQ(decided[0].median_seconds[static_cast<int>(TileOrder::kBlocked)], 1.0);
  EXPECT_EQ(decided[0].median_seconds[static_cast<int>(TileOrder::kWholeK)], 2.0);
}

TEST(TileOrderChooserTest, ShapesChooseApartAndTiesKeepKBlocked) {
  TileOrderChooser chooser;
  const LinearCallShape a{.in = 768, .panels = 72, .rows = 16}, b{.in = 768, .panels = 72, .rows = 32},
      c{.in = 2048, .panels = 24, .rows = 16}, d{.in = 768, .panels = 72, .rows = 16, .threads = 2};
  TrialRound(chooser, a, TileOrder::kBlocked);
  TrialRound(chooser, b, TileOrder::kWholeK);
  TrialRound(chooser, d, TileOrder::kWholeK);  // a's shape split between two threads
  for (int i = 0; i < 2 * TileOrderChooser::kTrials; ++i) chooser.Report(c, chooser.Next(c).order, 1.0);
  EXPECT_EQ(chooser.Chosen(a), TileOrder::kBlocked);
  EXPECT_EQ(chooser.Chosen(b), TileOrder::kWholeK);
  EXPECT_EQ(chooser.Chosen(c), TileOrder::kBlocked);
  EXPECT_EQ(chooser.Chosen(d), TileOrder::kWholeK);
  EXPECT_EQ(chooser.Decided().size(), 4u);
}

}  // namespace
}  // namespace crossreg::cpu
