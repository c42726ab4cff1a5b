// stories260K through the whole engine against llama2.c's golden outputs.
#include <cmath>
#include <cstdio>

#include "engine/cpu/cpu_backend.h"
#include "scheduler/generate.h"
#include "engine/model/model_loader.h"
#include "gtest/gtest.h"
#include "tests/testing/stories_reference.h"
#include "tests/testing/test_paths.h"

namespace crossreg {
namespace {

using testing::LoadStoriesReference;

class StoriesReferenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = LoadModel(testing::Stories260KGguf());
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = m->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  static Model* model_;
};
Model* StoriesReferenceTest::model_ = nullptr;

TEST_F(StoriesReferenceTest, PromptIdsGreedyIdsAndLogitsMatchReference) {
  const auto refs = LoadStoriesReference();
  ASSERT_EQ(refs.size(), 5u);
  CpuBackendOptions options;
  options.kv = {16, 64};  // 1024 positions, more than the 512-token context
  auto backend = CreateCpuBackend(*model_, options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  PagedKvCache kv(options.kv);
  for (const auto& ref : refs) {
    SCOPED_TRACE(ref.prompt);
    const auto ids = model_->tokenizer->Encode(ref.prompt, /*add_special=*/true);
    ASSERT_EQ(std::vector<int>(ids.begin(), ids.end()), ref.prompt_ids);
    GenerationRequest req;
    req.prompt_ids = ids;
    req.max_new_tokens = static_cast<int>(ref.greedy_ids.size());
    req.stop_at_eos = false;
    auto result = Generate(**backend, kv, req, DecodingEnvironment{.model = &model_->config});
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(std::vector<int>(result->ids.begin(), result->ids.end()), ref.greedy_ids);
    // The logits after the prompt: its forward, whose last row the first token is read
    // from (the CPU forward is batch-invariant, so chunking does not change them).
    std::vector<float> prompt_logits;
    const SequenceId seq = kv.CreateSequence();
    ForwardBatch prompt;
    for (size_t p = 0; p < ids.size(); ++p) {
      prompt.rows.push_back({.seq = seq, .position = static_cast<int32_t>(p), .token = ids[p],
                             .want_logits = p + 1 == ids.size()});
    }
    ASSERT_TRUE((*backend)->Forward(prompt, kv, prompt_logits).ok());
    kv.Free(seq);
    ASSERT_EQ(prompt_logits.size(), ref.logits_after_prompt.size());
    float max_err = 0;
    for (size_t i = 0; i < ref.logits_after_prompt.size(); ++i) {
      max_err = std::max(max_err, std::fabs(prompt_logits[i] - ref.logits_after_prompt[i]));
    }
    // The reference prints 6 significant digits: values near 10 carry 5e-5 of rounding.
    EXPECT_LE(max_err, 1e-4f);
    std::printf("%-32s greedy ids match (%zu), max |logit - reference| = %.2g\n", ("\"" + ref.prompt + "\"").c_str(),
                ref.greedy_ids.size(), max_err);
    EXPECT_EQ(kv.Stats().used_blocks, 0);
  }
}

TEST_F(StoriesReferenceTest, PromptLongerThanContextIsRefused) {
  CpuBackendOptions options;
  options.kv = {16, 64};
  auto backend = CreateCpuBackend(*model_, options);
  ASSERT_TRUE(backend.ok());
  PagedKvCache kv(options.kv);
  GenerationRequest req;
  req.prompt_ids.assign(static_cast<size_t>(model_->config.max_position) + 5, 300);
  auto result = Generate(**backend, kv, req, DecodingEnvironment{.model = &model_->config});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("context length"), std::string::npos) << result.status();
  EXPECT_EQ(kv.Stats().used_blocks, 0);
}

}  // namespace
}  // namespace crossreg
