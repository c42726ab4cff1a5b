// FP8 weights (--weights fp8): the quantization kernel against its CPU twin bit for bit,
// the FP8 GEMV and the dequantization against host references, and the CUDA backend on
// FP8 weights: lossless equals AR, and the logits track the bf16 model's (the figures
// are printed: they are docs/cuda.md's quality numbers).
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "engine/cuda/device_weights.h"
#include "engine/cuda/gemm.h"
#include "engine/cuda/kernels.h"
#include "scheduler/generate.h"
#include "engine/dtype.h"
#include "engine/model/model_loader.h"
#include "engine/model/random_model.h"
#include "engine/quant/fp8_e4m3.h"
#include "tests/gpu/gpu_generation.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/testing/tiny_models.h"

namespace crossreg {
namespace {

using cuda::Bf16;
using testing::Bf16ToDevice;
using testing::RandomVector;
using testing::RelativeL2Error;
using testing::ToDevice;
using testing::ToHost;

using Fp8KernelTest = testing::CudaContextTest;

// A bf16 matrix with rows of very different magnitudes, an all-zero row and a few
// values past the format's range before scaling.
std::vector<uint16_t> TestMatrix(int out, int in, uint32_t seed) {
  auto w = RandomVector(static_cast<size_t>(out) * in, seed);
  std::vector<uint16_t> bits(w.size());
  for (int o = 0; o < out; ++o) {
    const float magnitude = o == 3 ? 0.0f : std::ldexp(1.0f, (o % 13) - 8);
    for (int k = 0; k < in; ++k) bits[o * in + k] = F32ToBf16(w[o * in + k] * magnitude * (k == o % in ? 900.0f : 1.0f));
  }
  return bits;
}

struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> scale;
};
Quantized HostQuantize(const std::vector<uint16_t>& bits, int out, int in) {
  Quantized q{std::vector<uint8_t>(bits.size()), std::vector<float>(out)};
  std::vector<float> row(in);
  for (int o = 0; o < out; ++o) {
    for (int k = 0; k < in; ++k) row[k] = Bf16ToF32(bits[o * in + k]);
    q.scale[o] = QuantizeRowFp8E4M3(row.data(), in, q.codes.data() + o * in);
  }
  return q;
}

TEST_F(Fp8KernelTest, QuantizationGivesTheCpuTwinsBits) {
  const int out = 37, in = 1040;
  const auto bits = TestMatrix(out, in, 5);
  const Quantized want = HostQuantize(bits, out, in);
  auto dw = Bf16ToDevice(bits);
  cuda::DeviceBuffer<uint8_t> codes;
  cuda::DeviceBuffer<float> scale;
  ASSERT_TRUE(codes.Allocate(bits.size()).ok());
  ASSERT_TRUE(scale.Allocate(out).ok());
  ASSERT_EQ(cuda::LaunchQuantizeRowsFp8(dw.data(), out, in, codes.data(), scale.data(), ctx_->stream()), cudaSuccess);
  EXPECT_EQ(ToHost(codes, bits.size()), want.codes);
  EXPECT_EQ(ToHost(scale, out), want.scale);
}

TEST_F(Fp8KernelTest, GemvAndDequantizedGemmMatchTheHostProduct) {
  const int in = 1024, out = 136, ldy = 140;
  const auto bits = TestMatrix(out, in, 6);
  const Quantized q = HostQuantize(bits, out, in);
  cuda::DeviceLinear w;
  w.out = out;
  w.in = in;
  w.fp8 = ToDevice(q.codes);
  w.scale = ToDevice(q.scale);
  cuda::DeviceBuffer<Bf16> scratch;
  ASSERT_TRUE(scratch.Allocate(static_cast<size_t>(out) * in).ok());
  for (int rows : {1, 2, 3, 5, 8, 9, 33}) {
    std::vector<uint16_t> x_bits(static_cast<size_t>(rows) * in);
    const auto x = RandomVector(x_bits.size(), 40 + rows);
    for (size_t i = 0; i < x.size(); ++i) x_bits[i] = F32ToBf16(x[i]);
    auto dx = Bf16ToDevice(x_bits);
    cuda::DeviceBuffer<float> y;
    ASSERT_TRUE(y.Allocate(static_cast<size_t>(rows) * ldy).ok());
    ASSERT_TRUE(cuda::GemmLinear(*ctx_, dx.data(), rows, w, y.data(), ldy, 0.0f, scratch.data()).ok());
    const auto got_strided = ToHost(y, static_cast<size_t>(rows) * ldy);
    std::vector<float> got(static_cast<size_t>(rows) * out), want(got.size());
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < out; ++o) {
        double sum = 0;
        for (int k = 0; k < in; ++k) {
          float wv = Fp8E4M3ToF32(q.codes[o * in + k]) * q.scale[o];
          if (rows > cuda::kMaxGemvFp8Rows) wv = Bf16ToF32(F32ToBf16(wv));  // the dequantized bf16 copy
          sum += double(wv) * Bf16ToF32(x_bits[r * in + k]);
        }
        want[r * out + o] = static_cast<float>(sum);
        got[r * out + o] = got_strided[r * ldy + o];
      }
    }
    EXPECT_LT(RelativeL2Error(got, want), 1e-5) << "rows " << rows;
    // beta = 1 accumulates (the residual stream).
    ASSERT_TRUE(cuda::GemmLinear(*ctx_, dx.data(), rows, w, y.data(), ldy, 1.0f, scratch.data()).ok());
    const auto twice = ToHost(y, static_cast<size_t>(rows) * ldy);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < out; ++o) {
        ASSERT_NEAR(twice[r * ldy + o], 2 * got_strided[r * ldy + o], 1e-4 * (1 + std::abs(got_strided[r * ldy + o])))
            << "rows " << rows;
      }
    }
  }
}

TEST_F(Fp8KernelTest, DequantizationIsTheScaledCodeRoundedToBf16) {
  const int out = 9, in = 64;
  const auto bits = TestMatrix(out, in, 7);
  const Quantized q = HostQuantize(bits, out, in);
  auto codes = ToDevice(q.codes);
  auto scale = ToDevice(q.scale);
  cuda::DeviceBuffer<Bf16> w;
  ASSERT_TRUE(w.Allocate(bits.size()).ok());
  ASSERT_EQ(cuda::LaunchDequantizeFp8(codes.data(), scale.data(), out, in, w.data(), ctx_->stream()), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> got(bits.size());
  ASSERT_EQ(cudaMemcpy(got.data(), w.data(), got.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], F32ToBf16(Fp8E4M3ToF32(q.codes[i]) * q.scale[i / in])) << i;
  }
}

using testing::GpuEngine;
using testing::GreedyIds;
using testing::MakeGpuEngine;

TEST(CudaFp8BackendTest, GreedyLosslessEqualsGreedyArOnFp8Weights) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto model = MakeRandomModel(testing::TinyConfig(48), {DType::kF32, 1, 2.0f});
  RandomLoraOptions lo;
  lo.magnitude = 0.5f;
  lo.seed = 11;
  lo.placeholder_token_id = 47;
  auto adapter = MakeRandomLoraAdapter(model->config, lo);
  GpuEngine e = MakeGpuEngine(*model, adapter.get(), 1024, CudaWeights::kFp8);
  ASSERT_TRUE(e.backend);
  EXPECT_NE(e.backend->device().find("weights fp8"), std::string::npos) << e.backend->device();
  for (const std::vector<int32_t>& prompt : {std::vector<int32_t>{1}, std::vector<int32_t>{3, 4, 5, 3, 4}}) {
    const auto ar = GreedyIds(e, *model, prompt, 40, DecodingMode::kAutoregressive, 1);
    ASSERT_EQ(ar.size(), 40u);
    for (int gamma : {4, 16}) EXPECT_EQ(GreedyIds(e, *model, prompt, 40, DecodingMode::kLossless, gamma), ar) << gamma;
  }
}

TEST(CudaFp8BackendTest, RefusesShapesTheFp8KernelsCannotTake) {
  SKIP_WITHOUT_CUDA_DEVICE();
  ModelConfig c = testing::TinyConfig(48);
  c.intermediate_size = 72;  // not a multiple of 16
  auto model = MakeRandomModel(c, {DType::kF32, 1, 2.0f});
  CudaBackendOptions options;
  options.weights = CudaWeights::kFp8;
  options.kv = {4, 16};
  auto backend = CreateCudaBackend(*model, options);
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.status().message().find("divisible by 16"), std::string::npos) << backend.status();
}

// The quality figures: the default model (models/default) on FP8 against bf16, logits of
// a prompt's rows and the greedy continuation's agreement.
TEST(CudaFp8BackendTest, Fp8LogitsTrackBf16OnTheDefaultModel) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const char* env = std::getenv("CROSSREG_SOURCE_DIR");
  const std::string dir = std::string(env != nullptr ? env : CROSSREG_SOURCE_DIR) + "/models/default";
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << "no default model at " << dir;
  auto model = LoadModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  GpuEngine bf16 = MakeGpuEngine(**model, nullptr, 1024, CudaWeights::kBf16);
  GpuEngine fp8 = MakeGpuEngine(**model, nullptr, 1024, CudaWeights::kFp8);
  ASSERT_TRUE(bf16.backend && fp8.backend);
  // Byte-level BPE ids of ordinary Python source (any ids of the vocabulary would do).
  std::vector<int32_t> prompt;
  for (int i = 0; i < 48; ++i) prompt.push_back((i * 379 + 11) % 16000);
  auto logits = [&](GpuEngine& e) {
    ForwardBatch b;
    const SequenceId seq = e.kv->CreateSequence();
    for (size_t p = 0; p < prompt.size(); ++p)
      b.rows.push_back({.seq = seq, .position = static_cast<int>(p), .token = prompt[p], .want_logits = true});
    std::vector<float> out;
    EXPECT_TRUE(e.backend->Forward(b, *e.kv, out).ok());
    e.kv->Free(seq);
    return out;
  };
  const auto a = logits(bf16), b = logits(fp8);
  const double rel = RelativeL2Error(b, a);
  const int vocab = (*model)->config.vocab_size;
  int same_argmax = 0;
  for (size_t r = 0; r < prompt.size(); ++r) {
    auto row = [&](const std::vector<float>& v) {
      return std::max_element(v.begin() + r * vocab, v.begin() + (r + 1) * vocab) - (v.begin() + r * vocab);
    };
    same_argmax += row(a) == row(b);
  }
  const auto greedy_bf16 = GreedyIds(bf16, **model, {prompt.begin(), prompt.begin() + 16}, 128,
                                  DecodingMode::kAutoregressive, 1);
  const auto greedy_fp8 = GreedyIds(fp8, **model, {prompt.begin(), prompt.begin() + 16}, 128,
                                 DecodingMode::kAutoregressive, 1);
  size_t common = 0;
  while (common < std::min(greedy_bf16.size(), greedy_fp8.size()) && greedy_bf16[common] == greedy_fp8[common]) ++common;
  std::printf("[fp8 quality] default model, 48 prompt rows: logits relative L2 error %.4f vs bf16, argmax agreement "
              "%d/48; greedy: first %zu of 128 tokens identical\n",
              rel, same_argmax, common);
  RecordProperty("fp8_logits_rel_l2", std::to_string(rel));
  EXPECT_LT(rel, 0.1);
  EXPECT_GE(same_argmax, 40);
}

}  // namespace
}  // namespace crossreg
