// The lane forms of sub_block_fit.h's fits: a super-block's sub-blocks side by side.
// Built with -mavx2 and without FMA (engine/CMakeLists.txt): a contracted multiply-add
// would round differently from the one-sub-block forms, which these must equal bitwise.
#include <cstring>

#include "engine/quant/sub_block_fit.h"

namespace crossreg::quant::internal {
namespace {

// ---- Lanes: 8 sub-blocks of N elements side by side, one in each lane of a vector ----
//
// GCC's vector types: each operation is the scalar one in every lane (IEEE, no
// reassociation), and the scalar functions' branches (sub_block_fit.cc) become selects,
// so a lane computes what the one-sub-block function computes. Values a lane's branch
// would not have computed (a flat sub-block's grids, a failed fit's scale) are computed
// and dropped; no exception is unmasked, so they cost nothing but the time.
typedef float F8 __attribute__((vector_size(32)));
typedef int I8 __attribute__((vector_size(32)));
typedef float F4 __attribute__((vector_size(16)));
typedef int I4 __attribute__((vector_size(16)));
typedef double D4 __attribute__((vector_size(32)));
typedef long long L4 __attribute__((vector_size(32)));
constexpr int kLanes = 8;

inline F8 Broadcast(float v) { return F8{v, v, v, v, v, v, v, v}; }
inline D4 BroadcastD(double v) { return D4{v, v, v, v}; }
inline F8 Load8(const float* p) {
  F8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void Store8(F8 v, float* p) { std::memcpy(p, &v, sizeof v); }

// Halves of eight lanes as four doubles, and back.
inline D4 WidenLo(F8 v) { return __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), D4); }
inline D4 WidenHi(F8 v) { return __builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), D4); }
inline D4 WidenLo(I8 v) { return __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), D4); }
inline D4 WidenHi(I8 v) { return __builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), D4); }
inline F8 Narrow(D4 lo, D4 hi) {  // static_cast<float> in every lane
  const F4 a = __builtin_convertvector(lo, F4), b = __builtin_convertvector(hi, F4);
  return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7);
}
inline I8 Join(L4 lo, L4 hi) {  // two halves' masks as one
  const I4 a = __builtin_convertvector(lo, I4), b = __builtin_convertvector(hi, I4);
  return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7);
}

// RoundClamped in every lane.
inline I8 RoundClampedLanes(F8 v, int lo, int hi) {
  const F8 lo_v = Broadcast(static_cast<float>(lo)), hi_v = Broadcast(static_cast<float>(hi));
  v = v > lo_v ? v : lo_v;
  v = v < hi_v ? v : hi_v;
  const I8 whole = __builtin_convertvector(v, I8);
  const F8 frac = v - __builtin_convertvector(whole, F8);
  // A true comparison is -1 in its lane.
  return whole - (frac >= Broadcast(0.5f)) + (frac <= Broadcast(-0.5f));
}

inline F8 InverseLanes(F8 scale) {
  const F8 zero = Broadcast(0.0f);
  return scale != zero ? Broadcast(1.0f) / scale : zero;
}

// sub_block_fit.cc's FitToCodes in four lanes: the fit in *scale and *min (each
// static_cast<float>'s value, widened back), and where it holds.
inline L4 FitToCodesLanes(double count, D4 q, D4 x, D4 qq, D4 qx, D4* scale, D4* min) {
  const D4 zero = BroadcastD(0.0);
  const D4 det = count * qq - q * q;
  D4 s = (count * qx - q * x) / det;
  D4 b = (x - s * q) / count;
  const L4 positive = b > zero;
  b = positive ? zero : b;
  s = positive ? qx / qq : s;
  *scale = __builtin_convertvector(__builtin_convertvector(s, F4), D4);
  *min = __builtin_convertvector(__builtin_convertvector(-b, F4), D4);
  return (det > zero) & (s > zero);
}

template <int N>
struct SubBlocks {
  F8 v[N];  // v[i][j]: element i of sub-block j
  explicit SubBlocks(const float* x) {
    float t[N][kLanes];
    for (int j = 0; j < kLanes; ++j) {
      for (int i = 0; i < N; ++i) t[i][j] = x[N * j + i];
    }
    for (int i = 0; i < N; ++i) v[i] = Load8(t[i]);
  }
};

template <int N>
F8 LaneErrors(const SubBlocks<N>& s, F8 scale, F8 min, int qlo, int qhi) {
  const F8 inv = InverseLanes(scale);
  F8 acc = Broadcast(0.0f);
  for (int i = 0; i < N; ++i) {
    const F8 x = s.v[i];
    const I8 q = RoundClampedLanes((x + min) * inv, qlo, qhi);  // BestCode
    const F8 diff = scale * __builtin_convertvector(q, F8) - min - x;
    acc += diff * diff;
  }
  return acc;
}

// Per lane, the values as doubles, and the sums of them and of their squares (the same
// for every grid).
template <int N>
struct ValueSums {
  D4 wide[N][2];
  D4 x[2] = {}, xx[2] = {};
  explicit ValueSums(const SubBlocks<N>& s) {
    for (int i = 0; i < N; ++i) {
      wide[i][0] = WidenLo(s.v[i]);
      wide[i][1] = WidenHi(s.v[i]);
      for (int h = 0; h < 2; ++h) {
        x[h] += wide[i][h];
        xx[h] += wide[i][h] * wide[i][h];
      }
    }
  }
};

// Per lane, the sums over the codes `code_of(values)` picks. The codes' sums and sums of
// squares are integers far below 2^31 (and 2^53), which every partial sum in double holds
// exactly: summed in int32 they are the same numbers.
struct LaneCodeSums {
  D4 q[2], qq[2], qx[2] = {};
  template <int N, typename CodeOf>
  LaneCodeSums(const SubBlocks<N>& s, const ValueSums<N>& values, CodeOf code_of) {
    I8 q_sum = I8{}, qq_sum = I8{};
    for (int i = 0; i < N; ++i) {
      const I8 c = code_of(s.v[i]);
      q_sum += c;
      qq_sum += c * c;
      const D4 code[2] = {WidenLo(c), WidenHi(c)};
      for (int h = 0; h < 2; ++h) qx[h] += code[h] * values.wide[i][h];
    }
    q[0] = WidenLo(q_sum);
    q[1] = WidenHi(q_sum);
    qq[0] = WidenLo(qq_sum);
    qq[1] = WidenHi(qq_sum);
  }
};

template <int N>
void LaneFitScaleMin(const float* xin, int nmax, float* scale, float* min) {
  const SubBlocks<N> s(xin);
  F8 lo = Broadcast(0.0f), hi = s.v[0];
  for (int i = 0; i < N; ++i) {
    const F8 x = s.v[i];
    lo = x < lo ? x : lo;  // std::min(lo, x)
    hi = hi < x ? x : hi;  // std::max(hi, x)
  }
  // A flat lane's result is its min alone; its grids run over a span of 1 and are dropped.
  const I8 flat = ~(hi > lo);
  const F8 span = flat ? Broadcast(1.0f) : hi - lo;
  F8 best_scale = span / Broadcast(static_cast<float>(nmax));
  F8 best_min = -lo;
  const F8 first_err = LaneErrors(s, best_scale, best_min, 0, nmax);
  D4 best_err[2] = {WidenLo(first_err), WidenHi(first_err)};
  const ValueSums<N> values(s);
  const double count = N;
  for (int t = 0; t <= kGridTrials; ++t) {
    const F8 inv_step = Broadcast(GridSteps(nmax, t)) / span;
    const LaneCodeSums sums(s, values, [&](F8 x) { return RoundClampedLanes((x - lo) * inv_step, 0, nmax); });
    D4 fit_scale[2], fit_min[2];
    L4 better[2];
    for (int h = 0; h < 2; ++h) {
      const L4 ok = FitToCodesLanes(count, sums.q[h], values.x[h], sums.qq[h], sums.qx[h], &fit_scale[h], &fit_min[h]);
      const D4 e = SumsError(count, sums.q[h], values.x[h], sums.qq[h], sums.qx[h], values.xx[h], fit_scale[h],
                             -fit_min[h]);
      better[h] = ok & (e < best_err[h]);
      best_err[h] = better[h] ? e : best_err[h];
    }
    const I8 take = Join(better[0], better[1]);
    best_scale = take ? Narrow(fit_scale[0], fit_scale[1]) : best_scale;
    best_min = take ? Narrow(fit_min[0], fit_min[1]) : best_min;
  }
  I8 done = I8{};
  for (int round = 0; round < kRefits; ++round) {
    const F8 inv = InverseLanes(best_scale);
    const LaneCodeSums sums(s, values, [&](F8 x) { return RoundClampedLanes((x + best_min) * inv, 0, nmax); });
    D4 fit_scale[2], fit_min[2];
    L4 ok[2];
    for (int h = 0; h < 2; ++h) {
      ok[h] = FitToCodesLanes(count, sums.q[h], values.x[h], sums.qq[h], sums.qx[h], &fit_scale[h], &fit_min[h]);
    }
    const I8 fits = Join(ok[0], ok[1]);
    const I8 take = ~done & fits;
    done |= ~fits;
    best_scale = take ? Narrow(fit_scale[0], fit_scale[1]) : best_scale;
    best_min = take ? Narrow(fit_min[0], fit_min[1]) : best_min;
  }
  Store8(flat ? Broadcast(0.0f) : best_scale, scale);
  Store8(flat ? -lo : best_min, min);
}

template <int N>
void LaneFitSymmetricScale(const float* xin, int half, float* scale) {
  const int qlo = -half, qhi = half - 1;
  const SubBlocks<N> s(xin);
  const F8 zero = Broadcast(0.0f);
  F8 extreme = zero;
  for (int i = 0; i < N; ++i) {
    const F8 x = s.v[i];
    const F8 ax = x < zero ? -x : x, ae = extreme < zero ? -extreme : extreme;
    extreme = ax > ae ? x : extreme;  // std::fabs(x) > std::fabs(extreme)
  }
  // A lane of zeros has scale 0; its grids run against an extreme of 1 and are dropped.
  const I8 zeros = extreme == zero;
  const F8 ext = zeros ? Broadcast(1.0f) : extreme;
  F8 best_scale = ext / Broadcast(static_cast<float>(qlo));
  const F8 first_err = LaneErrors(s, best_scale, zero, qlo, qhi);
  D4 best_err[2] = {WidenLo(first_err), WidenHi(first_err)};
  const ValueSums<N> values(s);
  const double count = N;
  const D4 zero_d = BroadcastD(0.0);
  for (int t = 0; t <= kGridTrials; ++t) {
    const F8 inv_scale = Broadcast(-GridSteps(half, t)) / ext;
    const LaneCodeSums sums(s, values, [&](F8 x) { return RoundClampedLanes(x * inv_scale, qlo, qhi); });
    D4 fit[2];
    L4 better[2];
    for (int h = 0; h < 2; ++h) {
      fit[h] = sums.qx[h] / sums.qq[h];
      const L4 ok = (sums.qq[h] > zero_d) & (fit[h] != zero_d);
      const D4 e = SumsError(count, sums.q[h], values.x[h], sums.qq[h], sums.qx[h], values.xx[h], fit[h], zero_d);
      better[h] = ok & (e < best_err[h]);
      best_err[h] = better[h] ? e : best_err[h];
    }
    best_scale = Join(better[0], better[1]) ? Narrow(fit[0], fit[1]) : best_scale;
  }
  I8 done = I8{};
  for (int round = 0; round < kRefits; ++round) {
    const F8 inv = InverseLanes(best_scale);
    const LaneCodeSums sums(s, values, [&](F8 x) { return RoundClampedLanes((x + zero) * inv, qlo, qhi); });
    const I8 fits = Join(sums.qq[0] > zero_d, sums.qq[1] > zero_d);
    const I8 take = ~done & fits;
    done |= ~fits;
    best_scale = take ? Narrow(sums.qx[0] / sums.qq[0], sums.qx[1] / sums.qq[1]) : best_scale;
  }
  Store8(zeros ? zero : best_scale, scale);
}

}  // namespace

void SubBlockErrorsAvx2(const float* x, int sub, int trials, const float* scale, const float* min, int qlo, int qhi,
                        float* err) {
  const int count = 256 / sub;
  for (int g = 0; g < count; g += kLanes) {
    auto score = [&](const auto& blocks) {
      for (int t = 0; t < trials; ++t) {
        const int at = t * count + g;
        Store8(LaneErrors(blocks, Load8(scale + at), Load8(min + at), qlo, qhi), err + at);
      }
    };
    if (sub == 32) {
      score(SubBlocks<32>(x + sub * g));
    } else {
      score(SubBlocks<16>(x + sub * g));
    }
  }
}

void FitScaleMinsAvx2(const float* x, int sub, int nmax, float* scale, float* min) {
  for (int g = 0; g < 256 / sub; g += kLanes) {
    if (sub == 32) {
      LaneFitScaleMin<32>(x + sub * g, nmax, scale + g, min + g);
    } else {
      LaneFitScaleMin<16>(x + sub * g, nmax, scale + g, min + g);
    }
  }
}

void FitSymmetricScalesAvx2(const float* x, int sub, int half, float* scale) {
  for (int g = 0; g < 256 / sub; g += kLanes) {
    if (sub == 32) {
      LaneFitSymmetricScale<32>(x + sub * g, half, scale + g);
    } else {
      LaneFitSymmetricScale<16>(x + sub * g, half, scale + g);
    }
  }
}

}  // namespace crossreg::quant::internal
