// The packed linear kernels against a double-precision reference, for every weight
// dtype on every SIMD path this CPU has, on awkward shapes; and, on every path, a row's
// result bitwise independent of the rows, threads and layers that share the call.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "engine/cpu/bf16_panel_kernel.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/linear.h"
#include "engine/cpu/linear_kernels.h"
#include "engine/cpu/packed_weights.h"
#include "engine/cpu/tile_order_chooser.h"
#include "engine/sampler.h"
#include "gtest/gtest.h"

namespace crossreg::cpu {
namespace {

struct OwnedWeight {
  std::vector<float> f32;
  std::vector<uint16_t> half;
  TensorRef ref;
};

OwnedWeight MakeWeight(DType dtype, int64_t out, int64_t in, Rng& rng) {
  OwnedWeight w;
  w.f32.resize(static_cast<size_t>(out * in));
  for (auto& v : w.f32) v = static_cast<float>(rng.Uniform() * 2 - 1);
  w.ref.dtype = dtype;
  w.ref.shape = {out, in};
  if (dtype == DType::kF32) {
    w.ref.data = w.f32.data();
  } else {
    w.half.resize(w.f32.size());
    for (size_t i = 0; i < w.f32.size(); ++i) {
      w.half[i] = dtype == DType::kBF16 ? F32ToBf16(w.f32[i]) : F32ToF16(w.f32[i]);
    }
    w.ref.data = w.half.data();
  }
  return w;
}

std::vector<float> RandomRows(int64_t rows, int64_t in, Rng& rng) {
  std::vector<float> x(static_cast<size_t>(rows * in));
  for (auto& v : x) v = static_cast<float>(rng.Uniform() * 2 - 1);
  return x;
}

// What the kernels compute, in double: bf16 panels see weights and activations rounded
// to bf16 (f16 weights are rounded at packing), f32 panels see them as they are.
std::vector<float> Reference(const OwnedWeight& w, const std::vector<float>& x, int64_t rows) {
  const int64_t out = w.ref.rows(), in = w.ref.cols();
  std::vector<float> y(static_cast<size_t>(rows * out));
  if (w.ref.dtype == DType::kF32) {
    LinearReference(w.ref, x.data(), rows, y.data());
    return y;
  }
  auto round = [](float v) { return Bf16ToF32(F32ToBf16(v)); };
  std::vector<float> wf(static_cast<size_t>(out * in));
  ConvertToF32(w.ref.dtype, w.ref.data, wf.data(), wf.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t k = 0; k < in; ++k) acc += double(round(wf[o * in + k])) * round(x[r * in + k]);
      y[r * out + o] = static_cast<float>(acc);
    }
  }
  return y;
}

using Params = std::tuple<DType, SimdLevel>;
class LinearKernelTest : public ::testing::TestWithParam<Params> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  SimdLevel level() const { return std::get<1>(GetParam()); }
};

TEST_P(LinearKernelTest, MatchesReferenceOnAwkwardShapes) {
  Rng rng(3);
  ThreadPool pool(2);
  for (int64_t in : {1, 2, 15, 16, 17, 37, 172, 768}) {
    for (int64_t out : {1, 3, 13, 31, 32, 33, 70}) {
      auto w = MakeWeight(dtype(), out, in, rng);
      const PackedWeights packed = PackedWeights::Pack(w.ref);
      for (int64_t rows : {1, 2, 3, 11, 12, 13, 25}) {
        const auto x = RandomRows(rows, in, rng);
        std::vector<float> y(static_cast<size_t>(rows * out), -7.0f);
        Linear(packed, x.data(), rows, y.data(), pool, level());
        const auto ref = Reference(w, x, rows);
        for (size_t i = 0; i < y.size(); ++i) {
          // f32 accumulation of `in` products of magnitude <= 1.
          ASSERT_NEAR(y[i], ref[i], 2e-6 * in + 1e-6) << "in=" << in << " out=" << out << " rows=" << rows;
        }
      }
    }
  }
}

TEST_P(LinearKernelTest, RowResultDoesNotDependOnRowsThreadsOrLayersBesideIt) {
  Rng rng(4);
  ThreadPool one(1), two(2);
  const int64_t in = 200, out = 333, rows = 27;
  auto w = MakeWeight(dtype(), out, in, rng);
  auto w2 = MakeWeight(dtype(), 45, in, rng);
  const PackedWeights packed = PackedWeights::Pack(w.ref), packed2 = PackedWeights::Pack(w2.ref);
  const auto x = RandomRows(rows, in, rng);
  std::vector<float> batched(static_cast<size_t>(rows * out)), shared(batched.size()), other(45 * rows);
  Linear(packed, x.data(), rows, batched.data(), two, level());
  const LinearOutput group[] = {{&packed2, other.data()}, {&packed, shared.data()}};
  LinearShared(group, 2, x.data(), rows, two, level());
  EXPECT_EQ(std::memcmp(shared.data(), batched.data(), sizeof(float) * batched.size()), 0);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> alone(static_cast<size_t>(out));
    Linear(packed, x.data() + r * in, 1, alone.data(), one, level());
    EXPECT_EQ(std::memcmp(alone.data(), batched.data() + r * out, sizeof(float) * out), 0) << "row " << r;
  }
}

// Verify-sized calls with 2-4 row tiles run in either loop order (K-blocked or whole-K,
// engine/cpu/tile_order_chooser.h), the chooser alternating them during its trials:
// every call's bits must equal the first call's, whatever order it ran.
TEST_P(LinearKernelTest, BothLoopOrdersOfVerifySizedCallsGiveTheSameBits) {
  Rng rng(7);
  ThreadPool two(2);
  // The chooser is the process's: a shape of this test's own per path and dtype (panels
  // apart), so no earlier test has decided it and both orders run here.
  const int64_t in = 130, out = 100 + 64 * (4 * static_cast<int64_t>(dtype()) + static_cast<int64_t>(level()));
  auto w = MakeWeight(dtype(), out, in, rng);
  const PackedWeights packed = PackedWeights::Pack(w.ref);
  for (const int64_t rows : {20, 33, 45}) {
    const auto x = RandomRows(rows, in, rng);
    std::vector<float> first(static_cast<size_t>(rows * out)), again(first.size());
    Linear(packed, x.data(), rows, first.data(), two, level());
    for (int call = 0; call < 2 * TileOrderChooser::kTrials + 2; ++call) {
      Linear(packed, x.data(), rows, again.data(), two, level());
      ASSERT_EQ(std::memcmp(first.data(), again.data(), sizeof(float) * first.size()), 0)
          << rows << " rows, call " << call;
    }
    // Every call here is large enough to be split between the two threads.
    const LinearCallShape shape{.in = in, .panels = packed.panels(), .rows = rows, .threads = 2};
    // The AVX-512 vector paths have both orders and have compared them by now (the
    // others, AMX among them, have one order and never ask).
    const bool amx = dtype() != DType::kF32 && Bf16PanelKernelAt(level()) == Bf16PanelKernel::kAmx;
    if (level() >= SimdLevel::kAvx512 && !amx) {
      EXPECT_TRUE(TileOrderChooser::Global().Chosen(shape).has_value()) << rows;
    }
  }
}

// Prefill-sized inputs: more rows than a decode step, so three threads share the packing
// of the activations' row tiles as well as the panels. Every row's bits equal the row alone
// on one thread (odd `in`: the last bf16 pair is half padding).
TEST_P(LinearKernelTest, PrefillRowsPackedByEveryThreadMatchOneRowOnOneThread) {
  Rng rng(6);
  ThreadPool one(1), three(3);
  const int64_t in = 129, out = 70, rows = 131;
  auto w = MakeWeight(dtype(), out, in, rng);
  const PackedWeights packed = PackedWeights::Pack(w.ref);
  const auto x = RandomRows(rows, in, rng);
  std::vector<float> batched(static_cast<size_t>(rows * out), -7.0f);
  Linear(packed, x.data(), rows, batched.data(), three, level());
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> alone(static_cast<size_t>(out));
    Linear(packed, x.data() + r * in, 1, alone.data(), one, level());
    ASSERT_EQ(std::memcmp(alone.data(), batched.data() + r * out, sizeof(float) * out), 0) << "row " << r;
  }
}

// The adapter's B products: several layers, each with its own input, in one call; each
// output's bits equal its layer alone.
TEST_P(LinearKernelTest, EachLayerOfLinearEachEqualsItAlone) {
  Rng rng(7);
  ThreadPool two(2);
  const int64_t rows = 5;
  std::vector<OwnedWeight> w;
  std::vector<PackedWeights> packed;
  std::vector<std::vector<float>> x, y, alone;
  const std::pair<int64_t, int64_t> shapes[] = {{70, 32}, {33, 9}, {600, 480}};  // (out, in)
  for (const auto& [out, in] : shapes) {
    w.push_back(MakeWeight(dtype(), out, in, rng));
    packed.push_back(PackedWeights::Pack(w.back().ref));
    x.push_back(RandomRows(rows, in, rng));
    y.emplace_back(static_cast<size_t>(rows * out), -7.0f);
    alone.emplace_back(static_cast<size_t>(rows * out), -7.0f);
  }
  std::vector<LinearJob> jobs;
  for (size_t i = 0; i < packed.size(); ++i) jobs.push_back({&packed[i], x[i].data(), y[i].data()});
  LinearEach(jobs.data(), static_cast<int>(jobs.size()), rows, two, level());  // parallel: > 2^18 multiply-adds
  for (size_t i = 0; i < packed.size(); ++i) {
    Linear(packed[i], x[i].data(), rows, alone[i].data(), two, level());
    EXPECT_EQ(std::memcmp(alone[i].data(), y[i].data(), sizeof(float) * y[i].size()), 0) << "layer " << i;
  }
}

std::vector<Params> AllParams() {
  std::vector<Params> out;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (SimdLevel l : AvailableSimdLevels()) out.emplace_back(t, l);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryPath, LinearKernelTest, ::testing::ValuesIn(AllParams()), [](const auto& info) {
  return std::string(DTypeName(std::get<0>(info.param))) + "_" + SimdLevelName(std::get<1>(info.param));
});

// Different paths compute the same products in a different order: they agree to
// rounding, not bitwise.
TEST(LinearKernelPathsTest, EveryPathAgreesWithThePortableOne) {
  Rng rng(5);
  ThreadPool pool(2);
  for (DType t : {DType::kF32, DType::kBF16}) {
    auto w = MakeWeight(t, 96, 300, rng);
    const PackedWeights packed = PackedWeights::Pack(w.ref);
    const auto x = RandomRows(9, 300, rng);
    std::vector<float> portable(96 * 9), y(96 * 9);
    Linear(packed, x.data(), 9, portable.data(), pool, SimdLevel::kScalar);
    for (SimdLevel l : AvailableSimdLevels()) {
      Linear(packed, x.data(), 9, y.data(), pool, l);
      for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], portable[i], 1e-4) << SimdLevelName(l);
    }
  }
}

// The AVX2 kernels add each output's products of bf16 panels in the portable kernel's
// order, whatever tile a row lands in (1 to 6 rows, the 6-row tile's odd values masked by
// an AND from memory, whole-panel 2- and 3-row tiles, several tiles a call, and prefill's
// unblocked loop): the same bits. (A product of two bf16 values is exact in f32, so a
// fused multiply-add rounds as the portable multiply and add do; f32 panels' do not.)
TEST(LinearKernelPathsTest, Avx2EqualsThePortableKernelBitwise) {
  if (DetectedSimdLevel() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  Rng rng(41);
  ThreadPool pool(2);
  for (int64_t in : {1, 130, 301}) {
    auto w = MakeWeight(DType::kBF16, 83, in, rng);
    const PackedWeights packed = PackedWeights::Pack(w.ref);
    for (int64_t rows : {1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 16, 17, 50}) {
      const auto x = RandomRows(rows, in, rng);
      std::vector<float> portable(static_cast<size_t>(rows * 83), -7.0f), avx2(portable.size(), -9.0f);
      Linear(packed, x.data(), rows, portable.data(), pool, SimdLevel::kScalar);
      Linear(packed, x.data(), rows, avx2.data(), pool, SimdLevel::kAvx2);
      ASSERT_EQ(0, std::memcmp(portable.data(), avx2.data(), sizeof(float) * avx2.size()))
          << "in=" << in << " rows=" << rows;
    }
  }
}

// The AVX2 packer rounds rows straight into the widened kernel's floats: the same bits as
// rounding to pairs and widening them, for tiles of 1 to 7 rows, odd and even widths, and
// values that round up, tie to even, overflow to infinity, or are NaN.
TEST(PackRowTilesTest, Avx2WidePackingEqualsPackingThenWidening) {
  if (DetectedSimdLevel() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  Rng rng(17);
  const uint32_t specials[] = {0x7fc00001u, 0xffc12345u, 0x7f800001u, 0x7f800000u, 0xff800000u, 0x80000000u,
                               0x00000001u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0x00ffffffu};
  for (int64_t in : {1, 2, 7, 8, 9, 16, 33, 70}) {
    for (int64_t rows : {1, 2, 3, 5, 6, 7}) {
      std::vector<float> x = RandomRows(rows, in, rng);
      for (size_t i = 0; i < x.size(); i += 3) {
        const uint32_t bits = specials[(i / 3) % std::size(specials)];
        std::memcpy(&x[i], &bits, sizeof bits);
      }
      const std::vector<std::vector<std::pair<int64_t, int64_t>>> plans = {
          {{0, rows}}, internal::PlanRowTiles(rows, 2), internal::PlanRowTiles(rows, 6)};
      for (const auto& plan : plans) {
        const auto starts = internal::RowTileStartsBf16(in, plan);
        std::vector<uint32_t> pairs(static_cast<size_t>(rows * ((in + 1) / 2)));
        internal::PackRowTilesBf16Range(x.data(), in, plan, starts, pairs.data(), /*avx512=*/false, 0,
                                        static_cast<int64_t>(plan.size()));
        std::vector<float> want(2 * pairs.size()), got(2 * pairs.size(), -3.0f);
        internal::WidenBf16Pairs(pairs.data(), 0, static_cast<int64_t>(pairs.size()), want.data());
        internal::PackRowTilesWideAvx2(x.data(), in, plan, starts, got.data(), 0, static_cast<int64_t>(plan.size()));
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), sizeof(float) * got.size()))
            << "in=" << in << " rows=" << rows << " tiles=" << plan.size();
      }
    }
  }
}

// The AVX-512 packing of activation tiles (16 rows transposed in registers) writes the
// same bits as the portable loop: tiles of 1 to 25 rows (past one 16-row group), widths
// that end mid-vector, a NaN and a value that rounds up.
TEST(PackRowTilesTest, Avx512PackingEqualsThePortableOne) {
  if (DetectedSimdLevel() < SimdLevel::kAvx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  Rng rng(8);
  for (int64_t in : {1, 2, 31, 32, 33, 64, 100, 768}) {
    for (int64_t rows : {1, 2, 7, 11, 12, 16, 17, 25}) {
      auto x = RandomRows(rows + 1, in, rng);
      // In row 1, the first packed row (row 0 is skipped: the tiles start at an offset).
      x[static_cast<size_t>(in + in / 2)] = std::nanf("");
      x[static_cast<size_t>(2 * in - 1)] = 1.0f + 3.0f / (1 << 9);  // rounds up to the next bf16
      // One tile of every row (17 and 25 rows: a full 16-row group and a remainder), and
      // two tiles, as a verify step's forward packs them.
      const std::vector<std::vector<std::pair<int64_t, int64_t>>> plans = {
          {{1, rows}}, {{1, (rows + 1) / 2}, {1 + (rows + 1) / 2, rows / 2}}};
      for (const auto& tiles : plans) {
        const auto starts = internal::RowTileStartsBf16(in, tiles);
        const auto count = static_cast<int64_t>(tiles.size());
        const size_t size = static_cast<size_t>(rows * ((in + 1) / 2));
        std::vector<uint32_t> portable(size, 0xdeadbeef), avx512(size, 0xdeadbeef);
        internal::PackRowTilesBf16Range(x.data(), in, tiles, starts, portable.data(), /*avx512=*/false, 0, count);
        internal::PackRowTilesBf16Range(x.data(), in, tiles, starts, avx512.data(), /*avx512=*/true, 0, count);
        ASSERT_EQ(0, std::memcmp(portable.data(), avx512.data(), size * sizeof(uint32_t)))
            << "in=" << in << " rows=" << rows << " tiles=" << count;
      }
    }
  }
}

// Both kernels of bf16 panels on an AVX-512 CPU (engine/cpu/bf16_panel_kernel.h), run
// directly whichever the process chose: the widened one adds each pair's products as the
// portable kernel does (bitwise equal to it), vdpbf16ps in its own order (equal to
// rounding); each gives a row the same bits alone as in any tile of up to 12 rows.
struct Bf16Tiles {
  std::vector<uint32_t> pairs;
  std::vector<float> wide;
  std::vector<internal::RowTile> pair_tiles, wide_tiles;
};

Bf16Tiles PackBf16Tiles(const std::vector<float>& x, int64_t in, int64_t rows) {
  Bf16Tiles t;
  const auto plan = internal::PlanRowTiles(rows, 12);
  const auto starts = internal::RowTileStartsBf16(in, plan);
  t.pairs.resize(static_cast<size_t>(rows * ((in + 1) / 2)));
  t.wide.resize(2 * t.pairs.size());
  internal::PackRowTilesBf16Range(x.data(), in, plan, starts, t.pairs.data(), /*avx512=*/false, 0,
                                  static_cast<int64_t>(plan.size()));
  internal::WidenBf16Pairs(t.pairs.data(), 0, static_cast<int64_t>(t.pairs.size()), t.wide.data());
  for (size_t i = 0; i < plan.size(); ++i) {
    t.pair_tiles.push_back({plan[i].first, plan[i].second, t.pairs.data() + starts[i]});
    t.wide_tiles.push_back({plan[i].first, plan[i].second, t.wide.data() + 2 * starts[i]});
  }
  return t;
}

std::vector<float> RunBf16Kernel(void (*kernel)(const internal::PanelArgs&, int64_t, int64_t),
                                 const PackedWeights& w, const std::vector<internal::RowTile>& tiles, int64_t rows) {
  std::vector<float> y(static_cast<size_t>(rows * w.out()), -7.0f);
  internal::PanelArgs a;
  a.w = &w;
  a.tiles = tiles.data();
  a.num_tiles = static_cast<int>(tiles.size());
  a.rows = rows;
  a.y = y.data();
  a.y_stride = w.out();
  kernel(a, 0, w.panels());
  return y;
}

TEST(Bf16PanelKernelsTest, WidenedEqualsPortableBitwiseAndDotAgreesToRounding) {
  if (DetectedSimdLevel() < SimdLevel::kAvx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  const bool has_dot = DetectedSimdLevel() >= SimdLevel::kAvx512Bf16;
  Rng rng(12);
  for (int64_t in : {1, 33, 130, 384}) {
    auto w = MakeWeight(DType::kBF16, 70, in, rng);
    const PackedWeights packed = PackedWeights::Pack(w.ref);
    for (int64_t rows : {1, 5, 12, 13, 25}) {
      const auto x = RandomRows(rows, in, rng);
      const Bf16Tiles t = PackBf16Tiles(x, in, rows);
      const auto portable = RunBf16Kernel(internal::PanelsScalar, packed, t.pair_tiles, rows);
      const auto wide = RunBf16Kernel(internal::PanelsAvx512, packed, t.wide_tiles, rows);
      ASSERT_EQ(0, std::memcmp(portable.data(), wide.data(), sizeof(float) * wide.size()))
          << "in=" << in << " rows=" << rows;
      if (!has_dot) continue;
      const auto dot = RunBf16Kernel(internal::PanelsAvx512Bf16, packed, t.pair_tiles, rows);
      for (size_t i = 0; i < dot.size(); ++i) ASSERT_NEAR(dot[i], portable[i], 2e-6 * in + 1e-6) << i;
      // Each kernel alone: every row equals itself computed in a one-row call.
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<float> xr(x.begin() + r * in, x.begin() + (r + 1) * in);
        const Bf16Tiles one = PackBf16Tiles(xr, in, 1);
        const auto dot1 = RunBf16Kernel(internal::PanelsAvx512Bf16, packed, one.pair_tiles, 1);
        const auto wide1 = RunBf16Kernel(internal::PanelsAvx512, packed, one.wide_tiles, 1);
        ASSERT_EQ(0, std::memcmp(dot1.data(), dot.data() + r * 70, sizeof(float) * 70)) << "dot row " << r;
        ASSERT_EQ(0, std::memcmp(wide1.data(), wide.data() + r * 70, sizeof(float) * 70)) << "wide row " << r;
      }
    }
  }
}

// AMX row tiles of x (16 rows each, zero-padded; engine/cpu/linear_kernels.h).
struct AmxTiles {
  std::vector<uint32_t> pairs;
  std::vector<internal::RowTile> tiles;
};

AmxTiles PackAmxTiles(const std::vector<float>& x, int64_t in, int64_t rows) {
  AmxTiles t;
  const auto plan = internal::PlanRowTiles(rows, internal::kAmxTileRows);
  const int64_t tile_pairs = internal::AmxTilePairs(in);
  t.pairs.assign(static_cast<size_t>(tile_pairs) * plan.size(), 0xdeadbeef);
  for (size_t i = 0; i < plan.size(); ++i) {
    uint32_t* tile_x = t.pairs.data() + static_cast<int64_t>(i) * tile_pairs;
    internal::PackRowTileBf16Amx(x.data(), in, plan[i].first, plan[i].second,
                                 internal::AmxRowsRead(plan[i].second, plan.size()), tile_x);
    t.tiles.push_back({plan[i].first, plan[i].second, tile_x});
  }
  return t;
}

// The AMX kernel (tdpbf16ps), run directly whichever kernel the process chose: equal to
// the portable kernel to rounding on K with a partial last block (1, 33, 130 inputs) and
// whole blocks (64, 768); one and two row tiles at a time (up to 16, 17-32, and more
// rows, odd counts leaving one tile alone); outputs ending mid-panel. Every row gives the
// same bits alone as in any tile.
TEST(Bf16PanelKernelsTest, AmxAgreesWithPortableAndEachRowEqualsItselfAlone) {
  if (!HasAmx()) GTEST_SKIP() << "AMX not usable here: " << AmxUnavailableReason();
  Rng rng(13);
  for (int64_t in : {1, 33, 64, 130, 768}) {
    auto w = MakeWeight(DType::kBF16, 70, in, rng);
    const PackedWeights packed = PackedWeights::Pack(w.ref);
    for (int64_t rows : {1, 5, 16, 17, 40, 70}) {
      const auto x = RandomRows(rows, in, rng);
      const Bf16Tiles t = PackBf16Tiles(x, in, rows);
      const AmxTiles amx_tiles = PackAmxTiles(x, in, rows);
      const auto portable = RunBf16Kernel(internal::PanelsScalar, packed, t.pair_tiles, rows);
      const auto amx = RunBf16Kernel(internal::PanelsAmxBf16, packed, amx_tiles.tiles, rows);
      for (size_t i = 0; i < amx.size(); ++i) {
        ASSERT_NEAR(amx[i], portable[i], 2e-6 * in + 1e-6) << "in=" << in << " rows=" << rows << " at " << i;
      }
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<float> xr(x.begin() + r * in, x.begin() + (r + 1) * in);
        const auto amx1 = RunBf16Kernel(internal::PanelsAmxBf16, packed, PackAmxTiles(xr, in, 1).tiles, 1);
        ASSERT_EQ(0, std::memcmp(amx1.data(), amx.data() + r * 70, sizeof(float) * 70))
            << "in=" << in << " rows=" << rows << " row " << r;
      }
    }
  }
}

// The AMX packing: K block after K block, each the 16 rows' pairs rounded as F32ToBf16
// (a NaN, a value that rounds up), zeros past K and in the rows past the tile that the
// tiles read, the rows past those untouched.
TEST(PackRowTilesTest, AmxTilesHoldEachBlocksRowsThenZeros) {
  if (DetectedSimdLevel() < SimdLevel::kAvx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  Rng rng(9);
  for (int64_t in : {1, 2, 31, 33, 64, 100}) {
    for (const auto& [rows, rows_read] : std::vector<std::pair<int64_t, int64_t>>{{1, 16}, {7, 16}, {16, 16}, {1, 1}, {7, 9}}) {
      auto x = RandomRows(rows + 1, in, rng);
      x[static_cast<size_t>(in + in / 2)] = std::nanf("");
      x[static_cast<size_t>(2 * in - 1)] = 1.0f + 3.0f / (1 << 9);
      const int64_t blocks = internal::AmxBlocks(in);
      ASSERT_GE(blocks * internal::kAmxBlockPairs, (in + 1) / 2);
      std::vector<uint32_t> out(static_cast<size_t>(internal::AmxTilePairs(in)), 0xdeadbeef);
      internal::PackRowTileBf16Amx(x.data(), in, 1, rows, rows_read, out.data());
      for (int64_t b = 0; b < blocks; ++b) {
        for (int64_t r = 0; r < internal::kAmxTileRows; ++r) {
          for (int64_t i = 0; i < internal::kAmxBlockPairs; ++i) {
            const int64_t p = b * internal::kAmxBlockPairs + i;
            uint32_t want = r < rows_read ? 0 : 0xdeadbeef;
            if (r < rows && 2 * p < in) {
              const float* xr = x.data() + (1 + r) * in;
              want = F32ToBf16(xr[2 * p]) | (2 * p + 1 < in ? uint32_t{F32ToBf16(xr[2 * p + 1])} << 16 : 0u);
            }
            const size_t at = static_cast<size_t>((b * internal::kAmxTileRows + r) * internal::kAmxBlockPairs + i);
            ASSERT_EQ(out[at], want) << "in=" << in << " row " << r << " pair " << p;
          }
        }
      }
    }
  }
}

// The process's choice follows its own measurement (or CROSSREG_BF16_KERNEL), and the
// level without vdpbf16ps always widens.
TEST(Bf16PanelKernelsTest, ChoiceFollowsTheMeasuredRates) {
  EXPECT_EQ(Bf16PanelKernelAt(SimdLevel::kAvx512), Bf16PanelKernel::kWide);
  if (DetectedSimdLevel() < SimdLevel::kAvx512Bf16) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const Bf16PanelKernelChoice& c = ChosenBf16PanelKernel();
  if (std::string(c.reason) != "measured") GTEST_SKIP() << "chosen by " << c.reason;
  EXPECT_GT(c.dot_flops, 0);
  EXPECT_GT(c.fma_flops, 0);
  EXPECT_EQ(c.amx_flops > 0, HasAmx());
  if (c.amx_flops > std::max(c.dot_flops, c.fma_flops)) {
    EXPECT_EQ(c.kernel, Bf16PanelKernel::kAmx);
  } else {
    EXPECT_EQ(c.kernel, c.fma_flops > kWideAdvantage * c.dot_flops ? Bf16PanelKernel::kWide : Bf16PanelKernel::kDot);
  }
  EXPECT_EQ(Bf16PanelKernelAt(SimdLevel::kAvx512Bf16), c.kernel);
  EXPECT_NE(Bf16PanelKernelSummary().find(Bf16PanelKernelName(c.kernel)), std::string::npos);
}

TEST(PackedWeightsTest, PanelsHoldTheWeightsInKernelOrder) {
  Rng rng(6);
  auto w = MakeWeight(DType::kBF16, 40, 5, rng);  // two panels, odd K
  const PackedWeights p = PackedWeights::Pack(w.ref);
  ASSERT_EQ(p.format(), PanelFormat::kBf16);
  EXPECT_EQ(p.panels(), 2);
  EXPECT_EQ(p.k_steps(), 3);
  const auto* h = reinterpret_cast<const uint16_t*>(p.panel(1));
  // Output 33 (panel 1, lane 1), k = 3: step 1, odd half.
  EXPECT_EQ(h[1 * 64 + 2 * 1 + 1], w.half[33 * 5 + 3]);
  // Padding: k = 5 of every output, and outputs 40..63, are zero.
  EXPECT_EQ(h[2 * 64 + 2 * 1 + 1], 0);
  EXPECT_EQ(h[0 * 64 + 2 * 10], 0);
}

TEST(DTypeTest, HalfConversionsRoundTrip) {
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.1e-5f, 5.96e-8f, 3.14159f}) {
    EXPECT_NEAR(F16ToF32(F32ToF16(v)), v, std::fabs(v) * 1e-3 + 1e-7) << v;
    EXPECT_NEAR(Bf16ToF32(F32ToBf16(v)), v, std::fabs(v) * 8e-3) << v;
  }
  EXPECT_TRUE(std::isinf(F16ToF32(F32ToF16(1e6f))));
  EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(NAN))));
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(NAN))));
}

TEST(ThreadPoolTest, CoversRangeExactlyOnce) {
  ThreadPool pool(3);
  for (bool dynamic : {false, true}) {
    for (int64_t n : {1, 2, 7, 100, 1001}) {
      for (int64_t grain : {1, 4, 16}) {
        std::vector<int> hits(static_cast<size_t>(n), 0);
        auto body = [&](int64_t b, int64_t e) {
          EXPECT_EQ(b % grain, 0);
          for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
        };
        if (dynamic) {
          pool.ParallelForDynamic(n, grain, body);
        } else {
          pool.ParallelFor(n, grain, body);
        }
        for (int h : hits) ASSERT_EQ(h, 1);
        std::fill(hits.begin(), hits.end(), 0);
        pool.ParallelForBalanced(n, grain, body);
        for (int h : hits) ASSERT_EQ(h, 1);
      }
    }
  }
}

// Work on the calling thread made 8x slower than on the worker: balanced calls learn it
// and hand the caller the smaller share, and every split still covers the range once.
// The learnt speeds are clamped to [1/2, 2] of their mean, so the caller's share settles
// near 0.22 (not the 1/9 its speed alone would give), and an equal split stays at 0.5.
// Judged by the lowest share of the last calls: a preempted call (ctest runs two tests
// at once on two cores; ASan slows each) pushes the estimate up for the calls after it,
// so no single reading is trusted.
TEST(ThreadPoolTest, BalancedSplitFollowsTheThreadsSpeeds) {
  ThreadPool pool(2);
  EXPECT_NEAR(pool.BalancedShares()[0], 0.5, 1e-12);
  const auto caller = std::this_thread::get_id();
  const int64_t n = 64;
  const int calls = 120;
  const int judged = 40;
  double lowest = 1.0;
  for (int call = 0; call < calls; ++call) {
    std::vector<int> hits(static_cast<size_t>(n), 0);
    pool.ParallelForBalanced(n, 1, [&](int64_t b, int64_t e) {
      const auto per_item = std::chrono::microseconds(std::this_thread::get_id() == caller ? 80 : 10);
      for (int64_t i = b; i < e; ++i) {
        ++hits[static_cast<size_t>(i)];
        const auto until = std::chrono::steady_clock::now() + per_item;
        while (std::chrono::steady_clock::now() < until) {
        }
      }
    });
    for (int h : hits) ASSERT_EQ(h, 1);
    const std::vector<double> shares = pool.BalancedShares();
    EXPECT_NEAR(shares[0] + shares[1], 1.0, 1e-9);
    if (call >= calls - judged) lowest = std::min(lowest, shares[0]);
  }
  EXPECT_LT(lowest, 0.35);
}

// The caller stalls on the first piece of its chunk: the worker, done with its own, takes
// the rest of the caller's chunk from its back instead of waiting, and each item still
// runs once, on one thread. The worker starts its first piece only once the caller holds
// its own: a host that keeps the caller off its core between publishing the call and
// claiming a piece would otherwise let the worker take the whole chunk (correct, but not
// the case under test).
TEST(ThreadPoolTest, BalancedCallsTakeFromAStalledChunksBack) {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  const int64_t n = 64;  // a fresh pool splits 32 / 32
  std::vector<int> hits(static_cast<size_t>(n), 0);
  std::vector<int> by_caller(static_cast<size_t>(n), 0);
  std::atomic<bool> stalled{false};
  pool.ParallelForBalanced(n, 1, [&](int64_t b, int64_t e) {
    const bool on_caller = std::this_thread::get_id() == caller;
    if (on_caller && !stalled.load()) {
      stalled.store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    while (!on_caller && !stalled.load()) std::this_thread::yield();
    for (int64_t i = b; i < e; ++i) {
      ++hits[static_cast<size_t>(i)];
      by_caller[static_cast<size_t>(i)] = on_caller ? 1 : 0;
    }
  });
  for (int h : hits) ASSERT_EQ(h, 1);
  const int64_t caller_items = std::count(by_caller.begin(), by_caller.end(), 1);
  // The caller's first piece is half its chunk (16 items); the worker takes what it can of
  // the other half (all of it unless the host kept it off its core for the 200 ms).
  EXPECT_GE(caller_items, 16);
  EXPECT_LT(caller_items, 32);
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(by_caller[static_cast<size_t>(i)], 1) << i;
}

}  // namespace
}  // namespace crossreg::cpu
