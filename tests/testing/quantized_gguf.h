// A complete small llama GGUF whose matrices are GGML block-quantized, written the way
// the standard quantizer lays out its files: every matrix (embedding and output
// included) in one type, or the "_M" mix (Q6_K output, attn_v and ffn_down in Q6_K in
// the first and last eighth of the layers and every third between). Two layers, hidden
// 256, ffn 512, 4 heads of 64 over 2 KV heads, context 128, the byte-level vocabulary
// of TinyLlamaGguf (whole K-quant blocks of 256 in every row).
#pragma once

#include <cstdint>

#include "engine/dtype.h"
#include "tests/testing/gguf_writer.h"

namespace crossreg::testing {

// The ggml type id of a DType (F32, F16, BF16 and the quantized types).
uint32_t GgmlTypeOf(DType type);

GgufWriter QuantizedLlamaGguf(DType type, bool k_quant_mix = false, uint64_t seed = 1);

}  // namespace crossreg::testing
