// Verification by energy (ALGORITHM.md "Verify"): a bias-corrected EMA of the
// per-position energies E_k = log P_k(d_k) − log q_k(d_k) against log U_k + τ√(k/γ).
// β = 0, τ = 0 is the exact speculative-sampling test (accept with prob. min(1, p/q)).
#pragma once

#include <cmath>

namespace crossreg {

class EnergyAcceptor {
 public:
  EnergyAcceptor(double beta, double tau, int gamma) : beta_(beta), tau_(tau), gamma_(gamma) {}

  // Position k (1-based) of the current draft run; call in order k = 1, 2, ...
  // Returns whether d_k is accepted. `energy` may be −inf (P_k(d_k) = 0).
  bool Accept(int k, double energy, double log_u) {
    rho_ = beta_ * rho_ + (1.0 - beta_) * energy;             // Alg. 2: EMA of energies
    const double rhat = rho_ / (1.0 - std::pow(beta_, k));    // bias correction
    return rhat >= log_u + Threshold(k);
  }

  // T = 0 variant: no uniform draw, and a draft that is not the argmax needs a
  // strictly positive margin, so β = 0, τ = 0 is exact match.
  bool AcceptGreedy(int k, double energy, bool is_argmax) {
    rho_ = beta_ * rho_ + (1.0 - beta_) * energy;
    const double rhat = rho_ / (1.0 - std::pow(beta_, k));
    return is_argmax || rhat > Threshold(k);
  }

  void Reset() { rho_ = 0.0; }

 private:
  double Threshold(int k) const { return tau_ * std::sqrt(static_cast<double>(k) / gamma_); }
  double beta_;
  double tau_;
  int gamma_;
  double rho_ = 0.0;
};

}  // namespace crossreg
