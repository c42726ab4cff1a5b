#include "engine/forward_output.h"

#include "engine/cpu/ops.h"

namespace crossreg {

RowSummary SummarizeLogitRow(const float* logits, int vocab, int32_t token) {
  RowSummary s;
  s.argmax = cpu::Argmax(logits, vocab);  // the scan's index, vectorised
  s.max_logit = logits[s.argmax];
  s.token_logit = token >= 0 ? logits[token] : s.max_logit;
  return s;
}

}  // namespace crossreg
