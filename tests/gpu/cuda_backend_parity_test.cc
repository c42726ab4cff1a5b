// The CUDA backend against the CPU backend, forward by forward, on the same ragged
// batches: prefill chunks, control rows, predictive groups with a LoRA adapter, KV
// rollback. Tolerance: 2e-2 relative L2 per logits row (bf16 GEMM inputs on the GPU,
// f32 on the CPU; same stored weights where the model is bf16), 3e-2 on stories260K
// (f32 weights rounded to bf16 at upload).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "engine/cuda/cuda_backend.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/model/random_model.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/testing/stories_reference.h"
#include "tests/testing/test_paths.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

using testing::RelativeL2Error;

struct Engines {
  std::unique_ptr<Backend> cpu, gpu;
  std::unique_ptr<PagedKvCache> cpu_kv, gpu_kv;
};

Engines MakeEngines(const Model& model, const LoraAdapter* adapter, KvCacheConfig kv,
                    KvDtype kv_dtype = KvDtype::kF32) {
  Engines e;
  CpuBackendOptions cpu_options;
  cpu_options.num_threads = 1;
  cpu_options.kv = kv;
  cpu_options.adapter = adapter;
  cpu_options.kv_dtype = kv_dtype;
  auto cpu = CreateCpuBackend(model, cpu_options);
  EXPECT_TRUE(cpu.ok()) << cpu.status();
  CudaBackendOptions gpu_options;
  gpu_options.kv = kv;
  gpu_options.adapter = adapter;
  gpu_options.kv_dtype = kv_dtype;
  auto gpu = CreateCudaBackend(model, gpu_options);
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  if (cpu.ok()) e.cpu = std::move(*cpu);
  if (gpu.ok()) e.gpu = std::move(*gpu);
  e.cpu_kv = std::make_unique<PagedKvCache>(kv);
  e.gpu_kv = std::make_unique<PagedKvCache>(kv);
  return e;
}

// Runs `batch` on both; sequence ids agree because both caches see the same calls.
void ExpectSameForward(Engines& e, const ForwardBatch& batch, int vocab, double tolerance, const char* what,
                       std::vector<float>* gpu_logits_out = nullptr) {
  std::vector<float> cpu_logits, gpu_logits;
  ASSERT_TRUE(e.cpu->Forward(batch, *e.cpu_kv, cpu_logits).ok()) << what;
  const absl::Status s = e.gpu->Forward(batch, *e.gpu_kv, gpu_logits);
  ASSERT_TRUE(s.ok()) << what << ": " << s;
  ASSERT_EQ(cpu_logits.size(), gpu_logits.size()) << what;
  for (size_t r = 0; r * vocab < cpu_logits.size(); ++r) {
    EXPECT_LT(RelativeL2Error(gpu_logits, cpu_logits, r * vocab, (r + 1) * vocab), tolerance)
        << what << ", logits row " << r;
  }
  for (SequenceId seq = 0; seq < 8; ++seq) {
    if (e.cpu_kv->IsLive(seq)) {
      EXPECT_EQ(e.gpu_kv->length(seq), e.cpu_kv->length(seq)) << what;
    }
  }
  if (gpu_logits_out != nullptr) *gpu_logits_out = std::move(gpu_logits);
}

void Prefill(ForwardBatch& b, SequenceId seq, const std::vector<int32_t>& tokens, int32_t start) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    b.rows.push_back(
        {.seq = seq, .position = start + static_cast<int32_t>(i), .token = tokens[i], .want_logits = true});
  }
}
void Predict(ForwardBatch& b, SequenceId seq, const std::vector<int32_t>& tokens, int32_t p0) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    b.rows.push_back({.seq = seq,
                      .position = p0 + static_cast<int32_t>(i),
                      .token = tokens[i],
                      .want_logits = true,
                      .predictive = true});
  }
}

void RunRaggedScript(const Model& model, const LoraAdapter* adapter, double tolerance,
                     KvDtype kv_dtype = KvDtype::kF32) {
  Engines e = MakeEngines(model, adapter, {4, 64}, kv_dtype);
  ASSERT_TRUE(e.cpu && e.gpu);
  const int vocab = model.config.vocab_size;
  auto tok = [&](int i) { return static_cast<int32_t>((i * 7 + 3) % vocab); };
  SequenceId ids[3];
  for (SequenceId& id : ids) {
    id = e.cpu_kv->CreateSequence();
    ASSERT_EQ(e.gpu_kv->CreateSequence(), id);
  }
  {  // Prefill chunks of different lengths in one forward.
    ForwardBatch b;
    Prefill(b, ids[0], {tok(1), tok(2), tok(3), tok(4), tok(5), tok(6), tok(7), tok(8), tok(9), tok(10)}, 0);
    Prefill(b, ids[1], {tok(11), tok(12), tok(13), tok(14), tok(15)}, 0);
    Prefill(b, ids[2], {tok(16)}, 0);
    ExpectSameForward(e, b, vocab, tolerance, "prefill");
  }
  {  // Cross-Regression step: control rows plus predictive groups, interleaved.
    ForwardBatch b;
    Prefill(b, ids[0], {tok(20), tok(21), tok(22)}, 10);
    Predict(b, ids[1], {tok(23), tok(24), tok(25)}, 5);
    Predict(b, ids[0], {tok(26), tok(27), tok(28), tok(29)}, 10);
    Prefill(b, ids[1], {tok(30)}, 5);
    Prefill(b, ids[2], {tok(31)}, 1);
    Predict(b, ids[2], {tok(32), tok(33)}, 0);  // a group starting at position 0
    ExpectSameForward(e, b, vocab, tolerance, "control + predictive");
  }
  {  // Rejected drafts: roll back, then decode over the reused slots.
    ASSERT_TRUE(KvTransaction(*e.cpu_kv).Commit(ids[0], 11).ok());
    ASSERT_TRUE(KvTransaction(*e.gpu_kv).Commit(ids[0], 11).ok());
    ForwardBatch b;
    Prefill(b, ids[0], {tok(40), tok(41)}, 11);
    Prefill(b, ids[1], {tok(42)}, 6);
    b.rows.push_back({.seq = ids[2], .position = 2, .token = tok(43)});  // no logits for this one
    Predict(b, ids[1], {tok(44), tok(45)}, 6);                           // P0 <= the 6 positions cached before
    ExpectSameForward(e, b, vocab, tolerance, "after rollback");
  }
  {  // Forked refill: branch 0 plus forks that share its first rows (tree attention).
    ForwardBatch b;
    const int32_t p0 = static_cast<int32_t>(e.cpu_kv->length(ids[0]));
    Prefill(b, ids[0], {tok(50), tok(51), tok(52)}, p0);
    Predict(b, ids[0], {tok(50), tok(51), tok(52), tok(53), tok(54)}, p0);
    for (int32_t n = 0; n < 2; ++n) {
      for (int32_t j = 0; j < 2; ++j)
        b.rows.push_back({.seq = ids[0],
                          .position = p0 + n + 1 + j,
                          .token = tok(60 + j),
                          .want_logits = true,
                          .predictive = true,
                          .branch = n + 1});
    }
    ExpectSameForward(e, b, vocab, tolerance, "forked branches");
  }
  {  // Outcome blocks: bidirectional groups reading this forward's control rows. The engine
     // fills a block with one placeholder token; here every row has its own token, so that
     // attending the wrong rows of the block (or of the control rows) changes the logits.
     // Blocks of one repeated token make the comparison ill-conditioned: on an H200 their
     // rows read 0.022-0.040 from the CPU's (2026-11-28) while these stay under 0.02.
    ForwardBatch b;
    const int32_t p0 = static_cast<int32_t>(e.cpu_kv->length(ids[1]));
    Prefill(b, ids[1], {tok(80), tok(81), tok(82)}, p0);
    for (int32_t n = 0; n < 3; ++n) {
      for (int32_t j = 0; j < 3; ++j)
        b.rows.push_back({.seq = ids[1],
                          .position = p0 + n + 1 + j,
                          .token = tok(85 + 3 * n + j),
                          .want_logits = true,
                          .predictive = true,
                          .branch = n + 1,
                          .block = true});
    }
    ExpectSameForward(e, b, vocab, tolerance, "outcome blocks");
  }
}

TEST(CudaBackendParityTest, RaggedBatchesMatchCpuOnRandomBf16Model) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto model = MakeRandomModel(testing::TinyConfig(97), {DType::kBF16, 3, 1.0f});
  RandomLoraOptions lo;
  lo.seed = 4;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  RunRaggedScript(*model, adapter.get(), 2e-2);
  RunRaggedScript(*model, nullptr, 2e-2);  // predictive rows on the base weights
}

// head_dim 64: the predictive rows' attention runs on the tensor-core kernel (bf16
// products), the control rows' on the SIMT kernel; the script's groups, forks and
// rollback against the CPU. The bf16 attention adds to the bf16 GEMMs' error: 4e-2.
TEST(CudaBackendParityTest, RaggedBatchesMatchCpuWithTensorCorePredictiveAttention) {
  SKIP_WITHOUT_CUDA_DEVICE();
  ModelConfig c = testing::TinyConfig(97);
  c.hidden_size = 256;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.intermediate_size = 128;
  auto model = MakeRandomModel(c, {DType::kBF16, 3, 1.0f});
  RandomLoraOptions lo;
  lo.seed = 4;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  RunRaggedScript(*model, adapter.get(), 4e-2);
  RunRaggedScript(*model, adapter.get(), 4e-2, KvDtype::kBf16);
}

// --kv_dtype bf16 on both backends: the cache rounds K and V the same way, but from f32
// values that differ in their last bits between the backends (their GEMMs sum in other
// orders), so a value near a rounding boundary can land one bf16 step (2^-8 relative)
// apart. On an H100 one row of this script differs by 0.026, over the f32 tolerance of
// 0.02, the others by less; hence 0.04 here.
TEST(CudaBackendParityTest, RaggedBatchesMatchCpuWithABf16KvCache) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto model = MakeRandomModel(testing::TinyConfig(97), {DType::kBF16, 3, 1.0f});
  RandomLoraOptions lo;
  lo.seed = 4;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  RunRaggedScript(*model, adapter.get(), 4e-2, KvDtype::kBf16);
}

TEST(CudaBackendParityTest, RaggedBatchesMatchCpuOnQwen2StyleBias) {
  SKIP_WITHOUT_CUDA_DEVICE();
  ModelConfig c = testing::TinyConfig(61);
  c.arch = Architecture::kQwen2;
  c.qkv_bias = true;
  auto model = MakeRandomModel(c, {DType::kBF16, 5, 1.0f});
  RunRaggedScript(*model, nullptr, 2e-2);
}

TEST(CudaBackendParityTest, Stories260KPromptLogitsMatchCpuAndReference) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto model = LoadModel(testing::Stories260KGguf());
  ASSERT_TRUE(model.ok()) << model.status();
  const int vocab = (*model)->config.vocab_size;
  for (const auto& ref : testing::LoadStoriesReference()) {
    Engines e = MakeEngines(**model, nullptr, {16, 64});
    ASSERT_TRUE(e.cpu && e.gpu);
    const SequenceId seq = e.cpu_kv->CreateSequence();
    ASSERT_EQ(e.gpu_kv->CreateSequence(), seq);
    ForwardBatch b;
    Prefill(b, seq, std::vector<int32_t>(ref.prompt_ids.begin(), ref.prompt_ids.end()), 0);
    std::vector<float> logits;
    ExpectSameForward(e, b, vocab, 3e-2, ref.prompt.c_str(), &logits);
    ASSERT_EQ(logits.size(), ref.prompt_ids.size() * vocab);
    // The last row against the independent implementation's logits, and its argmax.
    const std::vector<float> last(logits.end() - vocab, logits.end());
    EXPECT_LT(RelativeL2Error(last, ref.logits_after_prompt), 3e-2) << ref.prompt;
    EXPECT_EQ(std::max_element(last.begin(), last.end()) - last.begin(), ref.greedy_ids[0]) << ref.prompt;
  }
}

// The graph and summary tests' backend: 4-slot blocks, 64 of them, a random adapter.
constexpr KvCacheConfig kTinyKv{4, 64};
std::unique_ptr<LoraAdapter> RandomAdapter(const Model& model, uint64_t seed) {
  RandomLoraOptions lo;
  lo.seed = seed;
  return MakeRandomLoraAdapter(model.config, lo);
}
CudaBackendOptions TinyCudaOptions(const LoraAdapter* adapter, bool graphs) {
  CudaBackendOptions options;
  options.kv = kTinyKv;
  options.adapter = adapter;
  options.use_graphs = graphs;
  testing::ApplyTestOverrides(options);
  return options;
}

// Decode-shaped forwards replayed as CUDA graphs give the bits of eager launches:
// the same XR step shape six times (captured at its second sighting, replayed after),
// positions crossing block boundaries so the block tables grow under the graph.
TEST(CudaBackendTest, GraphReplayGivesTheBitsOfEagerLaunches) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto model = MakeRandomModel(testing::TinyConfig(97), {DType::kBF16, 3, 1.0f});
  auto adapter = RandomAdapter(*model, 5);
  std::unique_ptr<Backend> backends[2];
  for (int graphs = 0; graphs < 2; ++graphs) {
    auto b = CreateCudaBackend(*model, TinyCudaOptions(adapter.get(), graphs == 1));
    ASSERT_TRUE(b.ok()) << b.status();
    backends[graphs] = std::move(*b);
  }
  PagedKvCache caches[2] = {PagedKvCache(kTinyKv), PagedKvCache(kTinyKv)};
  const SequenceId seq = caches[0].CreateSequence();
  ASSERT_EQ(caches[1].CreateSequence(), seq);
  std::vector<float> logits[2];
  {
    ForwardBatch b;
    Prefill(b, seq, {5, 6, 7, 8, 9}, 0);
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(backends[i]->Forward(b, caches[i], logits[i]).ok());
    EXPECT_EQ(logits[0], logits[1]);
  }
  for (int step = 0; step < 6; ++step) {
    const int32_t p0 = static_cast<int32_t>(caches[0].length(seq));
    ForwardBatch b;
    Prefill(b, seq, {11 + step, 12 + step}, p0);
    Predict(b, seq, {20, 21, 22}, p0);
    for (int i = 0; i < 2; ++i) {
      const absl::Status s = backends[i]->Forward(b, caches[i], logits[i]);
      ASSERT_TRUE(s.ok()) << s;
    }
    ASSERT_EQ(logits[0].size(), 5u * model->config.vocab_size);
    EXPECT_EQ(logits[0], logits[1]) << "step " << step;
  }
}

// One-row forwards (AR decode, each on the in-kernel split merge) replayed as CUDA
// graphs give the bits of eager launches, with whole rows and with row summaries
// (summarised on the host unless CROSSREG_TEST_DEVICE_SUMMARIES=1).
TEST(CudaBackendTest, OneRowForwardsReplayLikeEagerOnes) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto model = MakeRandomModel(testing::TinyConfig(97), {DType::kBF16, 4, 1.0f});
  std::vector<bool> modes = {false, true};
  if (const char* order = std::getenv("CROSSREG_TEST_ONEROW_MODES"); order != nullptr) {  // e.g. "1,0"
    modes.clear();
    for (const char* c = order; *c != '\0'; ++c) {
      if (*c == '0' || *c == '1') modes.push_back(*c == '1');
    }
  }
  for (bool summary : modes) {
    SCOPED_TRACE(summary ? "summaries" : "whole rows");
    std::unique_ptr<Backend> backends[2];
    for (int graphs = 0; graphs < 2; ++graphs) {
      CudaBackendOptions options;
      options.kv = kTinyKv;
      options.use_graphs = graphs == 1;
      testing::ApplyTestOverrides(options);
      options.use_graphs = graphs == 1;  // this test compares the two
      auto b = CreateCudaBackend(*model, options);
      ASSERT_TRUE(b.ok()) << b.status();
      backends[graphs] = std::move(*b);
    }
    PagedKvCache caches[2] = {PagedKvCache(kTinyKv), PagedKvCache(kTinyKv)};
    const SequenceId seq = caches[0].CreateSequence();
    ASSERT_EQ(caches[1].CreateSequence(), seq);
    for (int step = 0; step < 8; ++step) {
      ForwardBatch b;
      b.rows.push_back({.seq = seq, .position = step, .token = 3 + step, .want_logits = true, .summary = summary});
      ForwardOutput out[2];
      for (int i = 0; i < 2; ++i) ASSERT_TRUE(backends[i]->Forward(b, caches[i], out[i]).ok());
      if (summary) {
        ASSERT_EQ(out[0].summaries.size(), 1u);
        EXPECT_EQ(out[0].summaries[0].argmax, out[1].summaries[0].argmax) << "step " << step;
        EXPECT_EQ(out[0].summaries[0].max_logit, out[1].summaries[0].max_logit) << "step " << step;
        EXPECT_FALSE(std::isnan(out[1].summaries[0].max_logit)) << "step " << step;
      } else {
        EXPECT_EQ(out[0].logits, out[1].logits) << "step " << step;
      }
    }
  }
}

// Summary rows on the device: the same forward with every row whole and with some
// rows summarised (control and predictive, graphs on, the shape replayed) gives the
// whole rows' bits and, for each summary, the CPU reduction of that row's logits.
TEST(CudaBackendTest, SummaryRowsAreTheReductionOfTheRowsTheyReplace) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto model = MakeRandomModel(testing::TinyConfig(97), {DType::kBF16, 4, 1.0f});
  auto adapter = RandomAdapter(*model, 6);
  auto backend = CreateCudaBackend(*model, TinyCudaOptions(adapter.get(), /*graphs=*/true));
  ASSERT_TRUE(backend.ok()) << backend.status();
  PagedKvCache cache(kTinyKv);
  const SequenceId seq = cache.CreateSequence();
  std::vector<float> whole;
  {
    ForwardBatch b;
    Prefill(b, seq, {5, 6, 7, 8, 9}, 0);
    ASSERT_TRUE((*backend)->Forward(b, cache, whole).ok());
  }
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    const int32_t p0 = static_cast<int32_t>(cache.length(seq));
    ForwardBatch b;
    Prefill(b, seq, {11 + step, 12 + step, 13 + step}, p0);
    Predict(b, seq, {20, 21, 22, 23}, p0);
    // The same rows twice: all whole (the K/V it writes is rolled back), then mixed.
    ASSERT_TRUE((*backend)->Forward(b, cache, whole).ok());
    ASSERT_TRUE(KvTransaction(cache).Commit(seq, p0).ok());
    for (size_t r = 0; r < b.rows.size(); ++r) {
      BatchRow& row = b.rows[r];
      row.summary = r != 2 && r != 4;
      row.summary_token = r < 2 ? b.rows[r + 1].token : -1;
    }
    ForwardOutput out;
    ASSERT_TRUE((*backend)->Forward(b, cache, out).ok());
    const int vocab = model->config.vocab_size;
    ASSERT_EQ(out.summaries.size(), 5u);
    ASSERT_EQ(out.logits.size(), 2u * static_cast<size_t>(vocab));
    size_t full = 0, summary = 0;
    for (size_t r = 0; r < b.rows.size(); ++r) {
      const float* z = whole.data() + r * static_cast<size_t>(vocab);
      if (!b.rows[r].summary) {
        EXPECT_TRUE(std::equal(z, z + vocab, out.logits.begin() + static_cast<std::ptrdiff_t>(full++ * vocab)));
        continue;
      }
      const RowSummary want = SummarizeLogitRow(z, vocab, b.rows[r].summary_token);
      const RowSummary got = out.summaries[summary++];
      EXPECT_EQ(got.argmax, want.argmax) << "row " << r;
      EXPECT_EQ(got.max_logit, want.max_logit) << "row " << r;
      EXPECT_EQ(got.token_logit, want.token_logit) << "row " << r;
    }
    ASSERT_TRUE(KvTransaction(cache).Commit(seq, p0 + 1).ok());  // keep x_last, as a verify step that accepts nothing
  }
}

TEST(CudaBackendTest, ReportsNoDeviceAsFailedPrecondition) {
  if (CudaDeviceAvailable()) GTEST_SKIP() << "a CUDA device is present: this checks the no-device path";
  auto model = MakeRandomModel(testing::TinyConfig(16), {});
  CudaBackendOptions options;
  options.kv = {4, 8};
  auto backend = CreateCudaBackend(*model, options);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition) << backend.status();
  EXPECT_NE(backend.status().message().find("no CUDA device"), std::string::npos) << backend.status();
}

}  // namespace
}  // namespace crossreg
