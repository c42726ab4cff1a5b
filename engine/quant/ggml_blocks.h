// GGML's block-quantized weight formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_NL, IQ4_XS), byte for byte
// as GGUF files store them: decoding to f32, decoding one block to integer codes for the
// int8 CPU kernels, and quantizing f32 into blocks.
//
// Layouts (little-endian; "f16" is an IEEE half; element e counts from 0 within a block):
//
//   Q8_0, 32 elements, 34 bytes:  f16 d | int8 qs[32]
//     x[e] = d * qs[e]
//   Q4_0, 32 elements, 18 bytes:  f16 d | uint8 qs[16]
//     nibble(e) = e < 16 ? qs[e] & 15 : qs[e - 16] >> 4;   x[e] = d * (nibble(e) - 8)
//   Q4_1, 32 elements, 20 bytes:  f16 d | f16 m | uint8 qs[16]
//     x[e] = d * nibble(e) + m
//   Q5_0, 32 elements, 22 bytes:  f16 d | uint32 qh | uint8 qs[16]
//     q(e) = nibble(e) | ((qh >> e) & 1) << 4;   x[e] = d * (q(e) - 16)
//   Q5_1, 32 elements, 24 bytes:  f16 d | f16 m | uint32 qh | uint8 qs[16]
//     x[e] = d * q(e) + m, q as in Q5_0
//   Q2_K, 256 elements, 84 bytes: uint8 scales[16] | uint8 qs[64] | f16 d | f16 dmin
//     sixteen sub-blocks of 16, j = e / 16: sc[j] = scales[j] & 15, m[j] = scales[j] >> 4;
//     q(e) = (qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3
//     x[e] = (d * sc[j]) * q(e) - dmin * m[j]
//   Q3_K, 256 elements, 110 bytes: uint8 hmask[32] | uint8 qs[64] | uint8 scales[12] | f16 d
//     sixteen 6-bit scales, i = 4 * g + k (k < 4): the low 4 bits are nibble g / 2 of
//     scales[k + 4 * (g % 2)], the top 2 bits bits 2g, 2g + 1 of scales[8 + k]; sc[i] = that - 32
//     q(e) = low 2 bits as in Q2_K, less 4 unless bit 4 * (e / 128) + e % 128 / 32 of hmask[e % 32]
//     x[e] = (d * sc[e / 16]) * q(e)
//   IQ4_NL, 32 elements, 18 bytes: f16 d | uint8 qs[16]
//     x[e] = d * grid[nibble(e)], grid = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25,
//     38, 53, 69, 89, 113}
//   IQ4_XS, 256 elements, 136 bytes: f16 d | uint16 scales_h | uint8 scales_l[4] | uint8 qs[128]
//     eight sub-blocks of 32, j = e / 32: ls[j] = (scales_l[j / 2] >> 4 * (j % 2)) & 15 |
//     ((scales_h >> 2j) & 3) << 4; each sub-block's 16 bytes of qs as IQ4_NL's
//     x[e] = (d * (ls[j] - 32)) * grid[nibble]
//   Q4_K, 256 elements, 144 bytes: f16 d | f16 dmin | uint8 scales[12] | uint8 qs[128]
//     eight sub-blocks of 32, j = e / 32, each with a 6-bit scale sc[j] and 6-bit min m[j]:
//       j < 4:  sc[j] = scales[j] & 63;          m[j] = scales[j + 4] & 63
//       j >= 4: sc[j] = (scales[j + 4] & 15) | (scales[j - 4] >> 6) << 4
//               m[j]  = (scales[j + 4] >> 4) | (scales[j] >> 6) << 4
//     q(e) = qs[32 * (e / 64) + e % 32], low nibble if j is even, high nibble if odd
//     x[e] = (d * sc[j]) * q(e) - dmin * m[j]
//   Q5_K, 256 elements, 176 bytes: f16 d | f16 dmin | uint8 scales[12] | uint8 qh[32] | uint8 qs[128]
//     as Q4_K, with a fifth bit: q(e) = nibble as in Q4_K + 16 * ((qh[e % 32] >> j) & 1)
//   Q6_K, 256 elements, 210 bytes: uint8 ql[128] | uint8 qh[64] | int8 scales[16] | f16 d
//     h = e / 128 (which half), r = e % 128, k = r / 32, l = r % 32:
//       low4(e)  = ql[64 * h + 32 * (k & 1) + l], low nibble for k < 2, high nibble for k >= 2
//       high2(e) = (qh[32 * h + l] >> (2 * k)) & 3
//     q(e) = low4(e) | high2(e) << 4 (0..63);   x[e] = (d * scales[e / 16]) * (q(e) - 32)
//
// Float evaluation order matters for bitwise agreement between Dequantize and kernels
// built on DecodeBlock: a value is one multiply then one subtract, never fused (an FMA
// rounds once and can differ in the last bit).
#pragma once

#include <cstdint>

#include "engine/dtype.h"

namespace crossreg::quant {

// The reference definition of the stored values: n elements (whole blocks) of `type`
// into f32. Element types (kF32, kF16, kBF16) are converted as ConvertToF32 does.
// For Q4_0 the value is computed as d*q - 8*d (see DecodeBlock), which is d*(q - 8)
// exactly for every finite d; it differs from ggml's d*(q - 8) only in the sign of a
// zero (+0 where ggml gives -0 for q = 8 and d < 0).
void Dequantize(DType type, const void* src, float* dst, int64_t n);

// How DecodeBlock's output of one format reads: `sub_block` consecutive elements share
// a scale and a min, and element i's value is scale[i / sub_block] * q[i] - min[i / sub_block].
struct BlockCodes {
  int sub_block;       // 32 for Q8_0 and the 32-element formats, Q4_K, Q5_K; 16 for Q2_K, Q3_K, Q6_K
  bool has_min;        // min may be non-zero (the unsigned formats); Q8_0, Q3_K, Q6_K: min is 0
  bool signed_quants;  // Q8_0 (-128..127), Q3_K (-4..3), Q6_K (q6 - 32, -32..31); others q >= 0
  int max_abs_quant;   // the largest |q| a block can hold: 128 (Q8_0), 15, 31, 3 (Q2_K), 4, 32
};

// Quantized types only.
BlockCodes CodesOf(DType type);

// One block of a quantized `type` decoded to integers: q gets DTypeBlockElements(type)
// codes; scale and min get DTypeBlockElements(type) / CodesOf(type).sub_block floats
// each (min all zero where !has_min). Evaluating scale * q - min in float (a multiply,
// then a subtract) gives bitwise the floats Dequantize gives, for every block whose f16
// scales are finite.
//   Q8_0: q = qs, scale = d.       Q4_0: q = nibble (0..15), scale = d, min = 8 * d.
//   Q4_K/Q5_K: q = 0..15 / 0..31, scale = d * sc[j], min = dmin * m[j].
//   Q6_K: q = q6 - 32, scale = d * scales[j].
//   Q4_1/Q5_1: q = 0..15 / 0..31, scale = d, min = -m.   Q5_0: q = 0..31, scale = d, min = 16 * d.
//   Q2_K: q = 0..3, scale = d * sc[j], min = dmin * m[j].   Q3_K: q = -4..3, scale = d * sc[j].
//   IQ4_NL/IQ4_XS: q = grid[nibble] (-127..113), scale = d (IQ4_NL) or d * (ls[j] - 32) (IQ4_XS).
void DecodeBlock(DType type, const void* block, int8_t* q, float* scale, float* min);

// The K-quant formats whose sub-block scales (and mins) are small integers under the
// super-block's f16 d (and dmin), with unsigned codes: Q2_K, Q4_K, Q5_K, and Q6_K read as
// q6 in 0..63 with a min of 32 times its scale, Q3_K as q3 + 4 in 0..7 with a min of 4
// times its scale. A product with 8-bit activations that
// share one scale per super-block is then one exact integer sum per super-block
// (engine/cpu/packed_weights.h).
bool HasIntegerSubBlockScales(DType type);

// One super-block (256 elements) of such a `type`: q gets 256 unsigned codes, sc and m
// DTypeBlockElements(type) / CodesOf(type).sub_block integers each, and element e's
// value is, in exact arithmetic, d * (sc[j] * q[e]) - dmin * m[j] with j = e / sub_block.
//   Q4_K/Q5_K/Q2_K: sc, m the stored 6-bit (4-bit for Q2_K) scales and mins.
//   Q6_K: q = q6 (0..63), sc = scales[j], m = 32 * scales[j], dmin = d.
//   Q3_K: q = q3 + 4 (0..7), sc = the signed 6-bit scale, m = 4 * sc, dmin = d.
void DecodeSuperBlock(DType type, const void* block, uint8_t* q, int16_t* sc, int16_t* m, float* d, float* dmin);

// f32 into n elements (whole blocks) of `type`; element types are converted with
// rounding to nearest even. Blocks are independent, so callers may split a tensor at
// block boundaries across threads.
//   Q8_0, Q4_0: ggml's reference quantizers (d = absmax / 127; d = signed max / -8),
//     which give the same bytes as ggml for finite inputs within f16 range.
//   Q4_K, Q5_K: each sub-block of 32 gets a least-squares scale and min chosen among a
//     few grid placements, then the scales and mins are stored in 6 bits against the
//     super-block's d and dmin, and the codes are picked against the stored values.
//   Q6_K: the same for a symmetric grid on sub-blocks of 16, with int8 scales.
//   Q2_K: Q4_K's fit on sub-blocks of 16, scales and mins in 4 bits; Q3_K: Q6_K's on a
//     -4..3 grid, scales in 6 bits (signed).
//   Q5_0: Q4_0's reference quantizer with 5 bits (d = signed max / -16); Q4_1, Q5_1: the
//     block's minimum as m and its span as 15 or 31 steps of d, codes picked against the
//     stored d and m. IQ4_NL, IQ4_XS: a scale per 32 by the grid's squared error among a few
//     placements of the block's extreme value; IQ4_XS's in 6 bits against d as Q3_K's.
//     These need not give ggml's bytes, only valid blocks of the format.
// For the block formats, inputs that are not finite are read as 0, finite inputs are
// clipped to +-2^40, and where a block needs a scale beyond the largest f16 (65504) the
// scale saturates there and the values clip: the stored values are always finite.
// Scales below f16's normal range (6.1e-5) keep fewer significant bits; the K-quants
// round their super-block scales up rather than to nearest so small blocks are not
// clipped or flushed to zero.
void Quantize(DType type, const float* src, void* dst, int64_t n);

}  // namespace crossreg::quant
