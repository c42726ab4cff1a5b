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

// Rows [r0, r0 + count), count <= kMaxGroupRowsAvx2, and head h on AVX2
// (engine/cpu/paged_attention_avx2.cc), as AttendRowsAvx512 (each row's result bitwise the
// same as with count = 1), for the
// kBlockTransposed layout with head_dim a multiple of 64 and block_size a multiple of 8;
// false otherwise (the portable path then runs). Call only with AVX2.
bool AttendRowsAvx2(const PagedAttentionArgs& a, int64_t r0, int count, int h, std::vector<float>& scratch);

}  // namespace crossreg::cpu::internal
