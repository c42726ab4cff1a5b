#include "engine/cuda/device_weights.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/dtype.h"

namespace crossreg::cuda {
namespace {

// Host conversion goes through a bounded staging buffer: a 1 GB embedding must not
// need a second 1 GB host copy.
constexpr int64_t kStagingElements = int64_t{1} << 22;

absl::Status CopyAsBf16(const TensorRef& t, Bf16* dst) {
  const int64_t n = t.numel();
  if (t.dtype == DType::kBF16) {
    CROSSREG_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, t.data, static_cast<size_t>(n) * 2, cudaMemcpyHostToDevice),
                                  "cudaMemcpy (bf16 weights)");
    return absl::OkStatus();
  }
  std::vector<float> f32(static_cast<size_t>(std::min(n, kStagingElements)));
  std::vector<uint16_t> bf16(f32.size());
  const char* src = static_cast<const char*>(t.data);
  for (int64_t begin = 0; begin < n; begin += kStagingElements) {
    const int64_t count = std::min(kStagingElements, n - begin);
    // kStagingElements is a whole number of blocks of every quantized type (256 divides it).
    ConvertToF32(t.dtype, src + DTypeBytes(t.dtype, begin), f32.data(), static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) bf16[static_cast<size_t>(i)] = F32ToBf16(f32[static_cast<size_t>(i)]);
    CROSSREG_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dst + begin, bf16.data(), static_cast<size_t>(count) * 2, cudaMemcpyHostToDevice),
        "cudaMemcpy (converted weights)");
  }
  return absl::OkStatus();
}

// With FP8 the bf16 copy goes to `staging` (grown to the largest matrix) and is quantized
// from there into dst's codes and scales.
absl::Status QuantizeInto(const CudaContext& ctx, const DeviceBuffer<Bf16>& staging, DeviceLinear& dst) {
  // A pageable cudaMemcpy may return before its DMA lands, and the stream is non-blocking.
  CROSSREG_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before FP8 quantization)");
  if (absl::Status s = dst.fp8.Allocate(static_cast<size_t>(dst.out * dst.in)); !s.ok()) return s;
  if (absl::Status s = dst.scale.Allocate(static_cast<size_t>(dst.out)); !s.ok()) return s;
  CROSSREG_CUDA_RETURN_IF_ERROR(
      LaunchQuantizeRowsFp8(staging.data(), dst.out, dst.in, dst.fp8.data(), dst.scale.data(), ctx.stream()),
      "FP8 weight quantization");
  // The staging buffer is overwritten by the next matrix's upload on the default stream.
  CROSSREG_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx.stream()), "cudaStreamSynchronize (FP8 quantization)");
  return absl::OkStatus();
}

absl::Status UploadBf16(const std::vector<const TensorRef*>& parts, DeviceBuffer<Bf16>& dst) {
  int64_t total = 0;
  for (const TensorRef* t : parts) total += t->numel();
  if (absl::Status s = dst.Allocate(static_cast<size_t>(total)); !s.ok()) return s;
  int64_t offset = 0;
  for (const TensorRef* t : parts) {
    if (absl::Status s = CopyAsBf16(*t, dst.data() + offset); !s.ok()) return s;
    offset += t->numel();
  }
  return absl::OkStatus();
}

// Norms and biases are f32 on the host already (model_weights.h).
absl::Status UploadF32(const std::vector<const TensorRef*>& parts, DeviceBuffer<float>& dst) {
  int64_t total = 0;
  for (const TensorRef* t : parts) total += t->numel();
  if (absl::Status s = dst.Allocate(static_cast<size_t>(total)); !s.ok()) return s;
  int64_t offset = 0;
  std::vector<float> f32;
  for (const TensorRef* t : parts) {
    f32.resize(static_cast<size_t>(t->numel()));
    ConvertToF32(t->dtype, t->data, f32.data(), f32.size());
    CROSSREG_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dst.data() + offset, f32.data(), f32.size() * sizeof(float), cudaMemcpyHostToDevice),
        "cudaMemcpy (f32 weights)");
    offset += t->numel();
  }
  return absl::OkStatus();
}

absl::Status UploadInvFreq(const ModelConfig& config, DeviceBuffer<float>& dst) {
  const std::vector<float> inv_freq = config.RopeInverseFrequencies();
  if (absl::Status s = dst.Allocate(inv_freq.size()); !s.ok()) return s;
  CROSSREG_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(dst.data(), inv_freq.data(), inv_freq.size() * sizeof(float), cudaMemcpyHostToDevice),
      "cudaMemcpy (RoPE frequencies)");
  return absl::OkStatus();
}

// A layer matrix of `parts` stacked by rows, bf16 or FP8.
absl::Status UploadLinear(const CudaContext& ctx, const std::vector<const TensorRef*>& parts, int64_t in,
                          DeviceWeightFormat format, DeviceBuffer<Bf16>& staging, DeviceLinear& dst) {
  int64_t total = 0;
  for (const TensorRef* t : parts) total += t->numel();
  dst.in = in;
  dst.out = total / in;
  if (format == DeviceWeightFormat::kBf16) return UploadBf16(parts, dst.bf16);
  if (in % 16 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("FP8 weights need in_features divisible by 16; a matrix has ", in));
  }
  if (absl::Status s = UploadBf16(parts, staging); !s.ok()) return s;
  return QuantizeInto(ctx, staging, dst);
}

}  // namespace

int64_t DeviceModelWeights::LargestFp8Matrix() const {
  int64_t largest = 0;
  for (const auto& l : layers) {
    for (const DeviceLinear* m : {&l.wqkv, &l.wo, &l.w_gate_up, &l.w_down}) {
      if (m->is_fp8()) largest = std::max(largest, m->out * m->in);
    }
  }
  return largest;
}

int64_t DeviceModelWeights::LinearBytesPerForward() const {
  int64_t bytes = static_cast<int64_t>(tied ? tok_embeddings.bytes() : untied_output.bytes());
  for (const auto& l : layers) {
    bytes += static_cast<int64_t>(l.wqkv.bytes() + l.wo.bytes() + l.w_gate_up.bytes() + l.w_down.bytes());
  }
  return bytes;
}

absl::StatusOr<DeviceModelWeights> UploadModelWeights(const CudaContext& ctx, const Model& model,
                                                      DeviceWeightFormat format) {
  if (absl::Status s = ctx.Activate(); !s.ok()) return s;
  const ModelWeights& w = model.weights;
  DeviceModelWeights d;
  d.tied = model.config.tied_embeddings || w.output.data == w.tok_embeddings.data;
  if (absl::Status s = UploadBf16({&w.tok_embeddings}, d.tok_embeddings); !s.ok()) return s;
  if (!d.tied) {
    if (absl::Status s = UploadBf16({&w.output}, d.untied_output); !s.ok()) return s;
  }
  if (absl::Status s = UploadF32({&w.final_norm}, d.final_norm); !s.ok()) return s;
  if (absl::Status s = UploadInvFreq(model.config, d.rope_inv_freq); !s.ok()) return s;
  d.layers.resize(w.layers.size());
  const ModelConfig& c = model.config;
  DeviceBuffer<Bf16> staging;  // FP8: each matrix's bf16 copy before quantization
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& src = w.layers[i];
    DeviceLayerWeights& dst = d.layers[i];
    absl::Status s = UploadF32({&src.attn_norm}, dst.attn_norm);
    if (s.ok()) s = UploadLinear(ctx, {&src.wq, &src.wk, &src.wv}, c.hidden_size, format, staging, dst.wqkv);
    if (s.ok() && !src.bq.empty()) s = UploadF32({&src.bq, &src.bk, &src.bv}, dst.bqkv);
    if (s.ok()) s = UploadLinear(ctx, {&src.wo}, c.q_dim(), format, staging, dst.wo);
    if (s.ok()) s = UploadF32({&src.ffn_norm}, dst.ffn_norm);
    if (s.ok()) s = UploadLinear(ctx, {&src.w_gate, &src.w_up}, c.hidden_size, format, staging, dst.w_gate_up);
    if (s.ok()) s = UploadLinear(ctx, {&src.w_down}, c.intermediate_size, format, staging, dst.w_down);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat("uploading layer ", i, ": ", s.message()));
  }
  // Pageable cudaMemcpy may return before its DMA lands; the backend's stream is
  // non-blocking, so wait here rather than race the first forward.
  CROSSREG_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize (weight upload)");
  return d;
}

absl::StatusOr<DeviceModelWeights> MakeRandomDeviceWeights(const CudaContext& ctx, const ModelConfig& config,
                                                           uint64_t seed, DeviceWeightFormat format) {
  if (absl::Status s = ctx.Activate(); !s.ok()) return s;
  const int64_t hidden = config.hidden_size, ffn = config.intermediate_size;
  const int64_t qkv = config.q_dim() + 2 * int64_t{config.kv_dim()};
  uint64_t stream_seed = seed * 1000003u;
  auto linear = [&](DeviceBuffer<Bf16>& buf, int64_t out, int64_t in) -> absl::Status {
    if (absl::Status s = buf.Allocate(static_cast<size_t>(out * in)); !s.ok()) return s;
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    CROSSREG_CUDA_RETURN_IF_ERROR(LaunchFillUniformBf16(buf.data(), out * in, 0.0f, bound, ++stream_seed, ctx.stream()),
                                  "random bf16 fill");
    return absl::OkStatus();
  };
  DeviceBuffer<Bf16> staging;  // FP8: the random bf16 matrix before quantization
  auto layer_linear = [&](DeviceLinear& m, int64_t out, int64_t in) -> absl::Status {
    m.out = out;
    m.in = in;
    if (format == DeviceWeightFormat::kBf16) return linear(m.bf16, out, in);
    if (absl::Status s = linear(staging, out, in); !s.ok()) return s;
    return QuantizeInto(ctx, staging, m);
  };
  auto norm = [&](DeviceBuffer<float>& buf, int64_t n) -> absl::Status {
    if (absl::Status s = buf.Allocate(static_cast<size_t>(n)); !s.ok()) return s;
    CROSSREG_CUDA_RETURN_IF_ERROR(LaunchFillUniformF32(buf.data(), n, 1.0f, 0.1f, ++stream_seed, ctx.stream()),
                                  "random f32 fill");
    return absl::OkStatus();
  };
  DeviceModelWeights d;
  d.tied = config.tied_embeddings;
  absl::Status s = linear(d.tok_embeddings, config.vocab_size, hidden);
  if (s.ok() && !d.tied) s = linear(d.untied_output, config.vocab_size, hidden);
  if (s.ok()) s = norm(d.final_norm, hidden);
  if (s.ok()) s = UploadInvFreq(config, d.rope_inv_freq);
  d.layers.resize(static_cast<size_t>(config.num_layers));
  for (auto& l : d.layers) {
    if (s.ok()) s = norm(l.attn_norm, hidden);
    if (s.ok()) s = layer_linear(l.wqkv, qkv, hidden);
    if (s.ok() && config.qkv_bias) s = norm(l.bqkv, qkv);
    if (s.ok()) s = layer_linear(l.wo, hidden, config.q_dim());
    if (s.ok()) s = norm(l.ffn_norm, hidden);
    if (s.ok()) s = layer_linear(l.w_gate_up, 2 * ffn, hidden);
    if (s.ok()) s = layer_linear(l.w_down, hidden, ffn);
  }
  if (!s.ok()) return s;
  CROSSREG_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize (random weights)");
  return d;
}

}  // namespace crossreg::cuda
