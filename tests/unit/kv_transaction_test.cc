// KvTransaction (engine/kv/kv_transaction.h), the one way a step changes the paged KV
// cache: a table of steps, with and without prefix caching, each checked for the
// sequence's length and capacity and the cache's block counts afterwards; and the
// rules that make it one transaction: a sequence is open from Reserve until Commit,
// RollBack (or the end of the transaction) keeps the length it had, a sequence freed
// meanwhile is skipped, and a shared cached block is never given back.
#include "engine/kv/kv_transaction.h"

#include <string>
#include <vector>

#include "engine/kv/paged_kv_cache.h"
#include "gtest/gtest.h"

namespace crossreg {
namespace {

constexpr int kBlock = 4;

KvCacheConfig Config(bool prefix_caching) {
  return {.block_size = kBlock, .num_blocks = 16, .prefix_caching = prefix_caching};
}

std::vector<int32_t> Tokens(int n, int salt = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(100 + salt + i);
  return t;
}

// Writes and keeps `n` positions of `seq` from its length on, as a prefill forward's
// transaction would.
void Keep(KvTransaction& txn, SequenceId seq, const std::vector<int32_t>& tokens) {
  const int64_t from = txn.cache().length(seq);
  ASSERT_TRUE(txn.Reserve(seq, static_cast<int64_t>(tokens.size())).ok());
  for (int64_t p = from; p < static_cast<int64_t>(tokens.size()); ++p) {
    txn.RecordToken(seq, p, tokens[static_cast<size_t>(p)]);
  }
  ASSERT_TRUE(txn.Commit(seq, static_cast<int64_t>(tokens.size())).ok());
}

struct Case {
  std::string name;
  bool prefix_caching;
  int64_t cached_prompt;  // positions an earlier sequence left in the cache (0: none)
  int64_t attach;         // positions the new sequence asks to attach
  int64_t reserve;        // the forward's end position
  int64_t commit;         // kept length; -1: roll back
  // Expected afterwards.
  int64_t length;
  int64_t capacity;
  int used_blocks;
};

class KvTransactionTableTest : public ::testing::TestWithParam<Case> {};

TEST_P(KvTransactionTableTest, LeavesTheSequenceAndTheBlocksAsTheTableSays) {
  const Case& c = GetParam();
  PagedKvCache kv(Config(c.prefix_caching));
  const std::vector<int32_t> prompt = Tokens(16);
  if (c.cached_prompt > 0) {
    const SequenceId earlier = kv.CreateSequence();
    KvTransaction txn(kv);
    Keep(txn, earlier, std::vector<int32_t>(prompt.begin(), prompt.begin() + c.cached_prompt));
    kv.Free(earlier);
  }
  const SequenceId seq = kv.CreateSequence();
  {
    KvTransaction txn(kv);
    absl::StatusOr<int64_t> attached = txn.AttachCachedPrefix(seq, prompt, c.attach);
    ASSERT_TRUE(attached.ok()) << attached.status();
    ASSERT_TRUE(txn.Reserve(seq, c.reserve).ok());
    EXPECT_EQ(txn.open(), std::vector<SequenceId>{seq});
    EXPECT_EQ(kv.length(seq), *attached) << "Reserve does not move the length";
    for (int64_t p = *attached; p < c.reserve; ++p) txn.RecordToken(seq, p, prompt[static_cast<size_t>(p)]);
    if (c.commit >= 0) {
      ASSERT_TRUE(txn.Commit(seq, c.commit).ok());
      EXPECT_TRUE(txn.open().empty());
    }
  }  // the end of the transaction rolls back whatever is still open
  EXPECT_EQ(kv.length(seq), c.length);
  EXPECT_EQ(kv.capacity(seq), c.capacity);
  EXPECT_EQ(kv.Stats().used_blocks, c.used_blocks);
}

INSTANTIATE_TEST_SUITE_P(
    Steps, KvTransactionTableTest,
    ::testing::Values(
        // No prefix cache: a prefill chunk keeps all of its rows; a verify step keeps
        // x_last and the accepted drafts; a failed forward keeps nothing.
        Case{"PrefillKeepsItsRows", false, 0, 0, 6, 6, 6, 8, 2},
        Case{"VerifyKeepsPartOfTheRows", false, 0, 0, 10, 5, 5, 8, 2},
        Case{"RollBackKeepsTheOldLength", false, 0, 0, 10, -1, 0, 0, 0},
        // Prefix cache: 8 cached positions attach (two blocks), the forward writes on.
        Case{"AttachThenKeep", true, 8, 15, 12, 12, 12, 12, 3},
        Case{"AttachThenRollBack", true, 8, 15, 12, -1, 8, 8, 2},
        Case{"AttachIsWholeBlocksOnly", true, 8, 7, 9, 9, 9, 12, 3},
        Case{"NothingCachedAttachesNothing", true, 0, 15, 3, 3, 3, 4, 1},
        // Keeping fewer positions than attached takes the sequence's own blocks out
        // of the cache (nobody else holds them).
        Case{"ShorterThanTheAttachedPrefix", true, 8, 15, 8, 2, 2, 4, 1}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(KvTransactionTest, RollBackSkipsSequencesFreedMeanwhileAndCommitClosesOnlyItsOwn) {
  PagedKvCache kv(Config(false));
  const SequenceId a = kv.CreateSequence(), b = kv.CreateSequence();
  KvTransaction txn(kv);
  ASSERT_TRUE(txn.Reserve(a, 5).ok());
  ASSERT_TRUE(txn.Reserve(b, 3).ok());
  ASSERT_TRUE(txn.Reserve(a, 6).ok());  // a sequence is open once
  EXPECT_EQ(txn.open(), (std::vector<SequenceId>{a, b}));
  ASSERT_TRUE(txn.Commit(b, 3).ok());
  EXPECT_EQ(txn.open(), std::vector<SequenceId>{a});
  kv.Free(a);  // cancelled while the step ran
  txn.RollBack();
  EXPECT_TRUE(txn.open().empty());
  EXPECT_EQ(kv.length(b), 3);
  EXPECT_EQ(kv.Stats().used_blocks, 1);
}

TEST(KvTransactionTest, ASharedCachedBlockIsNeverGivenBack) {
  PagedKvCache kv(Config(true));
  const std::vector<int32_t> prompt = Tokens(8);
  const SequenceId first = kv.CreateSequence(), second = kv.CreateSequence();
  KvTransaction txn(kv);
  Keep(txn, first, prompt);
  absl::StatusOr<int64_t> attached = txn.AttachCachedPrefix(second, prompt, 8);
  ASSERT_TRUE(attached.ok());
  EXPECT_EQ(*attached, 8);
  EXPECT_EQ(kv.Stats().used_blocks, 2);  // shared, counted once
  // Shortening into a block another sequence holds is refused and changes nothing.
  EXPECT_EQ(txn.Commit(first, 2).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(kv.length(first), 8);
  kv.Free(second);
  EXPECT_TRUE(txn.Commit(first, 2).ok());  // its own again
  EXPECT_EQ(kv.length(first), 2);
}

TEST(KvTransactionTest, AttachingGoesOnlyToAnEmptySequence) {
  PagedKvCache kv(Config(true));
  const SequenceId seq = kv.CreateSequence();
  KvTransaction txn(kv);
  Keep(txn, seq, Tokens(3));
  EXPECT_EQ(txn.AttachCachedPrefix(seq, Tokens(8), 8).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(txn.Reserve(999, 1).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace crossreg
