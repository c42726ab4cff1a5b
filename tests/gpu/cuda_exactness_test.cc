// Lossless Cross-Regression on the GPU reproduces the GPU's own greedy AR output
// token for token (ALGORITHM.md "Required tests", on the CUDA backend).
// Caveat this test would expose: cuBLAS may pick a different reduction order for a
// 1-row and a (1+m+γ)-row GEMM, so a near-tie in the logits could flip an argmax;
// the random models' scale keeps ties rare, as in the CPU test.
#include <algorithm>

#include "engine/cuda/cuda_backend.h"
#include "engine/decoding/generate.h"
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
      }
      EXPECT_EQ(e.kv->Stats().used_blocks, 0);
    }
  }
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
