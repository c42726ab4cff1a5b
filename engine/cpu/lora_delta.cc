#include "engine/cpu/lora_delta.h"

namespace crossreg::cpu {

void AddLoraDelta(const LoraMatrix& m, int64_t in, int64_t out, const float* x, float* y,
                  const std::vector<int64_t>& which) {
  if (!m.present() || which.empty()) return;
  std::vector<float> t(static_cast<size_t>(m.rank));
  for (int64_t r : which) {
    const float* xr = x + r * in;
    for (int k = 0; k < m.rank; ++k) {
      const float* a = m.a.data() + static_cast<int64_t>(k) * in;
      float acc = 0.0f;
      for (int64_t i = 0; i < in; ++i) acc += a[i] * xr[i];
      t[static_cast<size_t>(k)] = acc * m.scale;
    }
    float* yr = y + r * out;
    for (int64_t o = 0; o < out; ++o) {
      const float* b = m.b.data() + o * m.rank;
      float acc = 0.0f;
      for (int k = 0; k < m.rank; ++k) acc += b[k] * t[static_cast<size_t>(k)];
      yr[o] += acc;
    }
  }
}

}  // namespace crossreg::cpu
