// The CPU attention over the CPU backend's block-transposed cache, on the path this CPU
// runs (AVX-512, AVX2 or portable), against a double-precision reference written here
// from the layout's definition (engine/cpu/paged_attention.h): cached positions through
// a block table (a partial last block included), and a predictive row's own keys.
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/paged_attention.h"
#include "engine/dtype.h"
#include "engine/sampler.h"
#include "gtest/gtest.h"

namespace crossreg::cpu {
namespace {

class PagedAttentionTest : public ::testing::TestWithParam<std::tuple<KvElement, int /*head_dim*/>> {};

TEST_P(PagedAttentionTest, MatchesTheReferenceOnTheBlockTransposedCache) {
  const auto [element, hd] = GetParam();
  const int heads = 4, kv_heads = 2, bs = 16, blocks = 4;
  const int64_t kv_dim = int64_t{kv_heads} * hd;
  Rng rng(3);
  auto uniform = [&rng] { return static_cast<float>(rng.Uniform() * 2 - 1); };
  // The cache: blocks in a scrambled table order, so a wrong block lookup shows.
  const std::vector<int32_t> table = {2, 0, 3, 1};
  std::vector<float> k(static_cast<size_t>(blocks * kv_dim * bs)), v(k.size());
  for (auto& x : k) x = uniform();
  for (auto& x : v) x = uniform();
  if (element == KvElement::kBf16) {  // the values the bf16 cache holds
    for (auto& x : k) x = Bf16ToF32(F32ToBf16(x));
    for (auto& x : v) x = Bf16ToF32(F32ToBf16(x));
  }
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  for (size_t i = 0; i < k.size(); ++i) k16[i] = F32ToBf16(k[i]), v16[i] = F32ToBf16(v[i]);
  auto key = [&](int64_t t, int kvh, int d) {
    return k[static_cast<size_t>(((int64_t{table[t / bs]} * kv_heads + kvh) * hd + d) * bs + t % bs)];
  };
  auto value = [&](int64_t t, int kvh, int d) {
    return v[static_cast<size_t>(((int64_t{table[t / bs]} * kv_heads + kvh) * bs + t % bs) * hd + d)];
  };
  // Rows: two control rows of 37 and 53 cached positions (partial blocks), and a
  // predictive row of 40 cached positions plus two own rows (itself and the row before).
  const int rows = 4;
  const std::vector<int32_t> num_cached = {37, 53, 40, 40}, num_own = {0, 0, 1, 2};
  const std::vector<int32_t> table_offset(rows, 0), group_begin = {0, 0, 0, 0}, group_rows = {2, 3};
  std::vector<float> q(static_cast<size_t>(rows * heads * hd)), pred_k(static_cast<size_t>(rows * kv_dim)),
      pred_v(pred_k.size());
  for (auto& x : q) x = uniform();
  for (auto& x : pred_k) x = uniform();
  for (auto& x : pred_v) x = uniform();
  std::vector<float> out(q.size(), -7.0f);
  PagedAttentionArgs a;
  a.q = q.data();
  a.q_stride = int64_t{heads} * hd;
  a.cache_element = element;
  a.kv_layout = KvLayout::kBlockTransposed;
  a.k_cache = element == KvElement::kBf16 ? static_cast<const void*>(k16.data()) : k.data();
  a.v_cache = element == KvElement::kBf16 ? static_cast<const void*>(v16.data()) : v.data();
  a.pred_k = pred_k.data();
  a.pred_v = pred_v.data();
  a.block_tables = table.data();
  a.table_offset = table_offset.data();
  a.num_cached = num_cached.data();
  a.num_own = num_own.data();
  a.group_begin = group_begin.data();
  a.group_rows = group_rows.data();
  a.rows = rows;
  a.num_heads = heads;
  a.num_kv_heads = kv_heads;
  a.head_dim = hd;
  a.block_size = bs;
  a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  a.out = out.data();
  a.out_stride = int64_t{heads} * hd;
  PagedAttention(a, nullptr);
  for (int r = 0; r < rows; ++r) {
    // Row 2's own rows are rows 2 (itself) and... the group lists rows 2, 3 from
    // group_begin 0: row 2 attends one (row 2), row 3 two (rows 2 and 3).
    for (int h = 0; h < heads; ++h) {
      const int kvh = h / (heads / kv_heads);
      const int64_t n = num_cached[r] + num_own[r];
      std::vector<double> s(static_cast<size_t>(n));
      double top = -1e300;
      for (int64_t t = 0; t < n; ++t) {
        double dot = 0;
        for (int d = 0; d < hd; ++d) {
          const double kd = t < num_cached[r] ? key(t, kvh, d)
                                               : pred_k[static_cast<size_t>(group_rows[t - num_cached[r]] * kv_dim +
                                                                            kvh * hd + d)];
          dot += double(q[static_cast<size_t>((r * heads + h) * hd + d)]) * kd;
        }
        s[static_cast<size_t>(t)] = dot * a.scale;
        top = std::max(top, s[static_cast<size_t>(t)]);
      }
      double sum = 0;
      for (auto& x : s) sum += (x = std::exp(x - top));
      for (int d = 0; d < hd; ++d) {
        double want = 0;
        for (int64_t t = 0; t < n; ++t) {
          const double vd = t < num_cached[r] ? value(t, kvh, d)
                                               : pred_v[static_cast<size_t>(group_rows[t - num_cached[r]] * kv_dim +
                                                                            kvh * hd + d)];
          want += s[static_cast<size_t>(t)] / sum * vd;
        }
        EXPECT_NEAR(out[static_cast<size_t>((r * heads + h) * hd + d)], want, 2e-5)
            << "row " << r << " head " << h << " element " << d << " on " << SimdLevelName(DetectedSimdLevel());
      }
    }
  }
}

// Lossless = AR rests on it: the SIMD kernels attend up to 4 rows of one sequence
// together, and each row's output must be bitwise what the row gets alone. Rows with
// contexts that end in different blocks and inside groups of 8, and predictive rows.
TEST_P(PagedAttentionTest, ARowsResultIsBitwiseTheSameAloneAndInAGroup) {
  const auto [element, hd] = GetParam();
  const int heads = 2, kv_heads = 1, bs = 16, blocks = 6;
  const int64_t kv_dim = int64_t{kv_heads} * hd;
  Rng rng(9);
  auto uniform = [&rng] { return static_cast<float>(rng.Uniform() * 2 - 1); };
  const std::vector<int32_t> table = {4, 1, 5, 0, 3, 2};
  std::vector<float> k(static_cast<size_t>(blocks * kv_dim * bs)), v(k.size());
  for (auto& x : k) x = uniform();
  for (auto& x : v) x = uniform();
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  for (size_t i = 0; i < k.size(); ++i) k16[i] = F32ToBf16(k[i]), v16[i] = F32ToBf16(v[i]);
  const int rows = 7;  // a group of 4, then one of 3
  const std::vector<int32_t> num_cached = {70, 33, 8, 95, 41, 41, 41}, num_own = {0, 0, 0, 0, 1, 2, 3};
  const std::vector<int32_t> table_offset(rows, 0), group_begin = {0, 0, 0, 0, 0, 0, 0}, group_rows = {4, 5, 6};
  std::vector<float> q(static_cast<size_t>(rows * heads * hd)), pred_k(static_cast<size_t>(rows * kv_dim)),
      pred_v(pred_k.size());
  for (auto& x : q) x = uniform();
  for (auto& x : pred_k) x = uniform();
  for (auto& x : pred_v) x = uniform();
  PagedAttentionArgs a;
  a.q_stride = int64_t{heads} * hd;
  a.cache_element = element;
  a.kv_layout = KvLayout::kBlockTransposed;
  a.k_cache = element == KvElement::kBf16 ? static_cast<const void*>(k16.data()) : k.data();
  a.v_cache = element == KvElement::kBf16 ? static_cast<const void*>(v16.data()) : v.data();
  a.pred_k = pred_k.data();
  a.pred_v = pred_v.data();
  a.block_tables = table.data();
  a.num_heads = heads;
  a.num_kv_heads = kv_heads;
  a.head_dim = hd;
  a.block_size = bs;
  a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  a.out_stride = int64_t{heads} * hd;
  auto run = [&](int first, int count, float* out) {
    PagedAttentionArgs b = a;
    b.q = q.data() + first * a.q_stride;
    b.table_offset = table_offset.data() + first;
    b.num_cached = num_cached.data() + first;
    b.num_own = num_own.data() + first;
    b.group_begin = group_begin.data() + first;
    b.group_rows = group_rows.data();
    b.rows = count;
    b.out = out;
    PagedAttention(b, nullptr);
  };
  std::vector<float> together(q.size(), -7.0f);
  run(0, rows, together.data());
  for (int r = 0; r < rows; ++r) {
    std::vector<float> alone(static_cast<size_t>(a.out_stride), -7.0f);
    run(r, 1, alone.data());
    for (int64_t e = 0; e < a.out_stride; ++e) {
      ASSERT_EQ(alone[static_cast<size_t>(e)], together[static_cast<size_t>(r * a.out_stride + e)])
          << "row " << r << " element " << e << " on " << SimdLevelName(DetectedSimdLevel());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Caches, PagedAttentionTest,
                         ::testing::Combine(::testing::Values(KvElement::kF32, KvElement::kBf16),
                                            ::testing::Values(8, 64, 128)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == KvElement::kBf16 ? "bf16" : "f32") + "_hd" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace crossreg::cpu
