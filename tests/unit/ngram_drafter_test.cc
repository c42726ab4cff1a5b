// The n-gram (prompt-lookup) drafter: longest suffix match, latest occurrence, chained
// through its own drafts, the length of the match reported, and the index growing with
// the context.
#include "engine/decoding/ngram_drafter.h"

#include <vector>

#include "gtest/gtest.h"

namespace crossreg {
namespace {

TEST(NgramIndexTest, ChainsThroughItsDraftsPastTheEndOfTheContext) {
  // "1 2 3 4" once, then "1 2": the drafts continue the repeat, 3 4 1 2 3 ...
  const std::vector<int32_t> context = {1, 2, 3, 4, 1, 2};
  NgramIndex index(3);
  index.Update(context);
  int match = -1;
  EXPECT_EQ(index.Draft(context, 5, &match), (std::vector<int32_t>{3, 4, 1, 2, 3}));
  EXPECT_EQ(match, 2);  // "1 2"
}

TEST(NgramIndexTest, PrefersTheLongestMatchThenTheLatestOccurrence) {
  // After "... 5 7": the 2-gram "5 7" was followed by 8; the latest "7" alone by 9.
  const std::vector<int32_t> context = {5, 7, 8, 0, 7, 9, 0, 5, 7};
  NgramIndex index(3);
  index.Update(context);
  int match = 0;
  EXPECT_EQ(index.Draft(context, 1, &match), (std::vector<int32_t>{8}));
  EXPECT_EQ(match, 2);
  // Only a 1-token match: the latest occurrence of "7" wins.
  const std::vector<int32_t> short_match = {7, 8, 1, 7, 9, 2, 7};
  NgramIndex one(3);
  one.Update(short_match);
  EXPECT_EQ(one.Draft(short_match, 1, &match), (std::vector<int32_t>{9}));
  EXPECT_EQ(match, 1);
}

TEST(NgramIndexTest, NoMatchNoDraftsAndMinimumMatchLength) {
  const std::vector<int32_t> context = {1, 2, 3, 4};
  NgramIndex index(3);
  index.Update(context);
  int match = -1;
  EXPECT_TRUE(index.Draft(context, 4, &match).empty());
  EXPECT_EQ(match, 0);
  // "9 3" ends the context: with min_n = 2 the lone "3" does not draft.
  const std::vector<int32_t> weak = {3, 4, 9, 3};
  NgramIndex strict(3, 2), loose(3, 1);
  strict.Update(weak);
  loose.Update(weak);
  EXPECT_TRUE(strict.Draft(weak, 2).empty());
  EXPECT_EQ(loose.Draft(weak, 1, &match), (std::vector<int32_t>{4}));
  EXPECT_EQ(match, 1);
}

TEST(NgramIndexTest, UpdateIndexesOnlyTheNewTokens) {
  std::vector<int32_t> context = {4, 5, 6};
  NgramIndex index(2);
  index.Update(context);
  EXPECT_TRUE(index.Draft(context, 1).empty());
  context.insert(context.end(), {4, 5});
  index.Update(context);
  EXPECT_EQ(index.Draft(context, 2), (std::vector<int32_t>{6, 4}));
  EXPECT_EQ(NgramDrafts(context, 2, 2), (std::vector<int32_t>{6, 4}));
}

}  // namespace
}  // namespace crossreg
