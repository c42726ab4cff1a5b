#include "engine/cpu/lora_delta.h"

#include <algorithm>

#include "engine/cpu/linear.h"

namespace crossreg::cpu {

PackedLoraMatrix PackedLoraMatrix::Pack(const LoraMatrix& m, int64_t in, int64_t out) {
  PackedLoraMatrix p;
  if (!m.present()) return p;
  p.a = PackedWeights::PackF32(m.a.data(), m.rank, in);
  p.b = PackedWeights::PackF32(m.b.data(), out, m.rank);
  p.scale = m.scale;
  return p;
}

void AddLoraDelta(const PackedLoraMatrix& m, const float* x, float* y, const std::vector<int64_t>& which,
                  ThreadPool& pool, SimdLevel level) {
  if (!m.present() || which.empty()) return;
  const int64_t n = static_cast<int64_t>(which.size());
  const int64_t in = m.a.in(), rank = m.a.out(), out = m.b.out();
  // Scratch reused across calls; the backend calls this from one thread.
  thread_local std::vector<float> xs, t, d;
  xs.resize(static_cast<size_t>(n * in));
  t.resize(static_cast<size_t>(n * rank));
  d.resize(static_cast<size_t>(n * out));
  for (int64_t i = 0; i < n; ++i) std::copy_n(x + which[static_cast<size_t>(i)] * in, in, xs.data() + i * in);
  Linear(m.a, xs.data(), n, t.data(), pool, level);  // t = x · Aᵀ   (n, rank)
  for (auto& v : t) v *= m.scale;
  Linear(m.b, t.data(), n, d.data(), pool, level);   // d = t · Bᵀ   (n, out)
  for (int64_t i = 0; i < n; ++i) {
    float* yr = y + which[static_cast<size_t>(i)] * out;
    const float* dr = d.data() + i * out;
    for (int64_t o = 0; o < out; ++o) yr[o] += dr[o];
  }
}

}  // namespace crossreg::cpu
