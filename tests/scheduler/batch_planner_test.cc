// The step planner as a table: how the token budget splits between decode rows and
// prefill chunks, how KV shortage picks preemption victims, and when a sequence
// can never fit.
#include "scheduler/batch_planner.h"

#include <vector>

#include "gtest/gtest.h"

namespace crossreg {
namespace {

PlannerSequence Decoding(int id, int64_t admit, int max_rows, int64_t pending, int64_t length = 8,
                         int64_t blocks = 2, int64_t last_served = -1) {
  PlannerSequence s;
  s.id = id;
  s.admit_order = admit;
  s.prefilling = false;
  s.max_decode_rows = max_rows;
  s.pending_kv_rows = pending;
  s.kv_length = length;
  s.kv_blocks = blocks;
  s.last_served_step = last_served;
  return s;
}

PlannerSequence Prefilling(int id, int64_t admit, int64_t remaining, int64_t length = 0, int64_t blocks = 0) {
  PlannerSequence s;
  s.id = id;
  s.admit_order = admit;
  s.prefilling = true;
  s.pending_kv_rows = remaining;
  s.kv_length = length;
  s.kv_blocks = blocks;
  return s;
}

std::vector<std::pair<int, int>> Pairs(const std::vector<PlannedRows>& rows) {
  std::vector<std::pair<int, int>> out;
  for (const auto& r : rows) out.emplace_back(r.id, r.rows);
  return out;
}

using P = std::vector<std::pair<int, int>>;

TEST(BatchPlannerTest, EmptyRunningGivesAnEmptyPlan) {
  const BatchPlan plan = PlanBatch({}, {512, 10, 4});
  EXPECT_TRUE(plan.empty());
  EXPECT_TRUE(plan.preempt.empty());
  EXPECT_FALSE(plan.fail.has_value());
}

TEST(BatchPlannerTest, DecodeRowsFirstThenPrefillUnderTheRemainingBudget) {
  struct Case {
    int budget;
    P decode;
    P prefill;
  };
  // Sequences: 0 AR decode (1 row), 1 Cross-Regression gamma 4 (9 rows),
  // 2 and 3 prefilling 100 rows each, admitted in that order.
  const std::vector<Case> cases = {
      {512, {{0, 1}, {1, 9}}, {{2, 100}, {3, 100}}},
      {32, {{0, 1}, {1, 9}}, {{2, 22}}},
      {10, {{0, 1}, {1, 9}}, {}},
      {5, {{0, 1}}, {{2, 4}}},  // the 9-row iteration waits for a later step
      {1, {{0, 1}}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "budget " << c.budget);
    const BatchPlan plan = PlanBatch({Decoding(0, 1, 1, 1), Decoding(1, 2, 9, 5), Prefilling(2, 3, 100),
                                      Prefilling(3, 4, 100)},
                                     {c.budget, 1000, 4});
    EXPECT_EQ(Pairs(plan.decode), c.decode);
    EXPECT_EQ(Pairs(plan.prefill), c.prefill);
    EXPECT_TRUE(plan.preempt.empty());
  }
}

TEST(BatchPlannerTest, FirstDecodeRunsEvenAboveTheBudget) {
  const BatchPlan plan = PlanBatch({Decoding(0, 1, 17, 9), Prefilling(1, 2, 10)}, {8, 1000, 4});
  EXPECT_EQ(Pairs(plan.decode), (P{{0, 17}}));
  EXPECT_TRUE(plan.prefill.empty());
}

TEST(BatchPlannerTest, PrefillProceedsInChunksStepByStep) {
  // A 50-row prompt under a 16-row budget, a 4-token block, plenty of blocks.
  PlannerSequence s = Prefilling(7, 1, 50);
  const std::vector<int> expected_chunks = {16, 16, 16, 2};
  for (int chunk : expected_chunks) {
    const BatchPlan plan = PlanBatch({s}, {16, 100, 4});
    ASSERT_EQ(Pairs(plan.prefill), (P{{7, chunk}}));
    s.kv_length += chunk;
    s.kv_blocks = (s.kv_length + 3) / 4;
    s.pending_kv_rows -= chunk;
  }
  EXPECT_EQ(s.pending_kv_rows, 0);
}

TEST(BatchPlannerTest, BudgetLeftoversRotateByLastServedStep) {
  // Three 9-row iterations, a 16-row budget: one per step, least recently served first.
  std::vector<PlannerSequence> seqs = {Decoding(0, 1, 9, 5), Decoding(1, 2, 9, 5), Decoding(2, 3, 9, 5)};
  std::vector<int> served;
  for (int step = 0; step < 6; ++step) {
    const BatchPlan plan = PlanBatch(seqs, {16, 1000, 4});
    ASSERT_EQ(plan.decode.size(), 1u);
    served.push_back(plan.decode[0].id);
    seqs[static_cast<size_t>(plan.decode[0].id)].last_served_step = step;
  }
  EXPECT_EQ(served, (std::vector<int>{0, 1, 2, 0, 1, 2}));
}

TEST(BatchPlannerTest, PrefillChunkIsCutToTheFreeBlocks) {
  // 3 free blocks of 4 plus 2 free slots in its own last block.
  const BatchPlan plan = PlanBatch({Prefilling(0, 1, 40, 6, 2)}, {512, 3, 4});
  EXPECT_EQ(Pairs(plan.prefill), (P{{0, 14}}));
}

TEST(BatchPlannerTest, KvShortagePreemptsTheMostRecentlyAdmitted) {
  // Both decode sequences sit at a block boundary and need one block each; one is free.
  const BatchPlan plan =
      PlanBatch({Decoding(0, 5, 1, 1, 8, 2), Decoding(1, 9, 1, 1, 8, 2)}, {512, 1, 4});
  EXPECT_EQ(plan.preempt, (std::vector<int>{1}));
  EXPECT_EQ(Pairs(plan.decode), (P{{0, 1}}));
  EXPECT_FALSE(plan.fail.has_value());
}

TEST(BatchPlannerTest, PreemptionFreesTheVictimsBlocksForTheOthers) {
  // The oldest needs 3 blocks, none free: the two newer ones (holding 2 each) go.
  const BatchPlan plan = PlanBatch({Decoding(0, 1, 9, 9, 8, 2), Decoding(1, 2, 1, 1, 6, 2),
                                    Prefilling(2, 3, 20, 5, 2)},
                                   {512, 0, 4});
  EXPECT_EQ(plan.preempt, (std::vector<int>{2, 1}));
  EXPECT_EQ(Pairs(plan.decode), (P{{0, 9}}));
  EXPECT_TRUE(plan.prefill.empty());
}

TEST(BatchPlannerTest, SharedPrefixBlocksAreNotCountedAsFreedByAPreemption) {
  // The oldest needs 3 blocks, none free. The newest holds 3 blocks, but 2 of them are
  // prefix blocks another sequence holds too: preempting it frees 1, so the next
  // newest goes as well. Unshared, its 3 blocks would have been enough.
  PlannerSequence newest = Decoding(1, 4, 1, 1, 6, 3);
  newest.freeable_blocks = 1;
  const BatchPlan shared = PlanBatch({Decoding(0, 1, 9, 9, 8, 2), Prefilling(2, 3, 20, 5, 2), newest}, {512, 0, 4});
  EXPECT_EQ(shared.preempt, (std::vector<int>{1, 2}));
  EXPECT_EQ(Pairs(shared.decode), (P{{0, 9}}));
  newest.freeable_blocks = -1;
  const BatchPlan alone = PlanBatch({Decoding(0, 1, 9, 9, 8, 2), Prefilling(2, 3, 20, 5, 2), newest}, {512, 0, 4});
  EXPECT_EQ(alone.preempt, (std::vector<int>{1}));
}

TEST(BatchPlannerTest, StalledPrefillsPreemptUntilOneCanProgress) {
  // Two half-done prefills fill the cache: nothing can run, so the newer yields.
  const BatchPlan plan = PlanBatch({Prefilling(0, 1, 10, 8, 2), Prefilling(1, 2, 10, 8, 2)}, {512, 0, 4});
  EXPECT_EQ(plan.preempt, (std::vector<int>{1}));
  EXPECT_EQ(Pairs(plan.prefill), (P{{0, 8}}));
}

TEST(BatchPlannerTest, ASequenceThatCannotFitAloneFails) {
  // Alone, holding every block of a 4-block cache, it needs one more.
  BatchPlan plan = PlanBatch({Decoding(3, 1, 9, 5, 14, 4)}, {512, 0, 4});
  EXPECT_TRUE(plan.empty());
  ASSERT_TRUE(plan.fail.has_value());
  EXPECT_EQ(*plan.fail, 3);
  // With another sequence, that one is preempted first, then it fails.
  plan = PlanBatch({Decoding(3, 1, 9, 5, 14, 4), Prefilling(4, 2, 10, 0, 0)}, {512, 0, 4});
  EXPECT_EQ(plan.preempt, (std::vector<int>{4}));
  ASSERT_TRUE(plan.fail.has_value());
  EXPECT_EQ(*plan.fail, 3);
}

}  // namespace
}  // namespace crossreg
