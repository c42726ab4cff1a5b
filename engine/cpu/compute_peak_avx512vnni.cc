// The VNNI 8-bit dot-product peak loop (engine/cpu/compute_peak.h): vpdpbusd, 64
// unsigned x signed byte multiply-adds into 16 int32 lanes per instruction.
#include <immintrin.h>

#include "engine/cpu/compute_peak.h"

namespace crossreg::cpu::internal {

double DotInt8LoopAvx512Vnni(int64_t iterations) {
  __m512i acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512i sum = acc[0];
  for (int i = 1; i < 16; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  PeakSink() = static_cast<float>(_mm512_reduce_add_epi32(sum));
  return static_cast<double>(iterations) * 16 * 64 * 2;
}

}  // namespace crossreg::cpu::internal
