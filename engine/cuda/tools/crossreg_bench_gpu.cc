// crossreg-bench-gpu: the CUDA backend at Llama-3-8B shapes with random bf16 weights
// made on the device. Per batch size: AR ms/forward against the HBM roofline
// ((weight + K/V bytes) / measured device-to-device copy bandwidth), and the cost of
// a Cross-Regression forward (1 + m control rows and γ predictive rows per
// sequence) relative to the AR forward.
//   crossreg-bench-gpu [--layers 32] [--context 512] [--batches 1,8,32] [--gammas 4,8,16,30]
//                      [--summaries=false: whole logit rows to the host instead of row summaries]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_config.h"

ABSL_FLAG(int, layers, 32, "Decoder layers (Llama-3-8B has 32; fewer for a quick run)");
ABSL_FLAG(int, context, 512, "Cached tokens per sequence before the timed forwards");
ABSL_FLAG(std::vector<std::string>, batches, std::vector<std::string>({"1", "8", "32"}), "Sequences per forward");
ABSL_FLAG(std::vector<std::string>, gammas, std::vector<std::string>({"4", "8", "16", "30"}),
          "Predictive rows per sequence (30: 1 + m + 30 = 33 rows, issue 11's T(33)/T(1))");
ABSL_FLAG(int, accepted, 2, "m: drafts accepted last step, fed as extra control rows (1 + m control rows)");
ABSL_FLAG(int, rank, 16, "LoRA rank of the random predictive-stream adapter");
ABSL_FLAG(int, iters, 20, "Timed forwards per figure (after 3 warm-up forwards)");
ABSL_FLAG(bool, xr_logits, true, "XR rows return logits to the host (as the decoder needs); false isolates compute");
ABSL_FLAG(bool, summaries, true,
          "Logit rows return 12-byte row summaries, as greedy requests ask (engine/forward_output.h); "
          "false: whole rows of logits, as sampled requests need");
ABSL_FLAG(int, device, 0, "CUDA device ordinal");
ABSL_FLAG(std::string, kv_dtype, "f32", "K/V cache element type: f32 or bf16");
ABSL_FLAG(std::string, weights, "bf16", "Decoder-layer weights on the device: bf16 or fp8 (e4m3, a scale per row)");
ABSL_FLAG(int, pred_attention_splits, 0,
          "Predictive rows' attention splits: 0 auto (by the forward's shape), N fixed, -1 the per-row rule of "
          "control rows (the baseline)");
ABSL_FLAG(bool, pred_attention_mma, true,
          "Predictive rows split apart run on the tensor-core attention kernel (false: the SIMT kernel)");
ABSL_FLAG(bool, device_summaries, false,
          "Greedy rows' summaries reduced on the device (CudaBackendOptions::device_summaries; off: on the host "
          "from whole rows)");
ABSL_FLAG(bool, graphs, true, "Replay decode-shaped forwards as CUDA graphs (false: launch every kernel each time)");

namespace crossreg {
namespace {

using Clock = std::chrono::steady_clock;

ModelConfig Llama3_8BConfig(int layers) {
  ModelConfig c;
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = layers;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.max_position = 8192;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  return c;
}

// Bytes per second of a large device-to-device copy, counting the read and the write.
double MeasureCopyBandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return 0;
  cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);  // warm-up
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const int reps = 10;
  cudaEventRecord(start);
  for (int i = 0; i < reps; ++i) cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes * reps / (ms * 1e-3);
}

std::vector<int> ParseInts(const std::vector<std::string>& items) {
  std::vector<int> out;
  for (const auto& s : items) out.push_back(std::stoi(s));
  return out;
}

// Mean wall-clock ms of one forward of `batch`, each rolled back (no sequence keeps any
// of its positions), so each repetition sees the same cache.
absl::StatusOr<double> TimeForward(Backend& backend, PagedKvCache& kv, const ForwardBatch& batch, int iters) {
  ForwardOutput out;
  double total_ms = 0;
  for (int i = 0; i < iters + 3; ++i) {
    KvTransaction transaction(kv);  // rolled back: each sequence keeps `context` positions
    const auto t0 = Clock::now();
    if (absl::Status s = backend.Execute(batch, transaction, out); !s.ok()) return s;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (i >= 3) total_ms += ms;
  }
  return total_ms / iters;
}

// The backend the flags describe; `kv` sizes its cache.
absl::StatusOr<CudaBackendOptions> BackendOptionsFromFlags(const LoraAdapter* adapter, KvCacheConfig kv) {
  CudaBackendOptions options;
  options.device = absl::GetFlag(FLAGS_device);
  options.adapter = adapter;
  options.use_graphs = absl::GetFlag(FLAGS_graphs);
  const std::string kv_dtype = absl::GetFlag(FLAGS_kv_dtype);
  if (kv_dtype != "f32" && kv_dtype != "bf16") {
    return absl::InvalidArgumentError(absl::StrCat("--kv_dtype must be f32 or bf16, got '", kv_dtype, "'"));
  }
  options.kv_dtype = kv_dtype == "bf16" ? KvDtype::kBf16 : KvDtype::kF32;
  const std::string weights = absl::GetFlag(FLAGS_weights);
  if (weights != "bf16" && weights != "fp8") {
    return absl::InvalidArgumentError(absl::StrCat("--weights must be bf16 or fp8, got '", weights, "'"));
  }
  options.weights = weights == "fp8" ? CudaWeights::kFp8 : CudaWeights::kBf16;
  options.predictive_attention_splits = absl::GetFlag(FLAGS_pred_attention_splits);
  options.predictive_attention_mma = absl::GetFlag(FLAGS_pred_attention_mma);
  options.device_summaries = absl::GetFlag(FLAGS_device_summaries);
  options.kv = kv;
  return options;
}

// Prefills `context` positions of a new sequence in chunks (no logits): the cache the
// decode forwards read.
absl::StatusOr<SequenceId> PrefillSequence(Backend& backend, PagedKvCache& kv, int context, int salt) {
  const SequenceId seq = kv.CreateSequence();
  for (int begin = 0; begin < context; begin += 512) {
    ForwardBatch prefill;
    for (int p = begin; p < std::min(context, begin + 512); ++p) {
      prefill.rows.push_back({.seq = seq, .position = p, .token = (p * 31 + salt) % 1000});
    }
    std::vector<float> unused;
    if (absl::Status st = backend.Forward(prefill, kv, unused); !st.ok()) return st;
  }
  return seq;
}

// The XR verify forward of every sequence: control rows [x_last, d_1..d_m] (each P_k
// names the draft it tests), then γ predictive rows.
ForwardBatch XrBatch(const std::vector<SequenceId>& seqs, int context, int accepted, int gamma, bool summaries) {
  ForwardBatch xr;
  const bool logits = absl::GetFlag(FLAGS_xr_logits);
  for (SequenceId seq : seqs) {
    for (int i = 0; i <= accepted; ++i) {
      xr.rows.push_back({.seq = seq, .position = context + i, .token = 7, .want_logits = logits,
                         .summary = logits && summaries, .summary_token = i < accepted ? 7 : -1});
    }
    for (int i = 0; i < gamma; ++i) {
      xr.rows.push_back({.seq = seq, .position = context + i, .token = 0, .want_logits = logits,
                         .predictive = true, .summary = logits && summaries});
    }
  }
  return xr;
}

int Run() {
  if (!CudaDeviceAvailable()) {
    std::fprintf(stderr,
                 "crossreg-bench-gpu: no CUDA device is available (cudaGetDeviceCount found none).\n"
                 "Run it on a machine with an NVIDIA GPU; see docs/cuda.md.\n");
    return 2;
  }
  const ModelConfig config = Llama3_8BConfig(absl::GetFlag(FLAGS_layers));
  const int context = absl::GetFlag(FLAGS_context);
  const int accepted = absl::GetFlag(FLAGS_accepted);
  const int iters = absl::GetFlag(FLAGS_iters);
  const std::vector<int> batches = ParseInts(absl::GetFlag(FLAGS_batches));
  const std::vector<int> gammas = ParseInts(absl::GetFlag(FLAGS_gammas));
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  const int max_gamma = *std::max_element(gammas.begin(), gammas.end());

  cudaSetDevice(absl::GetFlag(FLAGS_device));
  const double bandwidth = MeasureCopyBandwidth();
  std::printf("device-to-device copy bandwidth: %.0f GB/s\n", bandwidth / 1e9);

  RandomLoraOptions lora;
  lora.rank = absl::GetFlag(FLAGS_rank);
  lora.alpha = 2.0f * lora.rank;
  auto adapter = MakeRandomLoraAdapter(config, lora);

  const int block_size = 16;
  const int per_seq = context + 1 + accepted + max_gamma + block_size;
  auto options = BackendOptionsFromFlags(adapter.get(),
                                         {block_size, max_batch * ((per_seq + block_size - 1) / block_size)});
  if (!options.ok()) {
    std::fprintf(stderr, "crossreg-bench-gpu: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  const std::string kv_dtype = absl::GetFlag(FLAGS_kv_dtype);
  const std::string weights = absl::GetFlag(FLAGS_weights);
  auto backend = CreateCudaBackendWithRandomWeights(config, *options, /*seed=*/1);
  if (!backend.ok()) {
    std::fprintf(stderr, "crossreg-bench-gpu: %s\n", std::string(backend.status().message()).c_str());
    return 1;
  }
  PagedKvCache kv(options->kv);
  const double weight_bytes = static_cast<double>((*backend)->WeightBytesPerForward());
  const double kv_bytes_per_token = static_cast<double>(KvBytesPerToken(config, options->kv_dtype));
  const bool summaries = absl::GetFlag(FLAGS_summaries);
  std::printf("Llama-3-8B shapes, %d layers, %s weights (LM head bf16) %.2f GB, %s K/V, context %d, m = %d, LoRA rank %d, "
              "CUDA graphs %s, XR logits to host %s, logit rows returned as %s, predictive attention splits %s%s\n",
              config.num_layers, weights.c_str(), weight_bytes / 1e9, kv_dtype.c_str(), context, accepted, lora.rank,
              options->use_graphs ? "on" : "off", absl::GetFlag(FLAGS_xr_logits) ? "yes" : "no",
              summaries ? "row summaries (greedy)" : "whole rows",
              options->predictive_attention_splits == 0    ? "auto"
              : options->predictive_attention_splits < 0 ? "per-row rule (32)"
                                                         : std::to_string(options->predictive_attention_splits).c_str(),
              options->predictive_attention_splits >= 0 && options->predictive_attention_mma ? " (tensor cores)" : "");
  std::printf("%6s %10s %12s %9s", "batch", "AR ms", "roofline ms", "of peak");
  for (int g : gammas) std::printf("   T(1+m+%d)/T(1)", g);
  std::printf("\n");

  for (int batch_size : batches) {
    std::vector<SequenceId> seqs;
    for (int s = 0; s < batch_size; ++s) {
      auto seq = PrefillSequence(**backend, kv, context, s);
      if (!seq.ok()) {
        std::fprintf(stderr, "prefill: %s\n", std::string(seq.status().message()).c_str());
        return 1;
      }
      seqs.push_back(*seq);
    }
    ForwardBatch ar;
    for (SequenceId seq : seqs) {
      ar.rows.push_back({.seq = seq, .position = context, .token = 7, .want_logits = true, .summary = summaries});
    }
    auto ar_ms = TimeForward(**backend, kv, ar, iters);
    if (!ar_ms.ok()) {
      std::fprintf(stderr, "AR forward: %s\n", std::string(ar_ms.status().message()).c_str());
      return 1;
    }
    // One AR forward streams every weight once and reads each sequence's cache.
    const double roofline_ms = (weight_bytes + batch_size * (context + 1) * kv_bytes_per_token) / bandwidth * 1e3;
    std::printf("%6d %10.3f %12.3f %8.0f%%", batch_size, *ar_ms, roofline_ms, 100.0 * roofline_ms / *ar_ms);
    for (int gamma : gammas) {
      auto xr_ms = TimeForward(**backend, kv, XrBatch(seqs, context, accepted, gamma, summaries), iters);
      if (!xr_ms.ok()) {
        std::fprintf(stderr, "XR forward: %s\n", std::string(xr_ms.status().message()).c_str());
        return 1;
      }
      std::printf("   %14.2f", *xr_ms / *ar_ms);
    }
    std::printf("\n");
    for (SequenceId seq : seqs) kv.Free(seq);
  }
  return 0;
}

}  // namespace
}  // namespace crossreg

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("CUDA backend decode benchmark at Llama-3-8B shapes (random bf16 weights)");
  absl::ParseCommandLine(argc, argv);
  return crossreg::Run();
}
