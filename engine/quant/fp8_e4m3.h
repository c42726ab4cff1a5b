// FP8 E4M3 (OCP "e4m3fn": 1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no
// infinities, 0x7f/0xff are NaN, largest finite ±448) and per-row scaled weights: row o of
// a linear weight is stored as e4m3(w[o][k] / scale[o]) with scale[o] = max_k |w[o][k]| / 448,
// so each row uses the format's whole range. The CPU twin of the CUDA backend's FP8 weights
// (engine/cuda/fp8_kernels.cu): the device's quantization must produce these bits exactly.
#pragma once

#include <cstdint>

namespace crossreg {

constexpr float kFp8E4M3Max = 448.0f;

// Round to nearest, ties to even, saturating to ±448 (NaN stays NaN: 0x7f with the sign).
uint8_t F32ToFp8E4M3(float x);
float Fp8E4M3ToF32(uint8_t code);

// scale = max |w| / 448 (1 for an all-zero row), codes = e4m3(w / scale).
float QuantizeRowFp8E4M3(const float* w, int64_t n, uint8_t* codes);

}  // namespace crossreg
