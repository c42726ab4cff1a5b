// Portable kQ8 kernel and row quantizer: the reference the SIMD paths must match bit
// for bit (engine/cpu/linear_kernels.h), and what a CPU without AVX2 runs.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/cpu/linear_kernels.h"
#include "engine/dtype.h"

namespace crossreg::cpu::internal {

void QuantizeRowsScalar(const float* x, int64_t rows, int64_t in, int8_t* q, float* scale, float* sum16) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < in / 32; ++b) {
      const float* v = x + r * in + b * 32;
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[i]));
      const float d = amax / 127.0f;
      const float id = d > 0 ? 1.0f / d : 0.0f;
      int8_t* out = q + r * in + b * 32;
      int sums[2] = {0, 0};
      for (int i = 0; i < 32; ++i) {
        // nearbyint rounds half to even in the default mode, as the SIMD conversions do.
        const float t = std::nearbyint(v[i] * id);
        out[i] = static_cast<int8_t>(std::clamp(t, -127.0f, 127.0f));
        sums[i / 16] += out[i];
      }
      scale[r * (in / 32) + b] = d;
      sum16[r * (in / 16) + 2 * b] = static_cast<float>(sums[0]);
      sum16[r * (in / 16) + 2 * b + 1] = static_cast<float>(sums[1]);
    }
  }
}

void QuantizeRows256Scalar(const float* x, int64_t rows, int64_t in, int8_t* q, float* scale, int16_t* sum16,
                           int16_t* sum32) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < in / 256; ++b) {
      const float* v = x + r * in + b * 256;
      float amax = 0;
      for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(v[i]));
      const float d = amax / 127.0f;
      const float id = d > 0 ? 1.0f / d : 0.0f;
      int8_t* out = q + r * in + b * 256;
      int sums[16] = {};
      for (int i = 0; i < 256; ++i) {
        const float t = std::nearbyint(v[i] * id);
        out[i] = static_cast<int8_t>(std::clamp(t, -127.0f, 127.0f));
        sums[i / 16] += out[i];
      }
      scale[r * (in / 256) + b] = d;
      for (int i = 0; i < 16; ++i) sum16[r * (in / 16) + b * 16 + i] = static_cast<int16_t>(sums[i]);
      for (int i = 0; i < 8; ++i) {
        sum32[r * (in / 32) + b * 8 + i] = static_cast<int16_t>(sums[2 * i] + sums[2 * i + 1]);
      }
    }
  }
}

QuantPrefetch QuantPrefetchFor(const PanelArgs& a, const unsigned char* panel, int tile) {
  const int64_t groups = a.w->k_steps();
  const int64_t group_bytes = a.w->quant().group_bytes();
  if (tile == 0) return {panel + kQuantPrefetchBytes, (group_bytes + 63) / 64};
  const int64_t share = (a.w->panel_bytes() / 64 + a.num_tiles - 2) / (a.num_tiles - 1);  // lines per tile
  return {panel + a.w->panel_bytes() + (tile - 1) * share * 64, (share + groups - 1) / groups};
}

namespace {

// One sub-block's code k of output o (quarter o / 8, lane o % 8) in its layout.
int SubBlockCode(const QuantGroupLayout& layout, const unsigned char* codes, int o, int kk) {
  const int quarter = o / 8, lane = o % 8, step = kk / 4;
  if (layout.nibbles) {
    const unsigned char* q = codes + quarter * layout.quarter_code_bytes();
    const int low = (q[(step / 2) * 32 + lane * 4 + kk % 4] >> (4 * (step % 2))) & 15;
    if (layout.high_bits == 0) return low;
    const int high = (q[4 * layout.sub_block + lane * 4 + kk % 4] >> (layout.high_bits * step)) & ((1 << layout.high_bits) - 1);
    return low | high << 4;
  }
  const auto wq = static_cast<int8_t>(codes[((step * 4 + quarter) * 8 + lane) * 4 + kk % 4]);
  // Unsigned formats store q in [0, 63]: as int8 the same value.
  return layout.signed_quants ? wq : static_cast<uint8_t>(wq);
}

// Panels of integer sub-block scales (packed_weights.h): a super-block's two integer sums
// per output, then its two float steps.
void SuperBlockPanelsScalar(const PanelArgs& a, int64_t begin, int64_t end) {
  const PackedWeights& w = *a.w;
  const QuantGroupLayout& layout = w.quant();
  const int sub = layout.sub_block, n = layout.sub_blocks();
  const int64_t in = a.qx->in;
  for (int64_t j = begin; j < end; ++j) {
    const int64_t width = std::min<int64_t>(kPanelWidth, w.out() - j * kPanelWidth);
    const unsigned char* panel = w.panel(j);
    for (int64_t r = 0; r < a.rows; ++r) {
      const int8_t* xq = a.qx->q256 + r * in;
      const int16_t* xsums = sub == 16 ? a.qx->isum16 + r * (in / 16) : a.qx->isum32 + r * (in / 32);
      float acc[kPanelWidth] = {};
      for (int64_t g = 0; g < w.k_steps(); ++g) {
        const unsigned char* group = panel + g * layout.group_bytes();
        const float xs = a.qx->scale256[r * (in / 256) + g];
        float d[kPanelWidth], dmin[kPanelWidth];
        std::memcpy(d, group + layout.super_scales_offset(), sizeof d);
        std::memcpy(dmin, group + layout.super_scales_offset() + sizeof d, sizeof dmin);
        for (int o = 0; o < kPanelWidth; ++o) {
          int32_t isum = 0, msum = 0;
          for (int s = 0; s < n; ++s) {
            const unsigned char* codes = group + s * layout.code_bytes();
            int32_t dot = 0;
            for (int kk = 0; kk < sub; ++kk) dot += SubBlockCode(layout, codes, o, kk) * xq[g * 256 + s * sub + kk];
            const int32_t sc = static_cast<int8_t>(group[layout.int_scale_at(s, o)]);
            const int32_t m = layout.min_shift > 0 ? sc * (1 << layout.min_shift) : group[layout.int_min_at(s, o)];
            isum += sc * dot;
            msum += m * xsums[g * n + s];
          }
          if (layout.min_shift > 0) {  // d = dmin: one step, sum_j sc_j * ((q - 2^shift) . x)_j
            acc[o] = std::fma(static_cast<float>(isum - msum), d[o] * xs, acc[o]);
          } else {
            acc[o] = std::fma(static_cast<float>(isum), d[o] * xs, acc[o]);
            acc[o] = std::fma(-static_cast<float>(msum), dmin[o] * xs, acc[o]);
          }
        }
      }
      std::copy_n(acc, width, a.y + r * a.y_stride + j * kPanelWidth);
    }
  }
}

}  // namespace

void QuantPanelsScalar(const PanelArgs& a, int64_t begin, int64_t end) {
  const PackedWeights& w = *a.w;
  const QuantGroupLayout& layout = w.quant();
  if (layout.super_block > 0) {
    SuperBlockPanelsScalar(a, begin, end);
    return;
  }
  const int sub = layout.sub_block;
  const int64_t groups = w.k_steps();
  const int64_t in = a.qx->in;
  for (int64_t j = begin; j < end; ++j) {
    const int64_t width = std::min<int64_t>(kPanelWidth, w.out() - j * kPanelWidth);
    const unsigned char* panel = w.panel(j);
    for (int64_t r = 0; r < a.rows; ++r) {
      const int8_t* xq = a.qx->q + r * in;
      float acc[kPanelWidth] = {};
      for (int64_t g = 0; g < groups; ++g) {
        const unsigned char* group = panel + g * layout.group_bytes();
        float scales[2 * kPanelWidth];
        for (int i = 0; i < (layout.has_min ? 2 : 1) * kPanelWidth; ++i) {
          const unsigned char* at = group + layout.code_bytes() + i * layout.scale_bytes();
          if (layout.f16_scales) {
            uint16_t h;
            std::memcpy(&h, at, sizeof h);
            scales[i] = F16ToF32(h);
          } else {
            std::memcpy(&scales[i], at, sizeof(float));
          }
        }
        const float xs = a.qx->scale[r * (in / 32) + (g * sub) / 32];
        float xsum = 0;  // the group's code sum (exact: small integers) times its scale
        if (layout.has_min) {
          const float* s16 = a.qx->sum16 + r * (in / 16) + (g * sub) / 16;
          xsum = (sub == 16 ? s16[0] : s16[0] + s16[1]) * xs;
        }
        for (int o = 0; o < kPanelWidth; ++o) {
          int32_t isum = 0;
          for (int kk = 0; kk < sub; ++kk) isum += SubBlockCode(layout, group, o, kk) * xq[g * sub + kk];
          acc[o] = std::fma(static_cast<float>(isum), scales[o] * xs, acc[o]);
          if (layout.has_min) acc[o] = std::fma(-xsum, scales[kPanelWidth + o], acc[o]);
        }
      }
      std::copy_n(acc, width, a.y + r * a.y_stride + j * kPanelWidth);
    }
  }
}

}  // namespace crossreg::cpu::internal
