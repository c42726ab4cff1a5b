// crossreg-distill-data: distillation data for the drafter trainer
// (`python3 -m training distill --data FILE`). The user's corpus is tokenized with the
// model's own tokenizer, random prefixes are drawn from it, and the frozen base model
// (no adapter, greedy AR) continues each by exactly --window tokens, batched through
// the continuous-batching scheduler. File format: distill/distill_data_file.h.
//   crossreg-distill-data --prompts corpus.jsonl,notes.md --out distill.bin
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/string_view.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/flags/flag_spelling.h"
#include "engine/runtime/open_engine.h"
#include "distill/distill_data_builder.h"
#include "distill/distill_data_file.h"

ABSL_FLAG(std::string, model, "", "Model: a .gguf file or a Hugging Face directory (default: the embedded default model)");
ABSL_FLAG(std::string, backend, "auto",
          "Compute backend: cpu, cuda (fails when no CUDA device is available) or auto (CUDA when a device is "
          "visible, else CPU)");
ABSL_FLAG(int, threads, 0, "CPU threads; 0 = one per usable core (the cgroup CPU limit)");
ABSL_FLAG(int, cuda_device, 0, "CUDA backend: device ordinal");
ABSL_FLAG(int64_t, kv_memory_mb, 1024, "KV cache size in MiB (bounds how many continuations run at once)");
ABSL_FLAG(std::string, prompts, "",
          "Required. The corpus: comma-separated files or directories. A .jsonl file holds one document per line "
          "(its \"text\" field, else its \"prompt\" field); any other file is one document (its whole text); a "
          "directory is every regular file under it (hidden ones skipped), sorted by path, each one document");
ABSL_FLAG(int64_t, examples, 8192, "Train examples (prefix + continuation) to generate");
ABSL_FLAG(int64_t, eval_examples, 256, "Eval examples, drawn from the held-out documents (0: none)");
ABSL_FLAG(double, holdout_pct, 2.5,
          "Percent of documents held out for eval: those whose FNV-1a-64 text hash mod 10000 < 100 * pct (at "
          "least the last document when > 0)");
ABSL_FLAG(int32_t, prefix_min, 8, "Shortest prefix in tokens, >= 2");
ABSL_FLAG(int32_t, prefix_max, 768,
          "Longest prefix in tokens (capped at the model's context minus --window, and at each split's stream "
          "length minus 1)");
ABSL_FLAG(int32_t, window, 16, "Continuation tokens per example (the base's greedy tokens, EOS ignored), >= 2");
ABSL_FLAG(int32_t, windows_per_prefix, 1,
          "Train examples in runs of this many prefixes of one text (nested, longest first; the trainer's "
          "--windows-per-prefix shares one prefix forward between them); the runs share their prompt blocks "
          "through the prefix cache. Must divide --examples");
ABSL_FLAG(uint64_t, seed, 0, "Seed of the train prefixes (eval uses seed + 1); the same seed gives the same file");
ABSL_FLAG(std::string, out, "", "Required. Output file (written to OUT.tmp, then renamed)");
ABSL_FLAG(int, max_running, 64, "Scheduler: sequences decoding at once");
ABSL_FLAG(int, max_batch_tokens, 2048, "Scheduler: rows per forward (prefill chunks + decode rows)");

namespace crossreg {
namespace {

constexpr int kUsageError = 2;  // bad flags or input
constexpr int kRunError = 1;    // generation or writing failed

int Fail(int code, absl::string_view message) {
  std::fprintf(stderr, "crossreg-distill-data: %.*s\n", static_cast<int>(message.size()), message.data());
  return code;
}

std::string Clock(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
}

void PrintProgress(const std::string& split, const ContinuationProgress& p) {
  const double rate = p.seconds > 0 ? static_cast<double>(p.tokens) / p.seconds : 0.0;
  const std::string eta =
      p.done > 0 ? Clock(p.seconds / static_cast<double>(p.done) * static_cast<double>(p.total - p.done)) : "?";
  std::fprintf(stderr, "[distill-data] %s %" PRId64 "/%" PRId64 " continuations, %.0f tok/s, eta %s\n", split.c_str(),
               p.done, p.total, rate, eta.c_str());
}

absl::StatusOr<DistillDataOptions> DistillOptionsFromFlags() {
  DistillDataOptions o;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_prompts), ',', absl::SkipWhitespace())) {
    o.sources.emplace_back(part);
  }
  o.examples = absl::GetFlag(FLAGS_examples);
  o.eval_examples = absl::GetFlag(FLAGS_eval_examples);
  o.holdout_pct = absl::GetFlag(FLAGS_holdout_pct);
  o.prefix_min = absl::GetFlag(FLAGS_prefix_min);
  o.prefix_max = absl::GetFlag(FLAGS_prefix_max);
  o.window = absl::GetFlag(FLAGS_window);
  o.windows_per_prefix = absl::GetFlag(FLAGS_windows_per_prefix);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.max_running = absl::GetFlag(FLAGS_max_running);
  o.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  if (absl::Status s = ValidateDistillDataOptions(o); !s.ok()) return s;
  return o;
}

absl::StatusOr<EngineOptions> EngineOptionsFromFlags() {
  auto backend = ParseBackendChoice(absl::GetFlag(FLAGS_backend));
  if (!backend.ok()) return backend.status();
  if (absl::GetFlag(FLAGS_threads) < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--threads must be >= 0, got ", absl::GetFlag(FLAGS_threads)));
  }
  if (absl::GetFlag(FLAGS_cuda_device) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cuda_device must be >= 0, got ", absl::GetFlag(FLAGS_cuda_device)));
  }
  const int64_t kv_mb = absl::GetFlag(FLAGS_kv_memory_mb);
  if (kv_mb < 1 || kv_mb > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrCat("--kv_memory_mb must be in [1, 16777216], got ", kv_mb));
  }
  EngineOptions options;
  options.model_path = absl::GetFlag(FLAGS_model);
  options.ngram_table_path = "none";  // AR only
  options.backend = *backend;
  options.cpu_threads = absl::GetFlag(FLAGS_threads);
  options.cuda_device = absl::GetFlag(FLAGS_cuda_device);
  options.kv_memory_bytes = kv_mb << 20;
  // Nested prefixes of one text reuse the first one's prompt blocks.
  options.prefix_caching = absl::GetFlag(FLAGS_windows_per_prefix) > 1;
  return options;
}

// --out must name a file in an existing directory: checked before the long run.
absl::Status CheckOutPath(const std::string& out) {
  if (out.empty()) return absl::InvalidArgumentError("--out is required: the output file");
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(out).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("--out: ", parent.string(), " is not a directory"));
  }
  if (std::filesystem::is_directory(out, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("--out: ", out, " is a directory"));
  }
  return absl::OkStatus();
}

int Run() {
  auto options = DistillOptionsFromFlags();
  if (!options.ok()) return Fail(kUsageError, options.status().message());
  const std::string out = absl::GetFlag(FLAGS_out);
  if (absl::Status s = CheckOutPath(out); !s.ok()) return Fail(kUsageError, s.message());
  auto engine_options = EngineOptionsFromFlags();
  if (!engine_options.ok()) return Fail(kUsageError, engine_options.status().message());
  auto corpus = LoadDistillCorpus(*options);
  if (!corpus.ok()) return Fail(kUsageError, corpus.status().message());

  auto loaded = LoadEngineModel(*engine_options);
  if (!loaded.ok()) return Fail(kUsageError, absl::StrCat("--model: ", loaded.status().message()));
  // The frozen base continues the prefixes: a bundled adapter is not loaded onto the backend.
  loaded->adapter.reset();
  loaded->adapter_path.clear();
  auto opened = OpenEngine(*std::move(loaded), *engine_options);
  if (!opened.ok()) return Fail(kUsageError, opened.status().message());
  Engine& engine = **opened;
  const KvCacheConfig& kv = engine.kv->config();
  std::fprintf(stderr, "[distill-data] model %s (vocab %d, context %d), backend %s, KV %d blocks x %d tokens\n",
               engine.model_path.c_str(), engine.model->config.vocab_size, engine.model->config.max_position,
               engine.BackendDescription().c_str(), kv.num_blocks, kv.block_size);

  DistillDataObserver observer;
  observer.on_note = [](const std::string& note) { std::fprintf(stderr, "[distill-data] %s\n", note.c_str()); };
  observer.on_progress = PrintProgress;
  auto data = MakeDistillData(*options, *corpus, engine, observer);
  if (!data.ok()) {
    const bool usage = data.status().code() == absl::StatusCode::kInvalidArgument;
    return Fail(usage ? kUsageError : kRunError, data.status().message());
  }
  if (absl::Status s = WriteDistillDataFile(out, *data); !s.ok()) return Fail(kRunError, s.message());

  std::error_code ec;
  const auto bytes = std::filesystem::file_size(out, ec);
  const int64_t tokens = static_cast<int64_t>(data->train.continuation.size() + data->eval.continuation.size());
  const double seconds = data->header.seconds;
  std::fprintf(stderr,
               "[distill-data] wrote %s (%.1f MiB): train %" PRId64 " examples from %" PRId64 " documents (%zu "
               "tokens), eval %" PRId64 " examples from %" PRId64 " documents (%zu tokens), window %d, prefixes "
               "%d..%d; %" PRId64 " continuation tokens in %.1f s (%.0f tok/s) on %s\n",
               out.c_str(), ec ? 0.0 : static_cast<double>(bytes) / (1 << 20), data->train.examples(),
               data->train.documents, data->train.stream.size(), data->eval.examples(), data->eval.documents,
               data->eval.stream.size(), data->header.window, data->header.prefix_min, data->header.prefix_max,
               tokens, seconds, seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0,
               data->header.backend.c_str());
  if (data->header.windows_per_prefix > 1) {
    std::fprintf(stderr, "[distill-data] %d windows per prefix: the prefix cache served %" PRId64 " of %" PRId64
                 " prompt tokens\n", data->header.windows_per_prefix, data->prompt_tokens_cached,
                 data->prompt_tokens_looked_up);
  }
  return 0;
}

}  // namespace
}  // namespace crossreg

int main(int argc, char** argv) {
  const std::vector<std::string> positional = crossreg::tools::ParseFlags(argc, argv, "crossreg_distill_data",
                              "Distillation data for the drafter trainer: the frozen base model's greedy "
                              "continuations of random prefixes of your corpus.\n"
                              "  crossreg-distill-data --prompts FILE[,FILE...] --out FILE [--examples N] "
                              "[--window W]\n"
                              "Flags may be written with dashes or underscores (--eval-examples).");
  if (positional.size() > 1) {
    return crossreg::Fail(crossreg::kUsageError,
                          "unexpected argument '" + positional[1] + "': every input is a flag (see --help)");
  }
  return crossreg::Run();
}
