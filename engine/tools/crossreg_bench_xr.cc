// crossreg-bench-xr: Cross-Regression against AR on the CPU backend: per decoding
// mode tokens/s and tokens per forward, and the cost of the shared draft/verify
// forward T(1+m+γ rows)/T(1 row) that decides whether speculation pays here. With
// --temperatures, sampled decoding too: each exact rule for drafting and verifying
// (seed-exact with coupled or argmax drafts, speculative sampling) against AR.
//   crossreg-bench-xr --model stories260K.gguf [--adapter DIR] [--random100m]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/flags/flag_spelling.h"
#include "engine/cpu/bf16_panel_kernel.h"
#include "engine/cpu/cpu_features.h"
#include "scheduler/generate.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/model/random_model.h"
#include "engine/runtime/open_engine.h"

ABSL_FLAG(std::vector<std::string>, model, {}, "Models (.gguf or HF directories)");
ABSL_FLAG(std::string, adapter, "", "PEFT adapter for the models (default: a random rank-32 adapter)");
ABSL_FLAG(bool, random100m, true, "Also a random ~110M bf16 Llama with a random adapter");
ABSL_FLAG(std::vector<std::string>, gammas, std::vector<std::string>({"2", "4", "8", "16"}), "Draft lengths");
ABSL_FLAG(int, max_new_tokens, 128, "Tokens generated per prompt");
ABSL_FLAG(int, threads, 0, "CPU threads; 0 = one per usable core");
ABSL_FLAG(bool, adaptive_alone, false,
          "Also run the adaptive rows with every request learning alone (no acceptance memory or cost "
          "calibration shared across the engine's requests)");
// Five, not three: the adaptive rows of models whose drafts do not pay run AR forwards,
// and on a shared 2-core host the best of three (or five) runs puts them anywhere between
// 0.94x and 1.01x AR, where nine runs of the same binary read 1.00x (--repeats). More
// runs narrow that noise; they do not remove it.
// A policy comparison that must not move with the machine's memory speed: the adaptive
// rows decide on this curve (the tokens/s are still measured). Whether a draft pays
// depends on the curve's shape, which moves with the memory: a fast-memory host's curve
// (T(1) low against T(16), e.g. --cost_curve=1:3.92,16:12.46, the one docs/benchmarks.md,
// "Zen 4: Cross-Regression per model", uses) asks a
// higher acceptance of the ~110M model's drafts than a slow-memory host's does.
ABSL_FLAG(std::vector<std::string>, cost_curve, {},
          "Fixed cost curve for the adaptive rows, ROWS:MS pairs (e.g. 1:3.92,16:12.46), in place of the one "
          "measured at start-up; linear between points");
ABSL_FLAG(std::vector<std::string>, modes, std::vector<std::string>({"lossless", "ngram", "lossy"}),
          "Speculative modes to run (AR always runs)");
ABSL_FLAG(std::vector<std::string>, layouts, std::vector<std::string>({"chain", "blocks"}),
          "Draft layouts of the lossless rows: chain (ALGORITHM.md's), forked (forked refill, fork_outcomes 1) and "
          "blocks (outcome blocks for n = 0 and n = m; docs/algorithm.md)");
ABSL_FLAG(bool, greedy, true, "Run the greedy decoding table");
ABSL_FLAG(std::vector<std::string>, temperatures, {},
          "Sampled decoding tables at these temperatures: AR, n-gram and lossless under each of --rules, with "
          "acceptance; the same seeds in every row");
ABSL_FLAG(std::vector<std::string>, rules,
          std::vector<std::string>({"seed_exact", "seed_exact_argmax", "speculative_sampling"}),
          "Sampled tables: how lossless drafts are drawn and verified (decoding.sampled_verification)");
ABSL_FLAG(double, top_p, 1.0, "Sampled tables: top-p");
ABSL_FLAG(double, repetition_penalty, 1.0, "Sampled tables: repetition penalty");
ABSL_FLAG(int, repeats, 5, "Runs of every decoding configuration (taking turns, every other round in reverse order); the best tokens/s is reported");

namespace crossreg {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int> Gammas() {
  std::vector<int> out;
  for (const auto& s : absl::GetFlag(FLAGS_gammas)) {
    int g;
    if (absl::SimpleAtoi(s, &g) && g >= 1 && g <= kMaxGamma) out.push_back(g);
  }
  return out;
}

// --cost_curve as points, or nullopt when not given; exits on a malformed pair.
std::optional<ForwardCostCurve> FixedCostCurve() {
  const auto pairs = absl::GetFlag(FLAGS_cost_curve);
  if (pairs.empty()) return std::nullopt;
  ForwardCostCurve::Points points;
  for (const std::string& pair : pairs) {
    const std::vector<std::string> parts = absl::StrSplit(pair, ':');
    int rows = 0;
    double ms = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &rows) || !absl::SimpleAtod(parts[1], &ms)) {
      std::fprintf(stderr, "crossreg-bench-xr: --cost_curve: '%s' is not ROWS:MS (e.g. 16:12.46)\n", pair.c_str());
      std::exit(2);
    }
    points.push_back({rows, ms * 1e-3});
  }
  auto curve = ForwardCostCurve::FromPoints(points);
  if (!curve.ok()) {
    std::fprintf(stderr, "crossreg-bench-xr: --cost_curve: %s\n", std::string(curve.status().message()).c_str());
    std::exit(2);
  }
  return *curve;
}

bool LayoutWanted(const std::string& layout) {
  for (const std::string& name : absl::GetFlag(FLAGS_layouts)) {
    if (name == layout) return true;
  }
  return false;
}

bool ModeWanted(DecodingMode mode) {
  for (const std::string& name : absl::GetFlag(FLAGS_rules)) {
    if (!ParseSampledVerification(name).ok()) {
      std::fprintf(stderr, "crossreg-bench-xr: --rules: unknown rule '%s' (seed_exact, seed_exact_argmax, "
                   "speculative_sampling)\n", name.c_str());
      return 2;
    }
  }
  for (const std::string& name : absl::GetFlag(FLAGS_modes)) {
    if (name == DecodingModeName(mode)) return true;
  }
  return false;
}

std::unique_ptr<Engine> MakeEngine(LoadedModel loaded, int tokens) {
  EngineOptions o;
  o.backend = BackendChoice::kCpu;
  o.cpu_threads = absl::GetFlag(FLAGS_threads);
  o.kv_block_size = 16;
  o.kv_blocks = tokens / 16 + 8;
  // The cost curve behind --adaptive_gamma rows, up to the widest forward they may run.
  DecodingConfig widest;
  widest.mode = DecodingMode::kLossless;
  for (int g : Gammas()) widest.gamma = std::max(widest.gamma, g);
  DecodingConfig forked = widest, blocks = widest;
  forked.fork_outcomes = blocks.fork_outcomes = 1;
  blocks.draft_layout = DraftLayout::kBlocks;
  o.cost_curve_rows = std::max({MaxDecodeRows(widest), MaxDecodeRows(forked), MaxDecodeRows(blocks)});
  auto engine = OpenEngine(std::move(loaded), o);
  if (!engine.ok()) {
    std::fprintf(stderr, "crossreg-bench-xr: %s\n", std::string(engine.status().message()).c_str());
    std::exit(1);
  }
  if (auto fixed = FixedCostCurve()) (*engine)->cost_curve = *fixed;
  return *std::move(engine);
}

// Best-of-5 time of one forward with `control` control rows and `predictive`
// predictive rows of one sequence at context `context`, rolled back after each.
double TimeSharedForward(Engine& e, int context, int control, int predictive) {
  const int V = e.model->config.vocab_size;
  const SequenceId seq = e.kv->CreateSequence();
  ForwardBatch b;
  ForwardOutput out;
  for (int p = 0; p < context; ++p) b.rows.push_back({.seq = seq, .position = p, .token = (p * 13 + 1) % V});
  if (!e.backend->Forward(b, *e.kv, out).ok()) std::exit(1);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    b.rows.clear();
    for (int k = 0; k < control; ++k) {
      b.rows.push_back({.seq = seq, .position = context + k, .token = (k * 7 + 3) % V, .want_logits = true});
    }
    for (int k = 0; k < predictive; ++k) {
      b.rows.push_back(
          {.seq = seq, .position = context - 1 + k, .token = (k * 5 + 2) % V, .want_logits = true, .predictive = true});
    }
    KvTransaction transaction(*e.kv);  // rolled back: the sequence keeps `context` positions
    const auto t0 = Clock::now();
    if (!e.backend->Execute(b, transaction, out).ok()) std::exit(1);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  e.kv->Free(seq);
  return best;
}

struct ModeResult {
  double tokens_per_s = 0;
  double tpf = 0;
  int64_t tokens = 0, forwards = 0, drafted = 0, accepted = 0;
  std::vector<std::vector<int32_t>> texts;  // each prompt's ids
};

// `sampling` and `adjust` apply to every prompt; prompt i samples with seed
// sampling.seed + i.
ModeResult RunMode(Engine& e, const std::vector<std::vector<int32_t>>& prompts, DecodingConfig decoding, bool alone,
                   ForwardCostCalibration& calibration, const SamplingParams& sampling = {},
                   const LogitAdjustments& adjust = {}) {
  int64_t tokens = 0, forwards = 0, drafted = 0, accepted = 0;
  double seconds = 0;
  ModeResult result;
  DecodingEnvironment env = e.Environment();
  // The engine's memory persists across rows and repeats, as a server's does across
  // requests: every speculative row records there, adaptive rows start from it.
  if (alone) env.acceptance_memory = nullptr;
  for (const auto& prompt : prompts) {
    GenerationRequest req;
    req.prompt_ids = prompt;
    req.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
    req.stop_at_eos = false;
    req.decoding = decoding;
    req.sampling = sampling;
    req.sampling.seed = sampling.seed + result.texts.size();
    req.adjustments = adjust;
    GenerateOptions options;
    if (!alone) options.calibration = &calibration;
    auto r = Generate(*e.backend, *e.kv, req, env, nullptr, options);
    if (!r.ok()) {
      std::fprintf(stderr, "crossreg-bench-xr: %s\n", std::string(r.status().message()).c_str());
      std::exit(1);
    }
    tokens += r->stats.committed;
    forwards += r->stats.forwards;
    drafted += r->stats.drafted;
    accepted += r->stats.accepted;
    seconds += r->decode_seconds;
    result.texts.push_back(r->ids);
  }
  result.tokens_per_s = tokens / seconds;
  result.tpf = static_cast<double>(tokens) / forwards;
  result.tokens = tokens;
  result.forwards = forwards;
  result.drafted = drafted;
  result.accepted = accepted;
  return result;
}

// Sampled decoding at temperature `t`: AR, n-gram and each lossless layout under each
// rule, at each γ, taking turns as the greedy table's rows do. Every row samples with
// the same seeds (a round's own), so the seed-exact rows must write AR's texts: the
// table says whether they did. Tokens/s is the best round's; tokens per forward and
// acceptance count every round (each round samples other texts).
void BenchSampled(Engine& e, const std::vector<std::vector<int32_t>>& prompts, float t) {
  SamplingParams sampling;
  sampling.temperature = t;
  sampling.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  LogitAdjustments adjust;
  adjust.repetition_penalty = static_cast<float>(absl::GetFlag(FLAGS_repetition_penalty));
  struct Row {
    std::string rule;
    std::string name;
    int gamma = 0;
    DecodingConfig decoding;
    ModeResult best;
    ModeResult all;         // counts over every round
    bool same_text = true;  // every round's texts equal AR's
  };
  std::vector<Row> table;
  table.push_back({"-", "ar", 0, DecodingConfig{}, {}, {}});
  for (int g : Gammas()) {
    if (ModeWanted(DecodingMode::kNgram)) {
      DecodingConfig d;
      d.mode = DecodingMode::kNgram;
      d.gamma = g;
      table.push_back({"seed_exact", "ngram", g, d, {}, {}});
    }
    if (!ModeWanted(DecodingMode::kLossless)) continue;
    for (const std::string& rule_name : absl::GetFlag(FLAGS_rules)) {
      for (const char* layout : {"chain", "forked", "blocks"}) {
        if (!LayoutWanted(layout)) continue;
        DecodingConfig d;
        d.mode = DecodingMode::kLossless;
        d.gamma = g;
        d.sampled_verification = *ParseSampledVerification(rule_name);
        if (std::string(layout) != "chain") d.fork_outcomes = 1;
        if (std::string(layout) == "blocks") d.draft_layout = DraftLayout::kBlocks;
        table.push_back({rule_name, absl::StrCat("lossless, ", layout), g, d, {}, {}});
      }
    }
  }
  ForwardCostCalibration calibration;
  for (int rep = 0; rep < absl::GetFlag(FLAGS_repeats); ++rep) {
    sampling.seed = 1000 * static_cast<uint64_t>(rep + 1);
    std::vector<ModeResult> round(table.size());
    for (size_t i = 0; i < table.size(); ++i) {
      const size_t k = rep % 2 == 0 ? i : table.size() - 1 - i;
      round[k] = RunMode(e, prompts, table[k].decoding, false, calibration, sampling, adjust);
    }
    for (size_t k = 0; k < table.size(); ++k) {
      Row& row = table[k];
      row.same_text = row.same_text && round[k].texts == round.front().texts;
      if (round[k].tokens_per_s > row.best.tokens_per_s) row.best = round[k];
      row.all.tokens += round[k].tokens;
      row.all.forwards += round[k].forwards;
      row.all.drafted += round[k].drafted;
      row.all.accepted += round[k].accepted;
    }
  }
  std::printf("\nSampled decoding at T %.2f, top-p %.2f, repetition penalty %.2f, %zu prompts x %d new tokens, "
              "tokens/s the best of %d rounds, the rest over all of them (seeds 1000r + prompt):\n",
              t, sampling.top_p, adjust.repetition_penalty, prompts.size(), absl::GetFlag(FLAGS_max_new_tokens),
              absl::GetFlag(FLAGS_repeats));
  std::printf("| T | rule | mode | γ | tokens/s | tokens/forward | drafts accepted | speedup vs AR | AR's text |\n"
              "|---|---|---|---|---|---|---|---|---|\n");
  const double ar = table.front().best.tokens_per_s;
  for (const Row& row : table) {
    const double tpf = static_cast<double>(row.all.tokens) / std::max<int64_t>(1, row.all.forwards);
    const std::string accepted =
        row.all.drafted > 0 ? absl::StrFormat("%.1f%%", 100.0 * row.all.accepted / row.all.drafted) : "-";
    std::printf("| %.2f | %s | %s | %s | %.1f | %.2f | %s | %.2f | %s |\n", t, row.rule.c_str(), row.name.c_str(),
                row.gamma > 0 ? std::to_string(row.gamma).c_str() : "-", row.best.tokens_per_s, tpf, accepted.c_str(),
                row.best.tokens_per_s / ar, row.same_text ? "yes" : "no");
  }
}

void Bench(const std::string& name, LoadedModel loaded, const std::vector<std::vector<int32_t>>& prompts) {
  const int max_new = absl::GetFlag(FLAGS_max_new_tokens);
  std::unique_ptr<Engine> engine = MakeEngine(std::move(loaded), 4 * (max_new + 256));
  Engine& e = *engine;
  if (e.adapter != nullptr) {
    std::printf("\n## %s (adapter: %s, rank %d)\n", name.c_str(), e.adapter->source.c_str(), e.adapter->max_rank);
  } else {
    std::printf("\n## %s (no adapter: the model drafts for itself)\n", name.c_str());
  }
  for (const std::string& text : absl::GetFlag(FLAGS_temperatures)) {
    float t = 0;
    if (!absl::SimpleAtof(text, &t) || !(t > 0)) {
      std::fprintf(stderr, "crossreg-bench-xr: --temperatures: '%s' is not a temperature > 0\n", text.c_str());
      std::exit(2);
    }
    BenchSampled(e, prompts, t);
  }
  if (!absl::GetFlag(FLAGS_greedy)) return;
  const int context = 64;
  const double t1 = TimeSharedForward(e, context, 1, 0);
  std::printf("\nShared forward cost at context %d (full buffer m = γ−1: γ control + γ predictive rows):\n", context);
  std::printf("| γ | rows | ms/forward | T(rows)/T(1) |\n|---|---|---|---|\n| - | 1 | %.3f | 1.00 |\n", t1 * 1e3);
  for (int g : Gammas()) {
    const double t = TimeSharedForward(e, context, g, g);
    std::printf("| %d | %d | %.3f | %.2f |\n", g, 2 * g, t * 1e3, t / t1);
  }
  std::printf("\nDecoding, %zu prompts x %d new tokens, greedy (adaptive rows: γ' per forward from the "
              "%s cost curve %s; they start from the engine's acceptance memory, \"alone\" rows without it):\n",
              prompts.size(), max_new, absl::GetFlag(FLAGS_cost_curve).empty() ? "measured" : "fixed (--cost_curve)",
              e.CostCurveDescription().c_str());
  std::printf("| mode | γ | tokens/s | tokens/forward | speedup vs AR |\n|---|---|---|---|---|\n");
  // Every configuration, AR first; they take turns `repeats` times and keep their best
  // tokens/s, so load from elsewhere on the machine hits them alike.
  struct Row {
    std::string name;
    int gamma = 0;
    DecodingConfig decoding;
    ModeResult best;
    bool alone = false;  // adaptive: without the engine's acceptance memory
  };
  std::vector<Row> table;
  table.push_back({"ar", 0, DecodingConfig{}, {}});
  for (int g : Gammas()) {
    for (bool adaptive : {false, true}) {
      for (DecodingMode mode : {DecodingMode::kLossless, DecodingMode::kNgram, DecodingMode::kLossy}) {
        if (!ModeWanted(mode)) continue;
        DecodingConfig d;
        d.mode = mode;
        d.gamma = g;
        d.adaptive_gamma = adaptive;
        if (mode == DecodingMode::kLossy) {
          d.beta = 0.5f;
          d.tau = -2.0f;
        }
        const std::string name = std::string(DecodingModeName(mode)) +
                                 (mode == DecodingMode::kLossy ? " (β 0.5, τ −2)" : "") + (adaptive ? ", adaptive" : "");
        if (mode != DecodingMode::kLossless || LayoutWanted("chain")) {
          table.push_back({name, g, d, {}});
          if (adaptive && absl::GetFlag(FLAGS_adaptive_alone)) table.push_back({name + ", alone", g, d, {}, true});
        }
        if (mode != DecodingMode::kLossless) continue;
        // The anchored layouts: drafts for the outcomes n = 0 and n = m come from rows
        // placed after the last accepted token (rows: see MaxDecodeRows).
        for (const char* layout : {"forked", "blocks"}) {
          if (!LayoutWanted(layout)) continue;
          DecodingConfig anchored = d;
          anchored.fork_outcomes = 1;
          if (std::string(layout) == "blocks") anchored.draft_layout = DraftLayout::kBlocks;
          table.push_back({absl::StrCat("lossless, ", layout, adaptive ? ", adaptive" : ""), g, anchored, {}});
        }
      }
    }
  }
  // Like the acceptance memory, what the forwards cost is learnt across rows and
  // repeats ("alone" rows learn it per prompt).
  ForwardCostCalibration calibration;
  // Every other round runs the table backwards: the machine's speed drifts over a round
  // (down by 5-10% over the five rounds on a shared 2-core host, AR first each time), so a
  // fixed order favoured the rows that run early, AR among them, and read a few percent
  // off the rows at the end: the adaptive ones.
  for (int rep = 0; rep < absl::GetFlag(FLAGS_repeats); ++rep) {
    for (size_t i = 0; i < table.size(); ++i) {
      Row& row = table[rep % 2 == 0 ? i : table.size() - 1 - i];
      const ModeResult r = RunMode(e, prompts, row.decoding, row.alone, calibration);
      if (r.tokens_per_s > row.best.tokens_per_s) row.best = r;
    }
  }
  const double ar = table.front().best.tokens_per_s;
  for (const Row& row : table) {
    std::printf("| %s | %s | %.1f | %.2f | %.2f |\n", row.name.c_str(),
                row.gamma > 0 ? std::to_string(row.gamma).c_str() : "-", row.best.tokens_per_s, row.best.tpf,
                row.best.tokens_per_s / ar);
  }
}

int Run() {
  FixedCostCurve();  // a malformed --cost_curve fails before any model loads
  for (const std::string& name : absl::GetFlag(FLAGS_layouts)) {
    if (name != "chain" && name != "forked" && name != "blocks") {
      std::fprintf(stderr, "crossreg-bench-xr: --layouts: unknown layout '%s' (chain, forked, blocks)\n", name.c_str());
      return 2;
    }
  }
  for (const std::string& name : absl::GetFlag(FLAGS_rules)) {
    if (!ParseSampledVerification(name).ok()) {
      std::fprintf(stderr, "crossreg-bench-xr: --rules: unknown rule '%s' (seed_exact, seed_exact_argmax, "
                   "speculative_sampling)\n", name.c_str());
      return 2;
    }
  }
  for (const std::string& name : absl::GetFlag(FLAGS_modes)) {
    if (name != "lossless" && name != "ngram" && name != "lossy") {
      std::fprintf(stderr, "crossreg-bench-xr: --modes: unknown mode '%s' (lossless, ngram, lossy)\n", name.c_str());
      return 2;
    }
  }
  std::printf("# crossreg-bench-xr\nCPU backend on %s, SIMD %s (CPU: %s)\n", cpu::CpuModelName().c_str(),
              cpu::SimdLevelName(cpu::DetectedSimdLevel()), cpu::CpuIsaSummary().c_str());
  if (cpu::DetectedSimdLevel() >= cpu::SimdLevel::kAvx512) {
    std::printf("bf16 weights: %s\n", cpu::Bf16PanelKernelSummary().c_str());
  }
  for (const auto& path : absl::GetFlag(FLAGS_model)) {
    EngineOptions options;
    options.model_path = path;
    options.adapter_path = absl::GetFlag(FLAGS_adapter);
    auto loaded = LoadEngineModel(options);
    if (!loaded.ok()) {
      std::fprintf(stderr, "crossreg-bench-xr: %s\n", std::string(loaded.status().message()).c_str());
      return 2;
    }
    // Neither --adapter nor one bundled with the model: a random one, unless the model
    // drafts for itself (its predictive rows are its own, as a server runs them).
    if (loaded->adapter == nullptr && !loaded->model->config.self_drafting()) {
      RandomLoraOptions lo;
      lo.rank = 32;
      lo.alpha = 32;
      lo.magnitude = 0.1f;
      lo.placeholder_token_id = loaded->model->config.vocab_size - 1;
      loaded->adapter = MakeRandomLoraAdapter(loaded->model->config, lo);
      loaded->adapter->source = "random";
    }
    std::vector<std::vector<int32_t>> prompts;
    for (const char* text : {"Once upon a time", "The little dog", "def fibonacci(n):\n", "import os\nimport sys\n"}) {
      prompts.push_back(loaded->model->tokenizer->Encode(text, true));
    }
    Bench(path, *std::move(loaded), prompts);
  }
  if (absl::GetFlag(FLAGS_random100m)) {
    auto model = MakeRandomModel(Llama100MConfig(), {DType::kBF16, 1, 1.0f});
    RandomLoraOptions lo;
    lo.rank = 32;
    lo.alpha = 32;
    lo.magnitude = 0.1f;
    auto adapter = MakeRandomLoraAdapter(model->config, lo);
    adapter->source = "random";
    std::vector<std::vector<int32_t>> prompts = {{1, 100, 200, 300, 400, 500, 600, 700}};
    LoadedModel loaded;
    loaded.model = std::move(model);
    loaded.adapter = std::move(adapter);
    Bench("random Llama ~110M, bf16 weights", std::move(loaded), prompts);
  }
  return 0;
}

}  // namespace
}  // namespace crossreg

int main(int argc, char** argv) {
  crossreg::tools::ParseFlags(argc, argv, "crossreg_bench_xr",
                              "Cross-Regression vs AR on the CPU backend: tokens/s, tokens per forward, forward cost by rows.");
  return crossreg::Run();
}
