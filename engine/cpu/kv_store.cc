#include "engine/cpu/kv_store.h"

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

}  // namespace

void StoreKvRows(const KvStoreArgs& a, int64_t i_begin, int64_t i_end, SimdLevel level) {
  if (i_begin >= i_end) return;
  const bool avx512 = ClampSimdLevel(level) >= SimdLevel::kAvx512;
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
