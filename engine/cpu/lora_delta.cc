#include "engine/cpu/lora_delta.h"

#include <algorithm>
#include <array>

#include "engine/dtype.h"

namespace crossreg::cpu {
namespace {

PackedWeights PackAs(const std::vector<float>& w, int64_t out, int64_t in, PanelFormat format) {
  if (format == PanelFormat::kF32) return PackedWeights::PackF32(w.data(), out, in);
  std::vector<uint16_t> h(w.size());
  for (size_t i = 0; i < w.size(); ++i) h[i] = F32ToBf16(w[i]);
  return PackedWeights::Pack(TensorRef{DType::kBF16, {out, in}, h.data()});
}

}  // namespace

PackedLoraMatrix PackedLoraMatrix::Pack(const LoraMatrix& m, int64_t in, int64_t out, PanelFormat format) {
  PackedLoraMatrix p;
  if (!m.present()) return p;
  p.a = PackAs(m.a, m.rank, in, format);
  p.b = PackAs(m.b, out, m.rank, format);
  p.scale = m.scale;
  return p;
}

void LinearWithLora(const LinearOutput* base, const PackedLoraMatrix* const* lora, int count, const float* x,
                    int64_t rows, const std::vector<int64_t>& which, ThreadPool& pool, SimdLevel level) {
  std::array<LinearOutput, 2 * kMaxLoraGroup> outputs;
  std::array<const PackedLoraMatrix*, kMaxLoraGroup> updates;
  std::array<float*, kMaxLoraGroup> targets;
  int n = 0, k = 0;
  for (int i = 0; i < count; ++i) {
    outputs[static_cast<size_t>(n++)] = base[i];
    if (lora[i] != nullptr && lora[i]->present()) {
      updates[static_cast<size_t>(k)] = lora[i];
      targets[static_cast<size_t>(k++)] = base[i].y;
    }
  }
  const int64_t m = static_cast<int64_t>(which.size());
  if (m == 0 || k == 0) {
    LinearShared(outputs.data(), n, x, rows, pool, level);
    return;
  }
  // Scratch reused across calls; each thread of a row-split forward has its own.
  thread_local std::array<std::vector<float>, kMaxLoraGroup> t_all, t, d;
  thread_local std::vector<float> xs;
  const int64_t in = base[0].w->in();
  // t_j = scale_j · A_j·x for the predictive rows, (m, rank_j). When they are at least a
  // quarter of the rows (a verify step's are about half), the A products run for every
  // row inside the base layer's parallel region: a few percent more multiply-adds, no
  // extra synchronisation. A prefill chunk sharing the forward with a few predictive rows
  // would pay for hundreds of rows instead: gather the predictive rows first.
  if (4 * m >= rows) {
    for (int j = 0; j < k; ++j) {
      auto& buf = t_all[static_cast<size_t>(j)];
      buf.resize(static_cast<size_t>(rows * updates[static_cast<size_t>(j)]->a.out()));
      outputs[static_cast<size_t>(n++)] = {&updates[static_cast<size_t>(j)]->a, buf.data()};
    }
    LinearShared(outputs.data(), n, x, rows, pool, level);
    for (int j = 0; j < k; ++j) {
      const int64_t rank = updates[static_cast<size_t>(j)]->a.out();
      auto& tj = t[static_cast<size_t>(j)];
      tj.resize(static_cast<size_t>(m * rank));
      for (int64_t i = 0; i < m; ++i) {
        std::copy_n(t_all[static_cast<size_t>(j)].data() + which[static_cast<size_t>(i)] * rank, rank,
                    tj.data() + i * rank);
      }
    }
  } else {
    LinearShared(outputs.data(), n, x, rows, pool, level);
    xs.resize(static_cast<size_t>(m * in));
    for (int64_t i = 0; i < m; ++i) std::copy_n(x + which[static_cast<size_t>(i)] * in, in, xs.data() + i * in);
    std::array<LinearOutput, kMaxLoraGroup> a_outputs;
    for (int j = 0; j < k; ++j) {
      auto& tj = t[static_cast<size_t>(j)];
      tj.resize(static_cast<size_t>(m * updates[static_cast<size_t>(j)]->a.out()));
      a_outputs[static_cast<size_t>(j)] = {&updates[static_cast<size_t>(j)]->a, tj.data()};
    }
    LinearShared(a_outputs.data(), k, xs.data(), m, pool, level);
  }
  std::array<LinearJob, kMaxLoraGroup> jobs;
  for (int j = 0; j < k; ++j) {
    auto& tj = t[static_cast<size_t>(j)];
    const float scale = updates[static_cast<size_t>(j)]->scale;
    for (auto& v : tj) v *= scale;
    auto& dj = d[static_cast<size_t>(j)];
    dj.resize(static_cast<size_t>(m * updates[static_cast<size_t>(j)]->b.out()));
    jobs[static_cast<size_t>(j)] = {&updates[static_cast<size_t>(j)]->b, tj.data(), dj.data()};
  }
  LinearEach(jobs.data(), k, m, pool, level);  // d_j = t_j · B_jᵀ   (m, out_j)
  for (int j = 0; j < k; ++j) {
    const int64_t out = updates[static_cast<size_t>(j)]->b.out();
    const float* dj = d[static_cast<size_t>(j)].data();
    for (int64_t i = 0; i < m; ++i) {
      float* yr = targets[static_cast<size_t>(j)] + which[static_cast<size_t>(i)] * out;
      const float* dr = dj + i * out;
      for (int64_t o = 0; o < out; ++o) yr[o] += dr[o];
    }
  }
}

}  // namespace crossreg::cpu
