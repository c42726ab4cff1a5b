// Lossless Cross-Regression on the GPU reproduces the GPU's own greedy AR output
// token for token (ALGORITHM.md "Required tests", on the CUDA backend).
// Caveat this test would expose: cuBLAS may pick a different reduction order for a
// 1-row and a (1+m+γ)-row GEMM, so a near-tie in the logits could flip an argmax;
// the random models' scale keeps ties rare, as in the CPU test.
#include <algorithm>

#include "engine/cuda/cuda_backend.h"
#include "scheduler/generate.h"
#include "engine/model/model_loader.h"
#include "engine/model/random_model.h"
#include "tests/gpu/gpu_generation.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/testing/stories_reference.h"
#include "tests/testing/test_paths.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

using testing::GpuEngine;
using testing::GreedyIds;
using testing::MakeGpuEngine;

TEST(CudaExactnessTest, GreedyLosslessEqualsGreedyArOnRandomModels) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<std::vector<int32_t>> prompts = {{1}, {3, 4, 5, 3, 4}, {7, 7, 7, 7, 2, 9, 11, 30, 1, 0}};
  for (float adapter_magnitude : {0.5f, 30.0f}) {  // mostly right and mostly wrong drafts
    auto model = MakeRandomModel(testing::TinyConfig(48), {DType::kF32, 1, 2.0f});
    RandomLoraOptions lo;
    lo.magnitude = adapter_magnitude;
    lo.seed = 11;
    lo.placeholder_token_id = 47;
    auto adapter = MakeRandomLoraAdapter(model->config, lo);
    GpuEngine e = MakeGpuEngine(*model, adapter.get(), 1024);
    ASSERT_TRUE(e.backend);
    for (const auto& prompt : prompts) {
      const auto ar = GreedyIds(e, *model, prompt, 50, DecodingMode::kAutoregressive, 1);
      ASSERT_EQ(ar.size(), 50u);
      for (int gamma : {1, 4, 16}) {
        SCOPED_TRACE(::testing::Message() << "magnitude " << adapter_magnitude << " gamma " << gamma);
        EXPECT_EQ(GreedyIds(e, *model, prompt, 50, DecodingMode::kLossless, gamma), ar);
        EXPECT_EQ(GreedyIds(e, *model, prompt, 50, DecodingMode::kLossless, gamma, /*fork_outcomes=*/std::min(gamma, 2)),
                  ar);
        EXPECT_EQ(GreedyIds(e, *model, prompt, 50, DecodingMode::kLossless, gamma, /*fork_outcomes=*/0,
                            DraftLayout::kBlocks),
                  ar);
      }
      EXPECT_EQ(e.kv->Stats().used_blocks, 0);
    }
  }
}

// The CUDA block tables read shared prefix-cache blocks as they are: prompts that
// start with an earlier prompt (and its output) read its K/V from the cache and
// decode the same greedy ids as without it. Across forwards of different row counts
// the GEMMs may round a row differently (docs/cuda.md), so like the lossless = AR
// tests this holds up to near-ties.
TEST(CudaExactnessTest, GreedyOutputsWithPrefixCacheEqualWithout) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto model = MakeRandomModel(testing::TinyConfig(48), {DType::kF32, 2, 2.0f});
  RandomLoraOptions lo;
  lo.magnitude = 0.5f;
  lo.seed = 12;
  lo.placeholder_token_id = 47;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  GpuEngine plain = MakeGpuEngine(*model, adapter.get(), 1024);
  GpuEngine cached = MakeGpuEngine(*model, adapter.get(), 1024);
  ASSERT_TRUE(plain.backend && cached.backend);
  KvCacheConfig caching = cached.kv->config();
  caching.prefix_caching = true;
  cached.kv = std::make_unique<PagedKvCache>(caching);
  const std::vector<int32_t> shared = {5, 9, 2, 44, 17, 3, 3, 8, 21, 30, 6, 1, 12, 40, 7, 7, 19, 2, 28, 33, 4};
  const DecodingEnvironment env{.model = &model->config, .has_adapter = true};
  int64_t hits = 0;
  for (DecodingMode mode : {DecodingMode::kAutoregressive, DecodingMode::kLossless, DecodingMode::kNgram}) {
    std::vector<int32_t> previous = shared;
    for (int turn = 0; turn < 3; ++turn) {
      GenerationRequest req;
      req.prompt_ids = previous;
      req.prompt_ids.push_back(static_cast<int32_t>(10 + static_cast<int>(mode) * 3 + turn));
      req.max_new_tokens = 24;
      req.decoding.mode = mode;
      req.decoding.gamma = mode == DecodingMode::kAutoregressive ? 1 : 6;
      req.stop_at_eos = false;
      auto want = Generate(*plain.backend, *plain.kv, req, env);
      auto got = Generate(*cached.backend, *cached.kv, req, env);
      ASSERT_TRUE(want.ok() && got.ok());
      EXPECT_EQ(got->ids, want->ids) << "mode " << DecodingModeName(mode) << " turn " << turn;
      hits += got->cached_prompt_tokens;
      previous = req.prompt_ids;
      previous.insert(previous.end(), want->ids.begin(), want->ids.end());
    }
  }
  EXPECT_GT(hits, 0);
  EXPECT_EQ(cached.kv->Stats().used_blocks, 0);
}

TEST(CudaExactnessTest, GreedyLosslessEqualsGreedyArOnStories260K) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto model = LoadModel(testing::Stories260KGguf());
  ASSERT_TRUE(model.ok()) << model.status();
  RandomLoraOptions lo;
  lo.magnitude = 1.0f;
  auto adapter = MakeRandomLoraAdapter((*model)->config, lo);
  GpuEngine e = MakeGpuEngine(**model, adapter.get(), 2048);
  ASSERT_TRUE(e.backend);
  for (const auto& ref : testing::LoadStoriesReference()) {
    const std::vector<int32_t> prompt(ref.prompt_ids.begin(), ref.prompt_ids.end());
    const auto ar = GreedyIds(e, **model, prompt, 64, DecodingMode::kAutoregressive, 1);
    for (int gamma : {4, 16}) {
      SCOPED_TRACE(::testing::Message() << ref.prompt << " gamma " << gamma);
      EXPECT_EQ(GreedyIds(e, **model, prompt, 64, DecodingMode::kLossless, gamma), ar);
    }
  }
}

}  // namespace
}  // namespace crossreg
