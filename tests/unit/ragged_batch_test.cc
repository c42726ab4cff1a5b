// One ragged forward over many sequences equals running each alone, and KV
// rollback leaves the cache as if the rolled-back rows never ran.
#include <cmath>
#include <map>

#include "engine/cpu/cpu_backend.h"
#include "engine/model/model_loader.h"
#include "engine/model/random_model.h"
#include "engine/sampler.h"
#include "gtest/gtest.h"
#include "tests/testing/test_paths.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

ModelConfig TinyGqaConfig() { return testing::TinyConfig(97); }

float MaxAbsDiff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

std::vector<std::vector<int32_t>> MakeSequences(int vocab, const std::vector<int>& lengths) {
  Rng rng(42);
  std::vector<std::vector<int32_t>> seqs;
  for (int len : lengths) {
    std::vector<int32_t> s;
    for (int i = 0; i < len; ++i) s.push_back(static_cast<int32_t>(rng.Next() % vocab));
    seqs.push_back(s);
  }
  return seqs;
}

// Runs every sequence alone, one forward for the whole sequence: logits of every row.
std::vector<std::vector<float>> RunAlone(Backend& backend, PagedKvCache& kv,
                                         const std::vector<std::vector<int32_t>>& seqs) {
  std::vector<std::vector<float>> out;
  for (const auto& s : seqs) {
    const SequenceId id = kv.CreateSequence();
    ForwardBatch b;
    for (size_t p = 0; p < s.size(); ++p)
      b.rows.push_back({.seq = id, .position = static_cast<int32_t>(p), .token = s[p], .want_logits = true});
    std::vector<float> logits;
    EXPECT_TRUE(backend.Forward(b, kv, logits).ok());
    out.push_back(logits);
    kv.Free(id);
  }
  return out;
}

void CheckRaggedEqualsAlone(const Model& model, int block_size) {
  const std::vector<int> lengths = {3, 7, 1, 12, 5, 9, 2, 16};
  const auto seqs = MakeSequences(model.config.vocab_size, lengths);
  const int vocab = model.config.vocab_size;
  CpuBackendOptions options;
  options.kv = {block_size, 64};
  auto backend = CreateCpuBackend(model, options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  PagedKvCache kv(options.kv);
  const auto alone = RunAlone(**backend, kv, seqs);

  // Step 1: the first half of every sequence, all in one ragged batch, interleaved.
  // Step 2: the rest, again all at once. Rows of a sequence are appended in order.
  std::vector<SequenceId> ids;
  for (size_t i = 0; i < seqs.size(); ++i) ids.push_back(kv.CreateSequence());
  for (int step = 0; step < 2; ++step) {
    ForwardBatch b;
    std::vector<std::pair<size_t, size_t>> who;  // (sequence, position) per logit row
    for (size_t i = 0; i < seqs.size(); ++i) {
      const size_t half = seqs[i].size() / 2;
      const size_t begin = step == 0 ? 0 : half;
      const size_t end = step == 0 ? half : seqs[i].size();
      for (size_t p = begin; p < end; ++p) {
        b.rows.push_back(
            {.seq = ids[i], .position = static_cast<int32_t>(p), .token = seqs[i][p], .want_logits = true});
        who.emplace_back(i, p);
      }
    }
    std::vector<float> logits;
    ASSERT_TRUE((*backend)->Forward(b, kv, logits).ok());
    for (size_t j = 0; j < who.size(); ++j) {
      const auto [i, p] = who[j];
      EXPECT_LE(MaxAbsDiff(logits.data() + j * vocab, alone[i].data() + p * vocab, vocab), 1e-5f)
          << "sequence " << i << " position " << p;
    }
  }
  for (SequenceId id : ids) kv.Free(id);
  EXPECT_EQ(kv.Stats().free_blocks, kv.Stats().total_blocks);
  EXPECT_EQ(kv.Stats().num_sequences, 0);
}

TEST(RaggedBatchTest, RandomGqaModelRaggedEqualsAlone) {
  auto model = MakeRandomModel(TinyGqaConfig(), {DType::kF32, 7, 1.0f});
  CheckRaggedEqualsAlone(*model, 4);
}

TEST(RaggedBatchTest, Bf16WeightsRaggedEqualsAlone) {
  auto model = MakeRandomModel(TinyGqaConfig(), {DType::kBF16, 8, 1.0f});
  CheckRaggedEqualsAlone(*model, 16);
}

TEST(RaggedBatchTest, Stories260KRaggedEqualsAlone) {
  auto model = LoadModel(testing::Stories260KGguf());
  ASSERT_TRUE(model.ok()) << model.status();
  CheckRaggedEqualsAlone(**model, 4);
}

TEST(RaggedBatchTest, RollbackThenReappendEqualsNeverRollingBack) {
  auto model = MakeRandomModel(TinyGqaConfig(), {DType::kF32, 9, 1.0f});
  const int vocab = model->config.vocab_size;
  CpuBackendOptions options;
  options.kv = {4, 32};
  auto backend = CreateCpuBackend(*model, options);
  ASSERT_TRUE(backend.ok());
  PagedKvCache kv(options.kv);
  const auto tokens = MakeSequences(vocab, {10, 6, 6});
  const auto& prefix = tokens[0];
  const auto& rejected = tokens[1];
  const auto& accepted = tokens[2];
  auto append = [&](SequenceId id, const std::vector<int32_t>& t, std::vector<float>& logits) {
    ForwardBatch b;
    const int32_t start = static_cast<int32_t>(kv.length(id));
    for (size_t i = 0; i < t.size(); ++i)
      b.rows.push_back({.seq = id, .position = start + static_cast<int32_t>(i), .token = t[i], .want_logits = true});
    ASSERT_TRUE((*backend)->Forward(b, kv, logits).ok());
  };
  std::vector<float> logits, expected;
  // Reference: prefix then accepted.
  const SequenceId ref = kv.CreateSequence();
  append(ref, prefix, logits);
  append(ref, accepted, expected);
  kv.Free(ref);
  // Rolled back: prefix, rejected (6 rows cross a block boundary), truncate, accepted.
  const SequenceId seq = kv.CreateSequence();
  append(seq, prefix, logits);
  const int used_before = kv.Stats().used_blocks;
  append(seq, rejected, logits);
  EXPECT_GT(kv.Stats().used_blocks, used_before);
  ASSERT_TRUE(KvTransaction(kv).Commit(seq, 10).ok());
  EXPECT_EQ(kv.Stats().used_blocks, used_before);  // whole blocks past position 10 freed
  EXPECT_EQ(kv.length(seq), 10);
  append(seq, accepted, logits);
  EXPECT_LE(MaxAbsDiff(logits.data(), expected.data(), expected.size()), 1e-5f);
  kv.Free(seq);
  EXPECT_EQ(kv.Stats().free_blocks, kv.Stats().total_blocks);
}

TEST(RaggedBatchTest, InvalidBatchesAreRefusedBeforeAnyWrite) {
  auto model = MakeRandomModel(TinyGqaConfig(), {DType::kF32, 10, 1.0f});
  CpuBackendOptions options;
  options.kv = {4, 2};  // 8 positions in all
  auto backend = CreateCpuBackend(*model, options);
  ASSERT_TRUE(backend.ok());
  PagedKvCache kv(options.kv);
  const SequenceId seq = kv.CreateSequence();
  std::vector<float> logits;
  ForwardBatch gap;
  gap.rows.push_back({.seq = seq, .position = 1, .token = 5, .want_logits = true});  // position 0 missing
  EXPECT_EQ((*backend)->Forward(gap, kv, logits).code(), absl::StatusCode::kInvalidArgument);
  ForwardBatch bad_token;
  bad_token.rows.push_back({.seq = seq, .position = 0, .token = 1000, .want_logits = true});
  EXPECT_EQ((*backend)->Forward(bad_token, kv, logits).code(), absl::StatusCode::kInvalidArgument);
  ForwardBatch too_long;
  for (int p = 0; p < 9; ++p) too_long.rows.push_back({.seq = seq, .position = p, .token = 3});
  EXPECT_EQ((*backend)->Forward(too_long, kv, logits).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(kv.length(seq), 0);
  EXPECT_EQ(kv.Stats().used_blocks, 0);
  ForwardBatch unknown;
  unknown.rows.push_back({.seq = seq + 5, .position = 0, .token = 3, .want_logits = true});
  EXPECT_EQ((*backend)->Forward(unknown, kv, logits).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace crossreg
