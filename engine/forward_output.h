// What a forward hands back for its logit rows: whole rows of logits, or, for rows that
// asked for one, a 12-byte summary of the row.
//
// Why summaries: greedy decoding reads three numbers from a row of logits (ALGORITHM.md
// "Verify" at T = 0): the argmax (acceptance of d_k, the correction, the bonus token, a
// greedy draft), and for lossy energies the untempered gap z(d_k) − max z, where d_k is
// known before the forward. At vocab 128256 a row of logits is 513 KB; a verify step of
// 33 rows moves 16.9 MB off a GPU for 396 bytes of information. A backend reduces the
// row where the logits are and returns only the summary (CUDA: on the device; CPU: the
// reference reduction, SummarizeLogitRow, over the logits it computed anyway).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/kv/paged_kv_cache.h"

namespace crossreg {

// The summary of one row of logits z: its argmax (the lowest index among equal maxima,
// as Argmax in engine/sampler.h), max z, and z at the row's summary_token (max z when
// the row names none).
struct RowSummary {
  int32_t argmax = 0;
  float max_logit = 0.0f;
  float token_logit = 0.0f;
};
static_assert(sizeof(RowSummary) == 12, "RowSummary crosses from the device as 12 bytes");

// Summarises `vocab` logits: the CPU reference of every backend's reduction.
// `token` in [-1, vocab); -1 = none.
RowSummary SummarizeLogitRow(const float* logits, int vocab, int32_t token);

// A read-only window onto some consecutive logit rows of a ForwardOutput (one
// sequence's share of a batch). Which row is which kind is the plan's business
// (BatchRow::summary); this only holds the two runs of data.
struct LogitRows {
  absl::Span<const float> logits;
  absl::Span<const RowSummary> summaries;

  LogitRows() = default;
  // Full rows only (hand-made logits in tests, backends asked for no summaries).
  LogitRows(absl::Span<const float> full) : logits(full) {}  // NOLINT(google-explicit-constructor)
  LogitRows(const std::vector<float>& full) : logits(full) {}  // NOLINT(google-explicit-constructor)
  LogitRows(absl::Span<const float> full, absl::Span<const RowSummary> summary) : logits(full), summaries(summary) {}
};

// Where one sequence's logit rows sit in a ForwardOutput: `full_rows` whole rows from
// row `full_begin` of `logits`, `summary_rows` summaries from `summary_begin`.
// `consecutive` is false when the sequence's logit rows are interleaved with another
// sequence's in the batch (then they form no single window).
struct SequenceOutput {
  SequenceId seq = 0;
  int full_begin = 0, full_rows = 0;
  int summary_begin = 0, summary_rows = 0;
  bool consecutive = true;
};

// A forward's logit rows in batch order, split by kind: `logits` holds the full rows
// (vocab floats each) and `summaries` the summary rows, each in batch order.
// `sequences` (Backend::Execute fills it from the plan) says which rows are whose: the
// one description of the layout every reader uses.
struct ForwardOutput {
  std::vector<float> logits;
  std::vector<RowSummary> summaries;
  std::vector<SequenceOutput> sequences;  // each sequence with logit rows, by its first one

  // The window of `seq`'s logit rows: empty for a sequence without any (a prefill
  // chunk), FailedPrecondition when its rows are interleaved with another's.
  absl::StatusOr<LogitRows> RowsOf(SequenceId seq, int vocab) const;
};

}  // namespace crossreg
