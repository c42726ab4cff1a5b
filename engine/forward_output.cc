#include "engine/forward_output.h"

#include "engine/sampler.h"

namespace crossreg {

RowSummary SummarizeLogitRow(const float* logits, int vocab, int32_t token) {
  RowSummary s;
  s.argmax = Argmax(logits, vocab);
  s.max_logit = logits[s.argmax];
  s.token_logit = token >= 0 ? logits[token] : s.max_logit;
  return s;
}

}  // namespace crossreg
