#include "engine/cpu/ops.h"

#include <cmath>

#include "engine/cpu/cpu_features.h"

namespace crossreg::cpu {
namespace {
bool Avx512() {
  static const bool yes = DetectedSimdLevel() >= SimdLevel::kAvx512;
  return yes;
}
bool Avx2() {
  static const bool yes = DetectedSimdLevel() >= SimdLevel::kAvx2;
  return yes;
}
}  // namespace

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  if (Avx512()) return internal::RmsNormAvx512(x, weight, n, eps, out);
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = weight[i] * (scale * x[i]);
}

void ApplyRope(float* vec, int num_heads, int head_dim, const float* cos, const float* sin) {
  if (Avx512()) return internal::RopeAvx512(vec, num_heads, head_dim, cos, sin);
  const int half = head_dim / 2;
  for (int h = 0; h < num_heads; ++h) {
    float* v = vec + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float x0 = v[i];
      const float x1 = v[i + half];
      v[i] = x0 * cos[i] - x1 * sin[i];
      v[i + half] = x0 * sin[i] + x1 * cos[i];
    }
  }
}

void SwiGlu(float* gate, const float* up, int64_t n) {
  if (Avx512()) return internal::SwiGluAvx512(gate, up, n);
  if (Avx2()) return internal::SwiGluAvx2(gate, up, n);
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void Softmax(float* x, int64_t n) {
  if (Avx512()) return internal::SoftmaxAvx512(x, n);
  if (Avx2()) return internal::SoftmaxAvx2(x, n);
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::fmax(max, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

int32_t internal::ArgmaxScalar(const float* x, int64_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

void EmbeddingRow(const TensorRef& table, int32_t token, float* out) {
  const int64_t hidden = table.cols();
  const char* base = static_cast<const char*>(table.data) + static_cast<size_t>(token) * table.row_bytes();
  ConvertToF32(table.dtype, base, out, static_cast<size_t>(hidden));
}

float Dot(const float* a, const float* b, int64_t n) {
  if (Avx512()) return internal::DotAvx512(a, b, n);
  if (Avx2()) return internal::DotAvx2(a, b, n);
  float part[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) part[j] += a[i + j] * b[i + j];
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  for (int w = 8; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) part[j] += part[j + w];
  }
  return part[0] + tail;
}

float DotBf16(const float* a, const uint16_t* b, int64_t n) {
  if (Avx512()) return internal::DotBf16Avx512(a, b, n);
  if (Avx2()) return internal::DotBf16Avx2(a, b, n);
  float part[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) part[j] += a[i + j] * Bf16ToF32(b[i + j]);
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * Bf16ToF32(b[i]);
  for (int w = 8; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) part[j] += part[j + w];
  }
  return part[0] + tail;
}

void Axpy(float* out, float p, const float* v, int64_t n) {
  if (Avx512()) return internal::AxpyAvx512(out, p, v, n);
  if (Avx2()) return internal::AxpyAvx2(out, p, v, n);
  for (int64_t i = 0; i < n; ++i) out[i] += p * v[i];
}

void AxpyBf16(float* out, float p, const uint16_t* v, int64_t n) {
  if (Avx512()) return internal::AxpyBf16Avx512(out, p, v, n);
  if (Avx2()) return internal::AxpyBf16Avx2(out, p, v, n);
  for (int64_t i = 0; i < n; ++i) out[i] += p * Bf16ToF32(v[i]);
}

void AddInPlace(float* out, const float* x, int64_t n) {
  if (Avx512()) return internal::AddInPlaceAvx512(out, x, n);
  for (int64_t i = 0; i < n; ++i) out[i] += x[i];
}

}  // namespace crossreg::cpu
