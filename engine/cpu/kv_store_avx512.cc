// AVX-512 K/V store (engine/cpu/kv_store.h): a run of up to 16 rows is loaded 16
// elements at a time, transposed in registers so that each vector holds one element of
// every row, and written with one masked store per element (one cache line each)
// instead of one scalar store per row. Compiled with -mavx512f etc.; called only after
// run-time detection.
#include <immintrin.h>

#include <algorithm>

#include "engine/cpu/kv_store.h"

namespace crossreg::cpu::internal {
namespace {

// v[j] (row j, 16 elements) -> t[e] (element e, 16 rows): pairs, then quads within each
// 128-bit lane, then the 4 x 4 lanes.
inline void Transpose16(const __m512 (&v)[16], __m512 (&t)[16]) {
  __m512 p[16];
  for (int k = 0; k < 8; ++k) {
    p[2 * k] = _mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]);
    p[2 * k + 1] = _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]);
  }
  // q[4m + c], lane L: element 4L + c of rows 4m .. 4m + 3.
  __m512 q[16];
  for (int m = 0; m < 4; ++m) {
    const __m512d lo0 = _mm512_castps_pd(p[4 * m]), lo1 = _mm512_castps_pd(p[4 * m + 2]);
    const __m512d hi0 = _mm512_castps_pd(p[4 * m + 1]), hi1 = _mm512_castps_pd(p[4 * m + 3]);
    q[4 * m] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, lo1));
    q[4 * m + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, lo1));
    q[4 * m + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi0, hi1));
    q[4 * m + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi0, hi1));
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 s0 = _mm512_shuffle_f32x4(q[c], q[4 + c], 0x44);
    const __m512 s1 = _mm512_shuffle_f32x4(q[c], q[4 + c], 0xEE);
    const __m512 s2 = _mm512_shuffle_f32x4(q[8 + c], q[12 + c], 0x44);
    const __m512 s3 = _mm512_shuffle_f32x4(q[8 + c], q[12 + c], 0xEE);
    t[c] = _mm512_shuffle_f32x4(s0, s2, 0x88);
    t[4 + c] = _mm512_shuffle_f32x4(s0, s2, 0xDD);
    t[8 + c] = _mm512_shuffle_f32x4(s1, s3, 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(s1, s3, 0xDD);
  }
}

// F32ToBf16 on 16 lanes: round to nearest even, NaNs kept quiet.
inline __m256i ToBf16(__m512 x) {
  const __m512i bits = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
}

}  // namespace

void StoreKvRunAvx512(const KvStoreArgs& a, int64_t r0, int n, int64_t i_begin, int64_t i_end) {
  const int64_t bs = a.block_size;
  const int64_t slot = a.slots[r0];
  const int64_t base = (slot / bs) * a.width * bs + slot % bs;
  const __mmask16 rows_mask = static_cast<__mmask16>((1u << n) - 1u);
  for (int64_t i0 = i_begin; i0 < i_end; i0 += 16) {
    const int64_t count = std::min<int64_t>(16, i_end - i0);
    const __mmask16 elems = static_cast<__mmask16>((1u << count) - 1u);
    __m512 v[16], t[16];
    for (int j = 0; j < 16; ++j) {
      v[j] = j < n ? _mm512_maskz_loadu_ps(elems, a.src + (r0 + j) * a.src_stride + i0) : _mm512_setzero_ps();
    }
    Transpose16(v, t);
    for (int e = 0; e < count; ++e) {
      const int64_t at = base + (i0 + e) * bs;
      if (a.bf16) {
        _mm256_mask_storeu_epi16(static_cast<uint16_t*>(a.cache) + at, rows_mask, ToBf16(t[e]));
      } else {
        _mm512_mask_storeu_ps(static_cast<float*>(a.cache) + at, rows_mask, t[e]);
      }
    }
  }
}

void StoreBf16Avx512(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(dst + i, m, ToBf16(_mm512_maskz_loadu_ps(m, src + i)));
  }
}

}  // namespace crossreg::cpu::internal
