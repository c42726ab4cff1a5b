#include "engine/quant/sub_block_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace crossreg::quant::internal {
namespace {

// Least squares x ~ s*q - m over the codes summed, with m >= 0 (mins are stored
// unsigned, so the grid must reach down to 0 or below). False when no positive s fits.
bool FitToCodes(double count, double q, double x, double qq, double qx, float* scale, float* min) {
  const double det = count * qq - q * q;
  if (!(det > 0)) return false;
  double s = (count * qx - q * x) / det;
  double b = (x - s * q) / count;
  if (b > 0) {
    b = 0;
    s = qx / qq;
  }
  if (!(s > 0)) return false;
  *scale = static_cast<float>(s);
  *min = static_cast<float>(-b);
  return true;
}

// Sums over a sub-block and its codes.
struct CodeSums {
  double count = 0, q = 0, x = 0, qq = 0, qx = 0, xx = 0;
  void Add(double code, double value) {
    count += 1;
    q += code;
    x += value;
    qq += code * code;
    qx += code * value;
    xx += value * value;
  }
  double Error(double s, double b) const { return SumsError(count, q, x, qq, qx, xx, s, b); }
  bool Fit(float* scale, float* min) const { return FitToCodes(count, q, x, qq, qx, scale, min); }
};

// The lane forms run where the CPU has AVX2, for the shapes they take: 8 sub-blocks of
// 32, or 16 of 16 as two groups of 8 (the sub-blocks are independent). CROSSREG_SIMD=scalar
// keeps the one-sub-block forms (the results are the same). Read here rather than through
// engine/cpu/cpu_features.h: the quantizer is also built without the CPU backend (fuzz/).
bool UseLanes(int sub, int count) {
  static const bool avx2 = [] {
    const char* simd = std::getenv("CROSSREG_SIMD");
    return __builtin_cpu_supports("avx2") && !(simd != nullptr && std::strcmp(simd, "scalar") == 0);
  }();
  return avx2 && (sub == 32 || sub == 16) && count * sub == 256;
}

}  // namespace

float SubBlockError(const float* x, int n, float scale, float min, int qlo, int qhi) {
  const float inv_scale = Inverse(scale);
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int q = BestCode(x[i], inv_scale, min, qlo, qhi);
    const float diff = scale * static_cast<float>(q) - min - x[i];
    err += diff * diff;
  }
  return err;
}

void FitScaleMin(const float* x, int n, int nmax, float* scale, float* min) {
  float lo = 0.0f, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (!(hi > lo)) {  // every value equal and <= 0 (zero included): the min alone says it
    *scale = 0.0f;
    *min = -lo;
    return;
  }
  float best_scale = (hi - lo) / static_cast<float>(nmax);
  float best_min = -lo;
  double best_err = SubBlockError(x, n, best_scale, best_min, 0, nmax);
  for (int t = 0; t <= kGridTrials; ++t) {
    const float inv_step = GridSteps(nmax, t) / (hi - lo);
    CodeSums sums;
    for (int i = 0; i < n; ++i) sums.Add(RoundClamped((x[i] - lo) * inv_step, 0, nmax), x[i]);
    float s, m;
    if (!sums.Fit(&s, &m)) continue;
    const double err = sums.Error(s, -m);
    if (err < best_err) {
      best_err = err;
      best_scale = s;
      best_min = m;
    }
  }
  for (int round = 0; round < kRefits; ++round) {
    const float inv_scale = Inverse(best_scale);
    CodeSums sums;
    for (int i = 0; i < n; ++i) sums.Add(BestCode(x[i], inv_scale, best_min, 0, nmax), x[i]);
    float s, m;
    if (!sums.Fit(&s, &m)) break;
    best_scale = s;
    best_min = m;
  }
  *scale = best_scale;
  *min = best_min;
}

float FitSymmetricScale(const float* x, int n, int half) {
  const int qlo = -half, qhi = half - 1;
  float extreme = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
  }
  if (extreme == 0.0f) return 0.0f;
  float best_scale = extreme / static_cast<float>(qlo);
  double best_err = SubBlockError(x, n, best_scale, 0.0f, qlo, qhi);
  for (int t = 0; t <= kGridTrials; ++t) {
    const float inv_scale = -GridSteps(half, t) / extreme;
    CodeSums sums;
    for (int i = 0; i < n; ++i) sums.Add(RoundClamped(x[i] * inv_scale, qlo, qhi), x[i]);
    if (!(sums.qq > 0)) continue;
    const double s = sums.qx / sums.qq;
    if (s == 0) continue;
    const double err = sums.Error(s, 0);
    if (err < best_err) {
      best_err = err;
      best_scale = static_cast<float>(s);
    }
  }
  for (int round = 0; round < kRefits; ++round) {
    const float inv_scale = Inverse(best_scale);
    CodeSums sums;
    for (int i = 0; i < n; ++i) sums.Add(BestCode(x[i], inv_scale, 0.0f, qlo, qhi), x[i]);
    if (!(sums.qq > 0)) break;
    best_scale = static_cast<float>(sums.qx / sums.qq);
  }
  return best_scale;
}

void SubBlockErrors(const float* x, int sub, int count, int trials, const float* scale, const float* min, int qlo,
                    int qhi, float* err) {
  if (UseLanes(sub, count)) return SubBlockErrorsAvx2(x, sub, trials, scale, min, qlo, qhi, err);
  for (int i = 0; i < trials * count; ++i) err[i] = SubBlockError(x + sub * (i % count), sub, scale[i], min[i], qlo, qhi);
}

void FitScaleMins(const float* x, int sub, int count, int nmax, float* scale, float* min) {
  if (UseLanes(sub, count)) return FitScaleMinsAvx2(x, sub, nmax, scale, min);
  for (int j = 0; j < count; ++j) FitScaleMin(x + sub * j, sub, nmax, &scale[j], &min[j]);
}

void FitSymmetricScales(const float* x, int sub, int count, int half, float* scale) {
  if (UseLanes(sub, count)) return FitSymmetricScalesAvx2(x, sub, half, scale);
  for (int j = 0; j < count; ++j) scale[j] = FitSymmetricScale(x + sub * j, sub, half);
}

}  // namespace crossreg::quant::internal
