#include "engine/quant/fp8_e4m3.h"

#include <cmath>

namespace crossreg {

uint8_t F32ToFp8E4M3(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | 0x7f;
  const float a = std::fabs(x);
  if (a >= kFp8E4M3Max) return sign | 0x7e;  // saturate (values in (448, 464) round to 448 too)
  if (a < 0x1p-6f) {
    // Subnormals m · 2⁻⁹, m in 0..7; m = 8 is the smallest normal, whose code is also 8.
    return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1p9f));
  }
  int e = 0;
  std::frexp(a, &e);  // a = f · 2^e, f in [0.5, 1)
  e -= 1;             // a = (1 + m) · 2^e, e in [-6, 8]
  int mantissa = static_cast<int>(std::nearbyint(std::ldexp(a, -e) * 8.0f - 8.0f));  // exact: power-of-2 scaling
  if (mantissa == 8) {
    mantissa = 0;
    ++e;
  }
  return sign | static_cast<uint8_t>(((e + 7) << 3) | mantissa);
}

float Fp8E4M3ToF32(uint8_t code) {
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  const int exponent = (code >> 3) & 0xf;
  const int mantissa = code & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
}

float QuantizeRowFp8E4M3(const float* w, int64_t n, uint8_t* codes) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(w[i]));
  const float scale = amax > 0.0f ? amax / kFp8E4M3Max : 1.0f;
  for (int64_t i = 0; i < n; ++i) codes[i] = F32ToFp8E4M3(w[i] / scale);
  return scale;
}

}  // namespace crossreg
