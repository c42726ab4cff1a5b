// The contract every backend gets from the non-virtual Backend::Execute and Forward
// (engine/backend.h): refused batches touch nothing and never reach Compute, a
// failed Compute leaves the cache as it was, a good Execute reserves without moving a
// length (the caller commits what it keeps), a good Forward advances each sequence by
// its control rows only. A recording backend checks the seam; the CPU backend is held
// to the same refusals, so no backend can accept what another refuses.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/model/random_model.h"
#include "gtest/gtest.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

// Computes nothing: records the plans it was given, or fails when told to.
class RecordingBackend final : public Backend {
 public:
  RecordingBackend(const ModelConfig& config, const KvCacheConfig& kv) : Backend(config, kv) {}
  std::string_view name() const override { return "recording"; }
  std::string device() const override { return "none"; }
  int64_t WeightBytesPerForward() const override { return 0; }
  absl::Status fail_with = absl::OkStatus();
  std::vector<ForwardPlan> plans;

 protected:
  absl::Status Compute(const ForwardPlan& plan, ForwardOutput& out) override {
    plans.push_back(plan);
    if (!fail_with.ok()) return fail_with;
    const std::vector<float> dense(plan.logit_rows.size() * static_cast<size_t>(model_config().vocab_size), 0.0f);
    SplitLogitRows(plan, dense, model_config().vocab_size, out);
    return absl::OkStatus();
  }
};

constexpr KvCacheConfig kKv{4, 16};

struct BadBatch {
  std::string name;
  std::function<ForwardBatch(SequenceId seq, SequenceId other)> make;
  absl::StatusCode code;
};

// `seq` has 5 cached positions, `other` none.
std::vector<BadBatch> BadBatches() {
  return {
      {"empty batch", [](SequenceId, SequenceId) { return ForwardBatch{}; }, absl::StatusCode::kInvalidArgument},
      {"unknown sequence",
       [](SequenceId, SequenceId) { return ForwardBatch{{{.seq = 99, .position = 0, .token = 1}}}; },
       absl::StatusCode::kInvalidArgument},
      {"control row skips a position",
       [](SequenceId seq, SequenceId) { return ForwardBatch{{{.seq = seq, .position = 6, .token = 1}}}; },
       absl::StatusCode::kInvalidArgument},
      {"control row rewrites a cached position",
       [](SequenceId seq, SequenceId) { return ForwardBatch{{{.seq = seq, .position = 4, .token = 1}}}; },
       absl::StatusCode::kInvalidArgument},
      {"token outside the vocabulary",
       [](SequenceId seq, SequenceId) { return ForwardBatch{{{.seq = seq, .position = 5, .token = 48}}}; },
       absl::StatusCode::kInvalidArgument},
      {"position past the context",
       [](SequenceId, SequenceId other) { return ForwardBatch{{{.seq = other, .position = 300, .token = 1}}}; },
       absl::StatusCode::kOutOfRange},
      {"predictive rows not consecutive",
       [](SequenceId seq, SequenceId) {
         return ForwardBatch{{{.seq = seq, .position = 4, .token = 1, .predictive = true},
                              {.seq = seq, .position = 6, .token = 1, .predictive = true}}};
       },
       absl::StatusCode::kInvalidArgument},
      {"predictive chain starts beyond the cache with no branch 0 to fork from",
       [](SequenceId seq, SequenceId) {
         return ForwardBatch{{{.seq = seq, .position = 7, .token = 1, .predictive = true, .branch = 1}}};
       },
       absl::StatusCode::kInvalidArgument},
      {"a control row names a branch",
       [](SequenceId seq, SequenceId) { return ForwardBatch{{{.seq = seq, .position = 5, .token = 1, .branch = 2}}}; },
       absl::StatusCode::kInvalidArgument},
      {"a summary row that wants no logits",
       [](SequenceId seq, SequenceId) {
         return ForwardBatch{{{.seq = seq, .position = 5, .token = 1, .summary = true}}};
       },
       absl::StatusCode::kInvalidArgument},
      {"a summary of a token outside the vocabulary",
       [](SequenceId seq, SequenceId) {
         return ForwardBatch{
             {{.seq = seq, .position = 5, .token = 1, .want_logits = true, .summary = true, .summary_token = 48}}};
       },
       absl::StatusCode::kInvalidArgument},
      {"more blocks than the cache has",
       [](SequenceId, SequenceId other) {
         ForwardBatch b;
         for (int p = 0; p < 64; ++p) b.rows.push_back({.seq = other, .position = p, .token = 1});
         return b;
       },
       absl::StatusCode::kResourceExhausted},
  };
}

// The cache's observable state, to compare before and after.
struct KvSnapshot {
  int64_t length_seq, length_other, capacity_seq, capacity_other;
  int free_blocks;
  bool operator==(const KvSnapshot&) const = default;
};
KvSnapshot Snapshot(const PagedKvCache& kv, SequenceId seq, SequenceId other) {
  return {kv.length(seq), kv.length(other), kv.capacity(seq), kv.capacity(other), kv.free_blocks()};
}

// Prefills 5 positions of a fresh sequence and opens an empty one.
std::pair<SequenceId, SequenceId> Prepare(Backend& backend, PagedKvCache& kv) {
  const SequenceId seq = kv.CreateSequence();
  const SequenceId other = kv.CreateSequence();
  ForwardBatch prefill;
  for (int p = 0; p < 5; ++p) prefill.rows.push_back({.seq = seq, .position = p, .token = p + 1});
  std::vector<float> logits;
  EXPECT_TRUE(backend.Forward(prefill, kv, logits).ok());
  return {seq, other};
}

TEST(BackendContractTest, RefusedBatchesChangeNothingAndNeverReachCompute) {
  const ModelConfig config = testing::TinyConfig(48);
  for (const BadBatch& bad : BadBatches()) {
    SCOPED_TRACE(bad.name);
    RecordingBackend backend(config, kKv);
    PagedKvCache kv(kKv);
    const auto [seq, other] = Prepare(backend, kv);
    const size_t computed = backend.plans.size();
    const KvSnapshot before = Snapshot(kv, seq, other);
    ForwardOutput out;
    const absl::Status s = backend.Forward(bad.make(seq, other), kv, out);
    EXPECT_EQ(s.code(), bad.code) << s;
    EXPECT_EQ(backend.plans.size(), computed);
    EXPECT_TRUE(Snapshot(kv, seq, other) == before);
  }
}

TEST(BackendContractTest, TheCpuBackendRefusesTheSameBatchesTheSameWay) {
  auto model = MakeRandomModel(testing::TinyConfig(48), {DType::kF32, 3, 1.0f});
  for (const BadBatch& bad : BadBatches()) {
    SCOPED_TRACE(bad.name);
    auto e = testing::MakeEngine(*model, nullptr, kKv.num_blocks * kKv.block_size);
    const auto [seq, other] = Prepare(*e.backend, *e.kv);
    const KvSnapshot before = Snapshot(*e.kv, seq, other);
    ForwardOutput out;
    EXPECT_EQ(e.backend->Forward(bad.make(seq, other), *e.kv, out).code(), bad.code);
    EXPECT_TRUE(Snapshot(*e.kv, seq, other) == before);
  }
}

TEST(BackendContractTest, AFailedComputeGivesBackWhatThePlanReserved) {
  RecordingBackend backend(testing::TinyConfig(48), kKv);
  PagedKvCache kv(kKv);
  const auto [seq, other] = Prepare(backend, kv);
  const KvSnapshot before = Snapshot(kv, seq, other);
  backend.fail_with = absl::InternalError("device lost");
  ForwardBatch batch;  // crosses into new blocks for both sequences
  for (int p = 5; p < 11; ++p) batch.rows.push_back({.seq = seq, .position = p, .token = 1, .want_logits = true});
  for (int p = 0; p < 6; ++p) batch.rows.push_back({.seq = other, .position = p, .token = 1});
  std::vector<float> logits;
  EXPECT_EQ(backend.Forward(batch, kv, logits).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(backend.plans.size(), 2u);  // it did reach Compute
  EXPECT_TRUE(Snapshot(kv, seq, other) == before);
}

TEST(BackendContractTest, ASuccessfulForwardAdvancesEachSequenceByItsControlRowsOnly) {
  RecordingBackend backend(testing::TinyConfig(48), kKv);
  PagedKvCache kv(kKv);
  const auto [seq, other] = Prepare(backend, kv);
  ForwardBatch batch;
  // seq: x_last and two drafts (control), a predictive chain of 4 from position 5.
  for (int k = 0; k < 3; ++k) batch.rows.push_back({.seq = seq, .position = 5 + k, .token = 1, .want_logits = true});
  for (int k = 0; k < 4; ++k) {
    batch.rows.push_back({.seq = seq, .position = 5 + k, .token = 2, .want_logits = true, .predictive = true});
  }
  batch.rows.push_back({.seq = other, .position = 0, .token = 3});
  std::vector<float> logits;
  ASSERT_TRUE(backend.Forward(batch, kv, logits).ok());
  EXPECT_EQ(kv.length(seq), 8);
  EXPECT_EQ(kv.length(other), 1);
  EXPECT_EQ(logits.size(), 7u * 48u);
  const ForwardPlan& plan = backend.plans.back();
  EXPECT_EQ(plan.predictive_rows.size(), 4u);
  for (int r = 0; r < plan.rows; ++r) EXPECT_EQ(plan.predictive(r), batch.rows[static_cast<size_t>(r)].predictive);
}

TEST(BackendContractTest, ExecuteReservesAndTheCallerCommitsWhatItKeeps) {
  RecordingBackend backend(testing::TinyConfig(48), kKv);
  PagedKvCache kv(kKv);
  const auto [seq, other] = Prepare(backend, kv);  // seq: 5 positions in 2 blocks
  ForwardBatch batch;                              // x_last at 5 and four drafts: positions 5..9, into a third block
  for (int k = 0; k < 5; ++k) batch.rows.push_back({.seq = seq, .position = 5 + k, .token = 1, .want_logits = true});
  ForwardOutput out;
  KvTransaction transaction(kv);
  ASSERT_TRUE(backend.Execute(batch, transaction, out).ok());
  EXPECT_EQ(kv.length(seq), 5);  // nothing committed yet
  EXPECT_EQ(transaction.open(), std::vector<SequenceId>{seq});
  EXPECT_EQ(kv.capacity(seq), 12);
  EXPECT_EQ(out.logits.size(), 5u * 48u);
  // A verify step that accepts one draft keeps x_last and d_1: the third block returns.
  ASSERT_TRUE(transaction.Commit(seq, 7).ok());
  EXPECT_TRUE(transaction.open().empty());
  EXPECT_EQ(kv.length(seq), 7);
  EXPECT_EQ(kv.capacity(seq), 8);
  EXPECT_EQ(kv.free_blocks(), kKv.num_blocks - 2);
  EXPECT_EQ(kv.length(other), 0);
}

// The output says which logit rows are whose: each sequence's whole rows and summaries
// as one window, in batch order; interleaved rows have none.
TEST(BackendContractTest, TheOutputDescribesEachSequencesRows) {
  RecordingBackend backend(testing::TinyConfig(48), kKv);
  PagedKvCache kv(kKv);
  const auto [seq, other] = Prepare(backend, kv);
  ForwardBatch batch;
  // other: a prefill row without logits, then one whole row; seq: a summary, a whole
  // row, then two predictive summaries.
  batch.rows.push_back({.seq = other, .position = 0, .token = 1});
  batch.rows.push_back({.seq = other, .position = 1, .token = 1, .want_logits = true});
  batch.rows.push_back({.seq = seq, .position = 5, .token = 1, .want_logits = true, .summary = true});
  batch.rows.push_back({.seq = seq, .position = 6, .token = 1, .want_logits = true});
  for (int k = 0; k < 2; ++k) {
    batch.rows.push_back(
        {.seq = seq, .position = 5 + k, .token = 2, .want_logits = true, .predictive = true, .summary = true});
  }
  ForwardOutput out;
  KvTransaction transaction(kv);
  ASSERT_TRUE(backend.Execute(batch, transaction, out).ok());
  ASSERT_EQ(out.sequences.size(), 2u);
  EXPECT_EQ(out.sequences[0].seq, other);
  EXPECT_EQ(out.sequences[1].seq, seq);
  absl::StatusOr<LogitRows> mine = out.RowsOf(seq, 48);
  absl::StatusOr<LogitRows> theirs = out.RowsOf(other, 48);
  ASSERT_TRUE(mine.ok() && theirs.ok());
  EXPECT_EQ(theirs->logits.data(), out.logits.data());
  EXPECT_EQ(theirs->logits.size(), 48u);
  EXPECT_TRUE(theirs->summaries.empty());
  EXPECT_EQ(mine->logits.data(), out.logits.data() + 48);
  EXPECT_EQ(mine->logits.size(), 48u);
  EXPECT_EQ(mine->summaries.data(), out.summaries.data());
  EXPECT_EQ(mine->summaries.size(), 3u);
  // A sequence with no logit rows gets an empty window.
  ForwardBatch prefill{{{.seq = other, .position = 0, .token = 1}}};
  ASSERT_TRUE(transaction.Commit(seq, 5).ok() && transaction.Commit(other, 0).ok());
  ASSERT_TRUE(backend.Execute(prefill, transaction, out).ok());
  ASSERT_TRUE(out.RowsOf(other, 48).ok());
  EXPECT_TRUE(out.RowsOf(other, 48)->logits.empty());
  // Interleaved rows form no single window.
  ForwardBatch interleaved;
  interleaved.rows.push_back({.seq = seq, .position = 5, .token = 1, .want_logits = true});
  interleaved.rows.push_back({.seq = other, .position = 0, .token = 1, .want_logits = true});
  interleaved.rows.push_back({.seq = seq, .position = 6, .token = 1, .want_logits = true});
  transaction.RollBack();
  ASSERT_TRUE(backend.Execute(interleaved, transaction, out).ok());
  EXPECT_EQ(out.RowsOf(seq, 48).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(out.RowsOf(other, 48).ok());
}

// A batch of two sequences with control and predictive rows, some of them summaries:
// whole rows come back bit for bit as in an all-whole forward of the same batch, and
// each summary is the reference reduction of its row (the CPU computes every row).
TEST(BackendContractTest, SummaryRowsAreTheReferenceReductionOfTheirLogits) {
  auto model = MakeRandomModel(testing::TinyConfig(48), {DType::kF32, 4, 2.0f});
  RandomLoraOptions lo;
  lo.seed = 21;
  lo.placeholder_token_id = 47;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  auto whole = testing::MakeEngine(*model, adapter.get(), 256);
  auto mixed = testing::MakeEngine(*model, adapter.get(), 256);
  const auto [seq, other] = Prepare(*whole.backend, *whole.kv);
  const auto [mixed_seq, mixed_other] = Prepare(*mixed.backend, *mixed.kv);
  ASSERT_EQ(seq, mixed_seq);  // fresh caches number their sequences alike
  ASSERT_EQ(other, mixed_other);
  ForwardBatch batch;
  for (int k = 0; k < 4; ++k) {
    batch.rows.push_back({.seq = seq,
                          .position = 5 + k,
                          .token = 7 + k,
                          .want_logits = true,
                          .summary = k % 2 == 1,
                          .summary_token = k == 3 ? -1 : 8 + k});
  }
  for (int k = 0; k < 3; ++k) {
    batch.rows.push_back(
        {.seq = seq, .position = 5 + k, .token = 47, .want_logits = true, .predictive = true, .summary = k != 1});
  }
  batch.rows.push_back({.seq = other, .position = 0, .token = 3});
  batch.rows.push_back(
      {.seq = other, .position = 1, .token = 4, .want_logits = true, .summary = true, .summary_token = 0});
  ForwardBatch all_whole = batch;
  for (BatchRow& r : all_whole.rows) r.summary = false;

  std::vector<float> reference;
  ASSERT_TRUE(whole.backend->Forward(all_whole, *whole.kv, reference).ok());
  ForwardOutput out;
  ASSERT_TRUE(mixed.backend->Forward(batch, *mixed.kv, out).ok());
  ASSERT_EQ(out.summaries.size(), 5u);
  ASSERT_EQ(out.logits.size(), 3u * 48u);
  EXPECT_EQ(mixed.kv->length(seq), 9);
  size_t full = 0, summary = 0, j = 0;
  for (const BatchRow& r : batch.rows) {
    if (!r.want_logits) continue;
    const float* z = reference.data() + j++ * 48;
    if (!r.summary) {
      EXPECT_TRUE(std::equal(z, z + 48, out.logits.begin() + static_cast<std::ptrdiff_t>(full++ * 48)));
      continue;
    }
    const RowSummary want = SummarizeLogitRow(z, 48, r.summary_token);
    const RowSummary got = out.summaries[summary++];
    EXPECT_EQ(got.argmax, want.argmax);
    EXPECT_EQ(got.max_logit, want.max_logit);
    EXPECT_EQ(got.token_logit, want.token_logit);
  }
}

TEST(BackendContractTest, TheLogitsOnlyForwardRefusesABatchThatAsksForSummaries) {
  RecordingBackend backend(testing::TinyConfig(48), kKv);
  PagedKvCache kv(kKv);
  const auto [seq, other] = Prepare(backend, kv);
  const KvSnapshot before = Snapshot(kv, seq, other);
  ForwardBatch batch{{{.seq = seq, .position = 5, .token = 1, .want_logits = true, .summary = true}}};
  std::vector<float> logits;
  const absl::Status s = backend.Forward(batch, kv, logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("summaries"), std::string_view::npos) << s;
  EXPECT_EQ(backend.plans.size(), 1u);  // the prefill only
  EXPECT_TRUE(Snapshot(kv, seq, other) == before);
}

}  // namespace
}  // namespace crossreg
