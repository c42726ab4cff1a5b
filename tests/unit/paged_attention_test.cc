// The CPU attention over the CPU backend's block-transposed cache, on the path this CPU
// runs (AVX-512, AVX2 or portable), against a double-precision reference written here
// from the layout's definition (engine/cpu/paged_attention.h): cached positions through
// a block table (a partial last block included), and a predictive row's own keys.
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/paged_attention.h"
#include "engine/cpu/thread_pool.h"
#include "engine/dtype.h"
#include "engine/sampler.h"
#include "gtest/gtest.h"

namespace crossreg::cpu {
namespace {

// A block-transposed cache (blocks in the table's order), queries and predictive rows'
// K/V of uniform values, for `num_cached.size()` rows of one sequence; Args(first, count,
// out) describes rows [first, first + count) to PagedAttention.
struct AttentionInputs {
  AttentionInputs(KvElement element, int hd, int heads, int kv_heads, int bs, std::vector<int32_t> table,
                  std::vector<int32_t> num_cached, std::vector<int32_t> num_own, std::vector<int32_t> group_rows,
                  uint64_t seed)
      : element(element), hd(hd), heads(heads), kv_heads(kv_heads), bs(bs), table(std::move(table)),
        num_cached(std::move(num_cached)), num_own(std::move(num_own)), group_rows(std::move(group_rows)) {
    const int64_t rows = static_cast<int64_t>(this->num_cached.size());
    const int64_t kv_dim = int64_t{kv_heads} * hd;
    Rng rng(seed);
    auto uniform = [&rng] { return static_cast<float>(rng.Uniform() * 2 - 1); };
    k.resize(this->table.size() * static_cast<size_t>(kv_dim * bs));
    v.resize(k.size());
    for (auto& x : k) x = uniform();
    for (auto& x : v) x = uniform();
    if (element == KvElement::kBf16) {  // the values the bf16 cache holds
      for (auto& x : k) x = Bf16ToF32(F32ToBf16(x));
      for (auto& x : v) x = Bf16ToF32(F32ToBf16(x));
    }
    for (size_t i = 0; i < k.size(); ++i) k16.push_back(F32ToBf16(k[i])), v16.push_back(F32ToBf16(v[i]));
    q.resize(static_cast<size_t>(rows * heads * hd));
    pred_k.resize(static_cast<size_t>(rows * kv_dim));
    pred_v.resize(pred_k.size());
    for (auto& x : q) x = uniform();
    for (auto& x : pred_k) x = uniform();
    for (auto& x : pred_v) x = uniform();
    table_offset.assign(static_cast<size_t>(rows), 0);
    group_begin.assign(static_cast<size_t>(rows), 0);
  }

  int64_t stride() const { return int64_t{heads} * hd; }

  PagedAttentionArgs Args(int first, int count, float* out) const {
    PagedAttentionArgs a;
    a.q = q.data() + first * stride();
    a.q_stride = stride();
    a.cache_element = element;
    a.kv_layout = KvLayout::kBlockTransposed;
    a.k_cache = element == KvElement::kBf16 ? static_cast<const void*>(k16.data()) : k.data();
    a.v_cache = element == KvElement::kBf16 ? static_cast<const void*>(v16.data()) : v.data();
    a.pred_k = pred_k.data();
    a.pred_v = pred_v.data();
    a.block_tables = table.data();
    a.table_offset = table_offset.data() + first;
    a.num_cached = num_cached.data() + first;
    a.num_own = num_own.data() + first;
    a.group_begin = group_begin.data() + first;
    a.group_rows = group_rows.data();
    a.rows = count;
    a.num_heads = heads;
    a.num_kv_heads = kv_heads;
    a.head_dim = hd;
    a.block_size = bs;
    a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    a.out = out;
    a.out_stride = stride();
    return a;
  }

  KvElement element;
  int hd, heads, kv_heads, bs;
  std::vector<int32_t> table, num_cached, num_own, group_rows, table_offset, group_begin;
  std::vector<float> k, v, q, pred_k, pred_v;
  std::vector<uint16_t> k16, v16;
};

class PagedAttentionTest : public ::testing::TestWithParam<std::tuple<KvElement, int /*head_dim*/>> {};

// Each call's rows [first, first + count), on pools of 1, 2 and 3 threads, must give every
// row bitwise the output it gets alone on one thread.
void ExpectEachRowAsAlone(const AttentionInputs& in, const std::vector<std::pair<int, int>>& calls) {
  const int rows = static_cast<int>(in.num_cached.size());
  const int64_t stride = in.stride();
  std::vector<std::vector<float>> alone(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    alone[static_cast<size_t>(r)].assign(static_cast<size_t>(stride), -7.0f);
    PagedAttention(in.Args(r, 1, alone[static_cast<size_t>(r)].data()), nullptr);
  }
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (const auto& [first, count] : calls) {
      std::vector<float> together(in.q.size(), -7.0f);
      PagedAttention(in.Args(first, count, together.data()), &pool);
      for (int r = 0; r < count; ++r) {
        for (int64_t e = 0; e < stride; ++e) {
          ASSERT_EQ(alone[static_cast<size_t>(first + r)][static_cast<size_t>(e)],
                    together[static_cast<size_t>(r * stride + e)])
              << "row " << first + r << " of rows [" << first << ", " << first + count << "), element " << e << ", "
              << threads << " threads, on " << SimdLevelName(DetectedSimdLevel());
        }
      }
    }
  }
}

TEST_P(PagedAttentionTest, MatchesTheReferenceOnTheBlockTransposedCache) {
  const auto [element, hd] = GetParam();
  const int heads = 4, kv_heads = 2, bs = 16;
  const int64_t kv_dim = int64_t{kv_heads} * hd;
  // Blocks in a scrambled table order, so a wrong block lookup shows. Rows: two control
  // rows of 37 and 53 cached positions (partial blocks), and a predictive row of 40 cached
  // positions plus two own rows (itself and the row before).
  const AttentionInputs in(element, hd, heads, kv_heads, bs, {2, 0, 3, 1}, {37, 53, 40, 40}, {0, 0, 1, 2}, {2, 3}, 3);
  const std::vector<int32_t>& table = in.table;
  const std::vector<int32_t>& num_cached = in.num_cached;
  const std::vector<int32_t>& num_own = in.num_own;
  const std::vector<int32_t>& group_rows = in.group_rows;
  const std::vector<float>& q = in.q;
  const std::vector<float>& pred_k = in.pred_k;
  const std::vector<float>& pred_v = in.pred_v;
  auto key = [&](int64_t t, int kvh, int d) {
    return in.k[static_cast<size_t>(((int64_t{table[t / bs]} * kv_heads + kvh) * hd + d) * bs + t % bs)];
  };
  auto value = [&](int64_t t, int kvh, int d) {
    return in.v[static_cast<size_t>(((int64_t{table[t / bs]} * kv_heads + kvh) * bs + t % bs) * hd + d)];
  };
  const int rows = static_cast<int>(num_cached.size());
  std::vector<float> out(q.size(), -7.0f);
  const PagedAttentionArgs a = in.Args(0, rows, out.data());
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

// Lossless = AR rests on it: the SIMD kernels attend consecutive rows of one sequence
// together (AVX2 up to 8, AVX-512 up to 12; longer runs split evenly), and each row's
// output must be bitwise what the row gets alone. Rows with contexts that end in
// different blocks and inside groups of 8, and predictive rows; every row count from 1
// to 13, so that every group size and split (9 rows: 5 + 4, 13: 7 + 6) runs. Two sets of
// contexts: a group's longest context ends 1, 2 or 3 vectors of 16 keys into the
// kernels' last step of keys (the AVX-512 kernel scores 4 vectors a step for up to 4
// rows, 3 up to 8, 2 up to 12).
TEST_P(PagedAttentionTest, ARowsResultIsBitwiseTheSameAloneAndInAGroup) {
  const auto [element, hd] = GetParam();
  for (const std::vector<int32_t>& contexts :
       {std::vector<int32_t>{70, 33, 8, 95, 41, 41, 41, 17, 64, 3, 90, 41, 41},
        std::vector<int32_t>{75, 33, 8, 70, 41, 41, 41, 17, 26, 3, 22, 41, 41}}) {
    // Predictive rows have 1-3 own keys.
    const AttentionInputs in(element, hd, /*heads=*/2, /*kv_heads=*/1, /*bs=*/16, {4, 1, 5, 0, 3, 2}, contexts,
                             {0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 1, 2}, {4, 5, 6}, 9);
    const int rows = static_cast<int>(in.num_cached.size());
    const int64_t stride = in.stride();
    auto run = [&](int first, int count, float* out) { PagedAttention(in.Args(first, count, out), nullptr); };
    std::vector<std::vector<float>> alone(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) {
      alone[static_cast<size_t>(r)].assign(static_cast<size_t>(stride), -7.0f);
      run(r, 1, alone[static_cast<size_t>(r)].data());
    }
    for (int count = 2; count <= rows; ++count) {
      std::vector<float> together(in.q.size(), -7.0f);
      run(0, count, together.data());
      for (int r = 0; r < count; ++r) {
        for (int64_t e = 0; e < stride; ++e) {
          ASSERT_EQ(alone[static_cast<size_t>(r)][static_cast<size_t>(e)],
                    together[static_cast<size_t>(r * stride + e)])
              << "row " << r << " of " << count << ", element " << e << " (longest context " << contexts[3] << ") on "
              << SimdLevelName(DetectedSimdLevel());
        }
      }
    }
  }
}

// The same contract across the ways a forward's attention is split: decode and verify
// steps (up to 16 rows) run as units of query vectors (a kv head's query heads together)
// in phases split between the threads (keys by position, values by head element), larger
// forwards as row groups per head. A row's output must be bitwise its output alone, one
// thread, whatever the thread count, the row count and the other sequence in the call.
// Two sequences (their own block tables), rows of contexts long enough that the threads
// split the work, predictive rows with own keys, grouped-query heads (4 over 2).
TEST_P(PagedAttentionTest, ARowsResultDoesNotDependOnTheThreadsOrTheOtherRows) {
  const auto [element, hd] = GetParam();
  const std::vector<int32_t> contexts{120, 97, 128, 64, 101, 101, 101, 9, 128, 77, 111,
                                      90, 127, 33, 105, 105, 105, 105, 60, 128, 71, 119, 88, 100};
  const std::vector<int32_t> own{0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0};
  // Rows 0-10 read the first table (offset 0), rows 11-23 the second (offset 8).
  AttentionInputs in(element, hd, /*heads=*/4, /*kv_heads=*/2, /*bs=*/16,
                     {7, 2, 12, 0, 9, 4, 15, 1, 3, 10, 5, 14, 8, 11, 6, 13}, contexts, own,
                     {4, 5, 6, 14, 15, 16, 17}, 21);
  for (size_t r = 11; r < contexts.size(); ++r) {
    in.table_offset[r] = 8;
    in.group_begin[r] = 3;
  }
  const int rows = static_cast<int>(contexts.size());
  ExpectEachRowAsAlone(in, {{0, 1}, {4, 3}, {0, 4}, {3, 5}, {0, 8}, {2, 9}, {11, 7}, {0, 16}, {8, 16}, {0, 17},
                            {0, rows}});
}

// A batch's decode or verify step: many sequences of a few rows each run as units
// (however many rows the step has in all), a sequence of more rows than a unit holds (a
// prefill chunk) as row groups. Every row's output must be bitwise its output alone.
TEST_P(PagedAttentionTest, ABatchsRowsResultsDoNotDependOnTheOtherSequences) {
  const auto [element, hd] = GetParam();
  // 12 sequences of 1-3 rows (21 rows), then one of 20 rows; neighbours read different
  // block tables (offsets into one list of 16 blocks, 128 positions each).
  const std::vector<int> runs{1, 2, 3, 1, 1, 2, 3, 1, 2, 1, 3, 1, 20};
  std::vector<int32_t> contexts, offsets;
  Rng rng(11);
  for (size_t s = 0; s < runs.size(); ++s) {
    for (int i = 0; i < runs[s]; ++i) {
      contexts.push_back(s + 1 < runs.size() ? 1 + static_cast<int32_t>(rng.Uniform() * 127) : 100 + i);
      offsets.push_back(static_cast<int32_t>(s % 8));
    }
  }
  const int rows = static_cast<int>(contexts.size());
  AttentionInputs in(element, hd, /*heads=*/4, /*kv_heads=*/2, /*bs=*/16,
                     {7, 2, 12, 0, 9, 4, 15, 1, 3, 10, 5, 14, 8, 11, 6, 13}, contexts,
                     std::vector<int32_t>(static_cast<size_t>(rows), 0), {}, 23);
  in.table_offset = offsets;
  ExpectEachRowAsAlone(in, {{0, 21}, {3, 17}, {0, 13}, {21, 20}, {0, rows}, {14, 27}});
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
