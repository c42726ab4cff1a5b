#include "engine/forward_output.h"

#include "absl/strings/str_cat.h"

#include "engine/logit_argmax.h"

namespace crossreg {

RowSummary SummarizeLogitRow(const float* logits, int vocab, int32_t token) {
  RowSummary s;
  s.argmax = LogitArgmax(logits, vocab);  // the scan's index, vectorised
  s.max_logit = logits[s.argmax];
  s.token_logit = token >= 0 ? logits[token] : s.max_logit;
  return s;
}

absl::StatusOr<LogitRows> ForwardOutput::RowsOf(SequenceId seq, int vocab) const {
  for (const SequenceOutput& o : sequences) {
    if (o.seq != seq) continue;
    if (!o.consecutive) {
      return absl::FailedPreconditionError(
          absl::StrCat("forward output: the logit rows of sequence ", seq, " are interleaved with another's"));
    }
    const size_t V = static_cast<size_t>(vocab);
    return LogitRows(absl::MakeConstSpan(logits).subspan(static_cast<size_t>(o.full_begin) * V,
                                                         static_cast<size_t>(o.full_rows) * V),
                     absl::MakeConstSpan(summaries).subspan(static_cast<size_t>(o.summary_begin),
                                                            static_cast<size_t>(o.summary_rows)));
  }
  return LogitRows();
}

}  // namespace crossreg
