// The CPU adapter update (engine/cpu/lora_delta.h) on every SIMD path, for f32 and bf16
// panels: predictive rows get base + scale·B·(A·x) (double reference on the rounded
// operands), other rows exactly the base layer, and a row's bits are the same whether
// the A products ran with the base layer (many predictive rows) or on gathered rows
// (few), on one thread or two.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/linear.h"
#include "engine/cpu/lora_delta.h"
#include "engine/dtype.h"
#include "engine/sampler.h"
#include "gtest/gtest.h"

namespace crossreg::cpu {
namespace {

std::vector<float> Random(size_t n, Rng& rng, float magnitude = 1.0f) {
  std::vector<float> v(n);
  for (auto& x : v) x = magnitude * static_cast<float>(rng.Uniform() * 2 - 1);
  return v;
}

float Round(float v, PanelFormat f) { return f == PanelFormat::kBf16 ? Bf16ToF32(F32ToBf16(v)) : v; }

// (rows, out) = x · wᵀ in double on the operands as the kernels see them, then to float.
std::vector<double> Product(const std::vector<float>& x, int64_t rows, const std::vector<float>& w, int64_t out,
                            int64_t in, PanelFormat f) {
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t k = 0; k < in; ++k) acc += double(Round(w[o * in + k], f)) * Round(x[r * in + k], f);
      y[static_cast<size_t>(r * out + o)] = acc;
    }
  }
  return y;
}

struct Layer {
  std::vector<float> w;  // (out, in)
  std::vector<uint16_t> w_bf16;
  PackedWeights packed;
  LoraMatrix lora;
  PackedLoraMatrix packed_lora;
  int64_t out = 0;
};

Layer MakeLayer(int64_t in, int64_t out, int rank, PanelFormat f, Rng& rng) {
  Layer l;
  l.out = out;
  l.w = Random(static_cast<size_t>(out * in), rng);
  if (f == PanelFormat::kF32) {
    l.packed = PackedWeights::PackF32(l.w.data(), out, in);
  } else {
    for (float v : l.w) l.w_bf16.push_back(F32ToBf16(v));
    l.packed = PackedWeights::Pack(TensorRef{DType::kBF16, {out, in}, l.w_bf16.data()});
  }
  l.lora.rank = rank;
  l.lora.scale = 0.5f;
  l.lora.a = Random(static_cast<size_t>(rank * in), rng);
  l.lora.b = Random(static_cast<size_t>(out * rank), rng);
  l.packed_lora = PackedLoraMatrix::Pack(l.lora, in, out, f);
  return l;
}

using Params = std::tuple<PanelFormat, SimdLevel>;
class LoraDeltaTest : public ::testing::TestWithParam<Params> {
 protected:
  PanelFormat format() const { return std::get<0>(GetParam()); }
  SimdLevel level() const { return std::get<1>(GetParam()); }

  // Runs the group (every layer adapted except `unadapted`) on x with predictive `which`.
  std::vector<std::vector<float>> Run(std::vector<Layer>& layers, int unadapted, const std::vector<float>& x,
                                      int64_t rows, const std::vector<int64_t>& which, ThreadPool& pool) {
    std::vector<std::vector<float>> ys(layers.size());
    std::vector<LinearOutput> base;
    std::vector<const PackedLoraMatrix*> lora;
    for (size_t i = 0; i < layers.size(); ++i) {
      ys[i].assign(static_cast<size_t>(rows * layers[i].out), -7.0f);
      base.push_back({&layers[i].packed, ys[i].data()});
      lora.push_back(static_cast<int>(i) == unadapted ? nullptr : &layers[i].packed_lora);
    }
    LinearWithLora(base.data(), lora.data(), static_cast<int>(layers.size()), x.data(), rows, which, pool, level());
    return ys;
  }
};

TEST_P(LoraDeltaTest, PredictiveRowsGetTheUpdateAndOtherRowsTheBaseLayer) {
  Rng rng(11);
  ThreadPool two(2);
  const int64_t in = 67, rows = 9;
  const int rank = 5;
  std::vector<Layer> layers;
  for (int64_t out : {40, 33, 7}) layers.push_back(MakeLayer(in, out, rank, format(), rng));
  const auto x = Random(static_cast<size_t>(rows * in), rng);
  for (const std::vector<int64_t>& which : {std::vector<int64_t>{1, 4, 5, 8}, std::vector<int64_t>{6}}) {
    const auto ys = Run(layers, /*unadapted=*/1, x, rows, which, two);
    for (size_t i = 0; i < layers.size(); ++i) {
      const Layer& l = layers[i];
      const auto base = Product(x, rows, l.w, l.out, in, format());
      const auto t = Product(x, rows, l.lora.a, rank, in, format());
      for (int64_t r = 0; r < rows; ++r) {
        const bool predictive = std::find(which.begin(), which.end(), r) != which.end() && i != 1;
        // t is rounded to the kernels' operand precision before B (it is their input).
        std::vector<float> tr(static_cast<size_t>(rank));
        for (int j = 0; j < rank; ++j) tr[static_cast<size_t>(j)] = static_cast<float>(t[r * rank + j]) * l.lora.scale;
        const auto d = Product(tr, 1, l.lora.b, l.out, rank, format());
        for (int64_t o = 0; o < l.out; ++o) {
          const double want = base[r * l.out + o] + (predictive ? d[static_cast<size_t>(o)] : 0.0);
          ASSERT_NEAR(ys[i][static_cast<size_t>(r * l.out + o)], want, 1e-4 * in)
              << "layer " << i << " row " << r << " out " << o << (predictive ? " (predictive)" : "");
        }
      }
    }
  }
}

TEST_P(LoraDeltaTest, RowBitsDoNotDependOnThePathTheRowsOrTheThreads) {
  Rng rng(12);
  ThreadPool one(1), two(2);
  const int64_t in = 96, rows = 24;
  std::vector<Layer> layers;
  for (int64_t out : {64, 32}) layers.push_back(MakeLayer(in, out, 8, format(), rng));
  const auto x = Random(static_cast<size_t>(rows * in), rng);
  // Half the rows predictive: the A products run with the base layer. Two of 24: gathered.
  std::vector<int64_t> many;
  for (int64_t r = 1; r < rows; r += 2) many.push_back(r);
  const auto folded = Run(layers, -1, x, rows, many, two);
  const auto gathered = Run(layers, -1, x, rows, {3, 17}, two);
  for (int64_t r : {int64_t{3}, int64_t{17}}) {
    std::vector<float> row_x(x.begin() + r * in, x.begin() + (r + 1) * in);
    const auto alone = Run(layers, -1, row_x, 1, {0}, one);
    for (size_t i = 0; i < layers.size(); ++i) {
      const int64_t out = layers[i].out;
      EXPECT_EQ(std::memcmp(folded[i].data() + r * out, gathered[i].data() + r * out, sizeof(float) * out), 0)
          << "layer " << i << " row " << r;
      EXPECT_EQ(std::memcmp(alone[i].data(), folded[i].data() + r * out, sizeof(float) * out), 0)
          << "layer " << i << " row " << r;
    }
  }
}

std::vector<Params> AllParams() {
  std::vector<Params> out;
  for (PanelFormat f : {PanelFormat::kF32, PanelFormat::kBf16}) {
    for (SimdLevel l : AvailableSimdLevels()) out.emplace_back(f, l);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryPath, LoraDeltaTest, ::testing::ValuesIn(AllParams()), [](const auto& info) {
  return std::string(std::get<0>(info.param) == PanelFormat::kF32 ? "f32" : "bf16") + "_" +
         SimdLevelName(std::get<1>(info.param));
});

}  // namespace
}  // namespace crossreg::cpu
