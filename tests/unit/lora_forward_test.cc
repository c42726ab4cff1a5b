// The shared draft/verify forward: predictive rows use base + LoRA, never disturb
// control rows, and leave the KV cache as AR decoding would.
#include <cmath>

#include "engine/decoding/sequence_decoder.h"
#include "engine/model/random_model.h"
#include "gtest/gtest.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

using testing::MakeEngine;
using testing::TinyConfig;

float MaxAbsDiff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// A new sequence with `prefix` in the cache.
SequenceId CachedSequence(testing::EngineUnderTest& e, const std::vector<int32_t>& prefix) {
  const SequenceId seq = e.kv->CreateSequence();
  ForwardBatch b;
  for (size_t p = 0; p < prefix.size(); ++p)
    b.rows.push_back({.seq = seq, .position = static_cast<int32_t>(p), .token = prefix[p]});
  std::vector<float> logits;
  if (!b.rows.empty()) {
    EXPECT_TRUE(e.backend->Forward(b, *e.kv, logits).ok());
  }
  return seq;
}

// Prefills `prefix` into a new sequence, then runs `rows` (control or predictive)
// on top and returns their logits.
std::vector<float> RunOnPrefix(testing::EngineUnderTest& e, const std::vector<int32_t>& prefix,
                               const std::vector<int32_t>& tokens, bool predictive) {
  const SequenceId seq = CachedSequence(e, prefix);
  ForwardBatch b;
  std::vector<float> logits;
  for (size_t i = 0; i < tokens.size(); ++i) {
    b.rows.push_back({.seq = seq,
                      .position = static_cast<int32_t>(prefix.size() + i),
                      .token = tokens[i],
                      .want_logits = true,
                      .predictive = predictive});
  }
  EXPECT_TRUE(e.backend->Forward(b, *e.kv, logits).ok());
  e.kv->Free(seq);
  return logits;
}

const std::vector<int32_t> kPrefix = {5, 17, 3, 40, 2, 9, 33};
const std::vector<int32_t> kRows = {11, 0, 12, 60, 7};

TEST(LoraForwardTest, ZeroBAdapterGivesExactlyTheBaseLogits) {
  auto model = MakeRandomModel(TinyConfig(64), {DType::kF32, 1, 1.0f});
  RandomLoraOptions lo;
  lo.zero_b = true;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  auto e = MakeEngine(*model, adapter.get());
  const auto control = RunOnPrefix(e, kPrefix, kRows, false);
  const auto predictive = RunOnPrefix(e, kPrefix, kRows, true);
  ASSERT_EQ(control.size(), predictive.size());
  EXPECT_EQ(MaxAbsDiff(control.data(), predictive.data(), control.size()), 0.0f);
}

TEST(LoraForwardTest, PredictiveRowsEqualTheMergedModel) {
  auto model = MakeRandomModel(TinyConfig(64), {DType::kF32, 2, 1.0f});
  RandomLoraOptions lo;
  lo.rank = 4;
  lo.magnitude = 1.0f;
  lo.seed = 5;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  auto merged = testing::MergeLora(*model, *adapter);
  // The prefix is cached by the base model in both runs: control rows of the merged
  // model would cache merged K/V, so compare with rows only (empty prefix).
  auto e = MakeEngine(*model, adapter.get());
  auto em = MakeEngine(*merged, nullptr);
  std::vector<int32_t> all = kPrefix;
  all.insert(all.end(), kRows.begin(), kRows.end());
  const auto lora = RunOnPrefix(e, {}, all, true);
  const auto reference = RunOnPrefix(em, {}, all, false);
  EXPECT_LE(MaxAbsDiff(lora.data(), reference.data(), lora.size()), 1e-5f);
  // And the adapter does change something.
  const auto base = RunOnPrefix(e, {}, all, false);
  EXPECT_GT(MaxAbsDiff(lora.data(), base.data(), lora.size()), 1e-2f);
}

TEST(LoraForwardTest, PredictiveRowsNeverChangeOtherSequencesControlLogits) {
  auto model = MakeRandomModel(TinyConfig(64), {DType::kF32, 3, 1.0f});
  RandomLoraOptions lo;
  lo.magnitude = 5.0f;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  auto e = MakeEngine(*model, adapter.get());
  const auto alone = RunOnPrefix(e, kPrefix, kRows, false);
  // Mixed batch: sequence A verifies with control + predictive rows, B decodes.
  const SequenceId a = e.kv->CreateSequence();
  const SequenceId b = e.kv->CreateSequence();
  ForwardBatch batch;
  for (size_t p = 0; p < kPrefix.size(); ++p) {
    batch.rows.push_back({.seq = a, .position = static_cast<int32_t>(p), .token = kPrefix[p]});
    batch.rows.push_back({.seq = b, .position = static_cast<int32_t>(p), .token = kPrefix[p]});
  }
  std::vector<float> logits;
  ASSERT_TRUE(e.backend->Forward(batch, *e.kv, logits).ok());
  batch.rows.clear();
  const int32_t base = static_cast<int32_t>(kPrefix.size());
  for (int k = 0; k < 4; ++k)
    batch.rows.push_back(
        {.seq = a, .position = base - 1 + k, .token = 20 + k, .want_logits = true, .predictive = true});
  for (size_t i = 0; i < kRows.size(); ++i)
    batch.rows.push_back(
        {.seq = b, .position = base + static_cast<int32_t>(i), .token = kRows[i], .want_logits = true});
  for (int k = 0; k < 3; ++k)
    batch.rows.push_back({.seq = a, .position = base + k, .token = 30 + k, .want_logits = true});
  ASSERT_TRUE(e.backend->Forward(batch, *e.kv, logits).ok());
  const size_t V = 64;
  EXPECT_LE(MaxAbsDiff(logits.data() + 4 * V, alone.data(), alone.size()), 1e-5f);
  EXPECT_EQ(e.kv->length(a), base + 3);  // predictive rows kept no KV
  EXPECT_EQ(e.kv->length(b), base + static_cast<int64_t>(kRows.size()));
}

// Two predictive branches of one sequence in one forward are independent chains:
// each equals the same rows run alone on the prefix below its first position.
TEST(LoraForwardTest, PredictiveBranchesAreIndependentChains) {
  auto model = MakeRandomModel(TinyConfig(64), {DType::kF32, 6, 1.0f});
  RandomLoraOptions lo;
  lo.magnitude = 2.0f;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  auto e = MakeEngine(*model, adapter.get());
  const std::vector<int32_t> side = {3, 4, 5};  // branch 1, starting at position 5
  const auto main_alone = RunOnPrefix(e, kPrefix, kRows, true);
  const auto side_alone = RunOnPrefix(e, std::vector<int32_t>(kPrefix.begin(), kPrefix.begin() + 5), side, true);

  const SequenceId seq = CachedSequence(e, kPrefix);
  ForwardBatch b;
  std::vector<float> logits;
  // Interleave the branches: grouping is by (sequence, branch), not by batch order.
  const int32_t p0 = static_cast<int32_t>(kPrefix.size());
  for (size_t i = 0; i < kRows.size(); ++i) {
    b.rows.push_back({.seq = seq,
                      .position = p0 + static_cast<int32_t>(i),
                      .token = kRows[i],
                      .want_logits = true,
                      .predictive = true});
    if (i < side.size())
      b.rows.push_back({.seq = seq,
                        .position = 5 + static_cast<int32_t>(i),
                        .token = side[i],
                        .want_logits = true,
                        .predictive = true,
                        .branch = 1});
  }
  ASSERT_TRUE(e.backend->Forward(b, *e.kv, logits).ok());
  const size_t V = 64;
  size_t main_i = 0, side_i = 0;
  for (size_t r = 0; r < b.rows.size(); ++r) {
    const float* got = logits.data() + r * V;
    if (b.rows[r].branch == 0) {
      EXPECT_LE(MaxAbsDiff(got, main_alone.data() + V * main_i++, V), 1e-5f) << "main row " << r;
    } else {
      EXPECT_LE(MaxAbsDiff(got, side_alone.data() + V * side_i++, V), 1e-5f) << "side row " << r;
    }
  }
  EXPECT_EQ(e.kv->length(seq), p0);  // predictive rows keep no KV

  // Malformed branches are refused with the row named.
  b.rows = {{seq, p0, 1, true, false, 2}};
  auto s = e.backend->Forward(b, *e.kv, logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("control row cannot name a branch"), std::string::npos) << s.message();
  b.rows = {{seq, p0, 1, true, true, -1}};
  s = e.backend->Forward(b, *e.kv, logits);
  EXPECT_NE(s.message().find("negative predictive branch"), std::string::npos) << s.message();
  b.rows = {{seq, 2, 1, true, true, 3}, {seq, 4, 1, true, true, 3}};
  s = e.backend->Forward(b, *e.kv, logits);
  EXPECT_NE(s.message().find("(branch 3) must take consecutive positions"), std::string::npos) << s.message();
  e.kv->Free(seq);
}

// A branch that starts inside branch 0 forks from it: it sees branch 0's rows below
// its start as a shared prefix, exactly as if they were its own first rows.
TEST(LoraForwardTest, ForkedBranchSharesTheMainChainPrefix) {
  auto model = MakeRandomModel(TinyConfig(64), {DType::kF32, 7, 1.0f});
  RandomLoraOptions lo;
  lo.magnitude = 2.0f;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  auto e = MakeEngine(*model, adapter.get());
  const std::vector<int32_t> fork = {8, 9};  // after kRows[0], kRows[1]
  std::vector<int32_t> forked_chain = {kRows[0], kRows[1]};
  forked_chain.insert(forked_chain.end(), fork.begin(), fork.end());
  const auto main_alone = RunOnPrefix(e, kPrefix, kRows, true);
  const auto fork_alone = RunOnPrefix(e, kPrefix, forked_chain, true);

  const SequenceId seq = CachedSequence(e, kPrefix);
  ForwardBatch b;
  std::vector<float> logits;
  const int32_t p0 = static_cast<int32_t>(kPrefix.size());
  for (size_t i = 0; i < fork.size(); ++i)
    b.rows.push_back({.seq = seq,
                      .position = p0 + 2 + static_cast<int32_t>(i),
                      .token = fork[i],
                      .want_logits = true,
                      .predictive = true,
                      .branch = 1});
  for (size_t i = 0; i < kRows.size(); ++i)
    b.rows.push_back({.seq = seq,
                      .position = p0 + static_cast<int32_t>(i),
                      .token = kRows[i],
                      .want_logits = true,
                      .predictive = true});
  ASSERT_TRUE(e.backend->Forward(b, *e.kv, logits).ok());
  const size_t V = 64;
  for (size_t i = 0; i < fork.size(); ++i) {
    EXPECT_LE(MaxAbsDiff(logits.data() + i * V, fork_alone.data() + (2 + i) * V, V), 1e-5f) << "fork row " << i;
  }
  EXPECT_LE(MaxAbsDiff(logits.data() + fork.size() * V, main_alone.data(), main_alone.size()), 1e-5f);

  // A fork past the end of branch 0, or with no branch 0, is refused.
  b.rows = {{seq, p0, 1, true, true, 0}, {seq, p0 + 2, 1, true, true, 1}};
  auto s = e.backend->Forward(b, *e.kv, logits);
  EXPECT_NE(s.message().find("no branch-0 rows of the sequence reach that position"), std::string::npos) << s.message();
  b.rows = {{seq, p0 + 1, 1, true, true, 1}};
  s = e.backend->Forward(b, *e.kv, logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s.message();
  e.kv->Free(seq);
}

// An outcome block reads the control rows of its own forward below its start (through
// the cache they were just written to) and attends all of its rows: a one-row block is
// a one-row chain, but the first row of a longer block sees the rows after it.
TEST(LoraForwardTest, OutcomeBlockReadsThisForwardsControlRowsAndAttendsBothWays) {
  const int V = 64;
  auto model = MakeRandomModel(TinyConfig(V), {DType::kF32, 9, 1.0f});
  RandomLoraOptions lo;
  lo.magnitude = 2.0f;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  auto e = MakeEngine(*model, adapter.get());
  const std::vector<int32_t> control = {11, 0, 12, 60};
  const std::vector<int32_t> block = {63, 63, 63};
  const int32_t p0 = static_cast<int32_t>(kPrefix.size());
  auto block_rows = [&](SequenceId seq, int32_t start, bool as_block) {
    std::vector<BatchRow> rows;
    for (size_t j = 0; j < block.size(); ++j)
      rows.push_back({.seq = seq,
                      .position = start + static_cast<int32_t>(j),
                      .token = block[j],
                      .want_logits = true,
                      .predictive = true,
                      .branch = 1,
                      .block = as_block});
    return rows;
  };
  // In one forward: the control rows, then a block anchored after control[1].
  const SequenceId seq = CachedSequence(e, kPrefix);
  ForwardBatch b;
  for (size_t i = 0; i < control.size(); ++i)
    b.rows.push_back(
        {.seq = seq, .position = p0 + static_cast<int32_t>(i), .token = control[i], .want_logits = true});
  const auto rows = block_rows(seq, p0 + 2, true);
  b.rows.insert(b.rows.end(), rows.begin(), rows.end());
  std::vector<float> together;
  ASSERT_TRUE(e.backend->Forward(b, *e.kv, together).ok());
  const auto control_alone = RunOnPrefix(e, kPrefix, control, false);
  EXPECT_LE(MaxAbsDiff(together.data(), control_alone.data(), control_alone.size()), 1e-5f)
      << "a block changed the control rows";

  // The same block over a cache that already holds kPrefix + control[0..1].
  std::vector<int32_t> longer = kPrefix;
  longer.insert(longer.end(), control.begin(), control.begin() + 2);
  for (bool as_block : {true, false}) {
    const SequenceId alone = CachedSequence(e, longer);
    ForwardBatch a;
    a.rows = block_rows(alone, p0 + 2, as_block);
    std::vector<float> logits;
    ASSERT_TRUE(e.backend->Forward(a, *e.kv, logits).ok());
    const float* in_forward = together.data() + control.size() * V;
    if (as_block) {
      EXPECT_LE(MaxAbsDiff(in_forward, logits.data(), logits.size()), 1e-5f) << "block vs the block over the cache";
    } else {
      EXPECT_GT(MaxAbsDiff(in_forward, logits.data(), V), 1e-3f) << "the first row did not see the rows after it";
    }
    e.kv->Free(alone);
  }

  {  // One row: block and chain agree.
    const SequenceId alone = CachedSequence(e, longer);
    std::vector<float> as_block, as_chain;
    for (bool blocked : {true, false}) {
      ForwardBatch one;
      one.rows = {block_rows(alone, p0 + 2, blocked).front()};
      ASSERT_TRUE(e.backend->Forward(one, *e.kv, blocked ? as_block : as_chain).ok());
    }
    EXPECT_LE(MaxAbsDiff(as_block.data(), as_chain.data(), V), 1e-6f);
    e.kv->Free(alone);
  }

  // Refused: a block past the sequence's positions, mixed block and chain rows, a
  // control row marked as a block.
  std::vector<float> logits;
  ForwardBatch bad;
  bad.rows = block_rows(seq, static_cast<int32_t>(e.kv->length(seq)) + 1, true);
  auto s = e.backend->Forward(bad, *e.kv, logits);
  EXPECT_NE(s.message().find("outcome block of sequence"), std::string::npos) << s.message();
  bad.rows = block_rows(seq, p0, true);
  bad.rows[1].block = false;
  s = e.backend->Forward(bad, *e.kv, logits);
  EXPECT_NE(s.message().find("mix outcome-block and chain rows"), std::string::npos) << s.message();
  bad.rows = {{.seq = seq, .position = static_cast<int32_t>(e.kv->length(seq)), .token = 1, .block = true}};
  s = e.backend->Forward(bad, *e.kv, logits);
  EXPECT_NE(s.message().find("an outcome block's rows are predictive"), std::string::npos) << s.message();
  e.kv->Free(seq);
}

// After many Cross-Regression iterations with rejections, the cache must hold what
// AR decoding of the committed tokens would: a fresh continuation row agrees.
TEST(LoraForwardTest, KvAfterCrossRegressionEqualsArCache) {
  auto model = MakeRandomModel(TinyConfig(32), {DType::kF32, 4, 3.0f});
  RandomLoraOptions lo;
  lo.magnitude = 20.0f;  // drafts are often wrong: many rejections and rollbacks
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  for (float temperature : {0.0f, 1.0f}) {
    auto e = MakeEngine(*model, adapter.get());
    GenerationRequest request;
    request.prompt_ids = {1, 2, 3};
    request.sampling.temperature = temperature;
    request.sampling.seed = 9;
    request.decoding.mode = DecodingMode::kLossless;
    request.decoding.gamma = 6;
    request.max_new_tokens = 60;
    request.stop_at_eos = false;
    ASSERT_TRUE(ValidateGenerationRequest(request, e.env).ok());
    const SequenceId seq = e.kv->CreateSequence();
    SequenceDecoder decoder(request, e.env, seq);
    ForwardBatch batch;
    ForwardOutput out;
    while (!decoder.finished()) {
      const StepPlan plan = decoder.Plan(decoder.Choose(), 64);
      batch.rows = plan.rows;
      KvTransaction transaction(*e.kv);
      ASSERT_TRUE(e.backend->Execute(batch, transaction, out).ok());
      absl::StatusOr<StepOutcome> step = decoder.OnForward(plan, LogitRows(out.logits, out.summaries));
      ASSERT_TRUE(step.ok()) << step.status();
      ASSERT_TRUE(transaction.Commit(decoder.sequence(), step->kv_length).ok());
    }
    const auto& tokens = decoder.tokens();
    ASSERT_EQ(e.kv->length(seq), static_cast<int64_t>(tokens.size()) - 1);
    EXPECT_LT(decoder.stats().accepted, decoder.stats().drafted);  // there were rejections
    // Probe: the newest token's row on the XR cache vs on a cache built by AR prefill.
    ForwardBatch probe;
    probe.rows.push_back(
        {.seq = seq, .position = static_cast<int32_t>(tokens.size() - 1), .token = tokens.back(), .want_logits = true});
    std::vector<float> xr_logits;
    ASSERT_TRUE(e.backend->Forward(probe, *e.kv, xr_logits).ok());
    std::vector<int32_t> prefix(tokens.begin(), tokens.end() - 1);
    const auto ar_logits = RunOnPrefix(e, prefix, {tokens.back()}, false);
    EXPECT_LE(MaxAbsDiff(xr_logits.data(), ar_logits.data(), xr_logits.size()), 1e-5f) << "T=" << temperature;
    e.kv->Free(seq);
    EXPECT_EQ(e.kv->Stats().used_blocks, 0);
  }
}

}  // namespace
}  // namespace crossreg
