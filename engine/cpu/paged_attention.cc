#include "engine/cpu/paged_attention.h"

#include <algorithm>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/paged_attention_internal.h"
#include "engine/cpu/thread_pool.h"
#include "engine/dtype.h"

namespace crossreg::cpu {
namespace {


// Cached keys or values of one kv head, for either layout.
template <typename T>
struct CachedRows {
  const PagedAttentionArgs& a;
  const int32_t* table;
  const T* base;
  int kv_head;
  bool values;  // kBlockTransposed lays keys and values out differently
  const T* slot_major(int64_t t) const {
    const int64_t slot = int64_t{table[t / a.block_size]} * a.block_size + t % a.block_size;
    return base + slot * a.num_kv_heads * a.head_dim + int64_t{kv_head} * a.head_dim;
  }
  // Copies position t's row into `out` (head_dim floats).
  void Get(int64_t t, float* out) const {
    if (a.kv_layout == KvLayout::kSlotMajor) {
      const T* k = slot_major(t);
      for (int d = 0; d < a.head_dim; ++d) out[d] = ToFloat(k[d]);
      return;
    }
    const int64_t block = table[t / a.block_size];
    if (values) {
      const T* v = base + ((block * a.num_kv_heads + kv_head) * a.block_size + t % a.block_size) * a.head_dim;
      for (int d = 0; d < a.head_dim; ++d) out[d] = ToFloat(v[d]);
      return;
    }
    const T* k = base + ((block * a.num_kv_heads + kv_head) * a.head_dim) * a.block_size + t % a.block_size;
    for (int d = 0; d < a.head_dim; ++d) out[d] = ToFloat(k[int64_t{d} * a.block_size]);
  }
  static float ToFloat(float v) { return v; }
  static float ToFloat(uint16_t v) { return Bf16ToF32(v); }
};

// One (row, head): scores over the attended positions, softmax, weighted sum. The
// portable path: one key at a time.
template <typename T>
void AttendOne(const PagedAttentionArgs& a, int64_t r, int h, std::vector<float>& scores) {
  const int hd = a.head_dim;
  const int kv_head = h / (a.num_heads / a.num_kv_heads);
  const int64_t kv_dim = static_cast<int64_t>(a.num_kv_heads) * hd;
  const int64_t kv_off = static_cast<int64_t>(kv_head) * hd;
  const float* q = a.q + r * a.q_stride + static_cast<int64_t>(h) * hd;
  const int64_t n_cached = a.num_cached[r];
  const int64_t n = n_cached + a.num_own[r];
  const int32_t* table = a.block_tables + a.table_offset[r];
  const CachedRows<T> keys{a, table, static_cast<const T*>(a.k_cache), kv_head, false};
  const CachedRows<T> values{a, table, static_cast<const T*>(a.v_cache), kv_head, true};
  auto own_row = [&](int64_t t) { return int64_t{a.group_rows[a.group_begin[r] + (t - n_cached)]}; };
  scores.resize(static_cast<size_t>(n) + static_cast<size_t>(hd));
  float* key = scores.data() + n;  // scratch for one key or value row
  for (int64_t t = 0; t < n_cached; ++t) {
    keys.Get(t, key);
    scores[static_cast<size_t>(t)] = Dot(q, key, hd) * a.scale;
  }
  for (int64_t t = n_cached; t < n; ++t) {
    scores[static_cast<size_t>(t)] = Dot(q, a.pred_k + own_row(t) * kv_dim + kv_off, hd) * a.scale;
  }
  Softmax(scores.data(), n);
  float* out = a.out + r * a.out_stride + static_cast<int64_t>(h) * hd;
  std::fill_n(out, hd, 0.0f);
  for (int64_t t = 0; t < n_cached; ++t) {
    values.Get(t, key);
    Axpy(out, scores[static_cast<size_t>(t)], key, hd);
  }
  for (int64_t t = n_cached; t < n; ++t) {
    Axpy(out, scores[static_cast<size_t>(t)], a.pred_v + own_row(t) * kv_dim + kv_off, hd);
  }
}

// The units of a forward's row groups (`starts`: each group's first row, then a.rows):
// each takes as many of a kv head's query heads as keep rows x heads within the kernel's
// MaxVectors (one row of the default model: both query heads of a kv head, whose keys and
// values are then read once a step), larger groups one head each. kv-head major within a
// group, so that consecutive units read the same keys and values.
const std::vector<internal::AttentionUnit>& AttentionUnits(const PagedAttentionArgs& a,
                                                          const std::vector<int32_t>& starts, int max_vectors) {
  thread_local std::vector<internal::AttentionUnit> units;
  units.clear();
  const int per_kv = a.num_heads / a.num_kv_heads;
  for (size_t g = 0; g + 1 < starts.size(); ++g) {
    const int r0 = starts[g];
    const int rows = starts[g + 1] - r0;
    int heads = 1;
    for (int d = per_kv; d >= 1; --d) {
      if (per_kv % d == 0 && rows * d <= max_vectors) {
        heads = d;
        break;
      }
    }
    for (int h = 0; h < a.num_heads; h += heads) units.push_back({r0, rows, h, heads});
  }
  return units;
}

// Where RunUnits' units keep their items and scratch: unit u's scores from offset[u]
// (stride[u] floats a vector), its softmax inverses from inv_offset[u], its score and sum
// items from score_items[u] and sum_items[u]; each array but stride ends with the total.
struct UnitLayout {
  const std::vector<int64_t>& offset;
  const std::vector<int64_t>& stride;
  const std::vector<int64_t>& inv_offset;
  const std::vector<int64_t>& score_items;
  const std::vector<int64_t>& sum_items;
};

// The layout of `units`, in this thread's buffers (valid until its next call).
UnitLayout LayOutUnits(const PagedAttentionArgs& a, const std::vector<internal::AttentionUnit>& units,
                       const internal::UnitKernel& kernel) {
  const size_t count = units.size();
  thread_local std::vector<int64_t> offset, stride, inv_offset, score_items, sum_items;
  offset.assign(count + 1, 0);
  stride.assign(count, 0);
  inv_offset.assign(count + 1, 0);
  score_items.assign(count + 1, 0);
  sum_items.assign(count + 1, 0);
  for (size_t u = 0; u < count; ++u) {
    const internal::AttentionUnit& unit = units[u];
    int64_t max_n = 0;
    for (int i = 0; i < unit.rows; ++i) {
      max_n = std::max<int64_t>(max_n, int64_t{a.num_cached[unit.r0 + i]} + a.num_own[unit.r0 + i]);
    }
    stride[u] = (max_n + 16 + 15) / 16 * 16;
    offset[u + 1] = offset[u] + unit.vectors() * stride[u];
    inv_offset[u + 1] = inv_offset[u] + unit.vectors();
    score_items[u + 1] = score_items[u] + kernel.ScoreItems(a, unit);
    sum_items[u + 1] = sum_items[u] + kernel.SumItems(a, unit);
  }
  return {offset, stride, inv_offset, score_items, sum_items};
}

// Each thread takes whole units through the three phases, no meeting between them: a
// unit's values are then summed by the core that scored its keys (and asked for its
// values meanwhile), as in the row-group path. Split inside units, the ~110M model's 12
// heads ran 2-4% slower on AVX-512.
void RunWholeUnits(const PagedAttentionArgs& a, const std::vector<internal::AttentionUnit>& units,
                   const internal::UnitKernel& kernel, const UnitLayout& layout, ThreadPool* pool, int threads) {
  const size_t count = units.size();
  const std::vector<int64_t>& off = layout.offset;
  const std::vector<int64_t>& str = layout.stride;
  const std::vector<int64_t>& inv_off = layout.inv_offset;
  const std::vector<int64_t>& s_items = layout.score_items;
  const std::vector<int64_t>& v_items = layout.sum_items;
  // Thread t's units start at bound(t): split by score items (positions x vectors), as
  // a batch's sequences attend contexts of different lengths; bound(threads) is every
  // unit, whatever items the last ones have.
  auto bound = [&](int t) -> size_t {
    if (t >= threads) return count;
    const int64_t at = s_items.back() * t / threads;
    return static_cast<size_t>(std::lower_bound(s_items.begin(), s_items.begin() + static_cast<int64_t>(count), at) -
                               s_items.begin());
  };
  auto whole = [&](int t) {
    // Each thread's own scratch, one unit's at a time: a batch's units all at once would
    // take rows x heads x context floats.
    thread_local std::vector<float> unit_scores, unit_inv;
    const size_t last = bound(t + 1);
    for (size_t u = bound(t); u < last; ++u) {
      unit_scores.resize(static_cast<size_t>(off[u + 1] - off[u]));
      unit_inv.resize(static_cast<size_t>(inv_off[u + 1] - inv_off[u]));
      const internal::UnitScratch s{unit_scores.data(), str[u], unit_inv.data()};
      kernel.Score(a, units[u], s, 0, s_items[u + 1] - s_items[u]);
      for (int i = 0; i < units[u].vectors(); ++i) kernel.OwnKeysAndSoftmax(a, units[u], s, i);
      kernel.Sum(a, units[u], s, 0, v_items[u + 1] - v_items[u]);
    }
  };
  if (threads <= 1) {
    whole(0);
  } else {
    pool->ParallelFor(threads, 1, [&](int64_t t, int64_t) { whole(static_cast<int>(t)); });
  }
}

// The phases split units between the threads, every unit's scratch at once, the threads
// meeting between the phases.
void RunUnitPhases(const PagedAttentionArgs& a, const std::vector<internal::AttentionUnit>& units,
                   const internal::UnitKernel& kernel, const UnitLayout& layout, ThreadPool* pool, int threads) {
  const size_t count = units.size();
  const std::vector<int64_t>& off = layout.offset;
  const std::vector<int64_t>& str = layout.stride;
  const std::vector<int64_t>& inv_off = layout.inv_offset;
  const std::vector<int64_t>& s_items = layout.score_items;
  const std::vector<int64_t>& v_items = layout.sum_items;
  // Items [begin, end) of a phase whose unit u owns items [items[u], items[u + 1]):
  // fn(u, first, last) per unit, in the unit's own item numbers.
  auto for_items = [&](const std::vector<int64_t>& items, int64_t begin, int64_t end, auto fn) {
    size_t u = static_cast<size_t>(std::upper_bound(items.begin(), items.end(), begin) - items.begin()) - 1;
    for (; u < count && items[u] < end; ++u) {
      const int64_t first = std::max(begin, items[u]) - items[u];
      const int64_t last = std::min(end, items[u + 1]) - items[u];
      if (first < last) fn(u, first, last);
    }
  };
  thread_local std::vector<float> scores, inv;
  scores.resize(static_cast<size_t>(off.back()));
  inv.resize(static_cast<size_t>(inv_off.back()));
  // The workers reach this thread's buffers through these (naming a thread_local inside
  // the lambda would give each worker its own).
  float* const scores_base = scores.data();
  float* const inv_base = inv.data();
  auto scratch = [&](size_t u) {
    return internal::UnitScratch{scores_base + off[u], str[u], inv_base + inv_off[u]};
  };
  cpu::SpinBarrier barrier(threads);
  auto phases = [&](int t) {
    const int64_t n1 = s_items.back();
    for_items(s_items, n1 * t / threads, n1 * (t + 1) / threads, [&](size_t u, int64_t first, int64_t last) {
      kernel.Score(a, units[u], scratch(u), first, last);
    });
    if (threads > 1) barrier.Wait();
    const int64_t n2 = inv_off.back();
    const int64_t v0 = n2 * t / threads, v1 = n2 * (t + 1) / threads;
    for (size_t u = 0; u < count; ++u) {
      for (int64_t v = std::max(v0, inv_off[u]); v < std::min(v1, inv_off[u + 1]); ++v) {
        kernel.OwnKeysAndSoftmax(a, units[u], scratch(u), static_cast<int>(v - inv_off[u]));
      }
    }
    if (threads > 1) barrier.Wait();
    const int64_t n3 = v_items.back();
    for_items(v_items, n3 * t / threads, n3 * (t + 1) / threads, [&](size_t u, int64_t first, int64_t last) {
      kernel.Sum(a, units[u], scratch(u), first, last);
    });
  };
  if (threads <= 1) {
    phases(0);
    return;
  }
  pool->ParallelFor(threads, 1, [&](int64_t t, int64_t) { phases(static_cast<int>(t)); });
}

// The units' three phases (internal::UnitKernel) on `threads` threads of `pool` (one:
// this thread alone), each phase's items split in contiguous ranges (a thread's items of
// one unit run as one call, the values' passes block by block).
void RunUnits(const PagedAttentionArgs& a, const std::vector<internal::AttentionUnit>& units,
              const internal::UnitKernel& kernel, ThreadPool* pool, int threads) {
  const UnitLayout layout = LayOutUnits(a, units, kernel);
  // Enough units for each thread to take several whole ones (RunWholeUnits says why).
  if (units.size() >= 4 * static_cast<size_t>(threads)) {
    RunWholeUnits(a, units, kernel, layout, pool, threads);
  } else {
    RunUnitPhases(a, units, kernel, layout, pool, threads);
  }
}

}  // namespace

void PagedAttention(const PagedAttentionArgs& a, ThreadPool* pool) {
  const bool avx512 = DetectedSimdLevel() >= SimdLevel::kAvx512;
  const bool avx2 = DetectedSimdLevel() >= SimdLevel::kAvx2;
  // Groups of consecutive rows of one sequence (the same block table), up to the kernel's
  // group size each and as even as that allows (9 rows at 8: 5 + 4, not 8 + 1), which
  // the SIMD kernels attend together; the portable path takes them one row at a time.
  // Grouping never changes a row's result.
  const int max_group = avx512 ? internal::kMaxGroupRows : internal::kMaxGroupRowsAvx2;
  thread_local std::vector<int32_t> group_start;
  group_start.clear();
  int longest_run = 0;  // most rows of one sequence
  for (int r = 0; r < a.rows;) {
    int end = r + 1;
    while (end < a.rows && a.table_offset[end] == a.table_offset[r]) ++end;
    const int run = end - r;
    longest_run = std::max(longest_run, run);
    const int parts = (run + max_group - 1) / max_group;
    for (int p = 0; p < parts; ++p) group_start.push_back(r + run * p / parts);
    r = end;
  }
  const int64_t groups = static_cast<int64_t>(group_start.size());
  group_start.push_back(a.rows);
  // The workers read this thread's list through the reference (naming the thread_local
  // inside the lambda would give each worker its own, empty, list).
  const std::vector<int32_t>& starts = group_start;
  const int64_t tasks = groups * a.num_heads;
  const int64_t element_bytes = a.cache_element == KvElement::kBf16 ? 2 : 4;
  // One head's keys and values up to this size stay in L2 from one group to the next.
  constexpr int64_t kWarmKvBytes = int64_t{256} << 10;
  auto run = [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores;
    for (int64_t task = begin; task < end; ++task) {
      // Head-major: the rows of one head read the same K/V slice, so consecutive tasks
      // find it in L1 or L2.
      const int h = static_cast<int>(task / groups);
      const int64_t g = task % groups;
      const int r0 = starts[static_cast<size_t>(g)];
      const int count = starts[static_cast<size_t>(g) + 1] - r0;
      // The K/V of a group's sequence was just read here for the previous group when
      // both are rows of one sequence (one block table) and the same head; then it is
      // in this core's caches unless the context outgrows them.
      const bool warm = task > begin && g > 0 &&
                        a.table_offset[starts[static_cast<size_t>(g) - 1]] == a.table_offset[r0] &&
                        2 * int64_t{a.num_cached[r0 + count - 1]} * a.head_dim * element_bytes <= kWarmKvBytes;
      if (avx512 && internal::AttendRowsAvx512(a, r0, count, h, scores, !warm)) continue;
      if (avx2 && !avx512 && internal::AttendRowsAvx2(a, r0, count, h, scores)) continue;
      for (int64_t r = r0; r < r0 + count; ++r) {
        if (a.cache_element == KvElement::kBf16) {
          AttendOne<uint16_t>(a, r, h, scores);
        } else {
          AttendOne<float>(a, r, h, scores);
        }
      }
    }
  };
  int64_t cost = 0;  // multiply-adds, roughly: 2 · head_dim per attended position and head
  for (int r = 0; r < a.rows; ++r) cost += 2 * int64_t{a.head_dim} * a.num_heads * (a.num_cached[r] + a.num_own[r]);
  // Below ~64K multiply-adds a second thread costs more in synchronisation than it saves.
  const bool one_thread = pool == nullptr || pool->num_threads() == 1 || cost < (1 << 16);
  if (avx2) {
    const internal::UnitKernel* kernel = avx512 ? internal::UnitKernelAvx512(a) : internal::UnitKernelAvx2(a);
    // Units when no sequence has more rows than a unit holds: a verify step, or a batch's
    // decode and verify steps, however many sequences (the query heads of a kv head then
    // share its keys' and values' reads, which no longer fit L2 twice in a large batch's
    // decode step; docs/benchmarks.md, "The K/V cache's element type", has the batch
    // figures). A sequence of more rows (a
    // prefill chunk) leaves the call to the row groups, whose tasks are dealt out as the
    // threads finish, as its later rows attend more positions.
    if (kernel != nullptr && longest_run <= kernel->MaxRows()) {
      const std::vector<internal::AttentionUnit>& units = AttentionUnits(a, starts, kernel->MaxVectors());
      // On one thread, units of one head each are the row groups again, with the phases'
      // bookkeeping on top: stories260K's 16-row forward, its rows split 8 a thread, ran a
      // few percent slower so.
      const bool shared_reads =
          std::any_of(units.begin(), units.end(), [](const internal::AttentionUnit& u) { return u.heads > 1; });
      if (!one_thread || shared_reads) {
        RunUnits(a, units, *kernel, one_thread ? nullptr : pool, one_thread ? 1 : pool->num_threads());
        return;
      }
    }
  }
  if (one_thread) {
    run(0, tasks);
    return;
  }
  // Chunks of a few tasks: later rows of a prefill attend more positions.
  pool->ParallelForDynamic(tasks, std::max<int64_t>(1, std::min<int64_t>(groups, 2)), run);
}

}  // namespace crossreg::cpu
