// The kQ8 kernels (quantized GGML weights x 8-bit activations): on every SIMD path this
// CPU has, bit for bit the portable kernel's result, which is checked against an
// integer reference written here from the definition; within a stated tolerance of the
// dequantized weights times the unquantized activations; and a row's result
// independent of the rows beside it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/linear.h"
#include "engine/cpu/linear_kernels.h"
#include "engine/cpu/packed_weights.h"
#include "engine/cpu/quant_panel_order.h"
#include "engine/cpu/tile_order_chooser.h"
#include "engine/cpu/thread_pool.h"
#include "engine/quant/ggml_blocks.h"
#include "engine/sampler.h"
#include "gtest/gtest.h"

namespace crossreg::cpu {
namespace {

constexpr DType kTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                            DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,
                            DType::kIQ4_NL, DType::kIQ4_XS};

struct QuantWeight {
  std::vector<unsigned char> bytes;
  std::vector<float> dequantized;  // what the file's values are
  TensorRef ref;
};

QuantWeight MakeWeight(DType type, int64_t out, int64_t in, Rng& rng) {
  std::vector<float> values(static_cast<size_t>(out * in));
  for (auto& v : values) v = static_cast<float>(rng.Uniform() * 2 - 1);
  QuantWeight w;
  w.bytes.resize(DTypeBytes(type, out * in));
  quant::Quantize(type, values.data(), w.bytes.data(), out * in);
  w.dequantized.resize(values.size());
  quant::Dequantize(type, w.bytes.data(), w.dequantized.data(), out * in);
  w.ref = TensorRef{type, {out, in}, w.bytes.data()};
  return w;
}

std::vector<float> RandomRows(int64_t rows, int64_t in, Rng& rng) {
  std::vector<float> x(static_cast<size_t>(rows * in));
  for (auto& v : x) v = static_cast<float>(rng.Uniform() * 2 - 1);
  return x;
}

// Inputs per activation scale: 256 (a super-block) for the formats of integer sub-block
// scales, else 32.
int64_t ActivationBlock(DType type) { return quant::HasIntegerSubBlockScales(type) ? 256 : 32; }

// x's row r quantized per `block` inputs: d = amax / 127, q = nearest-even(x / d).
void QuantizeRow(const std::vector<float>& x, int64_t r, int64_t in, int64_t block, std::vector<int8_t>& xq,
                 std::vector<float>& xd) {
  for (int64_t b = 0; b < in / block; ++b) {
    float amax = 0;
    for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(r * in + b * block + i)]));
    const float d = amax / 127.0f;
    const float id = d > 0 ? 1.0f / d : 0.0f;
    xd[static_cast<size_t>(b)] = d;
    for (int64_t i = 0; i < block; ++i) {
      xq[static_cast<size_t>(b * block + i)] = static_cast<int8_t>(
          std::clamp(std::nearbyint(x[static_cast<size_t>(r * in + b * block + i)] * id), -127.0f, 127.0f));
    }
  }
}

// The formats of integer sub-block scales, from their definition: x quantized per 256,
// each super-block decoded to unsigned codes and integer scales and mins, the two exact
// integer sums sum_j sc_j * (q . x)_j and sum_j m_j * (sum x)_j, then the two float steps
// (Q6_K and Q3_K, whose mins are 32 and 4 times their scales: their difference, one step).
std::vector<float> SuperBlockReference(const QuantWeight& w, const std::vector<float>& x, int64_t rows) {
  const DType type = w.ref.dtype;
  const int64_t out = w.ref.rows(), in = w.ref.cols();
  const int sub = quant::CodesOf(type).sub_block;
  std::vector<float> y(static_cast<size_t>(rows * out));
  std::vector<int8_t> xq(static_cast<size_t>(in));
  std::vector<float> xd(static_cast<size_t>(in / 256));
  uint8_t q[256];
  int16_t sc[16], m[16];
  for (int64_t r = 0; r < rows; ++r) {
    QuantizeRow(x, r, in, 256, xq, xd);
    for (int64_t o = 0; o < out; ++o) {
      float acc = 0;
      for (int64_t b = 0; b < in / 256; ++b) {
        float d, dmin;
        quant::DecodeSuperBlock(type, w.bytes.data() + static_cast<size_t>(o) * w.ref.row_bytes() + b * DTypeBlockBytes(type),
                                q, sc, m, &d, &dmin);
        int32_t isum = 0, msum = 0;
        for (int s = 0; s < 256 / sub; ++s) {
          int32_t dot = 0, xsum = 0;
          for (int kk = 0; kk < sub; ++kk) {
            const int8_t v = xq[static_cast<size_t>(b * 256 + s * sub + kk)];
            dot += q[s * sub + kk] * v;
            xsum += v;
          }
          isum += sc[s] * dot;
          msum += m[s] * xsum;
        }
        const float xs = xd[static_cast<size_t>(b)];
        if (type == DType::kQ6_K || type == DType::kQ3_K) {  // m = 32 sc or 4 sc, dmin = d: one step
          acc = std::fma(static_cast<float>(isum - msum), d * xs, acc);
        } else {
          acc = std::fma(static_cast<float>(isum), d * xs, acc);
          acc = std::fma(-static_cast<float>(msum), dmin * xs, acc);
        }
      }
      y[static_cast<size_t>(r * out + o)] = acc;
    }
  }
  return y;
}

// The definition, written independently of the kernels' layout: x quantized per 32
// inputs (d = amax / 127, q = nearest-even(x / d)), each weight block decoded to its
// integer codes, per sub-block an exact integer dot product, then the float steps in
// the documented order; the formats of integer sub-block scales as SuperBlockReference.
std::vector<float> IntegerReference(const QuantWeight& w, const std::vector<float>& x, int64_t rows) {
  const DType type = w.ref.dtype;
  if (quant::HasIntegerSubBlockScales(type)) return SuperBlockReference(w, x, rows);
  const int64_t out = w.ref.rows(), in = w.ref.cols();
  const quant::BlockCodes codes = quant::CodesOf(type);
  const int64_t block = DTypeBlockElements(type);
  const int sub = codes.sub_block;
  std::vector<float> y(static_cast<size_t>(rows * out));
  std::vector<int8_t> xq(static_cast<size_t>(in));
  std::vector<float> xd(static_cast<size_t>(in / 32));
  std::vector<int8_t> q(static_cast<size_t>(block));
  std::vector<float> scale(static_cast<size_t>(block / sub)), min(static_cast<size_t>(block / sub));
  for (int64_t r = 0; r < rows; ++r) {
    QuantizeRow(x, r, in, 32, xq, xd);
    for (int64_t o = 0; o < out; ++o) {
      float acc = 0;
      for (int64_t b = 0; b < in / block; ++b) {
        quant::DecodeBlock(type, w.bytes.data() + static_cast<size_t>(o) * w.ref.row_bytes() + b * DTypeBlockBytes(type),
                           q.data(), scale.data(), min.data());
        for (int64_t s = 0; s < block / sub; ++s) {
          const int64_t k0 = b * block + s * sub;
          int32_t isum = 0, xsum = 0;
          for (int kk = 0; kk < sub; ++kk) {
            isum += q[static_cast<size_t>(s * sub + kk)] * xq[static_cast<size_t>(k0 + kk)];
            xsum += xq[static_cast<size_t>(k0 + kk)];
          }
          const float xs = xd[static_cast<size_t>(k0 / 32)];
          // Formats with mins store unsigned codes: isum above used the signed view of
          // values 0..63, which is the same number.
          acc = std::fma(static_cast<float>(isum), scale[static_cast<size_t>(s)] * xs, acc);
          if (codes.has_min) acc = std::fma(-(static_cast<float>(xsum) * xs), min[static_cast<size_t>(s)], acc);
        }
      }
      y[static_cast<size_t>(r * out + o)] = acc;
    }
  }
  return y;
}

class QuantizedLinearTest : public ::testing::TestWithParam<DType> {};

TEST_P(QuantizedLinearTest, EveryPathEqualsTheIntegerReferenceBitwise) {
  const DType type = GetParam();
  const int64_t block = DTypeBlockElements(type);
  Rng rng(11);
  ThreadPool pool(2);
  // Outputs not a multiple of the panel width; K of one and of several blocks.
  for (const auto& [out, in] : std::vector<std::pair<int64_t, int64_t>>{{37, block}, {70, 3 * block}}) {
    const QuantWeight w = MakeWeight(type, out, in, rng);
    const PackedWeights packed = PackedWeights::Pack(w.ref, &pool);
    ASSERT_EQ(packed.format(), PanelFormat::kQ8);
    // 7 and 8 rows: calls of tiles of 4 and 3 rows (the AVX2 super-block kernels run
    // several tiles' rows as 3 + 3, 3 + 2, 2 + 2, 3 or 2: quant_kernels_avx2.cc).
    for (int64_t rows : {1, 2, 3, 5, 6, 7, 8, 16, 33}) {
      const std::vector<float> x = RandomRows(rows, in, rng);
      const std::vector<float> want = IntegerReference(w, x, rows);
      for (SimdLevel level : AvailableSimdLevels()) {
        std::vector<float> y(static_cast<size_t>(rows * out), -1.0f);
        Linear(packed, x.data(), rows, y.data(), pool, level);
        ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)))
            << DTypeName(type) << " " << out << "x" << in << " rows " << rows << " on " << SimdLevelName(level)
            << ": y[0] " << y[0] << " want " << want[0];
      }
    }
  }
}

// Against the dequantized weights times unquantized activations, in double: the one
// approximation is the activations' 8-bit rounding, an error of at most d/2 = amax/254
// per input, so |error| <= sum_k |w_k| * amax_block(k) / 254 (plus float rounding), the
// block the activation scale's (ActivationBlock).
TEST_P(QuantizedLinearTest, WithinTheActivationRoundingOfTheDequantizedProduct) {
  const DType type = GetParam();
  const int64_t in = 2 * DTypeBlockElements(type), out = 40, rows = 6;
  Rng rng(5);
  ThreadPool pool(1);
  const QuantWeight w = MakeWeight(type, out, in, rng);
  const PackedWeights packed = PackedWeights::Pack(w.ref);
  const std::vector<float> x = RandomRows(rows, in, rng);
  std::vector<float> y(static_cast<size_t>(rows * out));
  Linear(packed, x.data(), rows, y.data(), pool);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double exact = 0, bound = 0;
      for (int64_t k = 0; k < in; ++k) {
        const double wk = w.dequantized[static_cast<size_t>(o * in + k)];
        exact += wk * x[static_cast<size_t>(r * in + k)];
        const int64_t block = ActivationBlock(type);
        float amax = 0;
        for (int64_t i = 0; i < block; ++i) {
          amax = std::max(amax, std::fabs(x[static_cast<size_t>(r * in + (k / block) * block + i)]));
        }
        bound += std::fabs(wk) * amax / 254.0;
      }
      EXPECT_NEAR(y[static_cast<size_t>(r * out + o)], exact, bound * 1.001 + 1e-5)
          << DTypeName(type) << " row " << r << " output " << o;
    }
  }
}

TEST_P(QuantizedLinearTest, ARowsResultDoesNotDependOnTheRowsBesideIt) {
  const DType type = GetParam();
  const int64_t in = 2 * DTypeBlockElements(type), out = 96;
  Rng rng(9);
  ThreadPool pool(2);
  const QuantWeight w = MakeWeight(type, out, in, rng);
  const PackedWeights packed = PackedWeights::Pack(w.ref);
  const std::vector<float> x = RandomRows(40, in, rng);
  for (SimdLevel level : AvailableSimdLevels()) {
    std::vector<float> all(static_cast<size_t>(40 * out));
    Linear(packed, x.data(), 40, all.data(), pool, level);
    for (int64_t r : {0, 7, 39}) {
      std::vector<float> one(static_cast<size_t>(out));
      Linear(packed, x.data() + r * in, 1, one.data(), pool, level);
      EXPECT_EQ(0, std::memcmp(one.data(), all.data() + r * out, out * sizeof(float)))
          << DTypeName(type) << " row " << r << " on " << SimdLevelName(level);
    }
  }
}

// Verify-sized calls of several row tiles run in either loop order (whole-K or K-blocked,
// engine/cpu/quant_panel_order.h), the chooser alternating them during its trials. K spans
// several blocks, so the blocked order carries sums between blocks: every call must still
// give the integer reference's bits, whichever order it ran.
TEST_P(QuantizedLinearTest, BothLoopOrdersOfVerifySizedCallsEqualTheIntegerReference) {
  const DType type = GetParam();
  const int64_t in = 1024;
  const int64_t type_index = std::find(std::begin(kTypes), std::end(kTypes), type) - std::begin(kTypes);
  Rng rng(13);
  ThreadPool pool(2);
  for (SimdLevel level : AvailableSimdLevels()) {
    // The chooser is the process's: a shape (panels) of this test's own per format and
    // level, so no other call has decided it and both orders run here.
    const int64_t out = 33 + kPanelWidth * (4 * type_index + static_cast<int64_t>(level));
    const QuantWeight w = MakeWeight(type, out, in, rng);
    const PackedWeights packed = PackedWeights::Pack(w.ref, &pool);
    ASSERT_GT(packed.panel_bytes(), 2 * internal::kQuantBlockBytes);  // three blocks or more
    // Every count makes two tiles or more on every kernel (the orders differ only then).
    for (const int64_t rows : {internal::kQuantTileRowsMax + 2, int64_t{16}, int64_t{33}}) {
      const std::vector<float> x = RandomRows(rows, in, rng);
      const std::vector<float> want = IntegerReference(w, x, rows);
      for (int call = 0; call < 2 * TileOrderChooser::kTrials + 2; ++call) {
        std::vector<float> y(static_cast<size_t>(rows * out), -1.0f);
        Linear(packed, x.data(), rows, y.data(), pool, level);
        ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)))
            << DTypeName(type) << " rows " << rows << " on " << SimdLevelName(level) << ", call " << call;
      }
      // The SIMD kernels have both orders and have compared them by now.
      if (level >= SimdLevel::kAvx2) {
        LinearCallShape shape{.in = in, .panels = packed.panels(), .rows = rows, .threads = 1};
        const bool decided = TileOrderChooser::Global().Chosen(shape).has_value() ||
                             TileOrderChooser::Global().Chosen({.in = in, .panels = packed.panels(), .rows = rows,
                                                                .threads = 2}).has_value();
        EXPECT_TRUE(decided) << DTypeName(type) << " rows " << rows << " on " << SimdLevelName(level);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedLinearTest, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// Q8_0 codes at the ends of their range (-128 and 127, which a file may hold though ggml's
// quantizer writes -127..127) against activations at theirs (+-127): the products and
// their pair sums as large as they get (2 x 128 x 127), where an int16 step would wrap or
// saturate. Every path still equals the integer reference bit for bit.
TEST(QuantizedLinearExtremes, Q8_0CodesAtTheirEndsSumExactlyOnEveryPath) {
  const int64_t out = 40, in = 96, rows = 5;
  const int64_t blocks = in / 32;
  QuantWeight w;
  w.bytes.resize(DTypeBytes(DType::kQ8_0, out * in));
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t b = 0; b < blocks; ++b) {
      unsigned char* block = w.bytes.data() + (o * blocks + b) * 34;
      block[0] = 0x00;  // f16 d = 1.0 (0x3c00), little-endian
      block[1] = 0x3c;
      for (int i = 0; i < 32; ++i) {
        // Mostly -128 (|w| = 128 is where vpmaddubsw's unsigned operand ends), some 127,
        // in patterns that differ by output and block.
        const bool high = ((o + b + i / 4) % 5) == 0;
        block[2 + i] = static_cast<unsigned char>(high ? 127 : -128);
      }
    }
  }
  w.ref = TensorRef{DType::kQ8_0, {out, in}, w.bytes.data()};
  std::vector<float> x(static_cast<size_t>(rows * in));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < in; ++k) {
      // Every block's amax is 1, so the codes are +-127: all -127 on row 0 (against the
      // -128 codes, pairs of products of +16,256), mixed signs on the others.
      const bool neg = r == 0 ? true : ((k * 7 + r) % 3) == 0;
      x[static_cast<size_t>(r * in + k)] = neg ? -1.0f : 1.0f;
    }
  }
  const std::vector<float> want = IntegerReference(w, x, rows);
  ThreadPool pool(2);
  const PackedWeights packed = PackedWeights::Pack(w.ref, &pool);
  for (SimdLevel level : AvailableSimdLevels()) {
    for (int64_t n : {int64_t{1}, rows}) {
      std::vector<float> y(static_cast<size_t>(n * out), -1.0f);
      Linear(packed, x.data(), n, y.data(), pool, level);
      ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)))
          << n << " rows on " << SimdLevelName(level) << ": y[0] " << y[0] << " want " << want[0];
    }
  }
}

// The 4-bit formats' codes take half a byte (nibble panels, packed_weights.h) on every
// CPU, so a batch-1 forward streams 4.75 (Q4_K) to 6 bits a weight, not 10; Q5_K's and
// Q6_K's half a byte and a plane of their 1 or 2 high bits (5.75 and 6.75 bits a weight,
// not 8.75); the other formats keep a byte a code, the integer sub-block scales and mins a
// byte each, and the per-group scales and mins their files' f16.
TEST(PackedQuantizedWeights, CodesTakeTheirBits) {
  Rng rng(3);
  for (DType type : kTypes) {
    const int64_t out = 64, in = 2 * DTypeBlockElements(type);
    const QuantWeight w = MakeWeight(type, out, in, rng);
    const PackedWeights packed = PackedWeights::Pack(w.ref);
    const quant::BlockCodes codes = quant::CodesOf(type);
    // Q3_K's codes read unsigned (q3 + 4) are 3-bit.
    const bool four_bit = (!codes.signed_quants && codes.max_abs_quant <= 15) || type == DType::kQ3_K;
    const int high_bits = type == DType::kQ5_K ? 1 : type == DType::kQ6_K ? 2 : 0;
    EXPECT_EQ(packed.quant().nibbles, four_bit || high_bits > 0) << DTypeName(type);
    EXPECT_EQ(packed.quant().high_bits, high_bits) << DTypeName(type);
    const int64_t code_bytes = (packed.quant().nibbles ? out * in * (4 + high_bits) / 8 : out * in);
    // Integer sub-block scales: per super-block and output, a byte scale and a byte min per
    // sub-block (Q6_K's and Q3_K's mins are multiples of their scales: none), and f32 d
    // and dmin.
    const int64_t sub_blocks = 256 / codes.sub_block;
    const int64_t scale_bytes = quant::HasIntegerSubBlockScales(type)
                                    ? out * (in / 256) * (sub_blocks * (type == DType::kQ6_K || type == DType::kQ3_K ? 1 : 2) + 8)
                                    : out * (in / codes.sub_block) * (type == DType::kIQ4_XS ? 4 : 2) *
                                          (codes.has_min ? 2 : 1);  // f16 as the files have them
    EXPECT_EQ(packed.bytes(), code_bytes + scale_bytes) << DTypeName(type);
  }
}

// The row quantizer: every path gives the scalar path's bytes, on values that land on
// .5 after scaling (ties to even) and on all-zero blocks.
TEST(QuantizeRows, PathsAgreeBytewise) {
  const int64_t rows = 3, in = 96;
  Rng rng(3);
  std::vector<float> x = RandomRows(rows, in, rng);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(32 + i)] = 0;             // a zero block
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(64 + i)] = (i - 16) * 0.5f;  // ties after scaling
  x[64] = 127.0f * 0.5f;
  std::vector<int8_t> q0(rows * in), q1(rows * in);
  std::vector<float> s0(rows * in / 32), s1(s0.size()), u0(rows * in / 16), u1(u0.size());
  internal::QuantizeRowsScalar(x.data(), rows, in, q0.data(), s0.data(), u0.data());
  EXPECT_EQ(s0[1], 0.0f);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q0[static_cast<size_t>(32 + i)], 0);
  if (DetectedSimdLevel() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  internal::QuantizeRowsAvx2(x.data(), rows, in, q1.data(), s1.data(), u1.data());
  EXPECT_EQ(q0, q1);
  EXPECT_EQ(s0, s1);
  EXPECT_EQ(u0, u1);
}

// The per-256 row quantizer (formats of integer sub-block scales): the AVX2 path gives
// the scalar path's bytes and sums, with a zero block, ties, and sums at their ends.
TEST(QuantizeRows, PerSuperBlockPathsAgreeBytewise) {
  const int64_t rows = 3, in = 768;
  Rng rng(4);
  std::vector<float> x = RandomRows(rows, in, rng);
  for (int i = 0; i < 256; ++i) x[static_cast<size_t>(256 + i)] = 0;                // a zero block
  for (int i = 0; i < 256; ++i) x[static_cast<size_t>(512 + i)] = (i % 64 - 32) * 0.5f;  // ties after scaling
  x[512] = 127.0f * 0.5f;
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(in + i)] = -4.0f;  // row 1: a sum of 32 x -127
  x[static_cast<size_t>(in + 40)] = 4.0f;
  std::vector<int8_t> q0(rows * in), q1(rows * in);
  std::vector<float> s0(rows * in / 256), s1(s0.size());
  std::vector<int16_t> a0(rows * in / 16), a1(a0.size()), b0(rows * in / 32), b1(b0.size());
  internal::QuantizeRows256Scalar(x.data(), rows, in, q0.data(), s0.data(), a0.data(), b0.data());
  EXPECT_EQ(s0[1], 0.0f);
  EXPECT_EQ(b0[static_cast<size_t>(in / 32)], -32 * 127);
  for (int64_t i = 0; i < rows * in / 32; ++i) {
    EXPECT_EQ(b0[static_cast<size_t>(i)], a0[static_cast<size_t>(2 * i)] + a0[static_cast<size_t>(2 * i + 1)]);
  }
  if (DetectedSimdLevel() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  internal::QuantizeRows256Avx2(x.data(), rows, in, q1.data(), s1.data(), a1.data(), b1.data());
  EXPECT_EQ(q0, q1);
  EXPECT_EQ(s0, s1);
  EXPECT_EQ(a0, a1);
  EXPECT_EQ(b0, b1);
}

}  // namespace
}  // namespace crossreg::cpu
