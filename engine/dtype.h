// Element types of stored weights and the scalar conversions between them.
// Compute is float32 (the CPU's quantized kernels multiply integer codes, then scale in
// float); bf16/f16 and the GGML block types are storage formats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace crossreg {

// kF32/kF16/kBF16 are element types. The others are GGML's block-quantized formats,
// stored as GGUF files hold them: a block of 32 (or 256, the K-quants) elements is one
// run of bytes with its scales inside (engine/quant/ggml_blocks.h has the layouts).
// Their sizes are per block, so use DTypeBytes, not an element size, for quantized data.
enum class DType : uint8_t { kF32, kF16, kBF16, kQ8_0, kQ4_0, kQ4_K, kQ5_K, kQ6_K, kQ4_1, kQ5_0, kQ5_1, kQ2_K, kQ3_K,
                             kIQ4_NL, kIQ4_XS };

inline bool IsQuantized(DType t) { return t >= DType::kQ8_0; }

// Elements per block: 1 for element types.
inline int64_t DTypeBlockElements(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16: return 1;
    case DType::kQ8_0: case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1: case DType::kIQ4_NL: return 32;
    case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K: case DType::kQ2_K: case DType::kQ3_K: case DType::kIQ4_XS: return 256;
  }
  return 1;
}

// Bytes per block (per element for element types).
inline size_t DTypeBlockBytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kQ8_0: return 34;   // f16 scale + 32 int8
    case DType::kQ4_0: return 18;   // f16 scale + 32 nibbles
    case DType::kQ4_K: return 144;  // f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 nibble bytes
    case DType::kQ5_K: return 176;  // as Q4_K plus 32 bytes of fifth bits
    case DType::kQ6_K: return 210;  // 128 low nibble bytes, 64 high 2-bit bytes, 16 int8 scales, f16 d
    case DType::kQ4_1: return 20;   // f16 scale, f16 offset, 32 nibbles
    case DType::kQ5_0: return 22;   // f16 scale, 32 fifth bits, 32 nibbles
    case DType::kQ5_1: return 24;   // f16 scale, f16 offset, 32 fifth bits, 32 nibbles
    case DType::kQ2_K: return 84;   // 16 bytes of 4-bit scales/mins, 64 bytes of 2-bit codes, f16 d, f16 dmin
    case DType::kQ3_K: return 110;  // 32 bytes of third bits, 64 bytes of 2-bit codes, 12 bytes of 6-bit scales, f16 d
    case DType::kIQ4_NL: return 18;  // f16 scale, 32 nibbles indexing a table of 16 values
    case DType::kIQ4_XS: return 136; // f16 d, 2 + 4 bytes of 6-bit scales, 128 nibble bytes (as IQ4_NL's)
  }
  return 0;
}

// Element size of an element type (kF32/kF16/kBF16 only: quantized types have none).
inline size_t DTypeSize(DType t) { return IsQuantized(t) ? 0 : DTypeBlockBytes(t); }

// Bytes of `n` elements: n must be a whole number of blocks (a quantized tensor's rows
// are, which the loaders check).
inline size_t DTypeBytes(DType t, int64_t n) {
  return static_cast<size_t>(n / DTypeBlockElements(t)) * DTypeBlockBytes(t);
}

inline std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kQ8_0: return "Q8_0";
    case DType::kQ4_0: return "Q4_0";
    case DType::kQ4_K: return "Q4_K";
    case DType::kQ5_K: return "Q5_K";
    case DType::kQ6_K: return "Q6_K";
    case DType::kQ4_1: return "Q4_1";
    case DType::kQ5_0: return "Q5_0";
    case DType::kQ5_1: return "Q5_1";
    case DType::kQ2_K: return "Q2_K";
    case DType::kQ3_K: return "Q3_K";
    case DType::kIQ4_NL: return "IQ4_NL";
    case DType::kIQ4_XS: return "IQ4_XS";
  }
  return "?";
}

inline float Bf16ToF32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round-to-nearest-even, NaN preserved (quiet).
inline uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);

// Converts `n` elements of type `src_type` at `src` to float32. For quantized types n
// is a whole number of blocks and src starts at a block (dequantization, the reference
// definition of the stored values).
void ConvertToF32(DType src_type, const void* src, float* dst, size_t n);

}  // namespace crossreg
