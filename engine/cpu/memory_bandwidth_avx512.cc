// The read loop of the bandwidth probe with 64-byte loads (compiled for AVX-512,
// called only after run-time detection): the probe must not be slower than the
// kernels it is the roofline for.
#include <immintrin.h>

#include <cstdint>

namespace crossreg::cpu::internal {

uint64_t XorReduceAvx512(const uint64_t* p, int64_t n) {
  __m512i acc[8];
  for (auto& a : acc) a = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int j = 0; j < 8; ++j) acc[j] = _mm512_xor_si512(acc[j], _mm512_loadu_si512(p + i + 8 * j));
  }
  for (int j = 1; j < 8; ++j) acc[0] = _mm512_xor_si512(acc[0], acc[j]);
  uint64_t x = static_cast<uint64_t>(_mm512_reduce_or_epi64(acc[0]));
  for (; i < n; ++i) x ^= p[i];
  return x;
}

}  // namespace crossreg::cpu::internal
