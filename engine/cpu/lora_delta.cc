#include "engine/cpu/lora_delta.h"

#include "engine/cpu/ops.h"

namespace crossreg::cpu {

void AddLoraDelta(const LoraMatrix& m, int64_t in, int64_t out, const float* x, float* y,
                  const std::vector<int64_t>& which) {
  if (!m.present() || which.empty()) return;
  std::vector<float> t(static_cast<size_t>(m.rank));
  for (int64_t r : which) {
    const float* xr = x + r * in;
    for (int k = 0; k < m.rank; ++k) {
      t[static_cast<size_t>(k)] = Dot(m.a.data() + static_cast<int64_t>(k) * in, xr, in) * m.scale;
    }
    float* yr = y + r * out;
    for (int64_t o = 0; o < out; ++o) yr[o] += Dot(m.b.data() + o * m.rank, t.data(), m.rank);
  }
}

}  // namespace crossreg::cpu
