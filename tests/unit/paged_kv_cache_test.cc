#include "engine/kv/kv_transaction.h"
#include "engine/kv/paged_kv_cache.h"

#include <algorithm>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace crossreg {
namespace {

// Every block is either free or held by exactly one live sequence, and each live
// sequence holds exactly the blocks its committed or reserved positions need.
void ExpectConsistent(const PagedKvCache& kv, const std::vector<SequenceId>& live) {
  std::set<int32_t> held;
  size_t total = 0;
  for (SequenceId seq : live) {
    ASSERT_TRUE(kv.IsLive(seq));
    const auto& table = kv.block_table(seq);
    total += table.size();
    held.insert(table.begin(), table.end());
    EXPECT_LE(kv.length(seq), kv.capacity(seq)) << "sequence " << seq;
    EXPECT_EQ(kv.capacity(seq), static_cast<int64_t>(table.size()) * kv.config().block_size);
  }
  EXPECT_EQ(held.size(), total) << "a block is held by two sequences";
  EXPECT_EQ(static_cast<int>(total) + kv.free_blocks(), kv.config().num_blocks) << "blocks lost or duplicated";
  for (int32_t b : held) EXPECT_TRUE(b >= 0 && b < kv.config().num_blocks);
}

TEST(KvBlockArithmeticTest, BlocksForAndExtraBlocks) {
  struct Case {
    int64_t positions, held;
    int block_size;
    int64_t blocks_for, extra;
  };
  const Case cases[] = {
      {0, 0, 4, 0, 0},   {1, 0, 4, 1, 1},   {4, 0, 4, 1, 1},
      {5, 1, 4, 2, 1},   {13, 1, 4, 4, 3},  {3, 3, 4, 1, 0},  // holds more than it needs: nothing extra
      {16, 0, 16, 1, 1}, {17, 1, 16, 2, 1},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(KvBlocksFor(c.positions, c.block_size), c.blocks_for) << c.positions << " / " << c.block_size;
    EXPECT_EQ(KvExtraBlocks(c.positions, c.held, c.block_size), c.extra) << c.positions << ", held " << c.held;
  }
}

TEST(KvBlockArithmeticTest, BlocksNeededIsWhatReserveAllocates) {
  for (int block_size : {1, 3, 4, 16}) {
    PagedKvCache kv({block_size, 64});
    KvTransaction txn(kv);
    const SequenceId seq = kv.CreateSequence();
    for (int64_t want : {0, 1, 2, 5, 9, 16, 17, 40}) {
      const int before = kv.free_blocks();
      const int64_t held = static_cast<int64_t>(kv.block_table(seq).size());
      const int64_t needed = kv.BlocksNeeded(seq, want);
      ASSERT_TRUE(txn.Reserve(seq, want).ok());
      EXPECT_EQ(before - kv.free_blocks(), needed) << "block size " << block_size << ", " << want << " positions";
      EXPECT_EQ(static_cast<int64_t>(kv.block_table(seq).size()), std::max(held, KvBlocksFor(want, block_size)));
      EXPECT_GE(kv.capacity(seq), want);
    }
  }
}

TEST(PagedKvCacheTest, ReserveIsAllOrNothing) {
  PagedKvCache kv({4, 5});
  KvTransaction txn(kv);
  const SequenceId a = kv.CreateSequence();
  const SequenceId b = kv.CreateSequence();
  ASSERT_TRUE(txn.Reserve(a, 9).ok());  // 3 blocks
  EXPECT_EQ(kv.capacity(a), 12);
  // b wants 3 blocks, 2 are free: refused, and nothing changes.
  EXPECT_EQ(txn.Reserve(b, 12).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(kv.capacity(b), 0);
  EXPECT_EQ(kv.free_blocks(), 2);
  EXPECT_EQ(kv.capacity(a), 12);
  ExpectConsistent(kv, {a, b});
}

TEST(PagedKvCacheTest, CommitKeepsThePositionsAndReturnsTheBlocksPastThem) {
  struct Case {
    int64_t reserved, committed;
    int64_t length, capacity;
    int free_blocks;
    bool ok;
  };
  // Block size 4, 8 blocks; each case starts from a fresh sequence holding 3 positions.
  const Case cases[] = {
      {13, 13, 13, 16, 4, true},  // a prefill chunk: everything written is kept
      {13, 7, 7, 8, 6, true},     // a verify step: x_last + accepted drafts
      {13, 3, 3, 4, 7, true},     // nothing accepted (as a failed forward releases)
      {13, 0, 0, 0, 8, true},     // everything dropped
      {13, 17, 3, 16, 4, false},  // past the reservation: refused, nothing changes
      {13, -1, 3, 16, 4, false},
  };
  for (const Case& c : cases) {
    PagedKvCache kv({4, 8});
    KvTransaction txn(kv);
    const SequenceId seq = kv.CreateSequence();
    ASSERT_TRUE(txn.Reserve(seq, 3).ok());
    ASSERT_TRUE(txn.Commit(seq, 3).ok());
    ASSERT_TRUE(txn.Reserve(seq, c.reserved).ok());
    EXPECT_EQ(kv.length(seq), 3) << "Reserve does not move the length";
    EXPECT_EQ(txn.Commit(seq, c.committed).ok(), c.ok) << "commit " << c.committed;
    EXPECT_EQ(kv.length(seq), c.length) << "commit " << c.committed;
    EXPECT_EQ(kv.capacity(seq), c.capacity) << "commit " << c.committed;
    EXPECT_EQ(kv.free_blocks(), c.free_blocks) << "commit " << c.committed;
    ExpectConsistent(kv, {seq});
  }
}

TEST(PagedKvCacheTest, FreeReturnsEveryBlockAndIdsAreRecycled) {
  PagedKvCache kv({4, 10});
  KvTransaction txn(kv);
  std::vector<SequenceId> live;
  for (int64_t n : {5, 9, 1, 12}) {
    const SequenceId seq = kv.CreateSequence();
    ASSERT_TRUE(txn.Reserve(seq, n).ok());
    ASSERT_TRUE(txn.Commit(seq, n).ok());
    live.push_back(seq);
  }
  ExpectConsistent(kv, live);
  EXPECT_EQ(kv.Stats().num_sequences, 4);
  EXPECT_EQ(kv.Stats().cached_tokens, 27);
  kv.Free(live[1]);
  const SequenceId freed = live[1];
  live.erase(live.begin() + 1);
  ExpectConsistent(kv, live);
  EXPECT_FALSE(kv.IsLive(freed));
  EXPECT_EQ(txn.Reserve(freed, 1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(txn.Commit(freed, 0).code(), absl::StatusCode::kNotFound);
  const SequenceId again = kv.CreateSequence();
  EXPECT_EQ(again, freed);
  EXPECT_EQ(kv.length(again), 0);
  EXPECT_EQ(kv.capacity(again), 0);
  for (SequenceId seq : live) kv.Free(seq);
  kv.Free(again);
  EXPECT_EQ(kv.free_blocks(), 10);
  EXPECT_EQ(kv.Stats().num_sequences, 0);
  EXPECT_EQ(kv.Stats().cached_tokens, 0);
}

// Reserve, commit part, free, in an interleaving of many sequences: no block is ever
// shared or lost, and slots map through each sequence's own table.
TEST(PagedKvCacheTest, InterleavedSequencesNeverShareABlock) {
  PagedKvCache kv({4, 32});
  KvTransaction txn(kv);
  std::vector<SequenceId> live;
  uint32_t state = 12345;
  auto next = [&](uint32_t n) {
    state = state * 1664525u + 1013904223u;
    return (state >> 8) % n;
  };
  for (int step = 0; step < 400; ++step) {
    const uint32_t action = next(10);
    if (live.empty() || action < 2) {
      live.push_back(kv.CreateSequence());
    } else if (action < 8) {
      const SequenceId seq = live[next(static_cast<uint32_t>(live.size()))];
      const int64_t want = kv.length(seq) + 1 + next(9);
      if (!txn.Reserve(seq, want).ok()) continue;  // full: all or nothing
      ASSERT_TRUE(txn.Commit(seq, kv.length(seq) + next(static_cast<uint32_t>(want - kv.length(seq)) + 1)).ok());
    } else {
      const size_t i = next(static_cast<uint32_t>(live.size()));
      kv.Free(live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    ExpectConsistent(kv, live);
    for (SequenceId seq : live) {
      for (int64_t p = 0; p < kv.length(seq); ++p) {
        ASSERT_EQ(kv.SlotOf(seq, p), kv.block_table(seq)[static_cast<size_t>(p / 4)] * 4 + p % 4);
      }
    }
  }
}

}  // namespace
}  // namespace crossreg
