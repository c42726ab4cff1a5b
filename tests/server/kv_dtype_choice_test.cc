// --kv_dtype auto: the K/V element type an engine picks for its model and backend, and
// what the flag accepts.
#include <string>

#include "engine/kv/kv_storage.h"
#include "engine/model/random_model.h"
#include "engine/runtime/open_engine.h"
#include "gtest/gtest.h"

namespace crossreg {
namespace {

LoadedModel Loaded(DType dtype) {
  LoadedModel loaded;
  loaded.model_path = "random";
  // Inputs of 256: whole blocks of every quantized type used here.
  ModelConfig config;
  config.vocab_size = 64;
  config.num_layers = 2;
  config.num_kv_heads = 2;
  config.max_position = 256;
  config.hidden_size = 256;
  config.intermediate_size = 256;
  config.num_heads = 8;
  config.head_dim = 32;
  loaded.model = MakeRandomModel(config, RandomModelOptions{.dtype = dtype, .seed = 3});
  return loaded;
}

TEST(KvDtypeChoiceTest, TheFlagTakesAutoF32AndBf16AndNamesThemWhenRefusing) {
  EXPECT_FALSE(ParseKvDtypeChoice("auto")->has_value());
  EXPECT_EQ(ParseKvDtypeChoice("f32")->value(), KvDtype::kF32);
  EXPECT_EQ(ParseKvDtypeChoice("bf16")->value(), KvDtype::kBf16);
  const auto bad = ParseKvDtypeChoice("f16");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("--kv_dtype must be auto, f32 or bf16, got 'f16'"),
            std::string::npos)
      << bad.status();
  EXPECT_STREQ(KvDtypeChoiceName(std::nullopt), "auto");
  EXPECT_STREQ(KvDtypeChoiceName(KvDtype::kBf16), "bf16");
}

TEST(KvDtypeChoiceTest, AutoIsBf16OnTheCpuUnlessTheWeightsAreF32AndF32OnCuda) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kQ8_0, DType::kQ4_K}) {
    const LoadedModel loaded = Loaded(dtype);
    EXPECT_EQ(AutoKvDtype(*loaded.model, BackendChoice::kCpu), dtype == DType::kF32 ? KvDtype::kF32 : KvDtype::kBf16)
        << std::string(DTypeName(dtype));
    EXPECT_EQ(AutoKvDtype(*loaded.model, BackendChoice::kCuda), KvDtype::kF32) << std::string(DTypeName(dtype));
  }
}

TEST(KvDtypeChoiceTest, AnEngineOpenedWithoutAChoiceTakesAutosAndSizesItsCacheForIt) {
  EngineOptions options;
  options.backend = BackendChoice::kCpu;
  options.cpu_threads = 1;
  options.kv_memory_bytes = int64_t{1} << 20;
  auto bf16 = OpenEngine(Loaded(DType::kBF16), options);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ((*bf16)->kv_dtype, KvDtype::kBf16);
  EXPECT_NE((*bf16)->backend->device().find("KV bf16"), std::string::npos) << (*bf16)->backend->device();

  options.kv_dtype = KvDtype::kF32;  // an explicit choice wins
  auto f32 = OpenEngine(Loaded(DType::kBF16), options);
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_EQ((*f32)->kv_dtype, KvDtype::kF32);
  // The same memory holds twice the blocks at 2 bytes an element.
  EXPECT_EQ((*bf16)->kv->config().num_blocks, 2 * (*f32)->kv->config().num_blocks);

  options.kv_dtype.reset();
  auto f32_model = OpenEngine(Loaded(DType::kF32), options);
  ASSERT_TRUE(f32_model.ok()) << f32_model.status();
  EXPECT_EQ((*f32_model)->kv_dtype, KvDtype::kF32);
}

}  // namespace
}  // namespace crossreg
