#include "distill/distill_data_builder.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "distill/distill_prefix_sampler.h"

namespace crossreg {
namespace {

absl::Status FlagError(const std::string& message) { return absl::InvalidArgumentError(message); }

void Note(const DistillDataObserver& observer, const std::string& note) {
  if (observer.on_note) observer.on_note(note);
}

// Examples of one split: prefixes drawn from its stream, continued by the base.
absl::Status FillSplit(const std::string& name, int64_t examples, int32_t group, uint64_t seed, int32_t prefix_max,
                       const DistillDataOptions& options, Scheduler& scheduler, const DistillDataObserver& observer,
                       DistillSplitData& split) {
  if (examples == 0) return absl::OkStatus();
  auto prefixes = SamplePrefixGroups(static_cast<int64_t>(split.stream.size()), examples / group, group,
                                     options.prefix_min, prefix_max, seed);
  if (!prefixes.ok()) {
    return FlagError(absl::StrCat("--prefix_min ", options.prefix_min, ": the ", name, " split (", split.documents,
                                  " documents) is too short: ", prefixes.status().message()));
  }
  GreedyContinuationOptions continuation;
  continuation.window = options.window;
  continuation.max_in_flight = options.max_running + 8;
  continuation.group = group;
  continuation.request_id_prefix = name + "-";
  continuation.progress_interval = observer.progress_interval;
  if (observer.on_progress) {
    continuation.on_progress = [&](const ContinuationProgress& p) { observer.on_progress(name, p); };
  }
  auto tokens = ContinueGreedily(scheduler, split.stream, *prefixes, continuation);
  if (!tokens.ok()) return tokens.status();
  split.start = std::move(prefixes->start);
  split.length = std::move(prefixes->length);
  split.continuation = *std::move(tokens);
  return absl::OkStatus();
}

}  // namespace

int32_t DocumentEosId(const Model& model) {
  if (model.tokenizer->eos_id() >= 0) return model.tokenizer->eos_id();
  return model.config.eos_token_ids.empty() ? -1 : model.config.eos_token_ids.front();
}

absl::Status ValidateDistillDataOptions(const DistillDataOptions& o) {
  if (o.sources.empty()) return FlagError("--prompts is required: a comma-separated list of files or directories");
  if (o.examples < 1) return FlagError(absl::StrCat("--examples must be >= 1, got ", o.examples));
  if (o.eval_examples < 0) return FlagError(absl::StrCat("--eval_examples must be >= 0, got ", o.eval_examples));
  if (!std::isfinite(o.holdout_pct) || o.holdout_pct < 0 || o.holdout_pct >= 100) {
    return FlagError(absl::StrCat("--holdout_pct must be in [0, 100), got ", o.holdout_pct));
  }
  if (o.holdout_pct == 0 && o.eval_examples > 0) {
    return FlagError(absl::StrCat("--eval_examples ", o.eval_examples,
                                  " needs held-out documents, but --holdout_pct is 0 (set --eval_examples 0)"));
  }
  if (o.prefix_min < 2) return FlagError(absl::StrCat("--prefix_min must be >= 2, got ", o.prefix_min));
  if (o.prefix_max < o.prefix_min) {
    return FlagError(absl::StrCat("--prefix_max (", o.prefix_max, ") must be >= --prefix_min (", o.prefix_min, ")"));
  }
  if (o.window < 2) return FlagError(absl::StrCat("--window must be >= 2, got ", o.window));
  if (o.windows_per_prefix < 1 || o.examples % o.windows_per_prefix != 0) {
    return FlagError(absl::StrCat("--windows_per_prefix ", o.windows_per_prefix, " must be >= 1 and divide --examples ",
                                  o.examples));
  }
  if (o.max_running < 1 || o.max_running > 65536) {
    return FlagError(absl::StrCat("--max_running must be in [1, 65536], got ", o.max_running));
  }
  if (o.max_batch_tokens < 1) return FlagError(absl::StrCat("--max_batch_tokens must be >= 1, got ", o.max_batch_tokens));
  // Continuations are held in memory: examples x window int32 tokens.
  constexpr int64_t kMaxExamples = int64_t{1} << 31;
  if (o.examples > kMaxExamples) return FlagError(absl::StrCat("--examples must be <= ", kMaxExamples));
  if (o.eval_examples > kMaxExamples) return FlagError(absl::StrCat("--eval_examples must be <= ", kMaxExamples));
  return absl::OkStatus();
}

absl::StatusOr<DistillCorpus> LoadDistillCorpus(const DistillDataOptions& options) {
  if (absl::Status s = ValidateDistillDataOptions(options); !s.ok()) return s;
  DistillCorpus corpus;
  auto documents = ReadCorpus(options.sources);
  if (!documents.ok()) return documents.status();
  corpus.documents = *std::move(documents);
  auto split = SplitDocuments(corpus.documents, options.holdout_pct);
  if (!split.ok()) return split.status();
  corpus.split = *std::move(split);
  return corpus;
}

absl::StatusOr<DistillData> MakeDistillData(const DistillDataOptions& options, const DistillCorpus& corpus,
                                            Engine& engine, const DistillDataObserver& observer) {
  if (absl::Status s = ValidateDistillDataOptions(options); !s.ok()) return s;
  const Model& model = *engine.model;
  const int max_position = model.config.max_position;
  // A prefix and its window must fit the context (the decoder stops at it).
  const int32_t prefix_max = std::min(options.prefix_max, max_position - options.window);
  if (prefix_max < options.prefix_min) {
    return FlagError(absl::StrCat("--prefix_min ", options.prefix_min, " plus --window ", options.window,
                                  " exceed the model's context of ", max_position, " tokens"));
  }
  if (prefix_max < options.prefix_max) {
    Note(observer, absl::StrCat("--prefix_max ", options.prefix_max, " capped at ", prefix_max,
                                " (the model's context ", max_position, " minus --window ", options.window, ")"));
  }
  const std::vector<CorpusDocument>& documents = corpus.documents;
  const DocumentSplit& split = corpus.split;
  if (split.last_document_held_out) {
    Note(observer, absl::StrCat("--holdout_pct ", options.holdout_pct, " held out no document by hash: the last one (",
                                documents[split.eval.back()].origin, ") is the eval split"));
  }
  const StreamSpecialIds special{.bos = model.tokenizer->bos_id(), .eos = DocumentEosId(model)};

  DistillData data;
  DistillDataHeader& h = data.header;
  h.model = engine.model_path;
  h.vocab_size = model.config.vocab_size;
  h.bos_id = special.bos;
  h.eos_id = special.eos;
  h.window = options.window;
  h.windows_per_prefix = options.windows_per_prefix;
  h.prefix_min = options.prefix_min;
  h.prefix_max = prefix_max;
  h.seed = options.seed;
  h.holdout_pct = options.holdout_pct;
  h.temperature = 0;
  h.sources = options.sources;
  h.backend = engine.BackendDescription();
  data.train.documents = static_cast<int64_t>(split.train.size());
  data.train.stream = TokenStream(documents, split.train, *model.tokenizer, special);
  data.eval.documents = static_cast<int64_t>(split.eval.size());
  data.eval.stream = TokenStream(documents, split.eval, *model.tokenizer, special);
  Note(observer, absl::StrCat("corpus: ", documents.size(), " documents; train ", data.train.documents,
                              " documents, ", data.train.stream.size(), " tokens; eval ", data.eval.documents,
                              " documents, ", data.eval.stream.size(), " tokens"));

  // The longest request must fit the KV cache alone: its prefix, its window and the
  // decode step's one row.
  int64_t longest_prefix = std::min<int64_t>(prefix_max, static_cast<int64_t>(data.train.stream.size()) - 1);
  if (options.eval_examples > 0) {
    longest_prefix =
        std::max(longest_prefix, std::min<int64_t>(prefix_max, static_cast<int64_t>(data.eval.stream.size()) - 1));
  }
  const KvCacheConfig& kv = engine.kv->config();
  const int64_t kv_positions = int64_t{kv.num_blocks} * kv.block_size;
  if (kv_positions < longest_prefix + options.window + 1) {
    return FlagError(absl::StrCat("--kv_memory_mb: the KV cache holds ", kv_positions,
                                  " positions, fewer than the longest prefix plus window (", longest_prefix, " + ",
                                  options.window, " + 1); give more memory or a smaller --prefix_max"));
  }

  SchedulerOptions scheduler_options;
  scheduler_options.max_batch_tokens = options.max_batch_tokens;
  scheduler_options.max_running = options.max_running;
  scheduler_options.max_queue = options.max_running + 16;  // above the sliding window of max_running + 8
  scheduler_options.decoding = engine.Environment();
  scheduler_options.decoding.cost_curve = nullptr;         // AR only: nothing to adapt
  scheduler_options.decoding.acceptance_memory = nullptr;
  Scheduler scheduler(scheduler_options, *engine.backend, *engine.kv);
  scheduler.Start();
  const auto begin = std::chrono::steady_clock::now();
  if (absl::Status s = FillSplit("train", options.examples, options.windows_per_prefix, options.seed, prefix_max,
                                 options, scheduler, observer, data.train);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = FillSplit("eval", options.eval_examples, 1, options.seed + 1, prefix_max, options, scheduler,
                                 observer, data.eval);
      !s.ok()) {
    return s;
  }
  h.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const SchedulerStats stats = scheduler.Stats();
  data.prompt_tokens_cached = stats.prefix_cache_hits;
  data.prompt_tokens_looked_up = stats.prefix_cache_queries;
  return data;
}

}  // namespace crossreg
