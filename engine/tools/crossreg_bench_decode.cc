// crossreg-bench-decode: the CPU backend against this machine's measured peaks: AR
// decode against the memory-bandwidth roofline, the cost of a forward as its row count
// grows (T(rows)/T(1), every row with logits, as a verify step), and prefill against
// the measured bf16 dot-product (or f32 FMA) peak.
//   crossreg-bench-decode [--model PATH] [--random100m] [--random1b_types q4_k_m] [--batches 1,8] [--prefill 512]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/flags/flag_spelling.h"
#include "engine/cpu/bf16_panel_kernel.h"
#include "engine/cpu/compute_peak.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/linear.h"
#include "engine/cpu/large_buffer.h"
#include "engine/cpu/memory_bandwidth.h"
#include "engine/cpu/packed_weights.h"
#include "engine/cpu/paged_attention.h"
#include "engine/cpu/thread_pool.h"
#include "engine/cpu/tile_order_chooser.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/model_loader.h"
#include "engine/model/random_model.h"
#include "engine/runtime/open_engine.h"
#include "engine/quant/ggml_blocks.h"
#include "engine/sampler.h"

ABSL_FLAG(std::vector<std::string>, model, {}, "Models to benchmark (.gguf or HF directories)");
ABSL_FLAG(bool, random100m, true, "Also benchmark a random ~110M-parameter Llama (12 x 768, vocab 32000)");
ABSL_FLAG(std::vector<std::string>, random100m_types, std::vector<std::string>({"bf16"}),
          "Weight types of the random ~110M model: bf16, f32, q8_0, q4_0, q4_k_m, q5_k_m, q6_k (the quantized "
          "ones in the standard quantizer's layouts), and every tensor in one of q4_1, q5_0, q5_1, q2_k, q3_k, "
          "iq4_nl, iq4_xs");
ABSL_FLAG(std::vector<std::string>, gemm_shapes, std::vector<std::string>({"2048x768", "768x2048", "32000x768"}),
          "Weight shapes (outputs x inputs) of the --gemm table; the ~110M model's calls are 2304x768 (Q, K, V), "
          "768x768 (attention output), 4096x768 (gate and up), 768x2048 (down) and 32000x768 (output)");
ABSL_FLAG(std::vector<std::string>, gemm_rows, std::vector<std::string>({"1", "16", "32", "512"}),
          "Rows of x per --gemm call");
ABSL_FLAG(std::vector<std::string>, random1b_types, {},
          "Also benchmark a random ~1.1B-parameter Llama (TinyLlama-1.1B's shape: 22 x 2048, ffn 5632, 4 K/V heads, "
          "vocab 32000, untied output) in these weight types (those of --random100m_types): weights no CPU cache "
          "holds, so its decode figures are DRAM's on every host. Off by default (it takes 1-2 GB and a minute)");
ABSL_FLAG(std::vector<std::string>, batches, std::vector<std::string>({"1", "8"}), "Batch sizes (sequences per forward)");
ABSL_FLAG(std::vector<std::string>, rows, std::vector<std::string>({"1", "2", "4", "8", "16", "32"}),
          "Rows of one sequence per forward for the cost-curve table");
ABSL_FLAG(int, steps, 64, "Decode steps timed per measurement");
ABSL_FLAG(int, context, 64, "Prompt tokens before decoding starts");
ABSL_FLAG(bool, step_times, false,
          "Also print each decode forward's time of the first measurement per batch size (how the "
          "speed moves over the steps: caches, frequency, the host)");
ABSL_FLAG(int, threads, 0, "CPU threads; 0 = one per usable core");
ABSL_FLAG(int, repeats, 3, "Measurements per figure; the best is reported");
ABSL_FLAG(int, prefill, 512, "Prompt tokens of the prefill measurement (one forward); 0 = skip");
ABSL_FLAG(std::string, kv_dtype, "f32", "K/V cache element type: f32 or bf16");
ABSL_FLAG(bool, gemm, true, "Also time the linear kernel alone at the ~110M model's shapes");
ABSL_FLAG(bool, attention, false,
          "Also time one layer's attention alone (cpu::PagedAttention) at each model's shapes: the rows of "
          "--attention_rows after --attention_context cached positions, and a prefill of --prefill rows");
ABSL_FLAG(std::vector<std::string>, attention_rows, std::vector<std::string>({"1", "5", "8", "16"}),
          "Rows of one sequence per --attention measurement (a verify step's rows)");
ABSL_FLAG(int, attention_context, 512, "Cached positions before the first of the --attention rows");
ABSL_FLAG(std::vector<std::string>, gemm_types, std::vector<std::string>({"bf16"}),
          "Weight types of the --gemm table: bf16, f32, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, "
          "iq4_nl, iq4_xs");

namespace crossreg {
namespace {

using Clock = std::chrono::steady_clock;

// A list flag's counts, each from 1 to `max`; anything else ends the program with the
// flag's name and the item, so a typo never shortens a table silently.
std::vector<int> ParseCounts(const char* flag, const std::vector<std::string>& items, int max) {
  std::vector<int> out;
  for (const auto& s : items) {
    int v = 0;
    if (!absl::SimpleAtoi(s, &v) || v < 1 || v > max) {
      std::fprintf(stderr, "crossreg-bench-decode: --%s: '%s' is not a count from 1 to %d\n", flag, s.c_str(), max);
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

std::vector<int> BatchesFlag() { return ParseCounts("batches", absl::GetFlag(FLAGS_batches), 256); }
std::vector<int> RowsFlag() { return ParseCounts("rows", absl::GetFlag(FLAGS_rows), 1024); }
std::vector<int> AttentionRowsFlag() { return ParseCounts("attention_rows", absl::GetFlag(FLAGS_attention_rows), 1024); }
std::vector<int> GemmRowsFlag() { return ParseCounts("gemm_rows", absl::GetFlag(FLAGS_gemm_rows), 4096); }

// One CPU engine per model, its cache large enough for every measurement below
// (each frees its sequences).
std::unique_ptr<Engine> OpenBenchEngine(const std::string& name, std::unique_ptr<Model> model, int64_t positions) {
  EngineOptions o;
  o.backend = BackendChoice::kCpu;
  o.cpu_threads = absl::GetFlag(FLAGS_threads);
  o.kv_block_size = 16;
  o.kv_blocks = positions / 16 + 16;
  auto kv_dtype = ParseKvDtype(absl::GetFlag(FLAGS_kv_dtype));
  if (!kv_dtype.ok()) {
    std::fprintf(stderr, "crossreg-bench-decode: %s\n", std::string(kv_dtype.status().message()).c_str());
    std::exit(2);
  }
  o.kv_dtype = *kv_dtype;
  LoadedModel loaded;
  loaded.model_path = name;
  loaded.model = std::move(model);
  auto engine = OpenEngine(std::move(loaded), o);
  if (!engine.ok()) {
    std::fprintf(stderr, "crossreg-bench-decode: %s\n", std::string(engine.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(engine);
}

// Prefills `batch` sequences with `context` random tokens, then times `steps`
// greedy decode forwards of one row per sequence. Returns seconds per forward (the mean);
// each forward's own time goes into `step_seconds` when given.
double TimeDecode(Engine& e, int batch, int context, int steps, std::vector<double>* step_seconds = nullptr) {
  const int vocab = e.model->config.vocab_size;
  Rng rng(1);
  std::vector<SequenceId> seqs;
  std::vector<int32_t> last(static_cast<size_t>(batch));
  std::vector<float> logits;
  for (int b = 0; b < batch; ++b) {
    const SequenceId id = e.kv->CreateSequence();
    seqs.push_back(id);
    ForwardBatch fb;
    for (int p = 0; p < context; ++p) {
      fb.rows.push_back(
          {.seq = id, .position = p, .token = static_cast<int32_t>(rng.Next() % vocab), .want_logits = p == context - 1});
    }
    if (!e.backend->Forward(fb, *e.kv, logits).ok()) std::exit(1);
    last[static_cast<size_t>(b)] = Argmax(logits.data(), vocab);
  }
  ForwardBatch fb;
  const auto t0 = Clock::now();
  for (int step = 0; step < steps; ++step) {
    fb.rows.clear();
    for (int b = 0; b < batch; ++b) {
      fb.rows.push_back({.seq = seqs[b], .position = context + step, .token = last[b], .want_logits = true});
    }
    const auto step_start = Clock::now();
    if (!e.backend->Forward(fb, *e.kv, logits).ok()) std::exit(1);
    if (step_seconds != nullptr) {
      step_seconds->push_back(std::chrono::duration<double>(Clock::now() - step_start).count());
    }
    for (int b = 0; b < batch; ++b) last[b] = Argmax(logits.data() + static_cast<size_t>(b) * vocab, vocab);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count() / steps;
  for (SequenceId id : seqs) e.kv->Free(id);
  return seconds;
}

// Time of one forward carrying `rows` rows of a single sequence (a verify step, every
// row with logits) for each entry of `row_counts`: rows are appended, then rolled back
// so every measurement sees the same context. The counts take turns `repeats` times and
// each keeps its best, so load from elsewhere on the machine hits them alike. The turns
// alternate between rising and falling counts: a forward right after a much larger one
// can run slow (ForwardCostCurve::Measure), and with rising turns alone every T(1) would
// follow the widest forward and the ratios would flatter the wider ones.
std::vector<double> TimeRows(Engine& e, const std::vector<int>& row_counts, int context, int repeats) {
  const int vocab = e.model->config.vocab_size;
  const SequenceId id = e.kv->CreateSequence();
  ForwardBatch fb;
  ForwardOutput out;
  for (int p = 0; p < context; ++p) fb.rows.push_back({.seq = id, .position = p, .token = p % vocab});
  if (!e.backend->Forward(fb, *e.kv, out).ok()) std::exit(1);
  std::vector<double> best(row_counts.size(), 1e30);
  for (int rep = 0; rep < repeats; ++rep) {
    for (size_t n = 0; n < row_counts.size(); ++n) {
      const size_t i = rep % 2 == 0 ? n : row_counts.size() - 1 - n;
      fb.rows.clear();
      for (int r = 0; r < row_counts[i]; ++r) {
        fb.rows.push_back({.seq = id, .position = context + r, .token = (7 * r) % vocab, .want_logits = true});
      }
      KvTransaction transaction(*e.kv);  // rolled back: the sequence keeps `context` positions
      const auto t0 = Clock::now();
      if (!e.backend->Execute(fb, transaction, out).ok()) std::exit(1);
      best[i] = std::min(best[i], std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }
  e.kv->Free(id);
  return best;
}

// Multiply-adds of the linear layers for one token (the output layer excluded: prefill
// asks for one row of logits).
// The random model's weights for a --random100m_types name.
absl::StatusOr<RandomModelOptions> RandomModelOptionsFor(const std::string& type) {
  RandomModelOptions o{DType::kBF16, 1, 1.0f};
  const std::string t = absl::AsciiStrToLower(type);
  if (t == "bf16") return o;
  if (t == "f32") o.dtype = DType::kF32;
  else if (t == "q8_0") o.dtype = DType::kQ8_0;
  else if (t == "q4_0") o.dtype = DType::kQ4_0;
  else if (t == "q6_k") o.dtype = DType::kQ6_K;
  else if (t == "q4_1") o.dtype = DType::kQ4_1;
  else if (t == "q5_0") o.dtype = DType::kQ5_0;
  else if (t == "q5_1") o.dtype = DType::kQ5_1;
  else if (t == "q2_k") o.dtype = DType::kQ2_K;
  else if (t == "q3_k") o.dtype = DType::kQ3_K;
  else if (t == "iq4_nl") o.dtype = DType::kIQ4_NL;
  else if (t == "iq4_xs") o.dtype = DType::kIQ4_XS;
  else if (t == "q4_k_m") o.dtype = DType::kQ4_K, o.k_quant_mix = true;
  else if (t == "q5_k_m") o.dtype = DType::kQ5_K, o.k_quant_mix = true;
  else return absl::InvalidArgumentError(absl::StrCat("unknown type '", type, "'"));
  return o;
}

double LinearMacsPerToken(const ModelConfig& c) {
  const double h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), f = c.intermediate_size;
  return c.num_layers * (h * (q + 2 * kv) + q * h + 3 * h * f);
}

// One forward of `tokens` prompt rows (logits for the last only), best of `repeats`.
double TimePrefill(Engine& e, int tokens, int repeats) {
  const int vocab = e.model->config.vocab_size;
  double best = 1e30;
  for (int rep = 0; rep < repeats; ++rep) {
    const SequenceId id = e.kv->CreateSequence();
    ForwardBatch fb;
    for (int p = 0; p < tokens; ++p) {
      fb.rows.push_back({.seq = id, .position = p, .token = (p * 31 + 7) % vocab, .want_logits = p == tokens - 1});
    }
    std::vector<float> logits;
    const auto t0 = Clock::now();
    if (!e.backend->Forward(fb, *e.kv, logits).ok()) std::exit(1);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    e.kv->Free(id);
  }
  return best;
}

// One kernel of a comparison: its name and what makes the next forwards run it.
struct KernelTurn {
  const char* name;
  std::function<void()> select;
};

// The rows table and prefill once per kernel, kernels taking turns for three rounds (best
// of each), the last kernel's ratio to the first per row count.
void PrintKernelTurns(Engine& engine, const std::vector<int>& row_counts, int context, int prefill, const char* what,
                      const std::vector<KernelTurn>& turns, const char* serving) {
  const size_t n = turns.size();
  std::vector<std::vector<double>> best(n);
  std::vector<double> prefill_best(n, 1e30);
  for (int round = 0; round < 3; ++round) {
    for (size_t k = 0; k < n; ++k) {
      turns[k].select();
      const std::vector<double> t = TimeRows(engine, row_counts, context, 5);
      if (best[k].empty()) best[k].assign(t.size(), 1e30);
      for (size_t i = 0; i < t.size(); ++i) best[k][i] = std::min(best[k][i], t[i]);
      if (prefill > 0) prefill_best[k] = std::min(prefill_best[k], TimePrefill(engine, prefill, 1));
    }
  }
  std::printf("\nThe %s kernels on these forwards, taking turns (this process serves with %s):\n| rows |", what, serving);
  for (size_t k = 0; k < n; ++k) std::printf(" %s ms | T(rows)/T(1) |", turns[k].name);
  std::printf(" %s / %s |\n|---|", turns[0].name, turns[n - 1].name);
  for (size_t k = 0; k < n; ++k) std::printf("---|---|");
  std::printf("---|\n");
  for (size_t i = 0; i < row_counts.size(); ++i) {
    std::printf("| %d |", row_counts[i]);
    for (size_t k = 0; k < n; ++k) std::printf(" %.3f | %.2f |", best[k][i] * 1e3, best[k][i] / best[k][0]);
    std::printf(" %.2f |\n", best[0][i] / best[n - 1][i]);
  }
  if (prefill > 0) {
    std::printf("| prefill %d |", prefill);
    for (size_t k = 0; k < n; ++k) std::printf(" %.1f | |", prefill_best[k] * 1e3);
    std::printf(" %.2f |\n", prefill_best[0] / prefill_best[n - 1]);
  }
}

void BenchAttention(const ModelConfig& cfg, int prefill, int repeats);

// Each rate of `again` that reads higher replaces `peaks`' own.
void KeepHighestPeaks(cpu::ComputePeaks& peaks, const cpu::ComputePeaks& again) {
  peaks.f32_fma_flops = std::max(peaks.f32_fma_flops, again.f32_fma_flops);
  peaks.bf16_dot_flops = std::max(peaks.bf16_dot_flops, again.bf16_dot_flops);
  peaks.int8_dot_ops = std::max(peaks.int8_dot_ops, again.int8_dot_ops);
  peaks.int8_signed_dot_ops = std::max(peaks.int8_signed_dot_ops, again.int8_signed_dot_ops);
  peaks.amx_bf16_flops = std::max(peaks.amx_bf16_flops, again.amx_bf16_flops);
  peaks.amx_int8_ops = std::max(peaks.amx_int8_ops, again.amx_int8_ops);
}

// `peaks` holds the highest readings of every probe so far, this model's included.
void BenchModel(const std::string& name, std::unique_ptr<Model> owned, double dram_bandwidth,
                cpu::ComputePeaks& peaks, int& probes) {
  const int steps = absl::GetFlag(FLAGS_steps);
  const int context = std::min(absl::GetFlag(FLAGS_context), owned->config.max_position - steps - 1);
  const int repeats = absl::GetFlag(FLAGS_repeats);
  const std::vector<int> batches = BatchesFlag();
  const std::vector<int> row_counts = RowsFlag();
  const int max_batch = batches.empty() ? 1 : *std::max_element(batches.begin(), batches.end());
  const int max_rows = row_counts.empty() ? 1 : *std::max_element(row_counts.begin(), row_counts.end());
  const int prefill = std::min(absl::GetFlag(FLAGS_prefill), owned->config.max_position);
  std::unique_ptr<Engine> engine = OpenBenchEngine(
      name, std::move(owned),
      std::max<int64_t>(int64_t{max_batch} * (context + steps + 17) + context + max_rows + 17, prefill + 32));
  std::printf("%s\n", cpu::HugePageSummary().c_str());
  const Model& model = *engine->model;
  const double weight_bytes = static_cast<double>(engine->backend->WeightBytesPerForward());
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
  // The peaks probed again before every model, each ratio below held against the highest
  // reading so far: a probe lasts a fraction of a second, and on a shared host (one core at
  // half rate for seconds at a time) one that lands in a slow spell reads up to a third
  // low and makes every floor easy to meet, while the timings below are the best of
  // several runs, which find the fast spells.
  KeepHighestPeaks(peaks, cpu::MeasureComputePeaks(pool));
  ++probes;
  std::printf("peaks for this model's ratios (the highest of %d probes): f32 FMA %.0f GFLOP/s, int8 dot product %.0f GOP/s",
              probes, peaks.f32_fma_flops / 1e9, peaks.int8_dot_ops / 1e9);
  if (peaks.int8_signed_dot_ops < peaks.int8_dot_ops) {
    std::printf(", signed int8 step %.0f GOP/s", peaks.int8_signed_dot_ops / 1e9);
  }
  if (peaks.bf16_dot_flops > 0) std::printf(", bf16 dot product %.0f GFLOP/s", peaks.bf16_dot_flops / 1e9);
  if (peaks.amx_bf16_flops > 0) std::printf(", AMX bf16 %.0f GFLOP/s", peaks.amx_bf16_flops / 1e9);
  std::printf("\n");
  std::printf("| batch | ms/forward | tokens/s | roofline tokens/s | of roofline | DRAM roofline tokens/s |\n"
              "|---|---|---|---|---|---|\n");
  std::vector<std::pair<int, std::vector<double>>> step_times;  // --step_times: per batch size
  for (int batch : batches) {
    double best = 1e30;
    std::vector<double> step_seconds;
    for (int rep = 0; rep < repeats; ++rep) {
      const bool record = rep == 0 && absl::GetFlag(FLAGS_step_times);
      best = std::min(best, TimeDecode(*engine, batch, context, steps, record ? &step_seconds : nullptr));
    }
    if (!step_seconds.empty()) step_times.emplace_back(batch, std::move(step_seconds));
    // Memory-bound bound: every forward reads all weights once plus each row's KV.
    const double bytes = weight_bytes + batch * kv_bytes_per_token * (context + steps / 2.0);
    const double roof_tps = batch * bandwidth / bytes;
    const double tps = batch / best;
    std::printf("| %d | %.3f | %.1f | %.1f | %.0f%% | %.1f |\n", batch, best * 1e3, tps, roof_tps,
                100.0 * tps / roof_tps, batch * dram_bandwidth / bytes);
  }
  for (const auto& [batch, seconds] : step_times) {
    std::printf("decode forwards of batch %d in order (first measurement), ms:", batch);
    for (double t : seconds) std::printf(" %.2f", t * 1e3);
    std::printf("\n");
  }
  std::printf("\nCost of one forward by rows of one sequence (verify step), context %d:\n", context);
  // The floor of each ratio on this machine in this run: the rows' linear-layer math at
  // the measured peak (every row with logits) cannot take less than that, however well
  // it overlaps the weight stream; T(1) is what this run measured.
  const DType weight_dtype = model.weights.layers.front().wq.dtype;
  const cpu::ComputePeaks::Peak peak = peaks.PeakFor(weight_dtype);
  const double row_peak = peak.rate;
  const double row_flops =
      2 * (LinearMacsPerToken(model.config) + static_cast<double>(model.config.hidden_size) * model.config.vocab_size);
  // The floor of a forward: the weight stream at this run's measured bandwidth, or the
  // rows' linear math at the measured peak, whichever is longer.
  std::printf("| rows | ms/forward | T(rows)/T(1) | linear math at the measured peak, ms | lowest T(rows)/T(1) "
              "that allows | floor ms (weight stream or math) | T / floor |\n|---|---|---|---|---|---|---|\n");
  const std::vector<double> times = TimeRows(*engine, row_counts, context, std::max(repeats, 15));
  for (size_t i = 0; i < row_counts.size(); ++i) {
    const double math = row_peak > 0 ? row_counts[i] * row_flops / row_peak : 0.0;
    const double floor = std::max(weight_bytes / bandwidth, math);
    std::printf("| %d | %.3f | %.2f | %.3f | %.2f | %.3f | %.2f |\n", row_counts[i], times[i] * 1e3,
                times[i] / times[0], math * 1e3, std::max(1.0, math / times[0]), floor * 1e3, times[i] / floor);
  }
  // Signed codes where each product costs a sign step: the floor at that step's own
  // measured rate, beside the one above (which holds every format to the int8 probe).
  if (IsQuantized(weight_dtype) && quant::CodesOf(weight_dtype).signed_quants &&
      !quant::HasIntegerSubBlockScales(weight_dtype) && peaks.int8_signed_dot_ops > 0 &&
      peaks.int8_signed_dot_ops < row_peak && std::any_of(row_counts.begin(), row_counts.end(), [](int rows) { return rows > 1; })) {
    std::printf("Signed codes (%s): the kernel has no signed x signed byte multiply here, so each product also takes "
                "a sign step (%s, measured %.0f G ops/s, %.0f%% of the int8 probe). Over the floor at that rate:",
                std::string(DTypeName(weight_dtype)).c_str(), peaks.int8_signed_isa.c_str(),
                peaks.int8_signed_dot_ops / 1e9, 100.0 * peaks.int8_signed_dot_ops / row_peak);
    // Several rows only: one row's floor is its weight stream whatever the multiply.
    const char* sep = "";
    for (size_t i = 0; i < row_counts.size(); ++i) {
      if (row_counts[i] < 2) continue;
      const double signed_floor =
          std::max(weight_bytes / bandwidth, row_counts[i] * row_flops / peaks.int8_signed_dot_ops);
      std::printf("%s T(%d) / the signed step's floor %.2f (%.3f ms)", sep, row_counts[i], times[i] / signed_floor,
                  signed_floor * 1e3);
      sep = ",";
    }
    std::printf(".\n");
  }
  // The bf16 kernels (engine/cpu/bf16_panel_kernel.h: vdpbf16ps, widened, and AMX where
  // the process can use it) on the same forwards, taking turns, so their ratios hold
  // whatever else the machine does meanwhile.
  if (cpu::DetectedSimdLevel() == cpu::SimdLevel::kAvx512Bf16 && weight_dtype == DType::kBF16) {
    std::vector<KernelTurn> turns;
    for (const cpu::Bf16PanelKernel k : {cpu::Bf16PanelKernel::kDot, cpu::Bf16PanelKernel::kWide, cpu::Bf16PanelKernel::kAmx}) {
      if (k == cpu::Bf16PanelKernel::kAmx && !cpu::HasAmx()) continue;
      turns.push_back({cpu::Bf16PanelKernelName(k), [k] { cpu::OverrideBf16PanelKernelForBenchmark(k); }});
    }
    PrintKernelTurns(*engine, row_counts, context, prefill, "bf16", turns,
                     cpu::Bf16PanelKernelName(cpu::ChosenBf16PanelKernel().kernel));
    cpu::ClearBf16PanelKernelOverride();
  }
  // The two loop orders of multi-tile calls, as this run's forwards timed them.
  auto decided = cpu::TileOrderChooser::Global().Decided();
  if (!decided.empty()) {
    std::sort(decided.begin(), decided.end(), [](const auto& a, const auto& b) {
      return std::tie(a.shape.rows, a.shape.threads, a.shape.in, a.shape.panels) <
             std::tie(b.shape.rows, b.shape.threads, b.shape.in, b.shape.panels);
    });
    std::printf("\nLoop order of the linear calls with 2-4 row tiles, chosen by timing both "
                "(engine/cpu/tile_order_chooser.h; median of the trial calls):\n"
                "| rows | threads | in | outputs | K-blocked ms | whole-K ms | chosen |\n|---|---|---|---|---|---|---|\n");
    for (const auto& o : decided) {
      std::printf("| %lld | %d | %lld | %lld | %.3f | %.3f | %s |\n", static_cast<long long>(o.shape.rows),
                  o.shape.threads, static_cast<long long>(o.shape.in), static_cast<long long>(o.shape.panels * 32),
                  o.median_seconds[0] * 1e3, o.median_seconds[1] * 1e3,
                  o.chosen == cpu::TileOrder::kWholeK ? "whole-K" : "K-blocked");
    }
  }
  if (absl::GetFlag(FLAGS_attention)) BenchAttention(model.config, prefill, repeats);
  if (prefill > 0) {
    const double t = TimePrefill(*engine, prefill, std::max(repeats, 3));
    const double flops = 2 * LinearMacsPerToken(model.config) * prefill / t;
    std::printf("\nPrefill of %d tokens (one forward): %.1f ms, %.0f tokens/s; linear layers %.1f GFLOP/s = "
                "%.0f%% of the measured %s peak (%.0f GFLOP/s)\n",
                prefill, t * 1e3, prefill / t, flops / 1e9, row_peak > 0 ? 100 * flops / row_peak : 0.0,
                peak.name, row_peak / 1e9);
  }
}

// One layer's attention alone (cpu::PagedAttention over the CPU backend's block-transposed
// cache, random queries, keys and values): `rows` consecutive rows of one sequence, row r
// attending its first context + r + 1 positions (a verify step's rows after `context`
// cached ones, or with context 0 a prefill's). Seconds, best of `repeats`.
double TimeAttention(const ModelConfig& cfg, cpu::KvElement element, int rows, int context, int repeats,
                     cpu::ThreadPool& pool) {
  constexpr int kBlock = 16;
  const int positions = context + rows;
  const int blocks = (positions + kBlock - 1) / kBlock;
  const int64_t kv_elements = int64_t{blocks} * cfg.kv_dim() * kBlock;
  Rng rng(11);
  auto uniform = [&rng] { return static_cast<float>(rng.Uniform() - 0.5); };
  std::vector<float> q(static_cast<size_t>(int64_t{rows} * cfg.q_dim())), out(q.size());
  std::vector<float> k(static_cast<size_t>(kv_elements)), v(k.size());
  std::vector<uint16_t> k16, v16;
  for (auto* buf : {&q, &k, &v})
    for (auto& x : *buf) x = uniform();
  if (element == cpu::KvElement::kBf16) {
    for (size_t i = 0; i < k.size(); ++i) k16.push_back(F32ToBf16(k[i])), v16.push_back(F32ToBf16(v[i]));
  }
  // The blocks in a scrambled order, as a paged cache hands them out (b -> 7b mod blocks is
  // a permutation unless 7 divides the count).
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>((int64_t{b} * 7) % blocks);
  if (blocks % 7 == 0) std::iota(table.begin(), table.end(), 0);
  std::vector<int32_t> offset(static_cast<size_t>(rows), 0), cached(static_cast<size_t>(rows)),
      own(static_cast<size_t>(rows), 0), group_begin(static_cast<size_t>(rows), 0), group_rows(1, 0);
  for (int r = 0; r < rows; ++r) cached[static_cast<size_t>(r)] = context + r + 1;
  cpu::PagedAttentionArgs a;
  a.q = q.data();
  a.q_stride = cfg.q_dim();
  a.cache_element = element;
  a.kv_layout = cpu::KvLayout::kBlockTransposed;
  a.k_cache = element == cpu::KvElement::kBf16 ? static_cast<const void*>(k16.data()) : k.data();
  a.v_cache = element == cpu::KvElement::kBf16 ? static_cast<const void*>(v16.data()) : v.data();
  a.block_tables = table.data();
  a.table_offset = offset.data();
  a.num_cached = cached.data();
  a.num_own = own.data();
  a.group_begin = group_begin.data();
  a.group_rows = group_rows.data();
  a.rows = rows;
  a.num_heads = cfg.num_heads;
  a.num_kv_heads = cfg.num_kv_heads;
  a.head_dim = cfg.head_dim;
  a.block_size = kBlock;
  a.scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim));
  a.out = out.data();
  a.out_stride = cfg.q_dim();
  double best = 1e30;
  for (int rep = 0; rep <= repeats; ++rep) {
    const auto t0 = Clock::now();
    cpu::PagedAttention(a, &pool);
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rep > 0) best = std::min(best, t);  // the first call warms the caches
  }
  return best;
}

void BenchAttention(const ModelConfig& cfg, int prefill, int repeats) {
  cpu::ThreadPool pool(absl::GetFlag(FLAGS_threads));
  const absl::StatusOr<KvDtype> kv = ParseKvDtype(absl::GetFlag(FLAGS_kv_dtype));
  const cpu::KvElement element = kv.ok() && *kv == KvDtype::kBf16 ? cpu::KvElement::kBf16 : cpu::KvElement::kF32;
  const int context = std::max(0, absl::GetFlag(FLAGS_attention_context));
  std::printf("\nOne layer's attention alone (PagedAttention, %s, K/V %s, %d heads / %d K/V heads x %d, %d threads; "
              "best of %d):\n| rows | positions attended by the first row | ms | GFLOP/s |\n|---|---|---|---|\n",
              cpu::SimdLevelName(cpu::DetectedSimdLevel()), element == cpu::KvElement::kBf16 ? "bf16" : "f32",
              cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, pool.num_threads(), std::max(repeats, 20));
  std::vector<std::pair<int, int>> shapes;  // (rows, context)
  for (int rows : AttentionRowsFlag()) shapes.emplace_back(rows, context);
  if (prefill > 0) shapes.emplace_back(prefill, 0);
  for (const auto& [rows, ctx] : shapes) {
    const double t = TimeAttention(cfg, element, rows, ctx, std::max(repeats, 20), pool);
    double flops = 0;  // scores and weighted values: 2 x 2 x head_dim per attended position and head
    for (int r = 0; r < rows; ++r) flops += 4.0 * (ctx + r + 1) * cfg.head_dim * cfg.num_heads;
    std::printf("| %d%s | %d | %.4f | %.1f |\n", rows, ctx == 0 ? " (prefill)" : "", ctx + 1, t * 1e3, flops / t / 1e9);
  }
}

// The linear kernel alone: bf16 weights (out x in) times `rows` f32 rows, best of 5,
// as GFLOP/s and a fraction of the measured bf16 dot-product peak.
// Random weights of `type` (out, in), as a packer reads them: element types stored as
// such, block types quantized the way a GGUF writer would.
std::vector<unsigned char> RandomWeights(DType type, int64_t out, int64_t in, Rng& rng) {
  std::vector<float> w(static_cast<size_t>(out * in));
  for (auto& v : w) v = static_cast<float>(rng.Uniform() - 0.5);
  std::vector<unsigned char> bytes(DTypeBytes(type, out * in));
  if (type == DType::kF32) {
    std::memcpy(bytes.data(), w.data(), bytes.size());
  } else if (type == DType::kBF16) {
    for (size_t i = 0; i < w.size(); ++i) {
      const uint16_t b = F32ToBf16(w[i]);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    }
  } else {
    quant::Quantize(type, w.data(), bytes.data(), out * in);
  }
  return bytes;
}

absl::StatusOr<DType> GemmType(const std::string& name) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                  DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL,
                  DType::kIQ4_XS}) {
    if (absl::EqualsIgnoreCase(std::string(DTypeName(t)), name)) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("--gemm_types: unknown weight type '", name,
                                                 "'; expected bf16, f32, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, "
                                                 "q3_k, q4_k, q5_k, q6_k, iq4_nl or iq4_xs"));
}

// "OUTxIN" (e.g. 2304x768).
absl::StatusOr<std::pair<int64_t, int64_t>> ParseGemmShape(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, 'x');
  int64_t out = 0, in = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &out) || !absl::SimpleAtoi(parts[1], &in) || out <= 0 ||
      in <= 0 || out > (int64_t{1} << 20) || in > (int64_t{1} << 16)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gemm_shapes: '", text, "' is not OUTxIN with 1-1048576 outputs and 1-65536 inputs"));
  }
  return std::make_pair(out, in);
}

// The --gemm table's types and shapes, each type against each shape; anything wrong ends
// the program naming the flag (Run checks them before the probes).
struct GemmCalls {
  std::vector<DType> types;
  std::vector<std::pair<int64_t, int64_t>> shapes;
};

GemmCalls GemmCallsFlag() {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "crossreg-bench-decode: %s\n", std::string(s.message()).c_str());
    std::exit(2);
  };
  GemmCalls calls;
  for (const std::string& name : absl::GetFlag(FLAGS_gemm_types)) {
    const absl::StatusOr<DType> type = GemmType(name);
    if (!type.ok()) fail(type.status());
    calls.types.push_back(*type);
  }
  for (const std::string& text : absl::GetFlag(FLAGS_gemm_shapes)) {
    const absl::StatusOr<std::pair<int64_t, int64_t>> shape = ParseGemmShape(text);
    if (!shape.ok()) fail(shape.status());
    for (DType type : calls.types) {
      if (shape->second % DTypeBlockElements(type) != 0) {
        fail(absl::InvalidArgumentError(absl::StrCat("--gemm_shapes: ", text, ": ", std::string(DTypeName(type)),
                                                     " weights take inputs in blocks of ", DTypeBlockElements(type))));
      }
    }
    calls.shapes.push_back(*shape);
  }
  return calls;
}

int BenchGemm(cpu::ThreadPool& pool, const cpu::ComputePeaks& peaks) {
  const auto [types, shapes] = GemmCallsFlag();
  const std::vector<int> row_counts = GemmRowsFlag();
  const int repeats = absl::GetFlag(FLAGS_repeats);
  for (const DType type : types) {
    std::printf("\nLinear kernel alone (%s weights, %s):\n", std::string(DTypeName(type)).c_str(),
                cpu::SimdLevelName(cpu::DetectedSimdLevel()));
    const cpu::ComputePeaks::Peak peak = peaks.PeakFor(type);
    std::printf("| out x in | rows | ms | GOP/s | of the %s peak | weight GB/s |\n|---|---|---|---|---|---|\n", peak.name);
    Rng rng(7);
    for (const auto& [out, in] : shapes) {
      const std::vector<unsigned char> w = RandomWeights(type, out, in, rng);
      const cpu::PackedWeights packed = cpu::PackedWeights::Pack(TensorRef{type, {out, in}, w.data()}, &pool);
      for (int rows : row_counts) {
        std::vector<float> x(static_cast<size_t>(rows * in)), y(static_cast<size_t>(rows * out));
        for (auto& v : x) v = static_cast<float>(rng.Uniform() - 0.5);
        double best = 1e30;
        // The first call is not timed: it pays the first touches and the tile order's trials.
        for (int rep = 0; rep <= std::max(5, repeats); ++rep) {
          const auto t0 = Clock::now();
          cpu::Linear(packed, x.data(), rows, y.data(), pool);
          const double t = std::chrono::duration<double>(Clock::now() - t0).count();
          if (rep > 0) best = std::min(best, t);
        }
        const double ops = 2.0 * out * in * rows / best;
        std::printf("| %lld x %lld | %d | %.3f | %.1f | %.0f%% | %.1f |\n", static_cast<long long>(out),
                    static_cast<long long>(in), rows, best * 1e3, ops / 1e9, peak.rate > 0 ? 100 * ops / peak.rate : 0.0,
                    static_cast<double>(packed.bytes()) / best / 1e9);
      }
    }
  }
  return 0;
}

int Run() {
  // The list flags checked before the probes' seconds (each is read again where used).
  BatchesFlag();
  RowsFlag();
  AttentionRowsFlag();
  GemmRowsFlag();
  if (absl::GetFlag(FLAGS_gemm)) GemmCallsFlag();
  cpu::ThreadPool pool(absl::GetFlag(FLAGS_threads));
  std::printf("# crossreg-bench-decode\nCPU backend on %s, %d threads, SIMD %s (CPU: %s)\n",
              cpu::CpuModelName().c_str(), pool.num_threads(), cpu::SimdLevelName(cpu::DetectedSimdLevel()),
              cpu::CpuIsaSummary().c_str());
  if (cpu::DetectedSimdLevel() >= cpu::SimdLevel::kAvx512) {
    std::printf("bf16 weights: %s\n", cpu::Bf16PanelKernelSummary().c_str());
  }
  std::printf("quantized weights: %s\n", cpu::QuantKernelName(cpu::DetectedSimdLevel()));
  const double bw = cpu::MeasureReadBandwidth(pool);
  std::printf("Measured DRAM read bandwidth: %.2f GB/s (1 GiB buffer, best of 5)\n", bw / 1e9);
  cpu::ComputePeaks peaks = cpu::MeasureComputePeaks(pool);
  int probes = 1;
  std::printf("Measured peaks on %d threads: f32 FMA %.0f GFLOP/s (%s), bf16 dot product %s, int8 dot product "
              "%.0f GOP/s (%s)\n",
              pool.num_threads(), peaks.f32_fma_flops / 1e9, peaks.f32_isa.c_str(),
              peaks.bf16_dot_flops > 0 ? (std::to_string(static_cast<int>(peaks.bf16_dot_flops / 1e9)) + " GFLOP/s").c_str()
                                       : "none (no AVX512_BF16: bf16 weights run on the f32 FMA peak)",
              peaks.int8_dot_ops / 1e9, peaks.int8_isa.c_str());
  if (peaks.int8_signed_dot_ops < peaks.int8_dot_ops) {
    std::printf("Measured signed int8 step (Q8_0, IQ4_NL, IQ4_XS codes) on %d threads: %.0f GOP/s (%s)\n",
                pool.num_threads(), peaks.int8_signed_dot_ops / 1e9, peaks.int8_signed_isa.c_str());
  }
  if (peaks.amx_bf16_flops > 0) {
    std::printf("Measured AMX peaks on %d threads: tdpbf16ps %.0f GFLOP/s, tdpbusd %.0f GOP/s\n", pool.num_threads(),
                peaks.amx_bf16_flops / 1e9, peaks.amx_int8_ops / 1e9);
  }
  if (absl::GetFlag(FLAGS_gemm)) {
    if (const int rc = BenchGemm(pool, peaks); rc != 0) return rc;
  }
  pool.ParallelFor(1, 1, [](int64_t, int64_t) {});  // workers idle from here on
  for (const auto& path : absl::GetFlag(FLAGS_model)) {
    auto model = LoadModel(path);
    if (!model.ok()) {
      std::fprintf(stderr, "crossreg-bench-decode: %s\n", std::string(model.status().message()).c_str());
      return 2;
    }
    BenchModel(path, *std::move(model), bw, peaks, probes);
  }
  struct RandomShape {
    const char* name;
    const char* flag;
    std::vector<std::string> types;
    ModelConfig config;
  };
  std::vector<RandomShape> shapes;
  if (absl::GetFlag(FLAGS_random100m)) {
    shapes.push_back({"~110M", "--random100m_types", absl::GetFlag(FLAGS_random100m_types), Llama100MConfig()});
  }
  shapes.push_back({"~1.1B", "--random1b_types", absl::GetFlag(FLAGS_random1b_types), Llama1BConfig()});
  for (const RandomShape& shape : shapes) {
    for (const std::string& type : shape.types) {
      auto options = RandomModelOptionsFor(type);
      if (!options.ok()) {
        std::fprintf(stderr, "crossreg-bench-decode: %s: %s\n", shape.flag, std::string(options.status().message()).c_str());
        return 2;
      }
      BenchModel(absl::StrCat("random Llama ", shape.name, ", ",
                              type == "bf16" || type == "f32" ? type : absl::AsciiStrToUpper(type), " weights"),
                 MakeRandomModel(shape.config, *options), bw, peaks, probes);
    }
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
