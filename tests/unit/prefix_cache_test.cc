// The prefix cache's bookkeeping (engine/kv/paged_kv_cache.h, engine/kv/kv_prefix_index.h):
// block matching, reference counts, eviction order, hash collisions, stale chains.
#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "engine/kv/kv_prefix_index.h"
#include "engine/kv/kv_transaction.h"
#include "engine/kv/paged_kv_cache.h"
#include "gtest/gtest.h"

namespace crossreg {
namespace {

constexpr int kBlock = 4;

KvCacheConfig Caching(int num_blocks, int hash_bits = 64) {
  return {.block_size = kBlock, .num_blocks = num_blocks, .prefix_caching = true, .prefix_hash_bits = hash_bits};
}

std::vector<int32_t> Iota(int n, int32_t first) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Runs `tokens` through a sequence as a forward would: attaches what is cached (at
// most all but the last token), reserves, records and commits the rest. Returns the
// cached positions it started from.
int64_t Prefill(PagedKvCache& kv, SequenceId seq, const std::vector<int32_t>& tokens) {
  KvTransaction txn(kv);
  const int64_t cached = txn.AttachCachedPrefix(seq, tokens, static_cast<int64_t>(tokens.size()) - 1).value();
  EXPECT_TRUE(txn.Reserve(seq, static_cast<int64_t>(tokens.size())).ok());
  for (size_t p = static_cast<size_t>(cached); p < tokens.size(); ++p) {
    txn.RecordToken(seq, static_cast<int64_t>(p), tokens[p]);
  }
  EXPECT_TRUE(txn.Commit(seq, static_cast<int64_t>(tokens.size())).ok());
  return cached;
}

// Every block is free, evictable, or held; a held block's count is its holders.
void ExpectPrefixCacheConsistent(const PagedKvCache& kv, const std::vector<SequenceId>& live) {
  std::map<int32_t, int> holders;
  for (SequenceId seq : live) {
    for (int32_t b : kv.block_table(seq)) ++holders[b];
  }
  for (const auto& [block, n] : holders) EXPECT_EQ(kv.refs(block), n) << "block " << block;
  const KvCacheStats stats = kv.Stats();
  EXPECT_EQ(stats.used_blocks, static_cast<int>(holders.size()));
  EXPECT_EQ(stats.used_blocks + kv.free_blocks(), kv.config().num_blocks) << "blocks lost or duplicated";
  EXPECT_EQ(stats.free_blocks + stats.evictable_blocks, kv.free_blocks());
}

TEST(PrefixCacheTest, OnlyFullCommittedBlocksAreSharedAndTheLastTokenIsAlwaysComputed) {
  PagedKvCache kv(Caching(16));
  KvTransaction txn(kv);
  const std::vector<int32_t> prompt = Iota(10, 100);  // 2 full blocks + 2 tokens
  const SequenceId a = kv.CreateSequence();
  EXPECT_EQ(Prefill(kv, a, prompt), 0);
  EXPECT_EQ(kv.Stats().cached_blocks, 2) << "the partial third block stays private";

  const SequenceId b = kv.CreateSequence();
  EXPECT_EQ(Prefill(kv, b, prompt), 8);
  EXPECT_EQ(kv.block_table(b)[0], kv.block_table(a)[0]);
  EXPECT_EQ(kv.block_table(b)[1], kv.block_table(a)[1]);
  EXPECT_NE(kv.block_table(b)[2], kv.block_table(a)[2]);
  EXPECT_EQ(kv.refs(kv.block_table(a)[0]), 2);
  ExpectPrefixCacheConsistent(kv, {a, b});

  // A prompt of exactly two blocks: its last token must be computed, so only the first
  // block can come from the cache.
  const SequenceId c = kv.CreateSequence();
  EXPECT_EQ(Prefill(kv, c, Iota(8, 100)), 4);
  ExpectPrefixCacheConsistent(kv, {a, b, c});
}

TEST(PrefixCacheTest, MatchingStopsAtTheFirstDifferentBlock) {
  PagedKvCache kv(Caching(32));
  KvTransaction txn(kv);
  const SequenceId a = kv.CreateSequence();
  Prefill(kv, a, Iota(17, 0));  // 4 full blocks
  std::vector<int32_t> other = Iota(17, 0);
  other[9] = 999;  // block 2 differs
  EXPECT_EQ(kv.MatchPrefix(other, 16).positions, 8);
  other = Iota(17, 0);
  other[0] = 999;
  EXPECT_EQ(kv.MatchPrefix(other, 16).positions, 0) << "a later block never matches after a different one";
  EXPECT_EQ(kv.MatchPrefix(Iota(17, 0), 15).positions, 12) << "max_positions caps the match to whole blocks";
  EXPECT_EQ(kv.MatchPrefix(Iota(17, 0), 16).positions, 16);
}

TEST(PrefixCacheTest, FreedBlocksStayCachedAndAreEvictedLeastRecentlyUsedTailFirst) {
  PagedKvCache kv(Caching(6));
  KvTransaction txn(kv);
  const SequenceId a = kv.CreateSequence();
  Prefill(kv, a, Iota(13, 0));  // blocks a0 a1 a2 full, a3 partial
  const std::vector<int32_t> a_blocks = kv.block_table(a);
  kv.Free(a);
  KvCacheStats stats = kv.Stats();
  EXPECT_EQ(stats.used_blocks, 0);
  EXPECT_EQ(stats.cached_blocks, 3);
  EXPECT_EQ(stats.evictable_blocks, 3);
  EXPECT_EQ(kv.free_blocks(), 6) << "cached blocks nobody holds count as free room";

  // Take 4 blocks: the 3 free ones first, then one eviction: a's last full block.
  const SequenceId b = kv.CreateSequence();
  ASSERT_TRUE(txn.Reserve(b, 16).ok());
  EXPECT_EQ(kv.Stats().cached_blocks, 2);
  EXPECT_EQ(kv.MatchPrefix(Iota(13, 0), 12).positions, 8) << "the prefix outlives the tail";
  const std::vector<int32_t>& b_blocks = kv.block_table(b);
  EXPECT_NE(std::find(b_blocks.begin(), b_blocks.end(), a_blocks[2]), b_blocks.end());
  // One more block: a1 goes next (the tail before the head).
  ASSERT_TRUE(txn.Reserve(b, 20).ok());
  EXPECT_EQ(kv.MatchPrefix(Iota(13, 0), 12).positions, 4);
  ExpectPrefixCacheConsistent(kv, {b});
  // Full: the last cached block is taken; then nothing is left.
  ASSERT_TRUE(txn.Reserve(b, 24).ok());
  EXPECT_EQ(kv.Stats().cached_blocks, 0);
  EXPECT_EQ(txn.Reserve(b, 28).code(), absl::StatusCode::kResourceExhausted);
  ExpectPrefixCacheConsistent(kv, {b});
}

TEST(PrefixCacheTest, AHitRefreshesABlockInTheEvictionOrder) {
  PagedKvCache kv(Caching(4));
  KvTransaction txn(kv);
  const SequenceId a = kv.CreateSequence();
  Prefill(kv, a, Iota(5, 0));  // one cached block
  kv.Free(a);
  const SequenceId b = kv.CreateSequence();
  Prefill(kv, b, Iota(5, 50));  // another
  kv.Free(b);
  // Reuse a's block: it becomes the most recently released.
  const SequenceId c = kv.CreateSequence();
  EXPECT_EQ(Prefill(kv, c, Iota(5, 0)), 4);
  kv.Free(c);
  // Two blocks are free; the third allocation evicts the least recently used: b's.
  const SequenceId d = kv.CreateSequence();
  ASSERT_TRUE(txn.Reserve(d, 12).ok());
  EXPECT_EQ(kv.MatchPrefix(Iota(5, 0), 4).positions, 4);
  EXPECT_EQ(kv.MatchPrefix(Iota(5, 50), 4).positions, 0);
  ExpectPrefixCacheConsistent(kv, {d});
}

TEST(PrefixCacheTest, HashCollisionsNeverMatchDifferentTokens) {
  // Zero key bits: every block lands in one bucket, so only the comparison of tokens
  // and parents tells them apart.
  PagedKvCache kv(Caching(64, /*hash_bits=*/0));
  KvTransaction txn(kv);
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SequenceId> live;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> p(13);
    for (auto& t : p) t = static_cast<int32_t>(rng() % 3);  // few symbols: many shared blocks
    prompts.push_back(p);
    const SequenceId seq = kv.CreateSequence();
    const int64_t cached = Prefill(kv, seq, p);
    // The hit is the longest whole-block prefix shared with an earlier prompt.
    int64_t best = 0;
    for (int j = 0; j < i; ++j) {
      int64_t common = 0;
      while (common < 12 && prompts[static_cast<size_t>(j)][static_cast<size_t>(common)] == p[static_cast<size_t>(common)]) ++common;
      best = std::max(best, common / kBlock * kBlock);
    }
    EXPECT_EQ(cached, best) << "prompt " << i;
    live.push_back(seq);
  }
  ExpectPrefixCacheConsistent(kv, live);
  // Same block tokens after a different parent: no match.
  std::vector<int32_t> shifted = {9, 9, 9, 9};
  shifted.insert(shifted.end(), prompts[0].begin(), prompts[0].begin() + 5);
  EXPECT_EQ(kv.MatchPrefix(shifted, 8).positions, 0);
}

TEST(PrefixCacheTest, ChildrenOfAnEvictedBlockAreUnreachable) {
  PagedKvCache kv(Caching(4, /*hash_bits=*/0));
  KvTransaction txn(kv);
  const SequenceId a = kv.CreateSequence();
  Prefill(kv, a, Iota(9, 0));  // blocks 0 and 1 cached, 2 partial
  const int32_t first = kv.block_table(a)[0];
  kv.Free(a);
  // Evict until the first block goes; its block id comes back holding other tokens.
  const SequenceId b = kv.CreateSequence();
  ASSERT_TRUE(txn.Reserve(b, 16).ok());  // takes the free block, then both cached ones
  ASSERT_TRUE(std::find(kv.block_table(b).begin(), kv.block_table(b).end(), first) != kv.block_table(b).end());
  EXPECT_EQ(kv.MatchPrefix(Iota(9, 0), 8).positions, 0);
  kv.Free(b);
  ExpectPrefixCacheConsistent(kv, {});
}

TEST(PrefixCacheTest, ConcurrentDuplicatesStayPrivateAndBothReadTheirOwnBlocks) {
  PagedKvCache kv(Caching(16));
  KvTransaction txn(kv);
  const std::vector<int32_t> prompt = Iota(9, 0);
  // Both admitted before either committed: neither hits.
  const SequenceId a = kv.CreateSequence();
  const SequenceId b = kv.CreateSequence();
  ASSERT_EQ(txn.AttachCachedPrefix(a, prompt, 8).value(), 0);
  ASSERT_EQ(txn.AttachCachedPrefix(b, prompt, 8).value(), 0);
  for (SequenceId s : {a, b}) {
    ASSERT_TRUE(txn.Reserve(s, 9).ok());
    for (int p = 0; p < 9; ++p) txn.RecordToken(s, p, prompt[static_cast<size_t>(p)]);
    ASSERT_TRUE(txn.Commit(s, 9).ok());
  }
  EXPECT_EQ(kv.Stats().cached_blocks, 2) << "a's blocks; b's equal ones stay private";
  kv.Free(b);
  EXPECT_EQ(kv.Stats().evictable_blocks, 0) << "b's private blocks went to the free list";
  const SequenceId c = kv.CreateSequence();
  EXPECT_EQ(Prefill(kv, c, prompt), 8);
  EXPECT_EQ(kv.block_table(c)[0], kv.block_table(a)[0]);
  ExpectPrefixCacheConsistent(kv, {a, c});
}

TEST(PrefixCacheTest, ACommitCannotReachBackIntoSharedBlocks) {
  PagedKvCache kv(Caching(16));
  KvTransaction txn(kv);
  const SequenceId a = kv.CreateSequence();
  Prefill(kv, a, Iota(10, 0));
  const SequenceId b = kv.CreateSequence();
  EXPECT_EQ(Prefill(kv, b, Iota(6, 0)), 4);  // shares a's first block
  EXPECT_EQ(txn.Commit(a, 3).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(kv.length(a), 10);
  EXPECT_TRUE(txn.Commit(a, 9).ok()) << "the private partial block may shrink";
  // a alone holds its second block: it leaves the cache and a may rewrite it.
  ASSERT_TRUE(txn.Commit(a, 6).ok());
  EXPECT_EQ(kv.Stats().cached_blocks, 1);
  EXPECT_EQ(kv.MatchPrefix(Iota(10, 0), 9).positions, 4);
  ASSERT_TRUE(txn.Reserve(a, 9).ok());
  for (int p = 6; p < 9; ++p) txn.RecordToken(a, p, 50 + p);
  ASSERT_TRUE(txn.Commit(a, 9).ok());
  std::vector<int32_t> rewritten = Iota(6, 0);
  for (int p = 6; p < 9; ++p) rewritten.push_back(50 + p);
  EXPECT_EQ(kv.MatchPrefix(rewritten, 9).positions, 8) << "the rewritten block is cached under its new tokens";
  EXPECT_EQ(kv.MatchPrefix(Iota(10, 0), 9).positions, 4);
  ExpectPrefixCacheConsistent(kv, {a, b});
}

TEST(PrefixCacheTest, DecodeStepsExtendTheChainAsBlocksFill) {
  PagedKvCache kv(Caching(16));
  KvTransaction txn(kv);
  const SequenceId a = kv.CreateSequence();
  std::vector<int32_t> tokens = Iota(5, 0);
  Prefill(kv, a, tokens);
  // Verify steps: reserve 1 + gamma rows, keep some, record what each row wrote.
  for (int step = 0; step < 6; ++step) {
    const int64_t length = kv.length(a);
    ASSERT_TRUE(txn.Reserve(a, length + 4).ok());
    for (int k = 0; k < 4; ++k) txn.RecordToken(a, length + k, 1000 + step * 10 + k);  // drafts
    const int keep = 1 + step % 3;
    for (int k = 0; k < keep; ++k) tokens.push_back(1000 + step * 10 + k);
    ASSERT_TRUE(txn.Commit(a, length + keep).ok());
  }
  const int64_t full = static_cast<int64_t>(tokens.size()) / kBlock;
  EXPECT_EQ(kv.Stats().cached_blocks, full);
  EXPECT_EQ(kv.MatchPrefix(tokens, static_cast<int64_t>(tokens.size())).positions, full * kBlock);
  // A rejected draft recorded past the kept length is never part of a cached block.
  std::vector<int32_t> wrong = tokens;
  wrong[static_cast<size_t>(full * kBlock) - 1] = 1003;
  EXPECT_LT(kv.MatchPrefix(wrong, static_cast<int64_t>(wrong.size())).positions, full * kBlock);
}

TEST(PrefixCacheTest, RandomWorkloadKeepsEveryInvariant) {
  PagedKvCache kv(Caching(24, /*hash_bits=*/2));
  KvTransaction txn(kv);
  std::mt19937 rng(11);
  std::vector<SequenceId> live;
  std::map<SequenceId, std::vector<int32_t>> tokens;
  for (int iter = 0; iter < 2000; ++iter) {
    const uint32_t op = rng() % 4;
    if (op == 0 || live.empty()) {
      std::vector<int32_t> p(1 + rng() % 14);
      for (auto& t : p) t = static_cast<int32_t>(rng() % 2);
      const SequenceId seq = kv.CreateSequence();
      const int64_t cached = txn.AttachCachedPrefix(seq, p, static_cast<int64_t>(p.size()) - 1).value();
      if (!txn.Reserve(seq, static_cast<int64_t>(p.size())).ok()) {
        kv.Free(seq);
        continue;
      }
      for (size_t i = static_cast<size_t>(cached); i < p.size(); ++i) txn.RecordToken(seq, static_cast<int64_t>(i), p[i]);
      ASSERT_TRUE(txn.Commit(seq, static_cast<int64_t>(p.size())).ok());
      live.push_back(seq);
      tokens[seq] = p;
    } else if (op == 1) {
      const size_t i = rng() % live.size();
      kv.Free(live[i]);
      tokens.erase(live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      const SequenceId seq = live[rng() % live.size()];
      const int64_t length = kv.length(seq);
      if (!txn.Reserve(seq, length + 3).ok()) continue;
      const int keep = static_cast<int>(rng() % 4);
      for (int k = 0; k < 3; ++k) txn.RecordToken(seq, length + k, static_cast<int32_t>(rng() % 2));
      // What was kept is what the rows wrote.
      ASSERT_TRUE(txn.Commit(seq, length).ok());
      ASSERT_TRUE(txn.Reserve(seq, length + keep).ok());
      for (int k = 0; k < keep; ++k) {
        const int32_t t = static_cast<int32_t>(rng() % 2);
        txn.RecordToken(seq, length + k, t);
        tokens[seq].push_back(t);
      }
      ASSERT_TRUE(txn.Commit(seq, length + keep).ok());
    }
    // Sequences that hold the same full block hold the same tokens up to its end.
    std::map<int32_t, std::vector<int32_t>> prefix_of;
    for (SequenceId seq : live) {
      const auto& t = tokens[seq];
      const auto& table = kv.block_table(seq);
      for (size_t b = 0; (b + 1) * kBlock <= t.size(); ++b) {
        std::vector<int32_t> prefix(t.begin(), t.begin() + static_cast<std::ptrdiff_t>((b + 1) * kBlock));
        auto [it, first] = prefix_of.try_emplace(table[b], prefix);
        if (!first) {
          ASSERT_EQ(it->second, prefix) << "block " << table[b] << " shared by different prefixes";
        }
      }
    }
    ExpectPrefixCacheConsistent(kv, live);
  }
}

TEST(PrefixCacheTest, OffByDefault) {
  PagedKvCache kv({kBlock, 8});
  KvTransaction txn(kv);
  EXPECT_FALSE(kv.prefix_caching());
  const SequenceId a = kv.CreateSequence();
  Prefill(kv, a, Iota(9, 0));
  kv.Free(a);
  EXPECT_EQ(kv.Stats().cached_blocks, 0);
  const SequenceId b = kv.CreateSequence();
  EXPECT_EQ(Prefill(kv, b, Iota(9, 0)), 0);
}

TEST(PrefixCacheTest, AttachingToASequenceThatHoldsBlocksIsRefused) {
  PagedKvCache kv(Caching(8));
  KvTransaction txn(kv);
  const SequenceId a = kv.CreateSequence();
  ASSERT_TRUE(txn.Reserve(a, 1).ok());
  EXPECT_EQ(txn.AttachCachedPrefix(a, Iota(9, 0), 8).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(KvPrefixIndexTest, FindComparesParentAndTokens) {
  KvPrefixIndex index(8, 2, /*hash_bits=*/1);
  const std::vector<int32_t> x = {1, 2}, y = {3, 4};
  const uint64_t kx = index.Key(index.RootKey(), x);
  ASSERT_TRUE(index.Insert(0, kx, KvPrefixIndex::kNoParent, x));
  EXPECT_FALSE(index.Insert(1, kx, KvPrefixIndex::kNoParent, x)) << "an equal entry exists";
  const uint64_t ky = index.Key(kx, y);
  ASSERT_TRUE(index.Insert(1, ky, 0, y));
  EXPECT_EQ(index.Find(ky, 0, y), 1);
  EXPECT_EQ(index.Find(ky, 2, y), -1) << "another parent";
  EXPECT_EQ(index.Find(ky, 0, x), -1) << "other tokens";
  index.Erase(0);
  EXPECT_EQ(index.Find(ky, 0, y), -1) << "the parent's identity ended";
  ASSERT_TRUE(index.Insert(0, kx, KvPrefixIndex::kNoParent, x));
  EXPECT_EQ(index.Find(ky, 0, y), -1) << "the same block id registered again is a new parent";
  EXPECT_EQ(index.size(), 2);
}

}  // namespace
}  // namespace crossreg
