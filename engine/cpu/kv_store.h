// Writing a forward's control rows into the CPU backend's paged K/V cache
// (cpu::KvLayout::kBlockTransposed).
//
// Keys: within a block, element i (kv_head * head_dim + d) of its block_size slots is
// contiguous, so attention scores 16 positions per vector. Slot s's element i lives at
//   ((s / block_size) * width + i) * block_size + s % block_size.
// A row's K is one column of that layout: one value in each of `width` cache lines.
// Rows of one sequence fill consecutive slots, so a run of them shares those lines;
// the AVX-512 path transposes a run in registers and writes each line once.
//
// Values: within a block, each kv head's slots follow each other, a slot's head_dim
// elements contiguous, so attention's weighted sum takes a position's head slice in
// whole vectors (head elements in lanes, no reduction across lanes). Slot s's element
// i = kv_head * head_dim + d lives at
//   (s / block_size) * width * block_size + (kv_head * block_size + s % block_size) * head_dim + d.
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
  bool value_rows = false;  // the values' layout (each slot's head slice contiguous), else the keys'
  int head_dim = 0;         // value_rows: elements per kv head (divides width)
};

// Stores elements [i_begin, i_end) of every row. Threads may split a store by element
// ranges: in the keys' layout disjoint ranges touch disjoint cache lines (each line
// holds one element of up to 16 slots); in the values' layout they touch disjoint
// bytes. The bytes written do not depend on `level`.
void StoreKvRows(const KvStoreArgs& a, int64_t i_begin, int64_t i_end, SimdLevel level);

namespace internal {
// kv_store_avx512.cc: rows [r0, r0 + n), n <= 16, whose slots are consecutive within one
// block, elements [i_begin, i_end). Call only when the CPU has AVX-512.
void StoreKvRunAvx512(const KvStoreArgs& a, int64_t r0, int n, int64_t i_begin, int64_t i_end);
// kv_store_avx512.cc: n values rounded to bf16 (as F32ToBf16) into dst.
void StoreBf16Avx512(const float* src, int64_t n, uint16_t* dst);
}  // namespace internal

}  // namespace crossreg::cpu
