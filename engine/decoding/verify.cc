#include "engine/decoding/verify.h"

#include <algorithm>
#include <cmath>

#include "engine/logit_argmax.h"
#include "engine/position_random.h"

namespace crossreg {
namespace {

bool IsCrossRegression(DecodingMode m) { return m == DecodingMode::kLossless || m == DecodingMode::kLossy; }

// Draws from normalize(max(0, p − q)), the residual of a rejected draft drawn from q
// (one-hot at `token` when q is empty), with the position's residual numbers; all mass
// in q → draws from p itself.
int32_t DrawResidual(const std::vector<float>& p, const std::vector<float>& q, int32_t token, int vocab,
                     const PositionRandom& random, int64_t position) {
  thread_local std::vector<float> residual;
  residual.assign(static_cast<size_t>(vocab), 0.0f);
  const bool one_hot = q.empty();
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) {
    const double qi = one_hot ? (i == token ? 1.0 : 0.0) : q[static_cast<size_t>(i)];
    const double r = std::max(0.0, static_cast<double>(p[static_cast<size_t>(i)]) - qi);
    residual[static_cast<size_t>(i)] = static_cast<float>(r);
    sum += r;
  }
  const float* from = p.data();
  if (sum > 0.0) {
    for (auto& r : residual) r = static_cast<float>(r / sum);
    from = residual.data();
  }
  return DrawToken(from, vocab, random, position, RandomLane::kResidual);
}

// The plan's logit rows in plan order, each whole (vocab floats) or a summary
// (BatchRow::summary). Greedy reads go through Argmax and Gap, which give the same
// numbers from either kind; sampling needs whole rows (the decoder asks summaries of
// greedy requests only).
class PlanRows {
 public:
  PlanRows(const StepPlan& plan, const LogitRows& rows, int vocab) : vocab_(vocab), logits_(rows.logits.data()) {
    if (rows.summaries.empty()) return;  // every row whole, in order
    size_t full = 0, summary = 0;
    for (const BatchRow& r : plan.rows) {
      if (!r.want_logits) continue;
      if (r.summary) {
        refs_.push_back({nullptr, &rows.summaries[summary++]});
      } else {
        refs_.push_back({rows.logits.data() + full++ * static_cast<size_t>(vocab), nullptr});
      }
    }
  }
  const float* full(int i) const { return At(i).full; }
  int32_t Argmax(int i) const {
    const Ref r = At(i);
    return r.full != nullptr ? LogitArgmax(r.full, vocab_) : r.summary->argmax;
  }
  // z(token) − max z of row i, untempered. A summary row must have been asked for
  // `token` (the decoder names d_k in P_k's summary).
  double Gap(int i, int32_t token) const {
    const Ref r = At(i);
    if (r.full == nullptr) return static_cast<double>(r.summary->token_logit) - r.summary->max_logit;
    return static_cast<double>(r.full[token]) - r.full[LogitArgmax(r.full, vocab_)];
  }

 private:
  struct Ref {
    const float* full;
    const RowSummary* summary;
  };
  Ref At(int i) const {
    if (refs_.empty()) return {logits_ + static_cast<size_t>(i) * static_cast<size_t>(vocab_), nullptr};
    return refs_[static_cast<size_t>(i)];
  }
  int vocab_;
  const float* logits_;
  std::vector<Ref> refs_;  // empty: no summaries
};

// A fresh draft from predictive row i: its argmax when greedy; else by `rule` (the
// request's, or kSpeculativeSampling for lossy mode): drawn from the row's processed
// distribution with the numbers of `position`, the one it will be verified at, or its
// most likely token. The q is kept only where verification reads it (the residual rule).
// Under a grammar (`state` non-null) every rule reads the row masked in `state` where
// its mask is at hand (prepared or cached; a refill never computes one on the
// scheduler's thread) and admits something.
Draft Propose(const PlanRows& rows, int i, int vocab, const SamplingParams& sampling, SampledVerification rule,
              const PositionRandom& random, int64_t position, const grammar::GrammarState* state) {
  Draft fresh;
  if (sampling.greedy()) {
    fresh.token = state != nullptr ? state->MaskedArgmax(rows.full(i), vocab, /*compute=*/false) : -1;
    if (fresh.token < 0) fresh.token = rows.Argmax(i);
    return fresh;
  }
  const float* z = rows.full(i);
  thread_local std::vector<float> masked;
  const std::shared_ptr<const grammar::TokenMask> mask = state != nullptr ? state->CachedMask() : nullptr;
  if (mask != nullptr && mask->allowed > 0) {
    masked.assign(z, z + vocab);
    grammar::ApplyMask(*mask, masked.data(), vocab);
    z = masked.data();
  }
  switch (rule) {
    case SampledVerification::kSeedExactArgmax:
      // Temperature and the cuts keep the most likely token first: the logits' argmax.
      fresh.token = LogitArgmax(z, vocab);
      return fresh;
    case SampledVerification::kSeedExact:
      ProcessedDistribution(z, vocab, sampling, fresh.q);
      fresh.token = DrawToken(fresh.q.data(), vocab, random, position, RandomLane::kToken);
      fresh.q.clear();
      return fresh;
    case SampledVerification::kSpeculativeSampling:
      ProcessedDistribution(z, vocab, sampling, fresh.q);
      fresh.token = DrawToken(fresh.q.data(), vocab, random, position, RandomLane::kToken);
      return fresh;
  }
  return fresh;
}

}  // namespace

VerifyOutcome Verify(const StepPlan& plan, const LogitRows& logits, int vocab, DraftBuffer drafts,
                     const SamplingParams& sampling, EnergyAcceptor acceptor, ExactnessFault fault,
                     const RowRequests& requests) {
  const int m = plan.drafts;
  const int g = plan.main_chain;
  const PlanRows rows(plan, logits, vocab);
  // Row indices: P_k is k - 1 (k = 1 .. m+1); Q_s of the main chain is pred + s - 1;
  // the forks follow it.
  const int pred = m + 1;
  const bool greedy = sampling.greedy();
  const bool lossy = plan.decoding.mode == DecodingMode::kLossy;
  // Lossy mode is energy acceptance over drafts sampled from q, whatever the request's rule.
  const SampledVerification rule = lossy ? SampledVerification::kSpeculativeSampling : plan.decoding.sampled_verification;
  const bool seed_exact = rule != SampledVerification::kSpeculativeSampling;
  // Every number is the one of the output position it decides (P_k decides plan.generated
  // + k − 1), so a position gets the same number in every mode and forward.
  const PositionRandom random(sampling.seed);
  // The output position P_k decides (the planted fault: the forward's first, for every k).
  auto position_of = [&](int k) {
    return fault == ExactnessFault::kDrawWithTheForwardsCounter ? plan.generated : plan.generated + k - 1;
  };
  thread_local std::vector<float> p, q_now, adjusted, processed;
  const bool adjusting = requests.adjust != nullptr && requests.adjust->active() && requests.history != nullptr;
  grammar::GrammarState* const grammar =
      requests.grammar != nullptr && requests.grammar->active() ? requests.grammar : nullptr;
  // Control row `row` penalised and biased in the context of the committed tokens and
  // the drafts pushed so far. Valid until the next call.
  auto penalised = [&](int row) -> const float* {
    const float* raw = rows.full(row);
    if (!adjusting && grammar == nullptr) return raw;
    adjusted.assign(raw, raw + vocab);
    if (adjusting) requests.history->Apply(*requests.adjust, adjusted.data(), vocab);
    return adjusted.data();
  };
  VerifyOutcome out;
  // The grammar's mask at a control row. A state whose mask is over the work budget, or
  // that admits no token (the vocabulary cannot spell what the grammar requires, or the
  // grammar's ambiguity hit the matcher's limits), fails the request: its row stays
  // unmasked here, and nothing of this outcome is committed.
  auto control_mask = [&]() -> std::shared_ptr<const grammar::TokenMask> {
    std::shared_ptr<const grammar::TokenMask> mask = grammar->Mask();
    if (mask != nullptr && mask->allowed > 0) return mask;
    if (out.error.ok()) out.error = grammar::UnmaskableState(mask.get());
    return nullptr;
  };
  // ... and masked by the grammar's state: the logits P is made from.
  auto control = [&](int row) -> const float* {
    const float* z = penalised(row);
    if (grammar != nullptr) {
      if (auto mask = control_mask()) grammar::ApplyMask(*mask, adjusted.data(), vocab);
    }
    return z;
  };
  // The greedy choice at a control row: the likeliest token the grammar admits.
  auto best_of = [&](int row) -> int32_t {
    if (grammar == nullptr) return adjusting ? LogitArgmax(penalised(row), vocab) : rows.Argmax(row);
    const float* z = penalised(row);
    const int32_t best = grammar->MaskedArgmax(z, vocab);
    if (best >= 0) return best;
    control_mask();  // records why none is allowed
    return LogitArgmax(z, vocab);
  };
  int pushed = 0;          // drafts pushed onto the history, popped before returning
  int grammar_pushed = 0;  // tokens pushed onto the grammar state, popped before returning

  // The log-probability of `token`, chosen at control row `row` in the current context.
  auto record_logprob = [&](int row, int32_t token) {
    if (requests.logprobs < 0) return;
    if (requests.logprobs_mode == LogprobsMode::kRaw) {
      out.logprobs.push_back(LogprobFromLogits(rows.full(row), vocab, token, requests.logprobs));
    } else {
      ProcessedDistribution(control(row), vocab, sampling, processed);
      out.logprobs.push_back(LogprobFromProbs(processed.data(), vocab, token, requests.logprobs));
    }
  };
  // Verify d_1 .. d_m in order against P_k, the control row whose input prefix is
  // x, d_<k; stop at the first rejection (Alg. 2).
  acceptor.Reset();
  int32_t next = -1;
  for (int k = 1; k <= m; ++k) {
    const Draft& d = drafts[static_cast<size_t>(k - 1)];
    bool accepted;
    if (greedy) {
      // T = 0: P is one-hot at the argmax. Lossy energies use the untempered logits:
      // E_k = z(d_k) − max z ≤ 0 (docs/algorithm.md).
      int32_t best;
      double gap;
      if (adjusting || grammar != nullptr) {
        best = best_of(k - 1);
        const float* z = penalised(k - 1);
        gap = static_cast<double>(z[d.token]) - z[best];
      } else {
        best = rows.Argmax(k - 1);
        gap = lossy ? rows.Gap(k - 1, d.token) : 0.0;
      }
      accepted = lossy ? acceptor.AcceptGreedy(k, gap, d.token == best) : d.token == best;
      // Lossy acceptance never takes a token the grammar forbids.
      if (accepted && grammar != nullptr && d.token != best && !grammar->Allows(d.token)) accepted = false;
      if (!accepted) next = best;  // residual of one-hot P minus one-hot q at d ≠ argmax
    } else if (seed_exact) {
      // The token AR draws at this position (the same P, the same number, the same
      // rule); the draft is accepted iff it is that token, and a mismatch commits the
      // drawn one. Whatever was drafted, the committed tokens are AR's.
      ProcessedDistribution(control(k - 1), vocab, sampling, p);
      const int32_t drawn = DrawToken(p.data(), vocab, random, position_of(k), RandomLane::kToken);
      accepted = drawn == d.token;
      if (!accepted) next = drawn;
    } else {
      // P exactly as the AR path processes it (penalties, temperature, top-k, min-p, top-p).
      ProcessedDistribution(control(k - 1), vocab, sampling, p);
      const std::vector<float>* q = &d.q;  // the q d_k was drawn from, cached with it
      if (fault == ExactnessFault::kVerifyCarriedDraftsWithCurrentQ && d.carried) {
        ProcessedDistribution(rows.full(pred + k - 1), vocab, sampling, q_now);
        q = &q_now;
      }
      const double qd = q->empty() ? 1.0 : (*q)[static_cast<size_t>(d.token)];
      const double energy = std::log(static_cast<double>(p[static_cast<size_t>(d.token)])) - std::log(qd);
      accepted = acceptor.Accept(k, energy, std::log(random.Uniform(position_of(k), RandomLane::kAcceptance)));
      if (!accepted) next = DrawResidual(p, *q, d.token, vocab, random, position_of(k));
    }
    out.verdicts.push_back(accepted);
    if (!accepted) {
      record_logprob(k - 1, next);
      break;
    }
    record_logprob(k - 1, d.token);
    ++out.accepted;
    out.tokens.push_back(d.token);
    if (adjusting && fault != ExactnessFault::kPenaliseDraftsWithoutEarlierDrafts) {
      requests.history->PushGenerated(d.token);
      ++pushed;
    }
    if (grammar != nullptr && fault != ExactnessFault::kMaskDraftsInTheCommittedState) {
      grammar->Push(d.token);
      ++grammar_pushed;
    }
  }
  const int n = out.accepted;
  if (n == m) {
    // Every draft accepted: the bonus token comes from P_{m+1} of this forward.
    if (greedy) {
      next = best_of(m);
    } else {
      ProcessedDistribution(control(m), vocab, sampling, p);
      next = DrawToken(p.data(), vocab, random, position_of(m + 1), RandomLane::kToken);
    }
    record_logprob(m, next);
  }
  out.tokens.push_back(next);
  for (int k = pushed; k >= 1; --k) requests.history->PopGenerated(out.tokens[static_cast<size_t>(k - 1)]);
  // Keep the K/V of x_last and the accepted drafts; the rest rolls back.
  out.kv_keep = plan.committed + n;

  // Leaves the grammar state as it came, on every return below.
  auto unwind = [&]() {
    for (; grammar_pushed > 0; --grammar_pushed) grammar->Pop();
  };
  if (!IsCrossRegression(plan.decoding.mode)) {  // AR and n-gram keep no buffer
    unwind();
    return out;
  }
  // The refill is proposed in the grammar state after this commit and the buffer's
  // drafts before each slot; where a carried draft is not legal there (it was drafted
  // after a draft the correction replaced), the slots after it go unmasked: they will
  // be rejected, never accepted wrongly.
  bool masking = grammar != nullptr;
  auto follow = [&](int32_t token) {
    if (!masking) return;
    if (grammar->Allows(token) && !grammar->Exhausted()) {
      grammar->Push(token);
      ++grammar_pushed;
    } else {
      masking = false;
    }
  };
  for (size_t i = static_cast<size_t>(n); i < out.tokens.size(); ++i) follow(out.tokens[i]);
  // The refill's slot j (0-based) is verified next as P_{j+1}, at output position
  // plan.generated + c + j: its coupled draw takes that position's number.
  const int c = n + 1;
  DraftBuffer& refilled = out.next_drafts;
  auto propose = [&](int i) {
    const int64_t position = plan.generated + c + static_cast<int64_t>(refilled.size());
    Draft fresh = Propose(rows, i, vocab, sampling, rule, random, position, masking ? grammar : nullptr);
    follow(fresh.token);
    return fresh;
  };
  // Refill: old slot j+c becomes slot j. Untested drafts carry with their cached q;
  // empty slots take fresh samples from this forward's Q at their old slot. Forked
  // refill: the outcomes with their own chain (n = m, and n < R) take that chain's
  // proposals instead. Which rows refill depends on n and m only, never on values.
  const bool forked = plan.decoding.forked();
  // The untested drafts d_{c+1} .. d_m, kept with the q they were drawn from.
  auto carry_untested = [&]() {
    for (int s = c + 1; s <= m; ++s) {
      Draft carried = std::move(drafts[static_cast<size_t>(s - 1)]);
      carried.carried = true;
      follow(carried.token);
      refilled.push_back(std::move(carried));
    }
  };
  // The rows of outcome n's fork or block: they follow the main chain and the earlier outcomes'.
  const int outcome_rows = n < static_cast<int>(plan.fork_sizes.size()) ? plan.fork_sizes[static_cast<size_t>(n)] : 0;
  int outcome_first = pred + g;
  for (int b = 0; b < n && b < static_cast<int>(plan.fork_sizes.size()); ++b) {
    outcome_first += plan.fork_sizes[static_cast<size_t>(b)];
  }
  if (plan.decoding.blocks()) {
    // Outcome blocks: the block of the outcome that happened proposes the whole buffer;
    // an outcome without one carries its untested drafts.
    if (outcome_rows == 0) carry_untested();
    for (int j = 0; j < outcome_rows; ++j) {
      Draft fresh = propose(outcome_first + j);
      if (fault == ExactnessFault::kBlockDraftsWithTheFirstRowsQ && j > 0) fresh.q = refilled.front().q;
      refilled.push_back(std::move(fresh));
    }
  } else if (forked && n == m) {
    for (int k = m + 1; k < g; ++k) refilled.push_back(propose(pred + k));
  } else if (forked && n < static_cast<int>(plan.fork_sizes.size())) {
    for (int j = 0; j < outcome_rows; ++j) refilled.push_back(propose(outcome_first + j));
  } else {
    carry_untested();
    for (int s = std::max(m, c) + 1; s <= g; ++s) refilled.push_back(propose(pred + s - 1));
  }
  unwind();
  return out;
}

}  // namespace crossreg
