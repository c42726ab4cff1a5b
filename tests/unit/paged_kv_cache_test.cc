#include "engine/paged_kv_cache.h"

#include "gtest/gtest.h"

namespace crossreg {
namespace {

TEST(PagedKvCacheTest, ReserveAdvanceTruncateFree) {
  PagedKvCache kv({4, 5});
  const SequenceId a = kv.CreateSequence();
  const SequenceId b = kv.CreateSequence();
  ASSERT_TRUE(kv.Reserve(a, 9).ok());  // 3 blocks
  EXPECT_EQ(kv.capacity(a), 12);
  EXPECT_EQ(kv.Stats().used_blocks, 3);
  ASSERT_TRUE(kv.Advance(a, 9).ok());
  EXPECT_EQ(kv.length(a), 9);
  EXPECT_FALSE(kv.Advance(a, 4).ok());  // past capacity
  // All or nothing: b wants 3 blocks, 2 are free.
  EXPECT_EQ(kv.Reserve(b, 12).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(kv.capacity(b), 0);
  EXPECT_EQ(kv.free_blocks(), 2);
  ASSERT_TRUE(kv.Truncate(a, 4).ok());
  EXPECT_EQ(kv.length(a), 4);
  EXPECT_EQ(kv.capacity(a), 4);
  EXPECT_EQ(kv.free_blocks(), 4);
  EXPECT_FALSE(kv.Truncate(a, 5).ok());  // cannot grow by truncating
  ASSERT_TRUE(kv.Reserve(b, 12).ok());
  // Slots map through the block table.
  for (int p = 0; p < 12; ++p) {
    EXPECT_EQ(kv.SlotOf(b, p), kv.block_table(b)[p / 4] * 4 + p % 4);
  }
  KvCacheStats s = kv.Stats();
  EXPECT_EQ(s.num_sequences, 2);
  EXPECT_EQ(s.cached_tokens, 4);
  kv.Free(a);
  kv.Free(b);
  EXPECT_EQ(kv.Stats().free_blocks, 5);
  EXPECT_EQ(kv.Stats().num_sequences, 0);
  EXPECT_FALSE(kv.IsLive(a));
  EXPECT_EQ(kv.Reserve(a, 1).code(), absl::StatusCode::kNotFound);
  // Ids are recycled.
  const SequenceId c = kv.CreateSequence();
  EXPECT_TRUE(c == a || c == b);
  EXPECT_EQ(kv.length(c), 0);
}

}  // namespace
}  // namespace crossreg
