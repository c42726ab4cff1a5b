// Quantizes a loaded model's float matrices at load (`--quantize q8_0|q4_0|q4_k|q5_k|q6_k`),
// for users of Hugging Face directories who want the memory and speed of a quantized
// GGUF file without converting it first. Linear weights, the embedding and the output
// matrix become GGML blocks (engine/quant/ggml_blocks.h); norms and biases stay f32. A
// matrix whose rows are not whole blocks of the type (e.g. 256 for the K-quants) takes
// Q8_0 when its rows are whole blocks of 32, and stays as it is otherwise; matrices
// already quantized are left alone. An adapter is unaffected (it stays floating point).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/dtype.h"
#include "engine/model/model_loader.h"

namespace crossreg {

// "q8_0" -> kQ8_0 ... ; "none" or "" -> kF32 (meaning: leave the model as it is).
// Anything else is an error naming the accepted values.
absl::StatusOr<DType> ParseQuantizeType(const std::string& name);

// What QuantizeModel did, for the program to print: "quantized 85 matrices to Q4_K
// (3 to Q8_0: rows not whole blocks of 256), 438 MB -> 124 MB in 1.9 s (116 M weights/s)".
struct QuantizeSummary {
  int quantized = 0;
  int fallback_q8_0 = 0;
  int kept = 0;
  size_t bytes_before = 0;
  size_t bytes_after = 0;
  int64_t weights = 0;   // elements quantized
  double seconds = 0.0;  // wall time of the quantizing
  std::string Describe(DType type) const;
};

// `threads` > 1 quantizes matrices in parallel. The K-quants' fits dominate: about 1.3 s
// per 100M weights on one AVX2 core (Q4_K; 3.5 s without AVX2), Q8_0 about 0.5 s.
QuantizeSummary QuantizeModel(Model& model, DType type, int threads = 1);

}  // namespace crossreg
