// AVX512_BF16 micro-kernel: bf16 panels through vdpbf16ps, each instruction 16 lanes x
// one weight pair x the broadcast activation pair, twice the f32 FMA rate. Compiled with
// -mavx512bf16 etc.; called only after run-time detection. f32 panels use the AVX-512 F
// kernel (linear_kernels_avx512.cc).
#include <immintrin.h>

#include "engine/cpu/linear_kernels.h"
#include "engine/cpu/linear_kernels_avx512_tile.h"

namespace crossreg::cpu::internal {
namespace {

struct Bf16DotStep {
  template <int R>
  static void Run(const unsigned char* panel, int64_t k0, int64_t k1, const void* tile_x, const PanelPrefetch& pf,
                  __m512 (&acc)[R][2]) {
    const int* x = static_cast<const int*>(tile_x) + k0 * R;
    for (int64_t k = k0; k < k1; ++k, x += R) {
      const __m512bh w0 = (__m512bh)_mm512_load_si512(panel + k * kPanelStepBytes);
      const __m512bh w1 = (__m512bh)_mm512_load_si512(panel + k * kPanelStepBytes + 64);
      PrefetchStep(pf, panel, k, k - k0);
      for (int r = 0; r < R; ++r) {
        const __m512bh xb = (__m512bh)_mm512_set1_epi32(x[r]);
        acc[r][0] = _mm512_dpbf16_ps(acc[r][0], w0, xb);
        acc[r][1] = _mm512_dpbf16_ps(acc[r][1], w1, xb);
      }
    }
  }
};

}  // namespace

void PanelsAvx512Bf16(const PanelArgs& a, int64_t begin, int64_t end) {
  if (a.w->format() == PanelFormat::kF32) {
    PanelsAvx512(a, begin, end);
  } else {
    RunPanels<Bf16DotStep>(a, begin, end);
  }
}

}  // namespace crossreg::cpu::internal
