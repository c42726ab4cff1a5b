// Element-wise and per-row CPU ops of the Llama block (float32 math). Each runs the
// AVX-512 version (ops_avx512.cc, with a vectorised exp) when the CPU has it and the
// portable one otherwise; the choice depends on the CPU only, never on how many rows a
// forward has, so a row's result does not depend on its batch.
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
// The same against bf16 b (a bf16 K/V cache).
float DotBf16(const float* a, const uint16_t* b, int64_t n);

// out[i] += p · v[i] (attention's weighted sum of values), f32 or bf16 v.
void Axpy(float* out, float p, const float* v, int64_t n);
void AxpyBf16(float* out, float p, const uint16_t* v, int64_t n);

// out[i] += x[i].
void AddInPlace(float* out, const float* x, int64_t n);


namespace internal {
// ops_avx512.cc; call only when the CPU has AVX-512.
void RmsNormAvx512(const float* x, const float* weight, int64_t n, float eps, float* out);
void RopeAvx512(float* vec, int num_heads, int head_dim, const float* cos, const float* sin);
void SwiGluAvx512(float* gate, const float* up, int64_t n);
void SoftmaxAvx512(float* x, int64_t n);
// ops_avx2.cc; call only when the CPU has AVX2 and FMA.
void SwiGluAvx2(float* gate, const float* up, int64_t n);
void SoftmaxAvx2(float* x, int64_t n);
float DotAvx2(const float* a, const float* b, int64_t n);
float DotBf16Avx2(const float* a, const uint16_t* b, int64_t n);
void AxpyAvx2(float* out, float p, const float* v, int64_t n);
void AxpyBf16Avx2(float* out, float p, const uint16_t* v, int64_t n);
float DotAvx512(const float* a, const float* b, int64_t n);
float DotBf16Avx512(const float* a, const uint16_t* b, int64_t n);
void AxpyAvx512(float* out, float p, const float* v, int64_t n);
void AxpyBf16Avx512(float* out, float p, const uint16_t* v, int64_t n);
void AddInPlaceAvx512(float* out, const float* x, int64_t n);
int32_t ArgmaxAvx512(const float* x, int64_t n);
int32_t ArgmaxAvx2(const float* x, int64_t n);
// The portable scan, the reference of every path.
int32_t ArgmaxScalar(const float* x, int64_t n);
}  // namespace internal

}  // namespace crossreg::cpu
