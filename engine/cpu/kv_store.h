// Writing a forward's control rows into the CPU backend's paged K/V cache, laid out
// block-transposed (cpu::KvLayout::kBlockTransposed): within a block, element i
// (kv_head * head_dim + d) of its block_size slots is contiguous, so attention reads 16
// positions per vector. Slot s's element i therefore lives at
//   ((s / block_size) * width + i) * block_size + s % block_size.
// A row's K is one column of that layout: one value in each of `width` cache lines.
// Rows of one sequence fill consecutive slots, so a run of them shares those lines;
// the AVX-512 path transposes a run in registers and writes each line once.
#pragma once

#include <cstdint>

#include "engine/cpu/cpu_features.h"

namespace crossreg::cpu {

struct KvStoreArgs {
  const float* src = nullptr;  // row r's values at src + r * src_stride (width floats)
  int64_t src_stride = 0;
  const int32_t* slots = nullptr;  // row r's slot; rows with slot < 0 are skipped
  int64_t rows = 0;
  int64_t width = 0;  // elements per row (num_kv_heads * head_dim)
  int block_size = 0;
  bool bf16 = false;      // cache elements: bf16 (rounded to nearest even, as F32ToBf16) or f32
  void* cache = nullptr;  // this layer's cache (slot 0's block first)
};

// Stores elements [i_begin, i_end) of every row. Disjoint element ranges touch disjoint
// cache lines (each line holds one element of up to 16 slots), so threads may split a
// store by elements without sharing lines. The bytes written do not depend on `level`.
void StoreKvRows(const KvStoreArgs& a, int64_t i_begin, int64_t i_end, SimdLevel level);

namespace internal {
// kv_store_avx512.cc: rows [r0, r0 + n), n <= 16, whose slots are consecutive within one
// block, elements [i_begin, i_end). Call only when the CPU has AVX-512.
void StoreKvRunAvx512(const KvStoreArgs& a, int64_t r0, int n, int64_t i_begin, int64_t i_end);
}  // namespace internal

}  // namespace crossreg::cpu
