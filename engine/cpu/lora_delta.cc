#include "engine/cpu/lora_delta.h"

#include <algorithm>

#include "engine/cpu/linear.h"

namespace crossreg::cpu {

void AddLoraDelta(const LoraMatrix& m, int64_t in, int64_t out, const float* x, float* y,
                  const std::vector<int64_t>& which, ThreadPool& pool) {
  if (!m.present() || which.empty()) return;
  const int64_t n = static_cast<int64_t>(which.size());
  // Scratch reused across calls; the backend calls this from one thread.
  thread_local std::vector<float> xs, t, d;
  xs.resize(static_cast<size_t>(n * in));
  t.resize(static_cast<size_t>(n * m.rank));
  d.resize(static_cast<size_t>(n * out));
  for (int64_t i = 0; i < n; ++i) std::copy_n(x + which[static_cast<size_t>(i)] * in, in, xs.data() + i * in);
  const TensorRef a{DType::kF32, {m.rank, in}, m.a.data()};   // (rank, in)
  const TensorRef b{DType::kF32, {out, m.rank}, m.b.data()};  // (out, rank)
  Linear(a, xs.data(), n, t.data(), pool);                    // t = x · Aᵀ   (n, rank)
  for (auto& v : t) v *= m.scale;
  Linear(b, t.data(), n, d.data(), pool);                     // d = t · Bᵀ   (n, out)
  for (int64_t i = 0; i < n; ++i) {
    float* yr = y + which[static_cast<size_t>(i)] * out;
    const float* dr = d.data() + i * out;
    for (int64_t o = 0; o < out; ++o) yr[o] += dr[o];
  }
}

}  // namespace crossreg::cpu
