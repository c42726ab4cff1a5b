// The quantizer's fits of sub-block scales (ggml_blocks.cc's Q2_K..Q6_K): the definition
// for one sub-block, and the same fits for a super-block's sub-blocks at once.
//
// Each fit tries several grids and refits to the codes they pick: a dozen passes over a
// sub-block, each a chain of dependent float or double adds, about 28 M weights a second
// for Q4_K on one core one sub-block at a time. The lane forms (sub_block_fit_avx2.cc)
// run a super-block's sub-blocks side by side, sub-block j in lane j of AVX2 vectors,
// every lane doing exactly the one-sub-block fit's operations in its order: about 80 M
// weights a second, and bitwise the same results (tests/unit/sub_block_fit_test.cc), so
// a file's bytes do not depend on the host that wrote it. No fused multiply-adds in
// either: the scalar forms are built for the baseline ISA, which has none, and the lanes'
// file with AVX2 alone. Built for the baseline ISA the lanes ran slower than one
// sub-block at a time (GCC lowers each 8-lane operation to SSE2 pairs and moves lanes
// through memory): 14 against 26 M weights a second.
#pragma once

namespace crossreg::quant::internal {

// Nearest integer in [lo, hi] (halves away from zero, as roundf), NaN giving lo. Clipping
// comes first so a huge or infinite ratio never reaches the integer conversion. The fits
// call this for every element of every trial grid, so it avoids a libm call and
// branches (the fractions are random: mispredictions cost more than the arithmetic).
inline int RoundClamped(float v, int lo, int hi) {
  v = v > static_cast<float>(lo) ? v : static_cast<float>(lo);
  v = v < static_cast<float>(hi) ? v : static_cast<float>(hi);
  const int whole = static_cast<int>(v);             // toward zero
  const float frac = v - static_cast<float>(whole);  // exact, |v| being small
  return whole + static_cast<int>(frac >= 0.5f) - static_cast<int>(frac <= -0.5f);
}

// The code in qlo..qhi whose value scale * q - min is nearest x, given inv_scale =
// 1 / scale (a zero scale, inv_scale 0, has only the value -min: code 0, or qlo where
// 0 is out of range).
inline int BestCode(float x, float inv_scale, float min, int qlo, int qhi) {
  return RoundClamped((x + min) * inv_scale, qlo, qhi);
}

inline float Inverse(float scale) { return scale != 0.0f ? 1.0f / scale : 0.0f; }

// Sum of (s*q + b - x)^2 over a sub-block, from its sums over the codes q and values x:
// the squared error of a fit without another pass over the values. One expression for
// every form of the fits, so that they round alike.
template <typename T>  // double, or a vector of them
T SumsError(double count, T q, T x, T qq, T qx, T xx, T s, T b) {
  return xx + s * s * qq + count * b * b + 2.0 * (s * b * q - s * qx - b * x);
}

// Grid widths from (steps - 1) to (steps + 1) steps across a sub-block's span: a slightly
// finer or coarser grid often lands more values near grid points than the plain span.
inline constexpr int kGridTrials = 4;
inline float GridSteps(int steps, int trial) {
  return static_cast<float>(steps) - 1.0f + 2.0f * static_cast<float>(trial) / kGridTrials;
}
// Rounds of re-picking codes for the best fit and fitting again.
inline constexpr int kRefits = 2;

// Squared error of n values against one scale and min, each at its best code.
float SubBlockError(const float* x, int n, float scale, float min, int qlo, int qhi);

// The K-quants' per-sub-block fit: x ~ scale * q - min with q in 0..nmax, scale >= 0
// and min >= 0. Each trial grid's codes get a least-squares scale and min; the best fit
// then alternates a few times between picking codes and refitting.
void FitScaleMin(const float* x, int n, int nmax, float* scale, float* min);

// Q6_K's and Q3_K's per-sub-block fit: x ~ scale * q with q in -half..half-1 (32 for
// Q6_K, 4 for Q3_K). The scale takes either sign so that the value of largest magnitude
// can sit at the -half end, one step wider.
float FitSymmetricScale(const float* x, int n, int half);

// The same for `count` sub-blocks of `sub` elements, sub-block j at x + sub * j, each
// result bitwise the one-sub-block function's. A super-block of 8 sub-blocks of 32 or 16
// of 16 (the K-quants' shapes) runs as lanes where the CPU has AVX2 (and CROSSREG_SIMD
// allows it); anything else one sub-block after another.
// SubBlockErrors scores `trials` sets of scales and mins at once (set t's for sub-block j
// at [t * count + j], its errors likewise), reading the sub-blocks in once for all.
void SubBlockErrors(const float* x, int sub, int count, int trials, const float* scale, const float* min, int qlo,
                    int qhi, float* err);
void FitScaleMins(const float* x, int sub, int count, int nmax, float* scale, float* min);
void FitSymmetricScales(const float* x, int sub, int count, int half, float* scale);

// The lane forms (sub_block_fit_avx2.cc) for one super-block of 256 elements in
// sub-blocks of `sub` (32 or 16). Call only where the CPU has AVX2.
void SubBlockErrorsAvx2(const float* x, int sub, int trials, const float* scale, const float* min, int qlo, int qhi,
                        float* err);
void FitScaleMinsAvx2(const float* x, int sub, int nmax, float* scale, float* min);
void FitSymmetricScalesAvx2(const float* x, int sub, int half, float* scale);

}  // namespace crossreg::quant::internal
