// The K/V store into the CPU cache (engine/cpu/kv_store.h), keys' and values' layouts,
// on every SIMD path this CPU has, against each layout's formula written out element
// by element: runs
// that start mid-block, cross a block, exceed one vector, skip predictive rows or jump
// between blocks; f32 and bf16 elements (rounding ties, NaN); stores split by element
// ranges. Every byte of the cache is compared, so a store outside a row's slots fails.
#include "engine/cpu/kv_store.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/dtype.h"
#include "engine/sampler.h"
#include "gtest/gtest.h"

namespace crossreg::cpu {
namespace {

struct Layout {
  int block_size;
  int64_t width;
  int head_dim;  // the values' layout: elements per kv head
};

// The slot patterns a forward produces, and some it might.
std::vector<std::vector<int32_t>> SlotPatterns(int bs) {
  std::vector<std::vector<int32_t>> patterns;
  std::vector<int32_t> run;  // 40 consecutive slots from mid-block 1: crosses blocks
  for (int i = 0; i < 40; ++i) run.push_back(bs + 3 + i);
  patterns.push_back(run);
  patterns.push_back({5});  // one decode row
  // Control rows of two sequences with predictive rows (slot -1) between them.
  patterns.push_back({2 * bs + 1, 2 * bs + 2, -1, -1, 7 * bs, 7 * bs + 1, 7 * bs + 2, -1, 4 * bs + bs - 1});
  // Consecutive slots that are not in one block order (a sequence's blocks need not
  // be adjacent), and a row repeated out of order.
  patterns.push_back({6 * bs + bs - 2, 6 * bs + bs - 1, 3 * bs, 3 * bs + 1, 0});
  return patterns;
}

void Reference(const KvStoreArgs& a, std::vector<unsigned char>& cache) {
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t slot = a.slots[r];
    if (slot < 0) continue;
    for (int64_t i = 0; i < a.width; ++i) {
      const int64_t block = slot / a.block_size, offset = slot % a.block_size;
      const int64_t at = a.value_rows ? block * a.width * a.block_size +
                                            ((i / a.head_dim) * a.block_size + offset) * a.head_dim + i % a.head_dim
                                      : (block * a.width + i) * a.block_size + offset;
      const float v = a.src[r * a.src_stride + i];
      if (a.bf16) {
        const uint16_t h = F32ToBf16(v);
        std::memcpy(cache.data() + at * 2, &h, 2);
      } else {
        std::memcpy(cache.data() + at * 4, &v, 4);
      }
    }
  }
}

using Case = std::tuple<SimdLevel, bool, Layout, bool>;  // level, bf16, layout, values

class KvStoreTest : public ::testing::TestWithParam<Case> {};

TEST_P(KvStoreTest, MatchesTheLayoutFormulaByteForByte) {
  const auto [level, bf16, layout, values] = GetParam();
  const int bs = layout.block_size;
  const int64_t width = layout.width;
  const int64_t stride = width + 5;  // rows need not be packed
  Rng rng(17);
  for (const std::vector<int32_t>& slots : SlotPatterns(bs)) {
    const int64_t rows = static_cast<int64_t>(slots.size());
    std::vector<float> src(static_cast<size_t>(rows * stride));
    for (auto& v : src) v = static_cast<float>(rng.Uniform() * 4 - 2);
    // bf16 rounding cases: a tie to even either way, a NaN, an infinity.
    src[0] = std::bit_cast<float>(0x3f808000u);
    src[1] = std::bit_cast<float>(0x3f818000u);
    src[2] = std::numeric_limits<float>::quiet_NaN();
    src[3] = -std::numeric_limits<float>::infinity();
    const int64_t blocks = 8;
    const size_t bytes = static_cast<size_t>(blocks * bs * width) * (bf16 ? 2 : 4);
    std::vector<unsigned char> want(bytes, 0xA5), got(bytes, 0xA5), split(bytes, 0xA5);
    KvStoreArgs a{.src = src.data(),
                  .src_stride = stride,
                  .slots = slots.data(),
                  .rows = rows,
                  .width = width,
                  .block_size = bs,
                  .bf16 = bf16,
                  .cache = nullptr,
                  .value_rows = values,
                  .head_dim = layout.head_dim};
    Reference(a, want);
    a.cache = got.data();
    StoreKvRows(a, 0, width, level);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), bytes)) << "rows " << rows << ", first slot " << slots[0];
    // The same store in three element ranges (as threads split it).
    a.cache = split.data();
    const int64_t cut1 = width / 3 / 16 * 16, cut2 = std::min<int64_t>(width, cut1 + 16 + width / 3);
    StoreKvRows(a, cut2, width, level);
    StoreKvRows(a, 0, cut1, level);
    StoreKvRows(a, cut1, cut2, level);
    EXPECT_EQ(0, std::memcmp(want.data(), split.data(), bytes)) << "split store, rows " << rows;
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (SimdLevel level : AvailableSimdLevels()) {
    for (bool bf16 : {false, true}) {
      for (Layout layout : {Layout{16, 768, 64}, Layout{16, 40, 8}, Layout{8, 72, 24}, Layout{32, 24, 8}}) {
        for (bool values : {false, true}) cases.emplace_back(level, bf16, layout, values);
      }
    }
  }
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const SimdLevel level = std::get<0>(info.param);
  const Layout layout = std::get<2>(info.param);
  return std::string(SimdLevelName(level)) + (std::get<1>(info.param) ? "_bf16" : "_f32") + "_bs" +
         std::to_string(layout.block_size) + "_w" + std::to_string(layout.width) +
         (std::get<3>(info.param) ? "_values_hd" + std::to_string(layout.head_dim) : "_keys");
}

INSTANTIATE_TEST_SUITE_P(EveryPath, KvStoreTest, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace crossreg::cpu
