// AVX-512 linear kernel. Compiled with -mavx512f etc. (engine/CMakeLists.txt) and
// called only after run-time detection.
#include <immintrin.h>

#include "engine/cpu/linear.h"

namespace crossreg::cpu::internal {
namespace {

template <DType T>
inline __m512 Load16(const void* base, int64_t idx) {
  if constexpr (T == DType::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(base) + idx);
  } else if constexpr (T == DType::kBF16) {
    const __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + idx));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    const __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + idx));
    return _mm512_cvtph_ps(h);
  }
}

template <DType T>
inline __m512 LoadMasked(const void* base, int64_t idx, __mmask16 m) {
  if constexpr (T == DType::kF32) {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(base) + idx);
  } else if constexpr (T == DType::kBF16) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(base) + idx);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(base) + idx);
    return _mm512_cvtph_ps(h);
  }
}

constexpr size_t kPrefetchBytes = 512;

// NO outputs x NR rows; one 16-lane accumulator per (output, row), so every
// element sees the same sequence of operations whatever NO and NR are.
template <DType T, int NO, int NR>
inline void Tile(const void* w, int64_t in, const float* x, float* y, int64_t out, int64_t o0,
                 int64_t r0) {
  __m512 acc[NO][NR];
  for (int o = 0; o < NO; ++o)
    for (int r = 0; r < NR; ++r) acc[o][r] = _mm512_setzero_ps();
  const size_t esize = T == DType::kF32 ? 4 : 2;
  const char* wbase = static_cast<const char*>(w);
  int64_t k = 0;
  for (; k + 16 <= in; k += 16) {
    __m512 xv[NR];
    for (int r = 0; r < NR; ++r) xv[r] = _mm512_loadu_ps(x + (r0 + r) * in + k);
    for (int o = 0; o < NO; ++o) {
      const char* wrow = wbase + static_cast<size_t>((o0 + o) * in) * esize;
      // Decode streams weights once: ask for them kPrefetchBytes ahead of use.
      _mm_prefetch(wrow + k * esize + kPrefetchBytes, _MM_HINT_T0);
      const __m512 wv = Load16<T>(wrow, k);
      for (int r = 0; r < NR; ++r) acc[o][r] = _mm512_fmadd_ps(wv, xv[r], acc[o][r]);
    }
  }
  if (k < in) {
    const __mmask16 m = static_cast<__mmask16>((1u << (in - k)) - 1u);
    __m512 xv[NR];
    for (int r = 0; r < NR; ++r) xv[r] = _mm512_maskz_loadu_ps(m, x + (r0 + r) * in + k);
    for (int o = 0; o < NO; ++o) {
      const __m512 wv = LoadMasked<T>(wbase + static_cast<size_t>((o0 + o) * in) * esize, k, m);
      for (int r = 0; r < NR; ++r) acc[o][r] = _mm512_fmadd_ps(wv, xv[r], acc[o][r]);
    }
  }
  for (int o = 0; o < NO; ++o)
    for (int r = 0; r < NR; ++r) y[(r0 + r) * out + o0 + o] = _mm512_reduce_add_ps(acc[o][r]);
}

template <DType T, int NO>
inline void RowsForOutputs(const void* w, int64_t in, const float* x, int64_t rows, float* y,
                           int64_t out, int64_t o0) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) Tile<T, NO, 4>(w, in, x, y, out, o0, r);
  switch (rows - r) {
    case 3: Tile<T, NO, 3>(w, in, x, y, out, o0, r); break;
    case 2: Tile<T, NO, 2>(w, in, x, y, out, o0, r); break;
    case 1: Tile<T, NO, 1>(w, in, x, y, out, o0, r); break;
    default: break;
  }
}

template <DType T>
void Range(const TensorRef& w, const float* x, int64_t rows, float* y, int64_t o_begin,
           int64_t o_end) {
  const int64_t in = w.cols();
  const int64_t out = w.rows();
  int64_t o = o_begin;
  // Eight weight rows in flight keep enough loads outstanding to reach bandwidth;
  // with many rows, four outputs x four rows fill the 32 vector registers.
  switch (rows) {
    case 1: for (; o + 8 <= o_end; o += 8) Tile<T, 8, 1>(w.data, in, x, y, out, o, 0); break;
    case 2: for (; o + 8 <= o_end; o += 8) Tile<T, 8, 2>(w.data, in, x, y, out, o, 0); break;
    case 3: for (; o + 8 <= o_end; o += 8) Tile<T, 8, 3>(w.data, in, x, y, out, o, 0); break;
    default: for (; o + 4 <= o_end; o += 4) RowsForOutputs<T, 4>(w.data, in, x, rows, y, out, o); break;
  }
  for (; o < o_end; ++o) RowsForOutputs<T, 1>(w.data, in, x, rows, y, out, o);
}

}  // namespace

void LinearRangeAvx512(const TensorRef& w, const float* x, int64_t rows, float* y,
                       int64_t o_begin, int64_t o_end) {
  switch (w.dtype) {
    case DType::kF32: Range<DType::kF32>(w, x, rows, y, o_begin, o_end); return;
    case DType::kF16: Range<DType::kF16>(w, x, rows, y, o_begin, o_end); return;
    case DType::kBF16: Range<DType::kBF16>(w, x, rows, y, o_begin, o_end); return;
  }
}

}  // namespace crossreg::cpu::internal
