// crossreg-generate: generate text from a model with the engine, no server.
//   crossreg-generate --model stories260K.gguf --prompt "Once upon a time" --format jsonl
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/flags/flag_spelling.h"
#include "engine/model/model_quantizer.h"
#include "scheduler/generate.h"
#include "engine/runtime/open_engine.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, model, "", "Model: a .gguf file or a Hugging Face directory (default: the embedded default model)");
ABSL_FLAG(std::string, prompt, "", "Prompt text (may be empty: generation then starts from BOS)");
ABSL_FLAG(std::string, prompt_ids, "", "Prompt as comma-separated token ids (instead of --prompt)");
ABSL_FLAG(int, max_new_tokens, 128, "Most tokens to generate");
ABSL_FLAG(double, temperature, 0.0, "Sampling temperature; 0 = greedy");
ABSL_FLAG(int, top_k, 0, "Keep only the k most likely tokens; 0 = off");
ABSL_FLAG(double, top_p, 1.0, "Nucleus sampling mass in (0, 1]; 1 = off");
ABSL_FLAG(uint64_t, seed, 0, "Random seed; the same seed gives the same output");
ABSL_FLAG(std::string, format, "text", "Output: text (streamed) or jsonl (one JSON object)");
ABSL_FLAG(std::string, stop_ids, "", "Comma-separated token ids that also end generation");
ABSL_FLAG(std::vector<std::string>, stop, {},
          "Comma-separated texts that end generation where they first appear (left out of the output)");
ABSL_FLAG(bool, ignore_eos, false, "Keep generating past the model's EOS token");
ABSL_FLAG(bool, add_bos, true, "Prepend BOS to --prompt when the model's tokenizer wants it");
ABSL_FLAG(int, threads, 0, "CPU threads; 0 = one per usable core (the cgroup CPU limit)");
ABSL_FLAG(std::string, backend, "auto",
          "Compute backend: cpu, cuda (fails when no CUDA device is available) or auto (CUDA when a device is "
          "visible, else CPU)");
ABSL_FLAG(int, cuda_device, 0, "CUDA backend: device ordinal");
ABSL_FLAG(std::string, kv_dtype, "auto",
          "K/V cache element type: f32, bf16 or auto (bf16 on the CPU backend unless the model's weights are f32; "
          "f32 on CUDA)");
ABSL_FLAG(std::string, weights, "bf16",
          "CUDA backend: decoder-layer weights on the device, bf16 or fp8 (e4m3, a scale per output row, quantized "
          "at load); the CPU backend refuses fp8");
ABSL_FLAG(std::string, quantize, "none",
          "Quantize the model's matrices at load: none, q8_0, q4_0, q4_k, q5_k or q6_k (float models; quantized "
          "GGUF files load as they are)");
ABSL_FLAG(std::string, adapter, "", "Cross-Regression adapter: a PEFT LoRA directory (needed by lossless and lossy modes)");
ABSL_FLAG(std::string, ngram_table, "",
          "Corpus n-gram table for n-gram drafts; default: the model directory's ngram_table.bin if any; none: the "
          "context only");
ABSL_FLAG(std::string, mode, "ar", "Decoding: ar, lossless (Cross-Regression, exact), lossy (Cross-Regression with beta/tau), ngram (prompt lookup, exact)");
ABSL_FLAG(double, beta, 0.0, "Lossy mode: EMA weight of earlier draft energies, in [0, 1)");
ABSL_FLAG(double, tau, 0.0, "Lossy mode: acceptance offset in nats, <= 0 (more negative accepts more)");
ABSL_FLAG(int, gamma, 8, "Draft slots (predictive rows) per forward, 1..64");
ABSL_FLAG(int, fork_outcomes, 0,
          "Cross-Regression forked refill: acceptance counts n below this get their own placeholder draft chain "
          "(0 = ALGORITHM.md's carry-and-refill; see docs/algorithm.md)");
ABSL_FLAG(int, fork_depth, 0,
          "Forked refill: drafts per forked chain or outcome block (0 = gamma, or on a model that drafts for itself "
          "min(gamma, the block rows it was trained with: config.json crossreg_draft.block_rows))");
ABSL_FLAG(std::string, draft_layout, "",
          "Lossless/lossy: chain (ALGORITHM.md's predictive chain, forks with --fork_outcomes) or blocks (one "
          "bidirectional block per acceptance outcome; docs/algorithm.md); empty = the adapter's layout");
ABSL_FLAG(bool, adaptive_gamma, false,
          "Speculative modes: measure this machine's forward cost curve at start, then pick each forward's draft "
          "length (0 = AR) for the most tokens per second; --gamma is the ceiling");
ABSL_FLAG(bool, warm_up, true,
          "Run the forwards of a cost-curve measurement (up to 32 rows) before decoding, in every mode, so the "
          "reported tokens/s of different modes compare; false: decode at once (its first forwards run cold)");
ABSL_FLAG(bool, ngram_assist, false,
          "Cross-Regression: prompt-lookup drafts take the first draft slots where the text repeats (exact)");

namespace crossreg {
namespace {

// The widest forward of the warm-up (--warm_up), whatever the mode's own widest.
constexpr int kWarmUpRows = 32;

int Fail(const std::string& message) {
  std::cerr << "crossreg-generate: " << message << "\n";
  return 2;
}

absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& flag, const std::string& text) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id)) {
      return absl::InvalidArgumentError("--" + flag + ": '" + std::string(part) + "' is not a token id");
    }
    ids.push_back(id);
  }
  return ids;
}

// The engine names the request's fields (engine/decoding/generation_request.h); here
// the user typed flags, so an error names the flag too.
std::string InFlagTerms(absl::string_view message) {
  static const std::pair<const char*, const char*> kFlags[] = {
      {"prompt_ids:", "--prompt/--prompt_ids"}, {"max_new_tokens:", "--max_new_tokens"},
      {"stop_ids:", "--stop_ids"},             {"sampling.temperature:", "--temperature"},
      {"sampling.top_k:", "--top_k"},           {"sampling.top_p:", "--top_p"},
      {"decoding.mode:", "--mode"},             {"decoding.beta:", "--beta"},
      {"decoding.tau:", "--tau"},               {"decoding.gamma:", "--gamma"},
      {"decoding.fork_outcomes:", "--fork_outcomes"}, {"decoding.fork_depth:", "--fork_depth"},
      {"decoding.ngram_assist:", "--ngram_assist"},   {"decoding.adaptive_gamma:", "--adaptive_gamma"},
      {"decoding.draft_layout:", "--draft_layout"},   {"draft_layout:", "--draft_layout"}};
  for (const auto& [field, flag] : kFlags) {
    if (absl::StartsWith(message, field)) return absl::StrCat(flag, " (", field, message.substr(strlen(field)), ")");
  }
  if (absl::StartsWith(message, "cannot load adapter")) return absl::StrCat("--adapter: ", message);
  if (absl::StartsWith(message, "cannot load model")) return absl::StrCat("--model: ", message);
  if (absl::StartsWith(message, "n-gram table")) return absl::StrCat("--ngram_table: ", message);
  return std::string(message);
}

// The request the flags describe, without its prompt (which needs the tokenizer).
absl::StatusOr<GenerationRequest> RequestFromFlags() {
  GenerationRequest request;
  auto mode = ParseDecodingMode(absl::GetFlag(FLAGS_mode));
  if (!mode.ok()) return absl::InvalidArgumentError("--" + std::string(mode.status().message()));
  request.decoding.mode = *mode;
  request.decoding.beta = static_cast<float>(absl::GetFlag(FLAGS_beta));
  request.decoding.tau = static_cast<float>(absl::GetFlag(FLAGS_tau));
  request.decoding.gamma = absl::GetFlag(FLAGS_gamma);
  request.decoding.fork_outcomes = absl::GetFlag(FLAGS_fork_outcomes);
  request.decoding.fork_depth = absl::GetFlag(FLAGS_fork_depth);
  request.decoding.ngram_assist = absl::GetFlag(FLAGS_ngram_assist);
  request.decoding.adaptive_gamma = absl::GetFlag(FLAGS_adaptive_gamma);
  if (const std::string layout = absl::GetFlag(FLAGS_draft_layout); !layout.empty()) {
    auto parsed = ParseDraftLayout(layout);
    if (!parsed.ok()) return absl::InvalidArgumentError("--" + std::string(parsed.status().message()));
    request.decoding.draft_layout = *parsed;
  }
  auto stop = ParseIds("stop_ids", absl::GetFlag(FLAGS_stop_ids));
  if (!stop.ok()) return stop.status();
  request.stop_ids = *stop;
  request.stop_strings = absl::GetFlag(FLAGS_stop);
  for (const std::string& s : request.stop_strings) {
    if (s.empty()) return absl::InvalidArgumentError("--stop: an empty stop text would end every output at once");
  }
  request.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  request.stop_at_eos = !absl::GetFlag(FLAGS_ignore_eos);
  request.sampling.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  request.sampling.top_k = absl::GetFlag(FLAGS_top_k);
  request.sampling.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  request.sampling.seed = absl::GetFlag(FLAGS_seed);
  if (!absl::GetFlag(FLAGS_prompt_ids).empty()) {
    auto ids = ParseIds("prompt_ids", absl::GetFlag(FLAGS_prompt_ids));
    if (!ids.ok()) return ids.status();
    request.prompt_ids = *ids;
  }
  return request;
}

// The engine the flags describe (its KV cache is sized later, from the request).
absl::StatusOr<EngineOptions> EngineOptionsFromFlags() {
  auto backend_choice = ParseBackendChoice(absl::GetFlag(FLAGS_backend));
  if (!backend_choice.ok()) return backend_choice.status();
  auto kv_dtype = ParseKvDtypeChoice(absl::GetFlag(FLAGS_kv_dtype));
  if (!kv_dtype.ok()) return kv_dtype.status();
  auto quantize = ParseQuantizeType(absl::GetFlag(FLAGS_quantize));
  if (!quantize.ok()) return quantize.status();
  auto device_weights = ParseDeviceWeights(absl::GetFlag(FLAGS_weights));
  if (!device_weights.ok()) return device_weights.status();
  EngineOptions options;
  options.model_path = absl::GetFlag(FLAGS_model);
  options.adapter_path = absl::GetFlag(FLAGS_adapter);
  options.ngram_table_path = absl::GetFlag(FLAGS_ngram_table);
  options.backend = *backend_choice;
  options.cpu_threads = absl::GetFlag(FLAGS_threads);
  options.cuda_device = absl::GetFlag(FLAGS_cuda_device);
  options.kv_dtype = *kv_dtype;
  options.quantize = *quantize;
  options.device_weights = *device_weights;
  return options;
}

// Refuses a bad request before the backend exists and times its cost curve (the
// curve --adaptive_gamma asks for is measured when the engine opens).
absl::Status ValidateBeforeOpening(const GenerationRequest& request, const LoadedModel& loaded) {
  DecodingEnvironment planned;
  planned.model = &loaded.model->config;
  planned.has_adapter = HasDrafter(*loaded.model, loaded.adapter.get());
  planned.placeholder_token = DrafterPlaceholder(*loaded.model, loaded.adapter.get());
  static const ForwardCostCurve kToBeMeasured = *ForwardCostCurve::FromPoints({{1, 1.0}});
  planned.cost_curve = request.decoding.adaptive_gamma ? &kToBeMeasured : nullptr;
  return ValidateGenerationRequest(request, planned);
}

void PrintTextSummary(const GenerationRequest& request, const GenerationResult& result, const Engine& engine,
                      double tok_per_s) {
  const SpeculativeStats& stats = result.stats;
  std::fprintf(stderr,
               "[crossreg-generate] mode=%s %zu prompt + %zu new tokens, finish=%s, prefill %.1f ms, "
               "decode %.1f tokens/s, %lld forwards, %.2f tokens/forward (accepted %lld of %lld drafts), "
               "model load %.2f s, backend %s\n",
               DecodingModeName(request.decoding.mode), request.prompt_ids.size(), result.ids.size(),
               FinishReasonName(result.finish_reason), result.prefill_seconds * 1e3, tok_per_s,
               static_cast<long long>(stats.forwards), stats.tokens_per_forward(),
               static_cast<long long>(stats.accepted), static_cast<long long>(stats.drafted), engine.load_seconds,
               engine.BackendDescription().c_str());
}

void PrintJsonResult(const GenerationRequest& request, const std::string& prompt_text, const GenerationResult& result,
                     const Engine& engine, double tok_per_s) {
  const SpeculativeStats& stats = result.stats;
  nlohmann::json out;
  out["model"] = engine.model_path;
  out["backend"] = std::string(engine.backend->name());
  out["backend_device"] = engine.backend->device();
  out["prompt"] = prompt_text;
  out["prompt_ids"] = request.prompt_ids;
  out["ids"] = result.ids;
  StreamDecoder continuation(*engine.model->tokenizer);
  continuation.ContinueSequence();
  std::string text;
  for (int32_t id : result.ids) text += continuation.Push(id);
  out["text"] = request.stop_strings.empty() ? text + continuation.Flush() : result.text;
  out["finish_reason"] = FinishReasonName(result.finish_reason);
  out["mode"] = DecodingModeName(request.decoding.mode);
  out["forwards"] = stats.forwards;
  out["ar_forwards"] = stats.ar_forwards;
  out["prefill_forwards"] = result.prefill_forwards;
  out["drafted"] = stats.drafted;
  out["accepted"] = stats.accepted;
  out["accepted_per_position"] = stats.accepted_per_position;
  out["tokens_per_forward"] = stats.tokens_per_forward();
  out["timing"] = {{"load_s", engine.load_seconds},
                   {"prefill_s", result.prefill_seconds},
                   {"decode_s", result.decode_seconds},
                   {"decode_tokens_per_s", tok_per_s}};
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

int Run() {
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "text" && format != "jsonl") return Fail("--format must be text or jsonl, got '" + format + "'");
  if (!absl::GetFlag(FLAGS_prompt).empty() && !absl::GetFlag(FLAGS_prompt_ids).empty()) {
    return Fail("give either --prompt or --prompt_ids, not both");
  }
  absl::StatusOr<EngineOptions> options = EngineOptionsFromFlags();
  if (!options.ok()) return Fail(std::string(options.status().message()));
  absl::StatusOr<GenerationRequest> request = RequestFromFlags();
  if (!request.ok()) return Fail(std::string(request.status().message()));
  auto loaded = LoadEngineModel(*options);
  if (!loaded.ok()) return Fail(InFlagTerms(loaded.status().message()));
  if (loaded->adapter != nullptr) {
    for (const std::string& warning : loaded->adapter->warnings) {
      std::fprintf(stderr, "[crossreg-generate] warning: --adapter: %s\n", warning.c_str());
    }
  }
  const bool xr = request->decoding.mode == DecodingMode::kLossless || request->decoding.mode == DecodingMode::kLossy;
  if (absl::GetFlag(FLAGS_draft_layout).empty() && xr &&
      DrafterLayout(*loaded->model, loaded->adapter.get()) == "blocks") {
    request->decoding.draft_layout = DraftLayout::kBlocks;  // the layout the drafter was trained for
  }
  if (loaded->adapter == nullptr && loaded->model->config.self_drafting()) {
    DefaultForkDepthToTrainedRows(request->decoding, loaded->model->config.draft_block_rows);
  }
  const std::string prompt_text = absl::GetFlag(FLAGS_prompt);
  if (absl::GetFlag(FLAGS_prompt_ids).empty()) {
    request->prompt_ids = loaded->model->tokenizer->Encode(prompt_text, absl::GetFlag(FLAGS_add_bos));
  }
  if (auto s = ValidateBeforeOpening(*request, *loaded); !s.ok()) return Fail(InFlagTerms(s.message()));
  // The cache holds the prompt and every new token, plus the gamma draft rows
  // verification appends past them; calibrating the cost curve needs a scratch
  // context (up to 64 positions) plus the widest forward.
  const int widest = MaxDecodeRows(request->decoding);
  if (request->decoding.adaptive_gamma) options->cost_curve_rows = widest;
  // Every mode's decoding is timed warm, as an adaptive run's is after its curve: a fresh
  // process's first forwards run slow (new pages and buffers, the thread pool still
  // learning its cores' speeds), and warmed only up to its own widest forward, AR read
  // 8% below an adaptive run of AR forwards; up to 32 rows, level with it.
  if (absl::GetFlag(FLAGS_warm_up)) options->warm_up_rows = std::max(widest, kWarmUpRows);
  const int64_t positions = std::max<int64_t>(
      static_cast<int64_t>(request->prompt_ids.size()) + request->max_new_tokens + request->decoding.gamma + 1,
      64 + std::max(widest, options->warm_up_rows));
  options->kv_block_size = 16;
  options->kv_blocks = KvBlocksFor(positions, options->kv_block_size);
  auto opened = OpenEngine(*std::move(loaded), *options);
  if (!opened.ok()) return Fail(std::string(opened.status().message()));
  Engine& engine = **opened;
  if (!engine.quantize_summary.empty()) {
    std::fprintf(stderr, "[crossreg-generate] --quantize: %s\n", engine.quantize_summary.c_str());
  }
  if (engine.cost_curve.has_value()) {
    std::fprintf(stderr, "[crossreg-generate] forward cost curve: %s\n", engine.CostCurveDescription().c_str());
  }
  // The continuation follows the prompt: no start-of-sequence space stripping.
  const Tokenizer& tok = *engine.model->tokenizer;
  StreamDecoder stream(tok);
  stream.ContinueSequence();
  const bool text = format == "text";
  if (text) std::cout << (prompt_text.empty() ? tok.Decode(request->prompt_ids) : prompt_text) << std::flush;
  GenerateOptions generate;
  generate.tokenizer = &tok;  // stop texts are found in the detokenized output
  auto result = Generate(
      *engine.backend, *engine.kv, *request, engine.Environment(),
      [&](const std::vector<int32_t>& ids) {
        // With stop texts the output streams once it is known where it ends.
        if (!text || !request->stop_strings.empty()) return;
        for (int32_t id : ids) std::cout << stream.Push(id);
        std::cout << std::flush;
      },
      generate);
  if (!result.ok()) return Fail(std::string(result.status().message()));
  const double tok_per_s = result->decode_seconds > 0 ? result->stats.committed / result->decode_seconds : 0.0;
  if (text) {
    if (!request->stop_strings.empty()) std::cout << result->text;
    std::cout << stream.Flush() << std::endl;
    PrintTextSummary(*request, *result, engine, tok_per_s);
  } else {
    PrintJsonResult(*request, prompt_text, *result, engine, tok_per_s);
  }
  return 0;
}

}  // namespace
}  // namespace crossreg

int main(int argc, char** argv) {
  crossreg::tools::ParseFlags(argc, argv, "crossreg_generate",
                              "Generate text from a Llama-family model (CPU or CUDA backend), no server.\n"
      "  crossreg-generate --model PATH --prompt TEXT [--max_new_tokens N] [--temperature T]\n"
      "Flags may be written with dashes or underscores (--max-new-tokens).");
  return crossreg::Run();
}
