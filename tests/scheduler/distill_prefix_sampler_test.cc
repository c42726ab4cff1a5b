// crossreg-distill-data's prefixes: inside the stream, lengths in range, the same for
// the same seed on every standard library.
#include "distill/distill_prefix_sampler.h"

#include <algorithm>
#include <set>

#include "gtest/gtest.h"

namespace crossreg {
namespace {

TEST(DistillPrefixSamplerTest, UniformIntStaysInRangeAndReachesBothEnds) {
  std::mt19937_64 rng(7);
  std::set<int64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const int64_t x = UniformInt(rng, -3, 5);
    ASSERT_GE(x, -3);
    ASSERT_LE(x, 5);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_EQ(UniformInt(rng, 4, 4), 4);
  const int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < 10; ++i) UniformInt(rng, kMin, kMax);  // the full range: no overflow
}

TEST(DistillPrefixSamplerTest, PrefixesLieInsideTheStreamWithLengthsInRange) {
  for (const int64_t stream : {10, 11, 100, 5000}) {
    auto sample = SamplePrefixes(stream, 3000, 8, 768, 3);
    ASSERT_TRUE(sample.ok()) << sample.status();
    ASSERT_EQ(sample->start.size(), 3000u);
    ASSERT_EQ(sample->length.size(), 3000u);
    const int64_t longest = std::min<int64_t>(768, stream - 1);
    int32_t shortest_seen = 1 << 30, longest_seen = 0;
    for (size_t i = 0; i < sample->start.size(); ++i) {
      ASSERT_GE(sample->length[i], 8);
      ASSERT_LE(sample->length[i], longest);
      ASSERT_GE(sample->start[i], 0);
      ASSERT_LE(sample->start[i] + sample->length[i], stream);
      shortest_seen = std::min(shortest_seen, sample->length[i]);
      longest_seen = std::max(longest_seen, sample->length[i]);
    }
    EXPECT_EQ(shortest_seen, 8) << stream;
    EXPECT_EQ(longest_seen, longest) << stream;
  }
}

TEST(DistillPrefixSamplerTest, SameSeedSamePrefixesOtherSeedOthers) {
  auto a = SamplePrefixes(1000, 64, 8, 100, 42);
  auto b = SamplePrefixes(1000, 64, 8, 100, 42);
  auto c = SamplePrefixes(1000, 64, 8, 100, 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->start, b->start);
  EXPECT_EQ(a->length, b->length);
  EXPECT_NE(a->start, c->start);
  // A prefix of the draws does not depend on how many are drawn.
  auto fewer = SamplePrefixes(1000, 10, 8, 100, 42);
  ASSERT_TRUE(fewer.ok());
  EXPECT_TRUE(std::equal(fewer->start.begin(), fewer->start.end(), a->start.begin()));
}

// std::mt19937_64's output is fixed by the standard and UniformInt is ours, so these
// draws are the same with every compiler and standard library (checked against an
// independent Python MT19937-64 with the same rejection rule).
TEST(DistillPrefixSamplerTest, DrawsArePinned) {
  auto sample = SamplePrefixes(1000, 4, 8, 768, 0);
  ASSERT_TRUE(sample.ok());
  EXPECT_EQ(sample->length, (std::vector<int32_t>{537, 424, 401, 268}));
  EXPECT_EQ(sample->start, (std::vector<int64_t>{75, 508, 518, 487}));
}

TEST(DistillPrefixSamplerTest, StreamTooShortForTheShortestPrefixIsAnError) {
  EXPECT_FALSE(SamplePrefixes(8, 1, 8, 768, 0).ok());  // a prefix of 8 needs 9 tokens
  EXPECT_TRUE(SamplePrefixes(9, 1, 8, 768, 0).ok());
  EXPECT_FALSE(SamplePrefixes(100, 1, 9, 8, 0).ok());
  auto none = SamplePrefixes(100, 0, 8, 768, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->start.empty());
}

}  // namespace
}  // namespace crossreg

namespace crossreg {
namespace {

TEST(DistillPrefixSamplerTest, GroupsShareAStartLongestFirstAndFitTheStream) {
  auto groups = SamplePrefixGroups(100, 50, 4, 3, 30, 11);
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->start.size(), 200u);
  for (size_t g = 0; g < 50; ++g) {
    const size_t first = g * 4;
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_EQ(groups->start[first + k], groups->start[first]);
      EXPECT_GE(groups->length[first + k], 3);
      EXPECT_LE(groups->length[first + k], 30);
      if (k > 0) {
        EXPECT_LE(groups->length[first + k], groups->length[first + k - 1]);
      }
    }
    EXPECT_LE(groups->start[first] + groups->length[first], 100);
  }
  // One per group draws what SamplePrefixes draws.
  auto single = SamplePrefixGroups(100, 20, 1, 3, 30, 7);
  auto plain = SamplePrefixes(100, 20, 3, 30, 7);
  ASSERT_TRUE(single.ok() && plain.ok());
  EXPECT_EQ(single->start, plain->start);
  EXPECT_EQ(single->length, plain->length);
  EXPECT_FALSE(SamplePrefixGroups(100, 2, 0, 3, 30, 7).ok());
}

}  // namespace
}  // namespace crossreg
