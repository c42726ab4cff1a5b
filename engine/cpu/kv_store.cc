#include "engine/cpu/kv_store.h"

#include <algorithm>
#include <cstring>

#include "engine/dtype.h"

namespace crossreg::cpu {
namespace {

// Rows [r0, r0 + n) of a run, the portable way: one element at a time.
void StoreRunScalar(const KvStoreArgs& a, int64_t r0, int n, int64_t i_begin, int64_t i_end) {
  const int64_t bs = a.block_size;
  for (int64_t r = r0; r < r0 + n; ++r) {
    const int64_t slot = a.slots[r];
    const int64_t base = (slot / bs) * a.width * bs + slot % bs;
    const float* src = a.src + r * a.src_stride;
    for (int64_t i = i_begin; i < i_end; ++i) {
      if (a.bf16) {
        static_cast<uint16_t*>(a.cache)[base + i * bs] = F32ToBf16(src[i]);
      } else {
        static_cast<float*>(a.cache)[base + i * bs] = src[i];
      }
    }
  }
}

// Values: each row's elements [i_begin, i_end), one contiguous piece per kv head.
void StoreValueRows(const KvStoreArgs& a, int64_t i_begin, int64_t i_end, bool avx512) {
  const int64_t bs = a.block_size;
  const int64_t hd = a.head_dim;
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t slot = a.slots[r];
    if (slot < 0) continue;
    const float* src = a.src + r * a.src_stride;
    const int64_t block_base = (slot / bs) * a.width * bs;
    for (int64_t i = i_begin; i < i_end;) {
      const int64_t head = i / hd;
      const int64_t end = std::min(i_end, (head + 1) * hd);
      const int64_t at = block_base + (head * bs + slot % bs) * hd + (i - head * hd);
      if (!a.bf16) {
        std::memcpy(static_cast<float*>(a.cache) + at, src + i, static_cast<size_t>(end - i) * sizeof(float));
      } else if (avx512) {
        internal::StoreBf16Avx512(src + i, end - i, static_cast<uint16_t*>(a.cache) + at);
      } else {
        for (int64_t e = i; e < end; ++e) static_cast<uint16_t*>(a.cache)[at + e - i] = F32ToBf16(src[e]);
      }
      i = end;
    }
  }
}

}  // namespace

void StoreKvRows(const KvStoreArgs& a, int64_t i_begin, int64_t i_end, SimdLevel level) {
  if (i_begin >= i_end) return;
  const bool avx512 = ClampSimdLevel(level) >= SimdLevel::kAvx512;
  if (a.value_rows) {
    StoreValueRows(a, i_begin, i_end, avx512);
    return;
  }
  const int64_t bs = a.block_size;
  int64_t r = 0;
  while (r < a.rows) {
    if (a.slots[r] < 0) {
      ++r;
      continue;
    }
    // The longest run from r: consecutive slots of one block, at most 16 (one vector).
    int n = 1;
    while (n < 16 && r + n < a.rows && a.slots[r + n] == a.slots[r] + n && a.slots[r + n] % bs != 0) ++n;
    if (avx512) {
      internal::StoreKvRunAvx512(a, r, n, i_begin, i_end);
    } else {
      StoreRunScalar(a, r, n, i_begin, i_end);
    }
    r += n;
  }
}

}  // namespace crossreg::cpu
