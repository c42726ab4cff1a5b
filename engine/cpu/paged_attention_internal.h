// The SIMD attention kernels behind engine/cpu/paged_attention.h.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cpu/paged_attention.h"

namespace crossreg::cpu::internal {

// Rows attended together by the AVX-512 kernel: consecutive rows of one sequence share
// each key load (their scores' FMA chains interleave). 12 rather than 4: a verify step of
// up to 11 drafts reads the head's keys once, and a prefill reads them a third as often
// (`crossreg-bench-decode --attention`, a layer after 512 positions, docs/benchmarks.md;
// the ~110M model against groups of 4: 5 rows 0.095-0.106 -> 0.065-0.077 ms, 16 rows
// 0.254-0.267 -> 0.176-0.192, prefill 512 2.95-3.11 -> 2.30-2.43). Groups of at most 6 split 8
// rows as 4 + 4 and lost that.
inline constexpr int kMaxGroupRows = 12;
// The AVX2 kernel's groups: up to 8 rows (a verify step of up to 7 drafts is one group;
// as 4 + 1 its fifth row re-read the keys and values alone, with 4 FMA chains per key
// load, and 5 rows took 1.3 as long as 4).
inline constexpr int kMaxGroupRowsAvx2 = 8;

// Rows [r0, r0 + count) for head h, count <= kMaxGroupRows, all with the same block
// table (one sequence), when head_dim is one the kernel is built for (a multiple of 8
// up to 256); false otherwise (the portable path then runs). Each row's result is
// bitwise the same as with count = 1. `prefetch`: ask for the head's K/V ahead of use
// (off when this thread has just read them for the previous rows). Call only with
// AVX-512.
bool AttendRowsAvx512(const PagedAttentionArgs& a, int64_t r0, int count, int h, std::vector<float>& scores,
                      bool prefetch);

// Query vectors attended together on AVX2: rows [r0, r0 + rows) of one sequence times
// heads [h0, h0 + heads) of one kv head (grouped-query heads read the same keys and
// values), rows x heads <= kMaxGroupRowsAvx2; vector i is row r0 + i % rows, head
// h0 + i / rows.
struct AttentionUnit {
  int64_t r0 = 0;
  int rows = 1;
  int h0 = 0;
  int heads = 1;
};

// Rows [r0, r0 + count), count <= kMaxGroupRowsAvx2, and head h on AVX2
// (engine/cpu/paged_attention_avx2.cc), as AttendRowsAvx512 (each row's result bitwise the
// same as with count = 1), for the
// kBlockTransposed layout with head_dim a multiple of 64 and block_size a multiple of 8;
// false otherwise (the portable path then runs). Call only with AVX2.
bool AttendRowsAvx2(const PagedAttentionArgs& a, int64_t r0, int count, int h, std::vector<float>& scratch);

// Every unit (together covering each row and head once) on AVX2, in three phases split
// between `threads` threads of `pool` (null when threads is 1) that meet between them:
// the cached keys' scores (each unit's keys in ranges), each vector's own keys and
// softmax, the value sums (each unit's head elements in ranges). A decode or verify
// step has a few units (3 kv heads of the default model): split by unit, the threads
// would read each kv head's keys and values twice, or wait on each other. Each vector's
// arithmetic is AttendRowsAvx2's, in the same order, so its result is bitwise the same.
// The same conditions as AttendRowsAvx2; false otherwise.
bool AttendUnitsAvx2(const PagedAttentionArgs& a, const std::vector<AttentionUnit>& units, ThreadPool* pool,
                     int threads);

}  // namespace crossreg::cpu::internal
