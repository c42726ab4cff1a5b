// crossreg-generate: generate text from a model with the engine, no server.
//   crossreg-generate --model stories260K.gguf --prompt "Once upon a time" --format jsonl
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/decoding/forward_cost_curve.h"
#include "engine/decoding/generate.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/default_model.h"
#include "engine/model/model_loader.h"
#include "engine/tools/flag_spelling.h"
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
ABSL_FLAG(bool, ignore_eos, false, "Keep generating past the model's EOS token");
ABSL_FLAG(bool, add_bos, true, "Prepend BOS to --prompt when the model's tokenizer wants it");
ABSL_FLAG(int, threads, 0, "CPU threads; 0 = one per core");
ABSL_FLAG(std::string, adapter, "", "Cross-Regression adapter: a PEFT LoRA directory (needed by lossless and lossy modes)");
ABSL_FLAG(std::string, mode, "ar", "Decoding: ar, lossless (Cross-Regression, exact), lossy (Cross-Regression with beta/tau), ngram (prompt lookup, exact)");
ABSL_FLAG(double, beta, 0.0, "Lossy mode: EMA weight of earlier draft energies, in [0, 1)");
ABSL_FLAG(double, tau, 0.0, "Lossy mode: acceptance offset in nats, <= 0 (more negative accepts more)");
ABSL_FLAG(int, gamma, 8, "Draft slots (predictive rows) per forward, 1..64");
ABSL_FLAG(int, fork_outcomes, 0,
          "Cross-Regression forked refill: acceptance counts n below this get their own placeholder draft chain "
          "(0 = ALGORITHM.md's carry-and-refill; see docs/algorithm.md)");
ABSL_FLAG(int, fork_depth, 0, "Forked refill: drafts per forked chain (0 = gamma)");
ABSL_FLAG(bool, adaptive_gamma, false,
          "Speculative modes: measure this machine's forward cost curve at start, then pick each forward's draft "
          "length (0 = AR) for the most tokens per second; --gamma is the ceiling");
ABSL_FLAG(bool, ngram_assist, false,
          "Cross-Regression: prompt-lookup drafts take the first draft slots where the text repeats (exact)");

namespace crossreg {
namespace {

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

int Run() {
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "text" && format != "jsonl") return Fail("--format must be text or jsonl, got '" + format + "'");
  if (!absl::GetFlag(FLAGS_prompt).empty() && !absl::GetFlag(FLAGS_prompt_ids).empty()) {
    return Fail("give either --prompt or --prompt_ids, not both");
  }
  std::string model_path = absl::GetFlag(FLAGS_model);
  std::string adapter_path = absl::GetFlag(FLAGS_adapter);
  if (model_path.empty()) {
    auto found = FindDefaultModel();
    if (!found.ok()) return Fail(std::string(found.status().message()));
    model_path = *found;
    // The default model brings its own Cross-Regression adapter.
    if (adapter_path.empty()) adapter_path = BundledAdapter(model_path);
  }
  auto t_load = std::chrono::steady_clock::now();
  auto model_or = LoadModel(model_path);
  if (!model_or.ok()) return Fail(std::string(model_or.status().message()));
  const Model& model = **model_or;
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();

  std::unique_ptr<LoraAdapter> adapter;
  if (!adapter_path.empty()) {
    auto loaded = LoadLoraAdapter(adapter_path, model.config);
    if (!loaded.ok()) return Fail("--adapter: " + std::string(loaded.status().message()));
    adapter = std::move(*loaded);
  }
  GenerationRequest request;
  auto mode = ParseDecodingMode(absl::GetFlag(FLAGS_mode));
  if (!mode.ok()) return Fail("--" + std::string(mode.status().message()));
  request.decoding.mode = *mode;
  request.decoding.beta = static_cast<float>(absl::GetFlag(FLAGS_beta));
  request.decoding.tau = static_cast<float>(absl::GetFlag(FLAGS_tau));
  request.decoding.gamma = absl::GetFlag(FLAGS_gamma);
  request.decoding.fork_outcomes = absl::GetFlag(FLAGS_fork_outcomes);
  request.decoding.fork_depth = absl::GetFlag(FLAGS_fork_depth);
  request.decoding.ngram_assist = absl::GetFlag(FLAGS_ngram_assist);
  request.decoding.adaptive_gamma = absl::GetFlag(FLAGS_adaptive_gamma);
  if (adapter) request.placeholder_token = adapter->placeholder_token_id;
  if (!absl::GetFlag(FLAGS_prompt_ids).empty()) {
    auto ids = ParseIds("prompt_ids", absl::GetFlag(FLAGS_prompt_ids));
    if (!ids.ok()) return Fail(std::string(ids.status().message()));
    request.prompt_ids = *ids;
  } else {
    request.prompt_ids = model.tokenizer->Encode(absl::GetFlag(FLAGS_prompt), absl::GetFlag(FLAGS_add_bos));
  }
  auto stop = ParseIds("stop_ids", absl::GetFlag(FLAGS_stop_ids));
  if (!stop.ok()) return Fail(std::string(stop.status().message()));
  request.stop_ids = *stop;
  request.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  request.stop_at_eos = !absl::GetFlag(FLAGS_ignore_eos);
  request.sampling.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  request.sampling.top_k = absl::GetFlag(FLAGS_top_k);
  request.sampling.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  request.sampling.seed = absl::GetFlag(FLAGS_seed);
  if (auto s = ValidateGenerationRequest(request, model.config, adapter != nullptr); !s.ok()) {
    return Fail("--" + std::string(s.message()));
  }

  // Room for the prompt and every new token, in 16-token blocks.
  CpuBackendOptions options;
  options.num_threads = absl::GetFlag(FLAGS_threads);
  options.adapter = adapter.get();
  options.kv.block_size = 16;
  // Verification appends up to gamma draft rows past the committed tokens.
  const int64_t tokens = static_cast<int64_t>(request.prompt_ids.size()) + request.max_new_tokens +
                         request.decoding.gamma + 1;
  // Calibrating the cost curve needs a scratch context plus the widest forward.
  const int widest = MaxDecodeRows(request.decoding);
  const int calibration_context = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(64, model.config.max_position - widest)));
  const int64_t positions = std::max<int64_t>(tokens, calibration_context + widest);
  options.kv.num_blocks = static_cast<int>((positions + options.kv.block_size - 1) / options.kv.block_size);
  auto backend = CreateCpuBackend(model, options);
  if (!backend.ok()) return Fail(std::string(backend.status().message()));
  PagedKvCache kv(options.kv);
  std::optional<ForwardCostCurve> curve;
  if (request.decoding.adaptive_gamma) {
    auto measured = ForwardCostCurve::Measure(**backend, kv, model.config, widest, calibration_context);
    if (!measured.ok()) return Fail("--adaptive_gamma: measuring the forward cost curve: " +
                                    std::string(measured.status().message()));
    curve = *std::move(measured);
    request.cost_curve = &*curve;
    std::string points;
    for (const auto& [rows, seconds] : curve->points()) {
      absl::StrAppend(&points, points.empty() ? "" : ", ", rows, " rows ", absl::SixDigits(seconds * 1e3), " ms");
    }
    std::fprintf(stderr, "[crossreg-generate] forward cost curve: %s\n", points.c_str());
  }

  const Tokenizer& tok = *model.tokenizer;
  // The continuation follows the prompt: no start-of-sequence space stripping.
  StreamDecoder stream(tok);
  stream.ContinueSequence();
  const bool text = format == "text";
  if (text) {
    std::cout << (absl::GetFlag(FLAGS_prompt).empty() ? tok.Decode(request.prompt_ids)
                                                      : absl::GetFlag(FLAGS_prompt))
              << std::flush;
  }
  auto result = Generate(**backend, kv, model.config, request, adapter != nullptr,
                         [&](const std::vector<int32_t>& ids) {
                           if (!text) return;
                           for (int32_t id : ids) std::cout << stream.Push(id);
                           std::cout << std::flush;
                         });
  if (!result.ok()) return Fail(std::string(result.status().message()));
  const auto& stats = result->stats;
  const double tok_per_s = result->decode_seconds > 0 ? stats.committed / result->decode_seconds : 0.0;
  if (text) {
    std::cout << stream.Flush() << std::endl;
    std::fprintf(stderr,
                 "[crossreg-generate] mode=%s %zu prompt + %zu new tokens, finish=%s, prefill %.1f ms, "
                 "decode %.1f tokens/s, %lld forwards, %.2f tokens/forward (accepted %lld of %lld drafts), "
                 "model load %.2f s\n",
                 DecodingModeName(request.decoding.mode), request.prompt_ids.size(), result->ids.size(),
                 FinishReasonName(result->finish_reason), result->prefill_seconds * 1e3, tok_per_s,
                 static_cast<long long>(stats.forwards), stats.tokens_per_forward(),
                 static_cast<long long>(stats.accepted), static_cast<long long>(stats.drafted), load_s);
  } else {
    nlohmann::json out;
    out["model"] = model_path;
    out["prompt"] = absl::GetFlag(FLAGS_prompt);
    out["prompt_ids"] = request.prompt_ids;
    out["ids"] = result->ids;
    StreamDecoder continuation(tok);
    continuation.ContinueSequence();
    std::string text;
    for (int32_t id : result->ids) text += continuation.Push(id);
    out["text"] = text + continuation.Flush();
    out["finish_reason"] = FinishReasonName(result->finish_reason);
    out["mode"] = DecodingModeName(request.decoding.mode);
    out["forwards"] = stats.forwards;
    out["ar_forwards"] = stats.ar_forwards;
    out["prefill_forwards"] = result->prefill_forwards;
    out["drafted"] = stats.drafted;
    out["accepted"] = stats.accepted;
    out["accepted_per_position"] = stats.accepted_per_position;
    out["tokens_per_forward"] = stats.tokens_per_forward();
    out["timing"] = {{"load_s", load_s},
                     {"prefill_s", result->prefill_seconds},
                     {"decode_s", result->decode_seconds},
                     {"decode_tokens_per_s", tok_per_s}};
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace crossreg

int main(int argc, char** argv) {
  crossreg::tools::ParseFlags(argc, argv, "crossreg_generate",
                              "Generate text from a Llama-family model on the CPU.\n"
      "  crossreg-generate --model PATH --prompt TEXT [--max_new_tokens N] [--temperature T]\n"
      "Flags may be written with dashes or underscores (--max-new-tokens).");
  return crossreg::Run();
}
