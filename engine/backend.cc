#include "engine/backend.h"

#include <algorithm>
#include <map>
#include <utility>

namespace crossreg {

namespace {

// Which logit rows of the output are whose, from the plan's row order.
void DescribeSequences(const ForwardPlan& plan, const ForwardBatch& batch, ForwardOutput& out) {
  out.sequences.clear();
  size_t next_summary = 0;
  int full = 0;
  for (size_t j = 0; j < plan.logit_rows.size(); ++j) {
    const SequenceId seq = batch.rows[static_cast<size_t>(plan.logit_rows[j])].seq;
    const bool summary =
        next_summary < plan.summary_rows.size() && static_cast<size_t>(plan.summary_rows[next_summary]) == j;
    if (out.sequences.empty() || out.sequences.back().seq != seq) {
      SequenceOutput& o = out.sequences.emplace_back();
      o.seq = seq;
      o.full_begin = full;
      o.summary_begin = static_cast<int>(next_summary);
    }
    SequenceOutput& o = out.sequences.back();
    if (summary) {
      ++o.summary_rows;
      ++next_summary;
    } else {
      ++o.full_rows;
      ++full;
    }
  }
  // A sequence with two runs of rows has no single window.
  for (SequenceOutput& o : out.sequences) {
    for (const SequenceOutput& other : out.sequences) {
      if (&other != &o && other.seq == o.seq) o.consecutive = false;
    }
  }
}

}  // namespace

absl::Status Backend::Execute(const ForwardBatch& batch, KvTransaction& kv, ForwardOutput& out) {
  absl::StatusOr<ForwardPlan> plan = PlanForward(batch, kv, config_, storage_);
  if (!plan.ok()) return plan.status();
  if (absl::Status computed = Compute(*plan, out); !computed.ok()) {
    // Give back the blocks the plan reserved: the K/V written beyond each sequence's
    // length is garbage nobody will read.
    kv.RollBack();
    return computed;
  }
  DescribeSequences(*plan, batch, out);
  return absl::OkStatus();
}

absl::Status Backend::Forward(const ForwardBatch& batch, PagedKvCache& kv, ForwardOutput& out) {
  // The control rows written per sequence, counted before Execute: a sequence keeps
  // its length plus these.
  std::map<SequenceId, int64_t> written;
  for (const BatchRow& row : batch.rows) written[row.seq] += row.predictive ? 0 : 1;
  KvTransaction transaction(kv);
  if (absl::Status s = Execute(batch, transaction, out); !s.ok()) return s;
  for (const auto& [seq, count] : written) {
    if (count == 0) continue;
    if (absl::Status s = transaction.Commit(seq, kv.length(seq) + count); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Backend::Forward(const ForwardBatch& batch, PagedKvCache& kv, std::vector<float>& logits) {
  if (batch.num_summary_rows() > 0) {
    return absl::InvalidArgumentError("forward: the batch asks for row summaries; pass a ForwardOutput");
  }
  ForwardOutput out;
  out.logits.swap(logits);  // reuse the caller's allocation
  const absl::Status s = Forward(batch, kv, out);
  logits.swap(out.logits);
  return s;
}

void SplitLogitRows(const ForwardPlan& plan, absl::Span<const float> dense, int vocab, ForwardOutput& out) {
  const size_t V = static_cast<size_t>(vocab);
  const size_t rows = plan.logit_rows.size();
  out.logits.resize(static_cast<size_t>(plan.full_logit_rows()) * V);
  out.summaries.resize(plan.summary_rows.size());
  size_t next_summary = 0, full = 0;
  for (size_t j = 0; j < rows; ++j) {
    const float* row = dense.data() + j * V;
    if (next_summary < plan.summary_rows.size() && static_cast<size_t>(plan.summary_rows[next_summary]) == j) {
      out.summaries[next_summary] = SummarizeLogitRow(row, vocab, plan.summary_tokens[next_summary]);
      ++next_summary;
    } else {
      std::copy(row, row + V, out.logits.begin() + static_cast<std::ptrdiff_t>(full * V));
      ++full;
    }
  }
}

}  // namespace crossreg
