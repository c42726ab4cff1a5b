#include "engine/decoding/verify.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "engine/decoding/exactness_fault.h"

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

// One verification (Alg. 2 and the refill), its shared state as members so that each
// part reads as a function of its own. `kFault` plants one of the ExactnessFault bugs
// (exactness_fault.h) for the tests that must catch it; the production instantiation is
// kNone, where every fault test is a compile-time constant.
template <ExactnessFault kFault>
class Verifier {
 public:
  Verifier(const StepPlan& plan, const LogitRows& logits, int vocab, DraftBuffer drafts, const SamplingParams& sampling,
           EnergyAcceptor acceptor, const RowRequests& requests)
      : plan_(plan),
        rows_(plan, logits, vocab),
        vocab_(vocab),
        drafts_(std::move(drafts)),
        sampling_(sampling),
        acceptor_(std::move(acceptor)),
        requests_(requests),
        m_(plan.drafts),
        g_(plan.main_chain),
        pred_(plan.drafts + 1),
        greedy_(sampling.greedy()),
        lossy_(plan.decoding.mode == DecodingMode::kLossy),
        // Lossy mode is energy acceptance over drafts sampled from q, whatever the
        // request's rule.
        rule_(lossy_ ? SampledVerification::kSpeculativeSampling : plan.decoding.sampled_verification),
        seed_exact_(rule_ != SampledVerification::kSpeculativeSampling),
        // Every number is the one of the output position it decides (P_k decides
        // plan.generated + k − 1), so a position gets the same number in every mode and
        // forward.
        random_(sampling.seed),
        adjusting_(requests.adjust != nullptr && requests.adjust->active() && requests.history != nullptr),
        grammar_(requests.grammar != nullptr && requests.grammar->active() ? requests.grammar : nullptr) {}

  VerifyOutcome Run() {
    const int32_t next = JudgeDrafts();
    out_.tokens.push_back(next);
    for (int k = pushed_; k >= 1; --k) requests_.history->PopGenerated(out_.tokens[static_cast<size_t>(k - 1)]);
    // Keep the K/V of x_last and the accepted drafts; the rest rolls back.
    out_.kv_keep = plan_.committed + out_.accepted;
    if (IsCrossRegression(plan_.decoding.mode)) Refill();  // AR and n-gram keep no buffer
    // The grammar state leaves as it came.
    for (; grammar_pushed_ > 0; --grammar_pushed_) grammar_->Pop();
    return std::move(out_);
  }

 private:
  // The output position P_k decides (the planted fault: the forward's first, for every k).
  int64_t PositionOf(int k) const {
    if constexpr (kFault == ExactnessFault::kDrawWithTheForwardsCounter) return plan_.generated;
    return plan_.generated + k - 1;
  }

  // Control row `row` penalised and biased in the context of the committed tokens and
  // the drafts pushed so far. Valid until the next call.
  const float* Penalised(int row) {
    const float* raw = rows_.full(row);
    if (!adjusting_ && grammar_ == nullptr) return raw;
    adjusted_.assign(raw, raw + vocab_);
    if (adjusting_) requests_.history->Apply(*requests_.adjust, adjusted_.data(), vocab_);
    return adjusted_.data();
  }
  // The grammar's mask at a control row. A state whose mask is over the work budget, or
  // that admits no token (the vocabulary cannot spell what the grammar requires, or the
  // grammar's ambiguity hit the matcher's limits), fails the request: its row stays
  // unmasked here, and nothing of this outcome is committed.
  std::shared_ptr<const grammar::TokenMask> ControlMask() {
    std::shared_ptr<const grammar::TokenMask> mask = grammar_->Mask();
    if (mask != nullptr && mask->allowed > 0) return mask;
    if (out_.error.ok()) out_.error = grammar::UnmaskableState(mask.get());
    return nullptr;
  }
  // ... and masked by the grammar's state: the logits P is made from.
  const float* Control(int row) {
    const float* z = Penalised(row);
    if (grammar_ != nullptr) {
      if (auto mask = ControlMask()) grammar::ApplyMask(*mask, adjusted_.data(), vocab_);
    }
    return z;
  }
  // The greedy choice at a control row: the likeliest token the grammar admits.
  int32_t BestOf(int row) {
    if (grammar_ == nullptr) return adjusting_ ? LogitArgmax(Penalised(row), vocab_) : rows_.Argmax(row);
    const float* z = Penalised(row);
    const int32_t best = grammar_->MaskedArgmax(z, vocab_);
    if (best >= 0) return best;
    ControlMask();  // records why none is allowed
    return LogitArgmax(z, vocab_);
  }
  // The log-probability of `token`, chosen at control row `row` in the current context.
  void RecordLogprob(int row, int32_t token) {
    if (requests_.logprobs < 0) return;
    if (requests_.logprobs_mode == LogprobsMode::kRaw) {
      out_.logprobs.push_back(LogprobFromLogits(rows_.full(row), vocab_, token, requests_.logprobs));
    } else {
      ProcessedDistribution(Control(row), vocab_, sampling_, processed_);
      out_.logprobs.push_back(LogprobFromProbs(processed_.data(), vocab_, token, requests_.logprobs));
    }
  }

  // Verifies d_1 .. d_m in order against P_k, the control row whose input prefix is
  // x, d_<k; stops at the first rejection (Alg. 2). Returns the token committed after
  // the accepted drafts: the correction, or the bonus when all were accepted.
  int32_t JudgeDrafts() {
    acceptor_.Reset();
    int32_t next = -1;
    for (int k = 1; k <= m_; ++k) {
      const Draft& d = drafts_[static_cast<size_t>(k - 1)];
      const bool accepted = greedy_ ? JudgeGreedy(k, d, &next) : seed_exact_ ? JudgeSeedExact(k, d, &next)
                                                                            : JudgeSpeculative(k, d, &next);
      out_.verdicts.push_back(accepted);
      if (!accepted) {
        RecordLogprob(k - 1, next);
        return next;
      }
      RecordLogprob(k - 1, d.token);
      ++out_.accepted;
      out_.tokens.push_back(d.token);
      if (adjusting_ && kFault != ExactnessFault::kPenaliseDraftsWithoutEarlierDrafts) {
        requests_.history->PushGenerated(d.token);
        ++pushed_;
      }
      if (grammar_ != nullptr && kFault != ExactnessFault::kMaskDraftsInTheCommittedState) {
        grammar_->Push(d.token);
        ++grammar_pushed_;
      }
    }
    // Every draft accepted: the bonus token comes from P_{m+1} of this forward.
    if (greedy_) {
      next = BestOf(m_);
    } else {
      ProcessedDistribution(Control(m_), vocab_, sampling_, p_);
      next = DrawToken(p_.data(), vocab_, random_, PositionOf(m_ + 1), RandomLane::kToken);
    }
    RecordLogprob(m_, next);
    return next;
  }
  // T = 0: P is one-hot at the argmax. Lossy energies use the untempered logits:
  // E_k = z(d_k) − max z ≤ 0 (docs/algorithm.md).
  bool JudgeGreedy(int k, const Draft& d, int32_t* next) {
    int32_t best;
    double gap;
    if (adjusting_ || grammar_ != nullptr) {
      best = BestOf(k - 1);
      const float* z = Penalised(k - 1);
      gap = static_cast<double>(z[d.token]) - z[best];
    } else {
      best = rows_.Argmax(k - 1);
      gap = lossy_ ? rows_.Gap(k - 1, d.token) : 0.0;
    }
    bool accepted = lossy_ ? acceptor_.AcceptGreedy(k, gap, d.token == best) : d.token == best;
    // Lossy acceptance never takes a token the grammar forbids.
    if (accepted && grammar_ != nullptr && d.token != best && !grammar_->Allows(d.token)) accepted = false;
    if (!accepted) *next = best;  // residual of one-hot P minus one-hot q at d ≠ argmax
    return accepted;
  }
  // The token AR draws at this position (the same P, the same number, the same rule);
  // the draft is accepted iff it is that token, and a mismatch commits the drawn one.
  // Whatever was drafted, the committed tokens are AR's.
  bool JudgeSeedExact(int k, const Draft& d, int32_t* next) {
    ProcessedDistribution(Control(k - 1), vocab_, sampling_, p_);
    const int32_t drawn = DrawToken(p_.data(), vocab_, random_, PositionOf(k), RandomLane::kToken);
    if (drawn != d.token) *next = drawn;
    return drawn == d.token;
  }
  // Speculative sampling (and lossy energy acceptance): P exactly as the AR path
  // processes it (penalties, temperature, top-k, min-p, top-p) against the q d_k was
  // drawn from, cached with it.
  bool JudgeSpeculative(int k, const Draft& d, int32_t* next) {
    ProcessedDistribution(Control(k - 1), vocab_, sampling_, p_);
    const std::vector<float>* q = &d.q;
    if constexpr (kFault == ExactnessFault::kVerifyCarriedDraftsWithCurrentQ) {
      if (d.carried) {
        ProcessedDistribution(rows_.full(pred_ + k - 1), vocab_, sampling_, q_now_);
        q = &q_now_;
      }
    }
    const double qd = q->empty() ? 1.0 : (*q)[static_cast<size_t>(d.token)];
    const double energy = std::log(static_cast<double>(p_[static_cast<size_t>(d.token)])) - std::log(qd);
    const bool accepted = acceptor_.Accept(k, energy, std::log(random_.Uniform(PositionOf(k), RandomLane::kAcceptance)));
    if (!accepted) *next = DrawResidual(p_, *q, d.token, vocab_, random_, PositionOf(k));
    return accepted;
  }

  // The refill is proposed in the grammar state after this commit and the buffer's
  // drafts before each slot; where a carried draft is not legal there (it was drafted
  // after a draft the correction replaced), the slots after it go unmasked: they will
  // be rejected, never accepted wrongly.
  void Follow(int32_t token) {
    if (!masking_) return;
    if (grammar_->Allows(token) && !grammar_->Exhausted()) {
      grammar_->Push(token);
      ++grammar_pushed_;
    } else {
      masking_ = false;
    }
  }
  // A fresh draft from row `i`. The refill's slot j (0-based) is verified next as
  // P_{j+1}, at output position plan.generated + c + j: its coupled draw takes that
  // position's number.
  Draft ProposeFrom(int i) {
    const int c = out_.accepted + 1;
    const int64_t position = plan_.generated + c + static_cast<int64_t>(out_.next_drafts.size());
    Draft fresh = Propose(rows_, i, vocab_, sampling_, rule_, random_, position, masking_ ? grammar_ : nullptr);
    Follow(fresh.token);
    return fresh;
  }
  // The untested drafts d_{c+1} .. d_m, kept with the q they were drawn from.
  void CarryUntested() {
    for (int s = out_.accepted + 2; s <= m_; ++s) {
      Draft carried = std::move(drafts_[static_cast<size_t>(s - 1)]);
      carried.carried = true;
      Follow(carried.token);
      out_.next_drafts.push_back(std::move(carried));
    }
  }
  // Refill: old slot j+c becomes slot j. Untested drafts carry with their cached q;
  // empty slots take fresh samples from this forward's Q at their old slot. Forked
  // refill: the outcomes with their own chain (n = m, and n < R) take that chain's
  // proposals instead. Which rows refill depends on n and m only, never on values.
  void Refill() {
    const int n = out_.accepted;
    const int c = n + 1;
    masking_ = grammar_ != nullptr;
    for (size_t i = static_cast<size_t>(n); i < out_.tokens.size(); ++i) Follow(out_.tokens[i]);
    const bool forked = plan_.decoding.forked();
    // The rows of outcome n's fork or block: they follow the main chain and the earlier outcomes'.
    const int forks = static_cast<int>(plan_.fork_sizes.size());
    const int outcome_rows = n < forks ? plan_.fork_sizes[static_cast<size_t>(n)] : 0;
    int outcome_first = pred_ + g_;
    for (int b = 0; b < n && b < forks; ++b) outcome_first += plan_.fork_sizes[static_cast<size_t>(b)];
    DraftBuffer& refilled = out_.next_drafts;
    if (plan_.decoding.blocks()) {
      // Outcome blocks: the block of the outcome that happened proposes the whole buffer;
      // an outcome without one carries its untested drafts.
      if (outcome_rows == 0) CarryUntested();
      for (int j = 0; j < outcome_rows; ++j) {
        Draft fresh = ProposeFrom(outcome_first + j);
        if constexpr (kFault == ExactnessFault::kBlockDraftsWithTheFirstRowsQ) {
          if (j > 0) fresh.q = refilled.front().q;
        }
        refilled.push_back(std::move(fresh));
      }
    } else if (forked && n == m_) {
      for (int k = m_ + 1; k < g_; ++k) refilled.push_back(ProposeFrom(pred_ + k));
    } else if (forked && n < forks) {
      for (int j = 0; j < outcome_rows; ++j) refilled.push_back(ProposeFrom(outcome_first + j));
    } else {
      CarryUntested();
      for (int s = std::max(m_, c) + 1; s <= g_; ++s) refilled.push_back(ProposeFrom(pred_ + s - 1));
    }
  }

  const StepPlan& plan_;
  const PlanRows rows_;
  const int vocab_;
  DraftBuffer drafts_;
  const SamplingParams& sampling_;
  EnergyAcceptor acceptor_;
  const RowRequests& requests_;
  const int m_, g_, pred_;  // drafts, main chain; row indices: P_k is k - 1, Q_s is pred + s - 1
  const bool greedy_, lossy_;
  const SampledVerification rule_;
  const bool seed_exact_;
  const PositionRandom random_;
  const bool adjusting_;
  grammar::GrammarState* const grammar_;
  VerifyOutcome out_;
  int pushed_ = 0;          // drafts pushed onto the history, popped before returning
  int grammar_pushed_ = 0;  // tokens pushed onto the grammar state, popped before returning
  bool masking_ = false;    // the refill still follows the grammar
  // Scratch rows, reused across calls on this thread.
  static thread_local std::vector<float> p_, q_now_, adjusted_, processed_;
};

template <ExactnessFault kFault>
thread_local std::vector<float> Verifier<kFault>::p_;
template <ExactnessFault kFault>
thread_local std::vector<float> Verifier<kFault>::q_now_;
template <ExactnessFault kFault>
thread_local std::vector<float> Verifier<kFault>::adjusted_;
template <ExactnessFault kFault>
thread_local std::vector<float> Verifier<kFault>::processed_;

template <ExactnessFault kFault>
VerifyOutcome Run(const StepPlan& plan, const LogitRows& logits, int vocab, DraftBuffer drafts,
                  const SamplingParams& sampling, EnergyAcceptor acceptor, const RowRequests& requests) {
  return Verifier<kFault>(plan, logits, vocab, std::move(drafts), sampling, std::move(acceptor), requests).Run();
}

}  // namespace

VerifyOutcome Verify(const StepPlan& plan, const LogitRows& logits, int vocab, DraftBuffer drafts,
                     const SamplingParams& sampling, EnergyAcceptor acceptor, const RowRequests& requests) {
  return Run<ExactnessFault::kNone>(plan, logits, vocab, std::move(drafts), sampling, std::move(acceptor), requests);
}

VerifyOutcome VerifyWithFault(ExactnessFault fault, const StepPlan& plan, const LogitRows& logits, int vocab,
                              DraftBuffer drafts, const SamplingParams& sampling, EnergyAcceptor acceptor,
                              const RowRequests& requests) {
  switch (fault) {
    case ExactnessFault::kNone:
      break;
    case ExactnessFault::kVerifyCarriedDraftsWithCurrentQ:
      return Run<ExactnessFault::kVerifyCarriedDraftsWithCurrentQ>(plan, logits, vocab, std::move(drafts), sampling,
                                                                   std::move(acceptor), requests);
    case ExactnessFault::kPenaliseDraftsWithoutEarlierDrafts:
      return Run<ExactnessFault::kPenaliseDraftsWithoutEarlierDrafts>(plan, logits, vocab, std::move(drafts),
                                                                      sampling, std::move(acceptor), requests);
    case ExactnessFault::kMaskDraftsInTheCommittedState:
      return Run<ExactnessFault::kMaskDraftsInTheCommittedState>(plan, logits, vocab, std::move(drafts), sampling,
                                                                 std::move(acceptor), requests);
    case ExactnessFault::kBlockDraftsWithTheFirstRowsQ:
      return Run<ExactnessFault::kBlockDraftsWithTheFirstRowsQ>(plan, logits, vocab, std::move(drafts), sampling,
                                                                std::move(acceptor), requests);
    case ExactnessFault::kDrawWithTheForwardsCounter:
      return Run<ExactnessFault::kDrawWithTheForwardsCounter>(plan, logits, vocab, std::move(drafts), sampling,
                                                              std::move(acceptor), requests);
  }
  return Verify(plan, logits, vocab, std::move(drafts), sampling, std::move(acceptor), requests);
}

}  // namespace crossreg
