// crossreg-bench-grammar: what structured output costs and gains on the CPU.
//  1. Token-mask cost per generated token, at the served vocabulary and at a 128k one
//     (the model's tokens plus concatenations of pairs of them, the shape of a large
//     byte-level BPE vocabulary), for each JSON schema: greedy requests (the masked
//     argmax: a few candidate tokens checked, a whole mask only when none is allowed)
//     and sampled ones (the whole mask of every state, cached), as a share of a decode
//     forward of the model.
//  2. Tokens/s of JSON-schema requests in AR and the speculative modes (greedy).
//   crossreg-bench-grammar [--model DIR] [--schemas tests/testdata/json_schemas]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "common/flags/flag_spelling.h"
#include "engine/cpu/cpu_features.h"
#include "scheduler/generate.h"
#include "engine/grammar/grammar_compiler.h"
#include "engine/runtime/open_engine.h"

ABSL_FLAG(std::string, model, "", "Model (.gguf or HF directory); empty: the embedded default model");
ABSL_FLAG(std::string, schemas, "tests/testdata/json_schemas", "Directory of JSON Schema files (*.json)");
ABSL_FLAG(int, max_new_tokens, 256, "Tokens generated per request at most");
ABSL_FLAG(int, walk_tokens, 200, "Tokens per schema in the mask-cost walk");
ABSL_FLAG(int, rounds, 3, "Rounds of the JSON-schema requests (every mode in turn); the fastest of each counts");
ABSL_FLAG(int, walk_repeats, 3,
          "Times each mask-cost walk runs (the same tokens, a fresh cache each time); the fastest counts, "
          "since a shared host only ever adds time");
ABSL_FLAG(int, large_vocab, 128000, "Size of the large vocabulary of the mask-cost measurement; 0: skip it");
ABSL_FLAG(int, threads, 0, "CPU threads; 0 = one per usable core");
ABSL_FLAG(std::vector<std::string>, modes, std::vector<std::string>({"ngram", "lossless"}),
          "Speculative modes to run (AR always runs)");

namespace crossreg {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "crossreg-bench-grammar: %s\n", what.c_str());
  std::exit(1);
}

struct Schema {
  std::string name, text;
};

std::vector<Schema> LoadSchemas() {
  std::vector<Schema> out;
  const std::string dir = absl::GetFlag(FLAGS_schemas);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    out.push_back({entry.path().stem().string(), text.str()});
  }
  if (ec || out.empty()) Die("--schemas " + dir + ": no *.json files");
  std::sort(out.begin(), out.end(), [](const Schema& a, const Schema& b) { return a.name < b.name; });
  return out;
}

// The model's tokens, then concatenations of random pairs of them until `size`.
std::shared_ptr<const grammar::GrammarVocabulary> LargeVocabulary(const grammar::GrammarVocabulary& base, int size) {
  std::vector<std::string> tokens;
  std::set<std::string> seen;
  for (int32_t id = 0; id < base.size(); ++id) {
    tokens.push_back(base.bytes(id));
    seen.insert(base.bytes(id));
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> pick(0, base.size() - 1);
  while (static_cast<int>(tokens.size()) < size) {
    const std::string t = base.bytes(pick(rng)) + base.bytes(pick(rng));
    if (t.size() > 24 || !seen.insert(t).second) continue;
    tokens.push_back(t);
  }
  return std::make_shared<const grammar::GrammarVocabulary>(std::move(tokens), base.eos_ids());
}

struct MaskCost {
  double greedy_us = 0, sampled_us = 0;  // per token, net of the argmax an unconstrained request pays
  double argmax_us = 0;                  // that argmax, per token
  int64_t tokens = 0;
  double sampled_hit_rate = 0;
};

volatile int32_t benchmark_sink = 0;  // keeps the baseline argmax from being optimized away

// Walks `tokens` tokens through the schema's grammar twice (random logits): once
// choosing as a greedy request does (MaskedArgmax), once as a sampled one does (the
// whole mask of each state). A fresh compiler per schema: the first masks are misses.
MaskCost WalkMasks(std::shared_ptr<const grammar::GrammarVocabulary> vocab, const Schema& schema, int tokens) {
  MaskCost cost;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(vocab->size()));
  for (int pass = 0; pass < 2; ++pass) {
    grammar::GrammarCompiler compiler(vocab);
    auto constraint = compiler.Compile(grammar::ConstraintKind::kJsonSchema, schema.text);
    if (!constraint.ok()) Die(schema.name + ": " + std::string(constraint.status().message()));
    grammar::GrammarState state(*constraint);
    double seconds = 0, argmax_seconds = 0;
    int n = 0;
    for (; n < tokens && !state.Exhausted(); ++n) {
      for (float& z : logits) z = normal(rng);
      // What a greedy request pays without a grammar: the argmax of its logits.
      const auto t_plain = Clock::now();
      int32_t plain = 0;
      for (int32_t i = 1; i < vocab->size(); ++i) {
        if (logits[static_cast<size_t>(i)] > logits[static_cast<size_t>(plain)]) plain = i;
      }
      argmax_seconds += Since(t_plain);
      benchmark_sink = plain;
      const auto t0 = Clock::now();
      int32_t next;
      if (pass == 0) {
        next = state.MaskedArgmax(logits.data(), vocab->size());
      } else {
        const auto mask = state.Mask();
        next = -1;
        for (int32_t i = 0; i < vocab->size(); ++i) {
          if (mask->test(i) && (next < 0 || logits[static_cast<size_t>(i)] > logits[static_cast<size_t>(next)])) next = i;
        }
      }
      seconds += Since(t0);
      if (next < 0 || vocab->is_eos(next)) break;
      state.Push(next);
      state.Commit();
    }
    (pass == 0 ? cost.greedy_us : cost.sampled_us) = n > 0 ? std::max(0.0, seconds - argmax_seconds) / n * 1e6 : 0;
    if (pass == 0) cost.argmax_us = n > 0 ? argmax_seconds / n * 1e6 : 0;
    if (pass == 1) {
      const double all = static_cast<double>((*constraint)->masker->hits() + (*constraint)->masker->misses());
      cost.sampled_hit_rate = all > 0 ? (*constraint)->masker->hits() / all : 0;
      cost.tokens = n;
    }
  }
  return cost;
}

struct Run {
  int64_t tokens = 0, forwards = 0;
  double seconds = 0;
  int valid_stops = 0;
  std::vector<int64_t> drafted, accepted;  // by draft position
};

Run RunSchemas(Engine& e, grammar::GrammarCompiler& compiler, const std::vector<Schema>& schemas,
               const std::vector<int32_t>& prompt, DecodingConfig decoding, bool constrained) {
  Run run;
  for (const Schema& schema : schemas) {
    GenerationRequest req;
    req.prompt_ids = prompt;
    req.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
    req.decoding = decoding;
    if (constrained) {
      auto constraint = compiler.Compile(grammar::ConstraintKind::kJsonSchema, schema.text);
      if (!constraint.ok()) Die(schema.name + ": " + std::string(constraint.status().message()));
      req.grammar = *constraint;
    }
    auto r = Generate(*e.backend, *e.kv, req, e.Environment());
    if (!r.ok()) Die(std::string(r.status().message()));
    run.tokens += r->stats.committed;
    run.forwards += r->stats.forwards;
    run.seconds += r->decode_seconds;
    run.valid_stops += r->finish_reason == FinishReason::kStop;
    const auto& d = r->stats.drafted_per_position;
    if (run.drafted.size() < d.size()) {
      run.drafted.resize(d.size(), 0);
      run.accepted.resize(d.size(), 0);
    }
    for (size_t k = 0; k < d.size(); ++k) {
      run.drafted[k] += d[k];
      run.accepted[k] += r->stats.accepted_per_position[k];
    }
  }
  return run;
}

int Main() {
  const std::vector<Schema> schemas = LoadSchemas();
  EngineOptions o;
  o.model_path = absl::GetFlag(FLAGS_model);
  o.backend = BackendChoice::kCpu;
  o.cpu_threads = absl::GetFlag(FLAGS_threads);
  auto engine = OpenEngine(o);
  if (!engine.ok()) Die(std::string(engine.status().message()));
  Engine& e = **engine;
  std::printf("host: %s; ISA %s; kernels %s\nmodel: %s (vocab %d)\n\n", cpu::CpuModelName().c_str(),
              cpu::CpuIsaSummary().c_str(), cpu::SimdLevelName(cpu::DetectedSimdLevel()), e.model_path.c_str(),
              e.model->config.vocab_size);
  const Tokenizer& tokenizer = *e.model->tokenizer;
  const std::vector<int32_t> prompt = tokenizer.Encode("The answer, as JSON:\n", /*add_special=*/true);

  // A decode forward's time: AR over a free-text request, per token.
  GenerationRequest free_text;
  free_text.prompt_ids = prompt;
  free_text.max_new_tokens = 64;
  free_text.stop_at_eos = false;
  double forward_s = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    auto r = Generate(*e.backend, *e.kv, free_text, e.Environment());
    if (!r.ok()) Die(std::string(r.status().message()));
    forward_s = std::min(forward_s, r->decode_seconds / static_cast<double>(r->stats.forwards));
  }
  std::printf("decode forward (AR, batch 1): %.3f ms\n\n", forward_s * 1e3);

  // 1. Mask cost.
  auto base = grammar::VocabularyOf(tokenizer, e.model->config.eos_token_ids);
  std::vector<std::pair<std::string, std::shared_ptr<const grammar::GrammarVocabulary>>> vocabularies = {
      {"served " + std::to_string(base->size()), base}};
  if (absl::GetFlag(FLAGS_large_vocab) > base->size()) {
    vocabularies.push_back({"large " + std::to_string(absl::GetFlag(FLAGS_large_vocab)),
                            LargeVocabulary(*base, absl::GetFlag(FLAGS_large_vocab))});
  }
  std::printf(
      "mask cost per token (us; %% of the decode forward), %d-token walks on random logits, cold cache;\n"
      "net of the argmax over the logits that a request without a grammar pays too (column argmax)\n",
      absl::GetFlag(FLAGS_walk_tokens));
  std::printf("%-22s %-10s %8s %8s %8s %10s %8s %9s\n", "schema", "vocab", "tokens", "argmax", "greedy", "(% fwd)",
              "sampled", "hit rate");
  for (const auto& [label, vocab] : vocabularies) {
    double greedy_sum = 0, sampled_sum = 0, argmax_sum = 0;
    int64_t tokens = 0;
    for (const Schema& schema : schemas) {
      MaskCost c = WalkMasks(vocab, schema, absl::GetFlag(FLAGS_walk_tokens));
      for (int rep = 1; rep < absl::GetFlag(FLAGS_walk_repeats); ++rep) {
        const MaskCost again = WalkMasks(vocab, schema, absl::GetFlag(FLAGS_walk_tokens));
        c.greedy_us = std::min(c.greedy_us, again.greedy_us);
        c.sampled_us = std::min(c.sampled_us, again.sampled_us);
        c.argmax_us = std::min(c.argmax_us, again.argmax_us);
      }
      std::printf("%-22s %-10s %8lld %8.1f %8.1f %9.2f%% %8.1f %8.1f%%\n", schema.name.c_str(), label.c_str(),
                  static_cast<long long>(c.tokens), c.argmax_us, c.greedy_us, 100 * c.greedy_us * 1e-6 / forward_s,
                  c.sampled_us, 100 * c.sampled_hit_rate);
      greedy_sum += c.greedy_us * static_cast<double>(c.tokens);
      argmax_sum += c.argmax_us * static_cast<double>(c.tokens);
      sampled_sum += c.sampled_us * static_cast<double>(c.tokens);
      tokens += c.tokens;
    }
    if (tokens > 0) {
      std::printf("%-22s %-10s %8lld %8.1f %8.1f %9.2f%% %8.1f %9s  (sampled: %.2f%% of a forward)\n", "ALL",
                  label.c_str(), static_cast<long long>(tokens), argmax_sum / tokens, greedy_sum / tokens,
                  100 * greedy_sum / tokens * 1e-6 / forward_s, sampled_sum / tokens, "",
                  100 * sampled_sum / tokens * 1e-6 / forward_s);
    }
  }

  // 2. Tokens/s of JSON-schema requests.
  grammar::GrammarCompiler compiler(base);
  std::printf("\nJSON-schema requests, greedy, %zu schemas, up to %d tokens each\n", schemas.size(),
              absl::GetFlag(FLAGS_max_new_tokens));
  std::printf("%-28s %8s %8s %8s %8s %8s\n", "mode", "tokens", "stops", "tok/s", "TPF", "vs AR");
  struct Config {
    std::string name;
    DecodingConfig decoding;
    bool constrained = true;
    Run best;
    bool cold = false;  // a fresh compiler each run: no cached masks, no learned spellings
  };
  std::vector<Config> configs;
  configs.push_back({"ar", DecodingConfig{}, true, {}});
  configs.push_back({"ar, cold", DecodingConfig{}, true, {}, true});
  for (const std::string& name : absl::GetFlag(FLAGS_modes)) {
    auto mode = ParseDecodingMode(name);
    if (!mode.ok()) Die("--modes: " + std::string(mode.status().message()));
    if ((*mode == DecodingMode::kLossless || *mode == DecodingMode::kLossy) && e.adapter == nullptr) continue;
    for (int gamma : {4, 8}) {
      DecodingConfig d;
      d.mode = *mode;
      d.gamma = gamma;
      configs.push_back({name + " gamma " + std::to_string(gamma), d, true, {}});
      if (*mode == DecodingMode::kNgram) {
        configs.push_back({name + " gamma " + std::to_string(gamma) + ", cold", d, true, {}, true});
      }
    }
  }
  configs.push_back({"ar, unconstrained", DecodingConfig{}, false, {}});
  // Rounds over every configuration in turn, the fastest round of each counting: a
  // shared host's slow spells then fall on all of them alike, and only ever add time.
  // One compiler serves all but the cold runs, as a server's does: masks and the
  // model's spellings of forced text (learned by n-gram requests) carry over between
  // requests with the same schema.
  for (int round = 0; round < std::max(1, absl::GetFlag(FLAGS_rounds)); ++round) {
    for (Config& c : configs) {
      grammar::GrammarCompiler fresh(base);
      const Run r = RunSchemas(e, c.cold ? fresh : compiler, schemas, prompt, c.decoding, c.constrained);
      if (round == 0 || r.seconds < c.best.seconds) c.best = r;
    }
  }
  const double ar_rate = configs[0].best.tokens / configs[0].best.seconds;
  const double cold_ar_rate = configs[1].best.tokens / configs[1].best.seconds;
  for (const Config& c : configs) {
    const Run& r = c.best;
    const double base_rate = c.cold ? cold_ar_rate : ar_rate;  // cold runs against cold AR
    std::printf("%-28s %8lld %8d %8.1f %8.2f %7.2fx\n", c.name.c_str(), static_cast<long long>(r.tokens),
                r.valid_stops, r.tokens / r.seconds, static_cast<double>(r.tokens) / std::max<int64_t>(1, r.forwards),
                r.tokens / r.seconds / base_rate);
  }
  std::printf("\nacceptance by draft position (accepted / verified)\n");
  for (const Config& c : configs) {
    if (c.best.drafted.empty() || c.best.drafted[0] == 0) continue;
    std::printf("%-28s", c.name.c_str());
    for (size_t k = 0; k < c.best.drafted.size(); ++k) {
      std::printf(" %zu:%.2f(%lld)", k + 1,
                  c.best.drafted[k] > 0 ? static_cast<double>(c.best.accepted[k]) / c.best.drafted[k] : 0.0,
                  static_cast<long long>(c.best.drafted[k]));
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace crossreg

int main(int argc, char** argv) {
  crossreg::tools::ParseFlags(argc, argv, "crossreg_bench_grammar",
                              "Structured output on the CPU: token-mask cost per token (served and 128k vocabularies) "
                              "and tokens/s of JSON-schema requests by decoding mode.");
  return crossreg::Main();
}
