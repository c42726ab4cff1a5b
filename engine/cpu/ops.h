// Element-wise and per-row CPU ops of the Llama block (float32).
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace crossreg::cpu {

// out[i] = x[i] / sqrt(mean(x²) + eps) * weight[i], for one row of n.
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);

// Rotates each head of `vec` (num_heads x head_dim) in NeoX/HF order: pairs
// (i, i + head_dim/2) by angle position * inv_freq[i]. cos/sin: head_dim/2 each.
void ApplyRope(float* vec, int num_heads, int head_dim, const float* cos, const float* sin);

// gate[i] = silu(gate[i]) * up[i].
void SwiGlu(float* gate, const float* up, int64_t n);

// In-place softmax over n values.
void Softmax(float* x, int64_t n);

// Copies embedding row `token` of `table` (vocab, hidden) to out as f32.
void EmbeddingRow(const TensorRef& table, int32_t token, float* out);

// Σ a[i]·b[i] with 16 independent partial sums: a single running sum is a serial
// dependency chain the compiler may not vectorise (float addition does not reassociate).
float Dot(const float* a, const float* b, int64_t n);

// out[i] += x[i].
void AddInPlace(float* out, const float* x, int64_t n);

}  // namespace crossreg::cpu
