// crossreg-distill-data's work, apart from its flags: corpus -> held-out split ->
// token streams -> random prefixes -> the frozen base model's greedy continuations
// (through the scheduler) -> the DistillData that distill_data_file.h writes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime/open_engine.h"
#include "distill/distill_corpus.h"
#include "distill/distill_data_file.h"
#include "distill/distill_split.h"
#include "distill/greedy_continuations.h"

namespace crossreg {

// One field per flag of crossreg-distill-data, with its default.
struct DistillDataOptions {
  std::vector<std::string> sources;  // --prompts: files (.jsonl: a document per line) or directories
  int64_t examples = 8192;           // train examples
  int64_t eval_examples = 256;
  double holdout_pct = 2.5;          // share of documents held out for eval (by text hash)
  int32_t prefix_min = 8;
  int32_t prefix_max = 768;          // capped at the model's context minus the window
  int32_t window = 16;               // continuation tokens per example
  // Train examples in runs of this many nested prefixes of one text (the trainer's
  // --windows-per-prefix); runs share their prompt blocks through the prefix cache.
  int32_t windows_per_prefix = 1;
  uint64_t seed = 0;                 // train prefixes; eval uses seed + 1
  int max_running = 64;              // scheduler: sequences decoding at once
  int max_batch_tokens = 2048;       // scheduler: rows per forward
};

// Ranges of every option; messages name the flag ("--window must be >= 2, got 1").
absl::Status ValidateDistillDataOptions(const DistillDataOptions& options);

struct DistillDataObserver {
  std::function<void(const std::string& note)> on_note;  // e.g. "--prefix_max 768 capped at 1008"
  // Per split ("train", "eval"), every progress_interval and at its end.
  std::function<void(const std::string& split, const ContinuationProgress&)> on_progress;
  std::chrono::milliseconds progress_interval{2000};
};

// The corpus read and split (before any model is loaded, so that a bad --prompts
// fails fast).
struct DistillCorpus {
  std::vector<CorpusDocument> documents;
  DocumentSplit split;
};
absl::StatusOr<DistillCorpus> LoadDistillCorpus(const DistillDataOptions& options);

// The rest of the run on an open engine (its adapter, if any, is not used: plain AR
// on the base). Errors name the flag they concern where there is one.
absl::StatusOr<DistillData> MakeDistillData(const DistillDataOptions& options, const DistillCorpus& corpus,
                                            Engine& engine, const DistillDataObserver& observer = {});

// The end-of-sequence id put after every document: the tokenizer's, else the model's
// first; -1 when neither has one.
int32_t DocumentEosId(const Model& model);

}  // namespace crossreg
