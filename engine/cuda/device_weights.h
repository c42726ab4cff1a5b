// The model's weights on the device: linear layers and the embedding in bf16 (f32
// and f16 sources converted at upload), norms and biases in f32. Q/K/V are stored
// as one (q_dim + 2·kv_dim, hidden) matrix and gate/up as one (2·ffn, hidden)
// matrix, so each shared-input group is a single GEMM that reads x once.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_context.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/kernels.h"
#include "engine/model/model_config.h"
#include "engine/model/model_loader.h"

namespace crossreg::cuda {

// How the decoder layers' linear weights live on the device (the embedding and the LM head
// stay bf16 either way).
enum class DeviceWeightFormat { kBf16, kFp8 };

// One (out, in) linear weight: bf16, or e4m3 codes with a scale per output row
// (kernels.h, "FP8 weights").
struct DeviceLinear {
  int64_t out = 0, in = 0;
  DeviceBuffer<Bf16> bf16;     // (out, in); empty when FP8
  DeviceBuffer<uint8_t> fp8;   // (out, in) e4m3 codes; empty when bf16
  DeviceBuffer<float> scale;   // (out); with fp8 only
  bool is_fp8() const { return fp8.size() > 0; }
  size_t bytes() const { return bf16.bytes() + fp8.bytes() + scale.bytes(); }
};

struct DeviceLayerWeights {
  DeviceBuffer<float> attn_norm;  // (hidden)
  DeviceLinear wqkv;              // rows [0, q_dim): wq, then wk, then wv
  DeviceBuffer<float> bqkv;       // (q_dim + 2·kv_dim); empty unless qkv_bias
  DeviceLinear wo;                // (hidden, q_dim)
  DeviceBuffer<float> ffn_norm;   // (hidden)
  DeviceLinear w_gate_up;         // rows [0, ffn): gate, then up
  DeviceLinear w_down;            // (hidden, ffn)
};

struct DeviceModelWeights {
  DeviceBuffer<Bf16> tok_embeddings;  // (vocab, hidden)
  DeviceBuffer<Bf16> untied_output;   // (vocab, hidden); empty when tied
  DeviceBuffer<float> final_norm;     // (hidden)
  DeviceBuffer<float> rope_inv_freq;  // (head_dim / 2)
  std::vector<DeviceLayerWeights> layers;
  bool tied = false;

  const Bf16* output() const { return tied ? tok_embeddings.data() : untied_output.data(); }
  // Bytes one forward streams through the GEMMs: every layer's matrices and the output.
  int64_t LinearBytesPerForward() const;
  // The largest FP8 layer matrix's element count (0 with bf16 weights): the bf16 scratch
  // that forwards wider than the FP8 GEMV dequantize into.
  int64_t LargestFp8Matrix() const;
};

// Copies `model`'s host weights to the device (synchronously); with kFp8 the layers'
// linear weights are quantized on the device after a bf16 upload.
absl::StatusOr<DeviceModelWeights> UploadModelWeights(const CudaContext& ctx, const Model& model,
                                                      DeviceWeightFormat format = DeviceWeightFormat::kBf16);

// Random weights made on the device, never on the host: benchmarks at real shapes
// (Llama-3-8B's 16 GB) where speed does not depend on the values. Linear weights are
// uniform in ±1/sqrt(in_features), norms near 1.
absl::StatusOr<DeviceModelWeights> MakeRandomDeviceWeights(const CudaContext& ctx, const ModelConfig& config,
                                                           uint64_t seed,
                                                           DeviceWeightFormat format = DeviceWeightFormat::kBf16);

}  // namespace crossreg::cuda
