// Philox4x32-10 against Random123's published known-answer vectors, and
// PositionRandom: a request's number for (position, lane) is fixed by the seed alone,
// whatever was drawn before, and the numbers look uniform and independent.
#include "engine/position_random.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/chi_square.h"

namespace crossreg {
namespace {

TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(Philox4x32_10({0, 0, 0, 0}, {0, 0}), (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// The property seed-exact decoding rests on: a position's number does not depend on
// which numbers were asked for before it, in which order, or how many times.
TEST(PositionRandomTest, ANumberDependsOnSeedPositionAndLaneOnly) {
  const PositionRandom forward(42), backward(42);
  std::vector<double> in_order, reversed(64);
  for (int64_t i = 0; i < 64; ++i) in_order.push_back(forward.Uniform(i, RandomLane::kToken));
  for (int64_t i = 63; i >= 0; --i) {
    backward.Uniform(i, RandomLane::kAcceptance);  // other lanes in between change nothing
    reversed[static_cast<size_t>(i)] = backward.Uniform(i, RandomLane::kToken);
  }
  EXPECT_EQ(in_order, reversed);
  EXPECT_EQ(PositionRandom(42).Uniform(17, RandomLane::kToken), in_order[17]);
  // Another seed, lane or position: another number.
  EXPECT_NE(PositionRandom(43).Uniform(17, RandomLane::kToken), in_order[17]);
  EXPECT_NE(forward.Uniform(17, RandomLane::kResidual), in_order[17]);
  EXPECT_NE(forward.Uniform(17, RandomLane::kAcceptance), forward.Uniform(17, RandomLane::kResidual));
  EXPECT_NE(forward.Uniform(int64_t{1} << 32, RandomLane::kToken), forward.Uniform(0, RandomLane::kToken));
  // Seeds differing in the high word only are different keys.
  EXPECT_NE(PositionRandom(uint64_t{1} << 40).Uniform(0, RandomLane::kToken),
            PositionRandom(0).Uniform(0, RandomLane::kToken));
}

// Uniform over [0, 1) (20 equal cells), across positions of one seed and across seeds
// at one position, and consecutive positions uncorrelated (pairs over a 5 x 5 grid).
TEST(PositionRandomTest, NumbersAreUniformAcrossPositionsAndSeeds) {
  constexpr int kCells = 20, kDraws = 100000;
  const std::vector<double> flat(kCells, 1.0 / kCells);
  std::vector<int64_t> by_position(kCells, 0), by_seed(kCells, 0);
  const PositionRandom random(7);
  for (int i = 0; i < kDraws; ++i) {
    const double a = random.Uniform(i, RandomLane::kToken);
    const double b = PositionRandom(static_cast<uint64_t>(i)).Uniform(3, RandomLane::kToken);
    ASSERT_GE(a, 0.0);
    ASSERT_LT(a, 1.0);
    ++by_position[static_cast<size_t>(a * kCells)];
    ++by_seed[static_cast<size_t>(b * kCells)];
  }
  EXPECT_GT(testing::ChiSquareTest(by_position, flat).p_value, 1e-3);
  EXPECT_GT(testing::ChiSquareTest(by_seed, flat).p_value, 1e-3);
  std::vector<int64_t> pairs(25, 0);
  for (int i = 0; i < kDraws; ++i) {
    const auto cell = [](double u) { return static_cast<size_t>(u * 5); };
    ++pairs[cell(random.Uniform(i, RandomLane::kToken)) * 5 + cell(random.Uniform(i + 1, RandomLane::kToken))];
  }
  EXPECT_GT(testing::ChiSquareTest(pairs, std::vector<double>(25, 1.0 / 25)).p_value, 1e-3);
}

}  // namespace
}  // namespace crossreg
