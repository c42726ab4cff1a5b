#include "engine/decoding/sequence_decoder.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/decoding/ngram_drafter.h"

namespace crossreg {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kContext:
      return "context";
  }
  return "?";
}

SequenceDecoder::SequenceDecoder(const GenerationRequest& request, const DecodingEnvironment& env, SequenceId seq)
    : request_(request),
      env_(env),
      vocab_(env.model->vocab_size),
      seq_(seq),
      tokens_(request.prompt_ids),
      ngrams_(request.decoding.ngram_max),
      rng_(request.sampling.seed),
      acceptor_(request.decoding.beta, request.decoding.tau, std::max(1, request.decoding.gamma)),
      acceptance_(std::max(1, request.decoding.gamma)),
      match_acceptance_(static_cast<size_t>(std::max(1, request.decoding.ngram_max)),
                        AcceptanceTracker(std::max(1, request.decoding.gamma))) {
  const size_t depth = static_cast<size_t>(std::max(1, request.decoding.gamma));
  stats_.drafted_per_position.assign(depth, 0);
  stats_.accepted_per_position.assign(depth, 0);
  if (env.acceptance_memory != nullptr && request.decoding.mode != DecodingMode::kAutoregressive) {
    memory_ = env.acceptance_memory;
    memory_class_ = AcceptanceClassKey(request);
    if (request.decoding.adaptive_gamma) {  // start from what earlier requests of the class saw
      memory_->Seed(memory_class_, 0, acceptance_);
      for (size_t n = 0; n < match_acceptance_.size(); ++n) {
        memory_->Seed(memory_class_, static_cast<int>(n) + 1, match_acceptance_[n]);
      }
    }
  }
}

void SequenceDecoder::OnKvDropped(SequenceId new_seq) {
  seq_ = new_seq;
  cached_ = 0;
  plan_outstanding_ = false;
}

int64_t SequenceDecoder::PendingKvRows() const {
  if (prefilling()) return static_cast<int64_t>(tokens_.size()) - 1 - cached_;
  return DecodeHeadroom(request_.decoding);
}

AcceptanceTracker& SequenceDecoder::TrackerFor(const StepPlan& plan) {
  if (plan.ngram_match <= 0) return acceptance_;
  return match_acceptance_[static_cast<size_t>(std::min<int>(plan.ngram_match, match_acceptance_.size()) - 1)];
}

int SequenceDecoder::MemorySlot(const StepPlan& plan) const {
  return std::clamp(plan.ngram_match, 0, static_cast<int>(match_acceptance_.size()));
}

int SequenceDecoder::ProbeGamma() const {
  // Probes use the cheapest draft length that still verifies one draft: they measure
  // depth-1 acceptance, and deeper drafts follow once that pays.
  const DecodingConfig& d = request_.decoding;
  return std::min(d.gamma, DraftCapacity(d, 1) > 0 ? 1 : 2);
}

int SequenceDecoder::DecodeRowsBound(const ForwardCostCurve* curve) const {
  const DecodingConfig& d = request_.decoding;
  if (!d.adaptive_gamma || curve == nullptr || !IsCrossRegression(d.mode) || last_gamma_ > 0) return MaxDecodeRows(d);
  return MaxDecodeRows(WithGamma(d, ProbeGamma()));
}

int SequenceDecoder::AdaptiveGamma(const DraftCost& cost, AcceptanceTracker& acceptance, int slot,
                                   int max_decode_rows) {
  const DecodingConfig& d = request_.decoding;
  const int probe = ProbeGamma();
  // The draft lengths whose rows fit what the caller reserved (a scheduler's bound).
  int fits = d.gamma;
  while (fits > 0 && MaxDecodeRows(WithGamma(d, fits)) > max_decode_rows) --fits;
  // A probe (and, for Cross-Regression, the forward that verifies it) costs more than an
  // AR forward: probe no more often than keeps that extra cost within kProbeBudget of
  // the AR forwards around it, so a sequence whose drafts never pay loses at most that.
  // Both at this forward's margin: under load a probe's rows cost several of this
  // sequence's shares of the forward, not a fraction of a one-row forward.
  const int probe_forwards = IsCrossRegression(d.mode) ? 2 : 1;
  const double extra =
      probe_forwards * cost.MarginalSeconds(d.mode, MaxDecodeRows(WithGamma(d, probe)) - 1) / cost.ArShare(d.mode);
  const int first_interval =
      std::clamp(static_cast<int>(std::ceil(extra / kProbeBudget)), kFirstProbeInterval, kMaxProbeInterval);
  if (probe_forwards_ > 0) {  // the forward after an XR probe verifies its drafts
    --probe_forwards_;
    return probe <= fits ? probe : 0;
  }
  const int chosen = fits == 0 ? 0 : ChooseGamma(fits == d.gamma ? d : WithGamma(d, fits), acceptance, cost);
  if (chosen > 0) {
    probes_.DraftsPay(first_interval);
    if (memory_ != nullptr) memory_->DraftsPay(memory_class_, first_interval);
    return chosen;
  }
  // Plain AR forwards learn nothing about acceptance. With a memory, each one moves the
  // request's estimate a step back toward the class's pooled one. Otherwise a burst of
  // failed first drafts freezes it below the point where drafts pay, in AR until the
  // next probe (~45 AR forwards on the ~110M model at kProbeBudget), though the class's
  // drafts pay. A class whose drafts never pay pools an estimate as low as the
  // request's own, so this does not make it draft.
  if (memory_ != nullptr) memory_->Revert(memory_class_, slot, acceptance);
  // After a run of AR forwards, probe (a count-based choice), backing off exponentially
  // while probes fail. With a memory the run is counted over the class's requests
  // (acceptance_memory.h).
  const bool due = memory_ != nullptr ? memory_->ProbeDue(memory_class_, first_interval)
                                      : probes_.ArForward(first_interval, kMaxProbeInterval);
  if (!due || probe > fits) return 0;
  probe_forwards_ = probe_forwards - 1;
  return probe;
}

StepPlan SequenceDecoder::Plan(int max_prefill_rows, const DraftCost* cost, int max_decode_rows) {
  plan_outstanding_ = true;
  if (!prefilling()) return PlanDecode(cost, max_decode_rows);
  // Every committed token but the newest goes into the cache without logits.
  StepPlan plan;
  plan.kind = StepPlan::Kind::kPrefill;
  const int64_t end =
      std::min<int64_t>(static_cast<int64_t>(tokens_.size()) - 1, cached_ + std::max(1, max_prefill_rows));
  for (int64_t p = cached_; p < end; ++p) {
    plan.rows.push_back({.seq = seq_, .position = static_cast<int32_t>(p), .token = tokens_[static_cast<size_t>(p)]});
  }
  return plan;
}

StepPlan SequenceDecoder::PlanDecode(const DraftCost* cost, int max_decode_rows) {
  StepPlan plan;
  plan.kind = StepPlan::Kind::kDecode;
  plan.decoding = request_.decoding;
  plan.committed = static_cast<int64_t>(tokens_.size());
  std::vector<int32_t> ngram_drafts = ChooseDraftLength(cost, max_decode_rows, plan);
  const int main_chain = FillDraftBuffer(std::move(ngram_drafts), plan);
  LayOutRows(main_chain, plan);
  AskForSummaries(plan);
  return plan;
}

std::vector<int32_t> SequenceDecoder::ChooseDraftLength(const DraftCost* cost, int max_decode_rows, StepPlan& plan) {
  std::vector<int32_t> ngram_drafts;  // adaptive n-gram: drafted before γ' is chosen
  if (!request_.decoding.adaptive_gamma || cost == nullptr || cost->curve == nullptr ||
      request_.decoding.mode == DecodingMode::kAutoregressive) {
    return ngram_drafts;
  }
  if (request_.decoding.mode == DecodingMode::kNgram) {
    // The drafts first: γ' follows the acceptance of drafts from matches of this length.
    // With no match there is nothing to verify (and nothing to probe): an AR forward.
    ngrams_.Update(tokens_);
    int match = 0;
    ngram_drafts = ngrams_.Draft(tokens_, request_.decoding.gamma, &match, env_.ngram_table);
    plan.ngram_match = match;
    last_gamma_ = match > 0 ? AdaptiveGamma(*cost, TrackerFor(plan), MemorySlot(plan), max_decode_rows) : 0;
  } else {
    last_gamma_ = AdaptiveGamma(*cost, acceptance_, 0, max_decode_rows);
  }
  plan.decoding = WithGamma(request_.decoding, last_gamma_);
  plan.ar_fallback = plan.decoding.mode == DecodingMode::kAutoregressive;
  return ngram_drafts;
}

int SequenceDecoder::FillDraftBuffer(std::vector<int32_t> ngram_drafts, StepPlan& plan) {
  const DecodingConfig& it = plan.decoding;
  const int64_t L = plan.committed;
  const int64_t remaining = request_.max_new_tokens - stats_.committed;
  const int64_t room = env_.model->max_position - L;  // drafts whose rows still fit
  const int gamma = it.gamma;
  switch (it.mode) {
    case DecodingMode::kAutoregressive:
      buffer_.clear();
      return 0;
    case DecodingMode::kNgram: {
      const int64_t want = std::max<int64_t>(0, std::min<int64_t>({gamma, remaining - 1, room}));
      buffer_.clear();
      if (plan.ngram_match > 0) {  // adaptive: drafted above, from the same context
        ngram_drafts.resize(std::min<size_t>(ngram_drafts.size(), static_cast<size_t>(want)));
      } else {
        ngrams_.Update(tokens_);
        int match = 0;  // the memory files these drafts' verdicts by match length
        ngram_drafts = ngrams_.Draft(tokens_, static_cast<int>(want), &match, env_.ngram_table);
        if (memory_ != nullptr && !ngram_drafts.empty()) plan.ngram_match = match;
      }
      for (int32_t t : ngram_drafts) buffer_.push_back(Draft{t, {}, false});
      plan.drafts = static_cast<int>(buffer_.size());
      return 0;
    }
    case DecodingMode::kLossless:
    case DecodingMode::kLossy: {
      // Limits depend on counts and positions only, never on drawn values.
      const int64_t cap = it.forked() ? gamma : std::max(gamma - 1, 1);
      if (it.ngram_assist) {
        // Prompt-lookup drafts, a function of the committed tokens alone, take the
        // first slots (one-hot q); the adapter's proposals keep the slots after them.
        ngrams_.Update(tokens_);
        const auto found = ngrams_.Draft(tokens_, static_cast<int>(cap), nullptr, env_.ngram_table);
        if (buffer_.size() < found.size()) buffer_.resize(found.size());
        for (size_t i = 0; i < found.size(); ++i) buffer_[i] = Draft{found[i], {}, false};
      }
      const int64_t keep =
          std::max<int64_t>(0, std::min<int64_t>({static_cast<int64_t>(buffer_.size()), cap, remaining - 1, room}));
      buffer_.resize(static_cast<size_t>(keep));
      plan.drafts = static_cast<int>(keep);
      return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({gamma, room + 1, remaining})));
    }
  }
  return 0;
}

void SequenceDecoder::LayOutRows(int main_chain, StepPlan& plan) const {
  const DecodingConfig& it = plan.decoding;
  const int64_t L = plan.committed;
  const int64_t remaining = request_.max_new_tokens - stats_.committed;
  const int64_t room = env_.model->max_position - L;
  const int m = plan.drafts;
  int g = main_chain;
  const int32_t base = static_cast<int32_t>(L - 1);
  const int32_t x_last = tokens_.back();
  auto draft_token = [&](int k) { return buffer_[static_cast<size_t>(k - 1)].token; };
  for (int k = 0; k <= m; ++k) {
    plan.rows.push_back(
        {.seq = seq_, .position = base + k, .token = k == 0 ? x_last : draft_token(k), .want_logits = true});
  }
  // Main predictive chain (branch 0): [x_last, d_1..d_m, placeholders]. Forked refill
  // gives it a placeholder tail for the outcome n = m, and adds for each outcome n < R
  // a placeholder chain forked after d_n (branch n+1). A chain's length depends on n,
  // m, the room left and the tokens still wanted, never on drawn values; each
  // placeholder row proposes one draft for the buffer after its outcome.
  const bool forked = IsCrossRegression(it.mode) && it.forked();
  const int f = it.ForkDepth();
  auto useful = [&](int n) {  // drafts worth proposing for the buffer after outcome n
    return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>({f, room - n, remaining - n - 2})));
  };
  if (forked) g = m + 1 + useful(m);
  const int32_t placeholder = env_.placeholder_token;
  for (int k = 0; k < g; ++k) {
    const int32_t token = k == 0 ? x_last : (k <= m ? draft_token(k) : placeholder);
    plan.rows.push_back(
        {.seq = seq_, .position = base + k, .token = token, .want_logits = true, .predictive = true, .branch = 0});
  }
  for (int n = 0; forked && n < std::min(it.fork_outcomes, m); ++n) {
    const int size = useful(n);
    plan.fork_sizes.push_back(size);
    for (int j = 0; j < size; ++j) {
      plan.rows.push_back({.seq = seq_, .position = base + n + 1 + j, .token = placeholder, .want_logits = true,
                           .predictive = true, .branch = n + 1});
    }
  }
  plan.main_chain = g;
}

void SequenceDecoder::AskForSummaries(StepPlan& plan) const {
  if (!env_.summarize_greedy_rows || !request_.sampling.greedy()) return;
  // Control rows come first: P_{k+1} (row k) tests d_{k+1}, the token of row k + 1.
  for (int k = 0; k <= plan.drafts; ++k) {
    if (k == 0 && stats_.forwards == 0) continue;  // first_logits_
    BatchRow& row = plan.rows[static_cast<size_t>(k)];
    row.summary = true;
    row.summary_token = k < plan.drafts ? plan.rows[static_cast<size_t>(k) + 1].token : -1;
  }
  for (size_t r = static_cast<size_t>(plan.drafts) + 1; r < plan.rows.size(); ++r) plan.rows[r].summary = true;
}

absl::StatusOr<StepOutcome> SequenceDecoder::OnForward(const StepPlan& plan, const LogitRows& logits) {
  if (finished()) return absl::FailedPreconditionError("decoder: sequence already finished");
  if (!plan_outstanding_) return absl::FailedPreconditionError("decoder: OnForward without a Plan for this forward");
  plan_outstanding_ = false;
  StepOutcome step;
  if (plan.prefill()) {
    cached_ += static_cast<int64_t>(plan.rows.size());
    step.kv_length = cached_;
    return step;
  }
  const size_t summaries = static_cast<size_t>(plan.summary_rows());
  const size_t full = static_cast<size_t>(plan.logit_rows()) - summaries;
  if (logits.logits.size() != full * static_cast<size_t>(vocab_) || logits.summaries.size() != summaries) {
    return absl::InternalError(absl::StrCat("decoder: the forward returned ", logits.logits.size() / vocab_,
                                            " logit rows and ", logits.summaries.size(), " summaries, the plan has ",
                                            full, " and ", summaries));
  }
  if (stats_.forwards == 0) {
    if (full == 0) return absl::InternalError("decoder: the first decode forward must return P_1's logits");
    first_logits_.assign(logits.logits.begin(), logits.logits.begin() + vocab_);
  }
  VerifyOutcome outcome =
      Verify(plan, logits, vocab_, std::move(buffer_), request_.sampling, acceptor_, rng_, request_.fault);
  buffer_.clear();
  // The cache keeps x_last and the accepted drafts.
  cached_ = outcome.kv_keep;
  step.kv_length = cached_;
  Apply(plan, std::move(outcome), step);
  return step;
}

void SequenceDecoder::Apply(const StepPlan& plan, VerifyOutcome outcome, StepOutcome& step) {
  ++stats_.forwards;
  if (plan.ar_fallback) ++stats_.ar_forwards;
  stats_.drafted += plan.drafts;
  stats_.accepted += outcome.accepted;
  step.drafted = plan.drafts;
  step.accepted = outcome.accepted;
  for (size_t k = 0; k < outcome.verdicts.size(); ++k) {
    ++stats_.drafted_per_position[k];
    if (outcome.verdicts[k]) ++stats_.accepted_per_position[k];
    TrackerFor(plan).Record(static_cast<int>(k) + 1, outcome.verdicts[k]);
  }
  if (memory_ != nullptr) {
    // Slot as TrackerFor picks it: 0 for Cross-Regression, the match length for n-gram.
    const int slot = MemorySlot(plan);
    memory_->Record(memory_class_, slot, outcome.verdicts);
  }
  step.verdicts = std::move(outcome.verdicts);
  buffer_ = std::move(outcome.next_drafts);
  for (int32_t t : outcome.tokens) {
    tokens_.push_back(t);
    ++stats_.committed;
    step.tokens.push_back(t);
    if (IsStop(t)) {
      finish_ = FinishReason::kStop;
      return;
    }
    if (stats_.committed >= request_.max_new_tokens) {
      finish_ = FinishReason::kLength;
      return;
    }
  }
  // The next forward's first row (x_last) must fit in the context.
  if (static_cast<int64_t>(tokens_.size()) - 1 >= env_.model->max_position) finish_ = FinishReason::kContext;
}

bool SequenceDecoder::IsStop(int32_t token) const {
  if (request_.stop_at_eos) {
    const auto& eos = env_.model->eos_token_ids;
    if (std::find(eos.begin(), eos.end(), token) != eos.end()) return true;
  }
  return std::find(request_.stop_ids.begin(), request_.stop_ids.end(), token) != request_.stop_ids.end();
}

}  // namespace crossreg
