// The load generator's prefix-cache workloads, without a server: the windows of the
// token pool they cut prompts from, the prompts of shared_prefix and the conversations
// of multi_turn, and the context checks that name their flags.
#include <set>
#include <vector>

#include "clients/loadgen/distinct_windows.h"
#include "clients/loadgen/multi_turn.h"
#include "clients/loadgen/shared_prefix.h"
#include "gtest/gtest.h"

namespace crossreg::clients {
namespace {

// A pool like real text: many different ids, some repeats.
std::vector<int32_t> TextLikePool(int n) {
  std::vector<int32_t> pool;
  uint32_t x = 12345;
  for (int i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    pool.push_back(static_cast<int32_t>((x >> 16) % 500));
  }
  return pool;
}

TEST(DistinctWindowsTest, WindowsAreDistinctAndBeginDifferentlyWhereThePoolAllows) {
  const auto pool = TextLikePool(300);
  int shuffled = 0;
  auto windows = DistinctWindows(pool, 16, 40, 10, &shuffled);
  ASSERT_TRUE(windows.ok()) << windows.status();
  ASSERT_EQ(windows->size(), 40u);
  std::set<std::vector<int32_t>> seen;
  std::set<int32_t> first_ids;
  for (const auto& w : *windows) {
    EXPECT_EQ(w.size(), 16u);
    EXPECT_TRUE(seen.insert(w).second) << "a window repeats";
    first_ids.insert(w.front());
  }
  EXPECT_EQ(first_ids.size(), 40u) << "each window starts with an id of its own";
  EXPECT_EQ(shuffled, 0);
  EXPECT_EQ(*windows, *DistinctWindows(pool, 16, 40, 10)) << "deterministic";
}

TEST(DistinctWindowsTest, ALoopingPoolFallsBackToShuffledWindowsThatStayDistinct) {
  std::vector<int32_t> pool;
  for (int i = 0; i < 200; ++i) pool.push_back(i % 7);  // 7 distinct windows at most
  int shuffled = 0;
  auto windows = DistinctWindows(pool, 8, 20, 0, &shuffled);
  ASSERT_TRUE(windows.ok()) << windows.status();
  EXPECT_GT(shuffled, 0);
  std::set<std::vector<int32_t>> seen(windows->begin(), windows->end());
  EXPECT_EQ(seen.size(), 20u);
}

TEST(DistinctWindowsTest, PoolsThatCannotGiveTheWindowsAreRefused) {
  EXPECT_FALSE(DistinctWindows(std::vector<int32_t>(5, 1), 8, 2, 0).ok()) << "shorter than a window";
  EXPECT_FALSE(DistinctWindows(std::vector<int32_t>(100, 3), 8, 2, 0).ok()) << "one id repeated";
}

TEST(SharedPrefixTest, EveryPromptIsThePrefixThenASuffixOfItsOwn) {
  const SharedPrefixShape shape{.prefix_tokens = 64, .suffix_tokens = 8, .requests = 12};
  const auto pool = TextLikePool(SharedPrefixPoolTokens(shape));
  auto prompts = SharedPrefixPrompts(pool, shape);
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  ASSERT_EQ(prompts->size(), 12u);
  std::set<int32_t> suffix_starts;
  for (const auto& p : *prompts) {
    ASSERT_EQ(p.size(), 72u);
    EXPECT_TRUE(std::equal(pool.begin(), pool.begin() + 64, p.begin()));
    suffix_starts.insert(p[64]);
  }
  EXPECT_EQ(suffix_starts.size(), 12u) << "suffixes differ from their first id on";
}

TEST(SharedPrefixTest, AWorkloadBeyondTheContextNamesItsFlags) {
  const SharedPrefixShape shape{.prefix_tokens = 768, .suffix_tokens = 32, .requests = 8};
  EXPECT_TRUE(CheckSharedPrefixFits(shape, 64, 1024).ok());
  const absl::Status s = CheckSharedPrefixFits(shape, 300, 1024);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  for (const char* flag : {"--prefix_tokens", "--suffix_tokens", "--max_tokens"}) {
    EXPECT_NE(s.message().find(flag), absl::string_view::npos) << s.message();
  }
}

TEST(MultiTurnTest, ConversationsOpenDifferentlyAndCarryAMessagePerLaterTurn) {
  const MultiTurnShape shape{.opening_tokens = 48, .message_tokens = 6, .conversations = 5, .turns = 4};
  const auto pool = TextLikePool(MultiTurnPoolTokens(shape));
  auto conversations = PlanConversations(pool, shape);
  ASSERT_TRUE(conversations.ok()) << conversations.status();
  ASSERT_EQ(conversations->size(), 5u);
  std::set<int32_t> first_ids;
  std::set<std::vector<int32_t>> messages;
  for (const Conversation& c : *conversations) {
    EXPECT_EQ(c.opening.size(), 48u);
    first_ids.insert(c.opening.front());
    ASSERT_EQ(c.messages.size(), 3u);
    for (const auto& m : c.messages) {
      EXPECT_EQ(m.size(), 6u);
      messages.insert(m);
    }
  }
  EXPECT_EQ(first_ids.size(), 5u) << "no two conversations share a cached block";
  EXPECT_EQ(messages.size(), 15u);
  EXPECT_FALSE(CheckMultiTurnFits(shape, 400, 1024).ok());
  EXPECT_TRUE(CheckMultiTurnFits(shape, 32, 1024).ok());
}

}  // namespace
}  // namespace crossreg::clients
