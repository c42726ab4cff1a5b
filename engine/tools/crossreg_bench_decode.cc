// crossreg-bench-decode: AR decode speed on the CPU backend against the memory
// bandwidth roofline, plus the cost of a forward as its row count grows.
//   crossreg-bench-decode [--model PATH] [--random100m] [--batches 1,8] [--steps 64]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/memory_bandwidth.h"
#include "engine/model/model_loader.h"
#include "engine/model/random_model.h"
#include "engine/sampler.h"
#include "engine/tools/flag_spelling.h"

ABSL_FLAG(std::vector<std::string>, model, {}, "Models to benchmark (.gguf or HF directories)");
ABSL_FLAG(bool, random100m, true, "Also benchmark a random ~110M-parameter bf16 Llama (12 x 768, vocab 32000)");
ABSL_FLAG(std::vector<std::string>, batches, std::vector<std::string>({"1", "8"}), "Batch sizes (sequences per forward)");
ABSL_FLAG(std::vector<std::string>, rows, std::vector<std::string>({"1", "2", "4", "8", "16", "32"}),
          "Rows of one sequence per forward for the cost-curve table");
ABSL_FLAG(int, steps, 64, "Decode steps timed per measurement");
ABSL_FLAG(int, context, 64, "Prompt tokens before decoding starts");
ABSL_FLAG(int, threads, 0, "CPU threads; 0 = one per core");
ABSL_FLAG(int, repeats, 3, "Measurements per figure; the best is reported");

namespace crossreg {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int> ParseInts(const std::vector<std::string>& items) {
  std::vector<int> out;
  for (const auto& s : items) {
    int v;
    if (absl::SimpleAtoi(s, &v) && v > 0) out.push_back(v);
  }
  return out;
}

struct BenchSetup {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<PagedKvCache> kv;
};

BenchSetup MakeSetup(const Model& model, int sequences, int tokens_each) {
  CpuBackendOptions o;
  o.num_threads = absl::GetFlag(FLAGS_threads);
  o.kv.block_size = 16;
  o.kv.num_blocks = sequences * ((tokens_each + 15) / 16 + 1);
  BenchSetup s;
  auto backend = CreateCpuBackend(model, o);
  if (!backend.ok()) {
    std::fprintf(stderr, "backend: %s\n", std::string(backend.status().message()).c_str());
    std::exit(1);
  }
  s.backend = std::move(*backend);
  s.kv = std::make_unique<PagedKvCache>(o.kv);
  return s;
}

// Prefills `batch` sequences with `context` random tokens, then times `steps`
// greedy decode forwards of one row per sequence. Returns seconds per forward.
double TimeDecode(const Model& model, int batch, int context, int steps) {
  const int vocab = model.config.vocab_size;
  BenchSetup s = MakeSetup(model, batch, context + steps + 1);
  Rng rng(1);
  std::vector<SequenceId> seqs;
  std::vector<int32_t> last(static_cast<size_t>(batch));
  std::vector<float> logits;
  for (int b = 0; b < batch; ++b) {
    const SequenceId id = s.kv->CreateSequence();
    seqs.push_back(id);
    ForwardBatch fb;
    for (int p = 0; p < context; ++p) {
      fb.rows.push_back({id, p, static_cast<int32_t>(rng.Next() % vocab), p == context - 1});
    }
    if (!s.backend->Forward(fb, *s.kv, logits).ok()) std::exit(1);
    last[static_cast<size_t>(b)] = Argmax(logits.data(), vocab);
  }
  ForwardBatch fb;
  const auto t0 = Clock::now();
  for (int step = 0; step < steps; ++step) {
    fb.rows.clear();
    for (int b = 0; b < batch; ++b) fb.rows.push_back({seqs[b], context + step, last[b], true});
    if (!s.backend->Forward(fb, *s.kv, logits).ok()) std::exit(1);
    for (int b = 0; b < batch; ++b) last[b] = Argmax(logits.data() + static_cast<size_t>(b) * vocab, vocab);
  }
  return std::chrono::duration<double>(Clock::now() - t0).count() / steps;
}

// Time of one forward carrying `rows` rows of a single sequence (a verify step):
// rows are appended, then rolled back so every measurement sees the same context.
double TimeRows(const Model& model, int rows, int context, int repeats) {
  const int vocab = model.config.vocab_size;
  BenchSetup s = MakeSetup(model, 1, context + rows + 1);
  const SequenceId id = s.kv->CreateSequence();
  ForwardBatch fb;
  std::vector<float> logits;
  for (int p = 0; p < context; ++p) fb.rows.push_back({id, p, p % vocab, false});
  if (!s.backend->Forward(fb, *s.kv, logits).ok()) std::exit(1);
  double best = 1e30;
  for (int rep = 0; rep < repeats; ++rep) {
    fb.rows.clear();
    for (int r = 0; r < rows; ++r) fb.rows.push_back({id, context + r, (7 * r) % vocab, true});
    const auto t0 = Clock::now();
    if (!s.backend->Forward(fb, *s.kv, logits).ok()) std::exit(1);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    if (!s.kv->Truncate(id, context).ok()) std::exit(1);
  }
  return best;
}

void BenchModel(const std::string& name, const Model& model, double dram_bandwidth) {
  const int steps = absl::GetFlag(FLAGS_steps);
  const int context = std::min(absl::GetFlag(FLAGS_context), model.config.max_position - steps - 1);
  const int repeats = absl::GetFlag(FLAGS_repeats);
  BenchSetup probe = MakeSetup(model, 1, 16);
  const double weight_bytes = static_cast<double>(probe.backend->WeightBytesPerForward());
  const double kv_bytes_per_token = static_cast<double>(KvBytesPerToken(model.config));
  std::printf("\n## %s\n", name.c_str());
  std::printf("layers %d, hidden %d, ffn %d, heads %d/%d, vocab %d; weights streamed per forward: %.1f MB\n",
              model.config.num_layers, model.config.hidden_size, model.config.intermediate_size,
              model.config.num_heads, model.config.num_kv_heads, model.config.vocab_size, weight_bytes / 1e6);
  // The roofline: read bandwidth over a buffer as large as the weights, so cache
  // residency is the same as the forward's.
  cpu::ThreadPool pool(absl::GetFlag(FLAGS_threads));
  const double bandwidth = cpu::MeasureReadBandwidth(pool, static_cast<int64_t>(weight_bytes), 10);
  std::printf("read bandwidth over a %.1f MB buffer: %.2f GB/s (DRAM, 1 GiB buffer: %.2f GB/s)\n",
              weight_bytes / 1e6, bandwidth / 1e9, dram_bandwidth / 1e9);
  std::printf("| batch | ms/forward | tokens/s | roofline tokens/s | of roofline | DRAM roofline tokens/s |\n"
              "|---|---|---|---|---|---|\n");
  for (int batch : ParseInts(absl::GetFlag(FLAGS_batches))) {
    double best = 1e30;
    for (int rep = 0; rep < repeats; ++rep) best = std::min(best, TimeDecode(model, batch, context, steps));
    // Memory-bound bound: every forward reads all weights once plus each row's KV.
    const double bytes = weight_bytes + batch * kv_bytes_per_token * (context + steps / 2.0);
    const double roof_tps = batch * bandwidth / bytes;
    const double tps = batch / best;
    std::printf("| %d | %.3f | %.1f | %.1f | %.0f%% | %.1f |\n", batch, best * 1e3, tps, roof_tps,
                100.0 * tps / roof_tps, batch * dram_bandwidth / bytes);
  }
  std::printf("\nCost of one forward by rows of one sequence (verify step), context %d:\n", context);
  std::printf("| rows | ms/forward | T(rows)/T(1) |\n|---|---|---|\n");
  double t1 = 0;
  for (int rows : ParseInts(absl::GetFlag(FLAGS_rows))) {
    const double t = TimeRows(model, rows, context, std::max(repeats, 5));
    if (rows == 1 || t1 == 0) t1 = t;
    std::printf("| %d | %.3f | %.2f |\n", rows, t * 1e3, t / t1);
  }
}

int Run() {
  cpu::ThreadPool pool(absl::GetFlag(FLAGS_threads));
  std::printf("# crossreg-bench-decode\nCPU backend, %d threads, SIMD %s\n", pool.num_threads(),
              cpu::SimdLevelName(cpu::DetectedSimdLevel()));
  const double bw = cpu::MeasureReadBandwidth(pool);
  std::printf("Measured DRAM read bandwidth: %.2f GB/s (1 GiB buffer, best of 5)\n", bw / 1e9);
  pool.ParallelFor(1, 1, [](int64_t, int64_t) {});  // workers idle from here on
  for (const auto& path : absl::GetFlag(FLAGS_model)) {
    auto model = LoadModel(path);
    if (!model.ok()) {
      std::fprintf(stderr, "crossreg-bench-decode: %s\n", std::string(model.status().message()).c_str());
      return 2;
    }
    BenchModel(path, **model, bw);
  }
  if (absl::GetFlag(FLAGS_random100m)) {
    auto model = MakeRandomModel(Llama100MConfig(), {DType::kBF16, 1, 1.0f});
    BenchModel("random Llama ~110M, bf16 weights", *model, bw);
  }
  return 0;
}

}  // namespace
}  // namespace crossreg

int main(int argc, char** argv) {
  crossreg::tools::ParseFlags(argc, argv, "crossreg_bench_decode",
                              "AR decode tokens/s on the CPU backend against the memory-bandwidth roofline.");
  return crossreg::Run();
}
