// The SIMD attention kernels behind engine/cpu/paged_attention.h.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cpu/paged_attention.h"

namespace crossreg::cpu::internal {

// Rows attended together by the AVX-512 kernel: consecutive rows of one sequence share
// each key load (their scores' FMA chains interleave). 12 rather than 4: a verify step of
// up to 11 drafts reads the head's keys once, and a prefill reads them a third as often;
// against groups of 4 that made verify steps of 5 and 16 rows and a 512-row prefill
// markedly faster (`crossreg-bench-decode --attention`, a layer after 512 positions;
// docs/benchmarks.md, "Xeon AMX: verify-forward cost"). Groups of at most 6 split 8
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

// Query vectors attended together in a decode or verify step: rows [r0, r0 + rows) of one
// sequence times heads [h0, h0 + heads) of one kv head (grouped-query heads read the same
// keys and values); vector i is row r0 + i % rows, head h0 + i / rows. rows x heads is
// at most the kernel's UnitKernel::MaxVectors.
struct AttentionUnit {
  int64_t r0 = 0;
  int rows = 1;
  int h0 = 0;
  int heads = 1;
  int vectors() const { return rows * heads; }
  int64_t row(int i) const { return r0 + i % rows; }
  int head(int i) const { return h0 + i / rows; }
  // The unit's longest cached context (the keys its first phase scores).
  int64_t max_cached(const PagedAttentionArgs& a) const {
    int64_t n = 0;
    for (int i = 0; i < rows; ++i) n = n > a.num_cached[r0 + i] ? n : a.num_cached[r0 + i];
    return n;
  }
};

// Where a unit's vectors keep their scores between the phases: vector i's at
// scores + i * stride (stride >= its attended positions + 16), and, for kernels that
// normalise at the end, 1 / the softmax sum at inv[i].
struct UnitScratch {
  float* scores = nullptr;
  int64_t stride = 0;
  float* inv = nullptr;
};

// A SIMD kernel's attention of units in three phases (engine/cpu/paged_attention.cc
// runs them, split between the threads, meeting between phases): the cached keys'
// scores, in ScoreItems ranges of positions; each vector's own keys and softmax; the
// value sums and outputs, in SumItems ranges of head elements. A decode or verify step
// has a few units (3 kv heads of the default model): split by unit, the threads would
// each read every kv head's keys and values for their heads, or wait on each other.
// Each vector's arithmetic is the kernel's row-group path's (AttendRowsAvx2,
// AttendRowsAvx512), in the same order, whichever items a thread takes: a row's
// result is bitwise the same as there, alone or in any batch, on any number of threads.
class UnitKernel {
 public:
  virtual ~UnitKernel() = default;
  // Forwards of up to this many rows (decode and verify steps) run as units; larger ones
  // (prefill) as row groups, tasks enough to share between the threads.
  virtual int MaxRows() const = 0;
  // The most vectors in a unit.
  virtual int MaxVectors() const = 0;
  virtual int64_t ScoreItems(const PagedAttentionArgs& a, const AttentionUnit& u) const = 0;
  virtual void Score(const PagedAttentionArgs& a, const AttentionUnit& u, const UnitScratch& s, int64_t first,
                     int64_t last) const = 0;
  virtual void OwnKeysAndSoftmax(const PagedAttentionArgs& a, const AttentionUnit& u, const UnitScratch& s,
                                 int i) const = 0;
  virtual int64_t SumItems(const PagedAttentionArgs& a, const AttentionUnit& u) const = 0;
  virtual void Sum(const PagedAttentionArgs& a, const AttentionUnit& u, const UnitScratch& s, int64_t first,
                   int64_t last) const = 0;
};

// The AVX2 kernel's phases for these args (engine/cpu/paged_attention_avx2.cc; the same
// conditions as AttendRowsAvx2), or null. Call only with AVX2.
const UnitKernel* UnitKernelAvx2(const PagedAttentionArgs& a);
// The AVX-512 kernel's (engine/cpu/paged_attention_avx512.cc: the block-transposed cache
// with block_size a multiple of 16, head_dim as AttendRowsAvx512 takes), or null. Call
// only with AVX-512.
const UnitKernel* UnitKernelAvx512(const PagedAttentionArgs& a);

// Rows [r0, r0 + count), count <= kMaxGroupRowsAvx2, and head h on AVX2
// (engine/cpu/paged_attention_avx2.cc), as AttendRowsAvx512 (each row's result bitwise the
// same as with count = 1), for the
// kBlockTransposed layout with head_dim a multiple of 64 and block_size a multiple of 8;
// false otherwise (the portable path then runs). Call only with AVX2.
bool AttendRowsAvx2(const PagedAttentionArgs& a, int64_t r0, int count, int h, std::vector<float>& scratch);

}  // namespace crossreg::cpu::internal
