// Verification and commit of one decode iteration (ALGORITHM.md "Verify", "Commit",
// "Refill"), as a pure function: the plan that ran, its logits, the drafts it tested
// and the sampling transforms (with the seed, whose numbers are fixed by output
// position: engine/position_random.h) in; what to commit, what the KV keeps and the
// next draft buffer out. It touches no cache and no decoder, so
// every exactness rule is testable on hand-made logits (tests/unit/verify_test.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/decoding/energy_acceptor.h"
#include "engine/decoding/logit_adjustments.h"
#include "engine/decoding/step_plan.h"
#include "engine/decoding/token_logprobs.h"
#include "engine/forward_output.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/sampler.h"

namespace crossreg {

// One buffered draft d_j with the distribution q_j it was drawn from.
struct Draft {
  int32_t token = 0;
  // Processed Q distribution (vocab floats) where verification reads it (speculative
  // sampling, lossy); empty = one-hot at token, or a seed-exact draft (never read).
  std::vector<float> q;
  bool carried = false;  // survived an earlier verification untested
};
using DraftBuffer = std::vector<Draft>;

struct VerifyOutcome {
  int accepted = 0;                // n: drafts accepted, a prefix d_1 .. d_n
  std::vector<int32_t> tokens;     // to commit: d_1 .. d_n, then the correction (n < m) or bonus (n = m)
  std::vector<bool> verdicts;      // verdicts[k-1]: d_k accepted; one per draft reached (min(n + 1, m))
  DraftBuffer next_drafts;         // the buffer for the next iteration (carry + refill)
  int64_t kv_keep = 0;             // positions the sequence's cache keeps: L + n (x_last, accepted drafts)
  std::vector<TokenLogprob> logprobs;  // one per token, when asked (RowRequests::logprobs >= 0)
  // A grammar's control row could not be masked (its mask over the work budget, or a
  // state that admits no token): nothing of this outcome may be committed, and the
  // request ends with this error rather than continue unconstrained.
  absl::Status error;
};

// What a request asks of its control rows besides P. Penalties and biases change
// each row before anything reads it, in the context of the committed tokens plus the
// drafts before that row (as if they had been committed); the committed tokens'
// log-probabilities come from the rows that chose or verified them. Both need whole
// rows (no summaries).
//
// A grammar masks every row (control rows P_k in the state after the committed tokens
// and d_1 .. d_{k-1}; the refill's fresh proposals in the state after the new commit
// and the drafts before them in the buffer), so lossless is exact with respect to the
// grammar-masked distribution and every fresh draft is legal where it was proposed.
// A control row's state that cannot be masked (grammar_budget.h) or admits no token
// is VerifyOutcome::error; a refill's state that cannot be masked proposes from the
// row as computed (a draft is only a guess: verification judges it).
struct RowRequests {
  const LogitAdjustments* adjust = nullptr;  // null or inactive: the rows as computed
  TokenHistory* history = nullptr;           // the committed tokens; Verify leaves it as it came
  int logprobs = -1;                         // -1: none; else each token's and the top `logprobs`
  LogprobsMode logprobs_mode = LogprobsMode::kRaw;
  grammar::GrammarState* grammar = nullptr;  // null or inactive: none; Verify leaves it as it came
};

// `logits`: the plan's plan.logit_rows() rows in plan order: P_1 .. P_{m+1} (control),
// Q_1 .. Q_g (branch 0), then each fork's or outcome block's rows; each row whole (vocab floats, in
// logits.logits) or, where the plan asked (BatchRow::summary, greedy requests only), a
// RowSummary (in logits.summaries) whose token is the d_k its P_k tests. `drafts`: the
// m drafts the plan's control rows carried, d_1 first. `acceptor` holds β, τ and the
// request's γ. Sampling (T > 0) draws P_k's numbers for output position
// plan.generated + k − 1 under sampling.seed, by plan.decoding.sampled_verification.
// (Tests plant deliberate bugs through engine/decoding/exactness_fault.h.)
VerifyOutcome Verify(const StepPlan& plan, const LogitRows& logits, int vocab, DraftBuffer drafts,
                     const SamplingParams& sampling, EnergyAcceptor acceptor, const RowRequests& requests = {});

}  // namespace crossreg
