#include "engine/decoding/verify.h"

#include <algorithm>
#include <cmath>

namespace crossreg {
namespace {

bool IsCrossRegression(DecodingMode m) { return m == DecodingMode::kLossless || m == DecodingMode::kLossy; }

// Samples normalize(max(0, p − q)), the residual of a rejected draft drawn from q
// (one-hot at `token` when q is empty); all mass in q → samples p itself.
int32_t SampleResidual(const std::vector<float>& p, const std::vector<float>& q, int32_t token, int vocab, Rng& rng) {
  thread_local std::vector<float> residual;
  residual.assign(static_cast<size_t>(vocab), 0.0f);
  const bool one_hot = q.empty();
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) {
    const double qi = one_hot ? (i == token ? 1.0 : 0.0) : q[static_cast<size_t>(i)];
    const double r = std::max(0.0, static_cast<double>(p[static_cast<size_t>(i)]) - qi);
    residual[static_cast<size_t>(i)] = static_cast<float>(r);
    sum += r;
  }
  if (sum <= 0.0) return SampleFromDistribution(p.data(), vocab, rng);
  for (auto& r : residual) r = static_cast<float>(r / sum);
  return SampleFromDistribution(residual.data(), vocab, rng);
}

// A fresh draft from predictive row `qs`: its argmax when greedy, else a sample with
// its processed distribution kept for the residual.
Draft Propose(const float* qs, int vocab, const SamplingParams& sampling, Rng& rng) {
  Draft fresh;
  if (sampling.greedy()) {
    fresh.token = Argmax(qs, vocab);
  } else {
    ProcessedDistribution(qs, vocab, sampling, fresh.q);
    fresh.token = SampleFromDistribution(fresh.q.data(), vocab, rng);
  }
  return fresh;
}

}  // namespace

VerifyOutcome Verify(const StepPlan& plan, absl::Span<const float> logits, int vocab, DraftBuffer drafts,
                     const SamplingParams& sampling, EnergyAcceptor acceptor, Rng& rng, ExactnessFault fault) {
  const int m = plan.drafts;
  const int g = plan.main_chain;
  const int64_t V = vocab;
  const float* ctrl = logits.data();                // P_1 .. P_{m+1}
  const float* pred = logits.data() + (m + 1) * V;  // Q_1 .. Q_g, then the forks
  const bool greedy = sampling.greedy();
  const bool lossy = plan.decoding.mode == DecodingMode::kLossy;
  thread_local std::vector<float> p, q_now;

  VerifyOutcome out;
  // Verify d_1 .. d_m in order against P_k, the control row whose input prefix is
  // x, d_<k; stop at the first rejection (Alg. 2).
  acceptor.Reset();
  int32_t next = -1;
  for (int k = 1; k <= m; ++k) {
    const Draft& d = drafts[static_cast<size_t>(k - 1)];
    const float* pk = ctrl + (k - 1) * V;
    bool accepted;
    if (greedy) {
      // T = 0: P is one-hot at the argmax. Lossy energies use the untempered logits:
      // E_k = z(d_k) − max z ≤ 0 (docs/algorithm.md).
      const int32_t best = Argmax(pk, vocab);
      accepted = lossy ? acceptor.AcceptGreedy(k, static_cast<double>(pk[d.token]) - pk[best], d.token == best)
                       : d.token == best;
      if (!accepted) next = best;  // residual of one-hot P minus one-hot q at d ≠ argmax
    } else {
      // P exactly as the AR path processes it (temperature, top-k, top-p).
      ProcessedDistribution(pk, vocab, sampling, p);
      const std::vector<float>* q = &d.q;  // the q d_k was drawn from, cached with it
      if (fault == ExactnessFault::kVerifyCarriedDraftsWithCurrentQ && d.carried) {
        ProcessedDistribution(pred + (k - 1) * V, vocab, sampling, q_now);
        q = &q_now;
      }
      const double qd = q->empty() ? 1.0 : (*q)[static_cast<size_t>(d.token)];
      const double energy = std::log(static_cast<double>(p[static_cast<size_t>(d.token)])) - std::log(qd);
      accepted = acceptor.Accept(k, energy, std::log(rng.Uniform()));
      if (!accepted) next = SampleResidual(p, *q, d.token, vocab, rng);
    }
    out.verdicts.push_back(accepted);
    if (!accepted) break;
    ++out.accepted;
    out.tokens.push_back(d.token);
  }
  const int n = out.accepted;
  if (n == m) {
    // Every draft accepted: the bonus token comes from P_{m+1} of this forward.
    const float* pb = ctrl + m * V;
    if (greedy) {
      next = Argmax(pb, vocab);
    } else {
      ProcessedDistribution(pb, vocab, sampling, p);
      next = SampleFromDistribution(p.data(), vocab, rng);
    }
  }
  out.tokens.push_back(next);
  // Keep the K/V of x_last and the accepted drafts; the rest rolls back.
  out.kv_keep = plan.committed + n;

  if (!IsCrossRegression(plan.decoding.mode)) return out;  // AR and n-gram keep no buffer
  // Refill: old slot j+c becomes slot j. Untested drafts carry with their cached q;
  // empty slots take fresh samples from this forward's Q at their old slot. Forked
  // refill: the outcomes with their own chain (n = m, and n < R) take that chain's
  // proposals instead. Which rows refill depends on n and m only, never on values.
  const int c = n + 1;
  const bool forked = plan.decoding.forked();
  DraftBuffer& refilled = out.next_drafts;
  if (forked && n == m) {
    for (int k = m + 1; k < g; ++k) refilled.push_back(Propose(pred + k * V, vocab, sampling, rng));
  } else if (forked && n < static_cast<int>(plan.fork_sizes.size())) {
    const float* fork = pred + g * V;
    for (int b = 0; b < n; ++b) fork += plan.fork_sizes[static_cast<size_t>(b)] * V;
    for (int j = 0; j < plan.fork_sizes[static_cast<size_t>(n)]; ++j) {
      refilled.push_back(Propose(fork + j * V, vocab, sampling, rng));
    }
  } else {
    for (int s = c + 1; s <= m; ++s) {
      Draft carried = std::move(drafts[static_cast<size_t>(s - 1)]);
      carried.carried = true;
      refilled.push_back(std::move(carried));
    }
    for (int s = std::max(m, c) + 1; s <= g; ++s) refilled.push_back(Propose(pred + (s - 1) * V, vocab, sampling, rng));
  }
  return out;
}

}  // namespace crossreg
