#include "engine/decoding/sequence_decoder.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/decoding/exactness_fault.h"
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
      acceptor_(request.decoding.beta, request.decoding.tau, std::max(1, request.decoding.gamma)),
      controller_(request, env) {
  const size_t depth = static_cast<size_t>(std::max(1, request.decoding.gamma));
  stats_.drafted_per_position.assign(depth, 0);
  stats_.accepted_per_position.assign(depth, 0);
  if (UsesNgrams()) ngrams_.Update(tokens_);
  if (request_.adjustments.active()) history_ = TokenHistory(request_.prompt_ids, {});
  if (request_.grammar != nullptr) grammar_ = grammar::GrammarState(request_.grammar);
}

absl::Status SequenceDecoder::OnKvAttached(SequenceId seq, int64_t cached) {
  if (cached < 0 || cached > static_cast<int64_t>(tokens_.size()) - 1) {
    return absl::InvalidArgumentError(absl::StrCat("decoder: ", cached, " cached positions for a sequence of ",
                                                   tokens_.size(), " tokens (at most ", tokens_.size() - 1, ")"));
  }
  seq_ = seq;
  cached_ = cached;
  return absl::OkStatus();
}

int64_t SequenceDecoder::PendingKvRows() const {
  if (prefilling()) return static_cast<int64_t>(tokens_.size()) - 1 - cached_;
  return DecodeHeadroom(request_.decoding);
}

DraftChoice SequenceDecoder::Choose(const DraftCost* cost, int max_decode_rows) const {
  DraftChoice choice;
  choice.decoding = request_.decoding;
  const DecodingMode mode = request_.decoding.mode;
  if (prefilling() || mode == DecodingMode::kAutoregressive) return choice;
  if (grammar_.active()) {
    // Forced text is drafted whole, up to the request's γ and the rows reserved, in every
    // speculative mode and whether γ adapts or not: the grammar leaves the model no choice
    // there, so the drafts are rejected only where it tokenizes the text differently.
    // The forward has n-gram's shape (control rows only, one-hot drafts): a
    // Cross-Regression request's predictive rows would draft what is already known, and
    // its next forward refills the buffer.
    choice.forced_drafts = grammar_.ForcedTokens(std::min(request_.decoding.gamma, std::max(0, max_decode_rows - 1)));
    if (!choice.forced_drafts.empty()) {
      choice.decoding = ForcedTextStep(request_.decoding, static_cast<int>(choice.forced_drafts.size()));
      return choice;
    }
  }
  if (!request_.decoding.adaptive_gamma || cost == nullptr || cost->curve == nullptr) return choice;
  if (mode == DecodingMode::kNgram) {
    // The drafts first: γ' follows the acceptance of drafts from matches of this class.
    int length = 0;
    bool from_table = false;
    choice.ngram_drafts = ngrams_.Draft(tokens_, request_.decoding.gamma, &length, env_.ngram_table, &from_table);
    choice.ngram_match = NgramMatchClass(length, from_table, request_.decoding.ngram_max);
  }
  choice.decision = controller_.Choose(*cost, max_decode_rows, choice.ngram_match);
  choice.decoding = WithGamma(request_.decoding, choice.decision.gamma);
  choice.ar_fallback = choice.decoding.mode == DecodingMode::kAutoregressive;
  return choice;
}

StepPlan SequenceDecoder::Plan(const DraftChoice& choice, int max_prefill_rows) const {
  if (!prefilling()) return PlanDecode(choice);
  // Every committed token but the newest goes into the cache without logits.
  StepPlan plan;
  plan.kind = StepPlan::Kind::kPrefill;
  const int64_t end = std::min<int64_t>(static_cast<int64_t>(tokens_.size()) - 1, cached_ + std::max(1, max_prefill_rows));
  for (int64_t p = cached_; p < end; ++p) {
    plan.rows.push_back({.seq = seq_, .position = static_cast<int32_t>(p), .token = tokens_[static_cast<size_t>(p)]});
  }
  return plan;
}

StepPlan SequenceDecoder::PlanDecode(const DraftChoice& choice) const {
  StepPlan plan;
  plan.kind = StepPlan::Kind::kDecode;
  plan.decoding = choice.decoding;
  plan.ar_fallback = choice.ar_fallback;
  plan.ngram_match = choice.ngram_match;
  plan.decision = choice.decision;
  plan.committed = static_cast<int64_t>(tokens_.size());
  plan.generated = stats_.committed;
  const std::vector<int32_t> drafts = PlanDrafts(choice, plan);
  LayOutRows(drafts, plan);
  AskForSummaries(plan);
  return plan;
}

std::vector<int32_t> SequenceDecoder::PlanDrafts(const DraftChoice& choice, StepPlan& plan) const {
  const DecodingConfig& it = plan.decoding;
  const int64_t remaining = request_.max_new_tokens - stats_.committed;
  const int64_t room = env_.model->max_position - plan.committed;  // drafts whose rows still fit
  const int gamma = it.gamma;
  std::vector<int32_t> drafts;
  switch (it.mode) {
    case DecodingMode::kAutoregressive:
      break;
    case DecodingMode::kNgram: {
      const int64_t want = std::max<int64_t>(0, std::min<int64_t>({gamma, remaining - 1, room}));
      std::vector<int32_t> forced = choice.forced_drafts;  // Choose found what the grammar forces
      if (!forced.empty()) {  // not filed with the n-gram matches' verdicts (plan.ngram_match stays 0)
        drafts = std::move(forced);
        drafts.resize(std::min<size_t>(drafts.size(), static_cast<size_t>(want)));
        plan.forced_drafts = true;
      } else if (plan.ngram_match > 0) {  // adaptive: γ' was chosen for the drafts of this match
        drafts = choice.ngram_drafts;
        drafts.resize(std::min<size_t>(drafts.size(), static_cast<size_t>(want)));
      } else {
        int match = 0;  // a shared memory files these drafts' verdicts by match class
        bool from_table = false;
        drafts = ngrams_.Draft(tokens_, static_cast<int>(want), &match, env_.ngram_table, &from_table);
        if (env_.acceptance_memory != nullptr && !drafts.empty()) {
          plan.ngram_match = NgramMatchClass(match, from_table, request_.decoding.ngram_max);
        }
      }
      break;
    }
    case DecodingMode::kLossless:
    case DecodingMode::kLossy: {
      // Limits depend on counts and positions only, never on drawn values.
      const int64_t cap = it.anchored() ? gamma : std::max(gamma - 1, 1);
      for (const Draft& d : buffer_) drafts.push_back(d.token);
      if (it.ngram_assist) {
        // Prompt-lookup drafts, a function of the committed tokens alone, take the
        // first slots (one-hot q); the adapter's proposals keep the slots after them.
        const auto found = ngrams_.Draft(tokens_, static_cast<int>(cap), nullptr, env_.ngram_table);
        if (drafts.size() < found.size()) drafts.resize(found.size());
        std::copy(found.begin(), found.end(), drafts.begin());
        plan.assisted_drafts = static_cast<int>(found.size());
      }
      const int64_t keep =
          std::max<int64_t>(0, std::min<int64_t>({static_cast<int64_t>(drafts.size()), cap, remaining - 1, room}));
      drafts.resize(static_cast<size_t>(keep));
      plan.assisted_drafts = std::min(plan.assisted_drafts, static_cast<int>(keep));
      plan.main_chain =
          it.blocks() ? 0 : static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({gamma, room + 1, remaining})));
      break;
    }
  }
  // One-hot drafts: an n-gram-shaped step's all (a forced-text step of any request too).
  CutIllegalDrafts(drafts, it.mode == DecodingMode::kNgram ? static_cast<int>(drafts.size()) : plan.assisted_drafts);
  plan.assisted_drafts = std::min(plan.assisted_drafts, static_cast<int>(drafts.size()));
  plan.drafts = static_cast<int>(drafts.size());
  return drafts;
}

void SequenceDecoder::CutIllegalDrafts(std::vector<int32_t>& drafts, int one_hot_drafts) const {
  if (!grammar_.active() || drafts.empty()) return;
  // A one-hot draft the grammar forbids would be rejected with certainty and its
  // residual is P itself, so cutting it changes nothing but the rows spent; a
  // seed-exact draft (kept without q) likewise, as the target's draw is legal and is
  // committed whatever was drafted. A draft sampled for speculative sampling (the
  // adapter's, with its q) is legal where it was proposed; if the context changed
  // since, it stays and verification rejects it (cutting it would skip its residual
  // and bias the output).
  grammar::GrammarState walk = grammar_;
  for (size_t k = 0; k < drafts.size(); ++k) {
    const bool one_hot = static_cast<int>(k) < one_hot_drafts || buffer_[k].q.empty();
    if (!one_hot) return;
    if (!walk.Allows(drafts[k]) || walk.Exhausted()) {
      drafts.resize(k);
      return;
    }
    walk.Push(drafts[k]);
  }
}

void SequenceDecoder::LayOutRows(const std::vector<int32_t>& drafts, StepPlan& plan) const {
  const DecodingConfig& it = plan.decoding;
  const int64_t remaining = request_.max_new_tokens - stats_.committed;
  const int64_t room = env_.model->max_position - plan.committed;
  const int m = plan.drafts;
  const int32_t base = static_cast<int32_t>(plan.committed - 1);
  const int32_t x_last = tokens_.back();
  auto draft_token = [&](int k) { return drafts[static_cast<size_t>(k - 1)]; };
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
  if (forked) plan.main_chain = m + 1 + useful(m);
  const int32_t placeholder = env_.placeholder_token;
  if (IsCrossRegression(it.mode) && it.blocks()) {
    // Outcome blocks: for each outcome n with a block, useful(n) placeholder rows at
    // positions L+n .. (the first stands for the token committed after d_n), attending
    // the control rows x_last, d_1 .. d_n and one another. Which outcomes get a block
    // and how many rows depends on n, m and the room left only.
    for (int n = 0; n <= m; ++n) {
      const int size = it.BlockFor(n, m) ? useful(n) : 0;
      plan.fork_sizes.push_back(size);
      for (int j = 0; j < size; ++j) {
        plan.rows.push_back({.seq = seq_, .position = base + n + 1 + j, .token = placeholder, .want_logits = true,
                             .predictive = true, .branch = n + 1, .block = true});
      }
    }
    return;
  }
  for (int k = 0; k < plan.main_chain; ++k) {
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
}

DraftBuffer SequenceDecoder::TakeDrafts(const StepPlan& plan) {
  DraftBuffer drafts;
  drafts.reserve(static_cast<size_t>(plan.drafts));
  const bool one_hot = plan.decoding.mode == DecodingMode::kNgram;
  for (int k = 0; k < plan.drafts; ++k) {
    const int32_t token = plan.rows[static_cast<size_t>(k) + 1].token;  // control row k + 1 carries d_{k+1}
    if (one_hot || k < plan.assisted_drafts) {
      drafts.push_back(Draft{token, {}, false});
    } else {
      drafts.push_back(std::move(buffer_[static_cast<size_t>(k)]));  // the refill replaces the buffer
    }
  }
  return drafts;
}

bool SequenceDecoder::PrepareGrammarMasks(const StepPlan& plan, grammar::MaskWork& work,
                                          std::vector<grammar::GrammarMatcher>* missing) {
  if (!grammar_.active() || plan.prefill()) return true;
  std::vector<int32_t> drafts;
  for (int k = 1; k <= plan.drafts; ++k) drafts.push_back(plan.rows[static_cast<size_t>(k)].token);
  return grammar_.PrepareMasks(drafts, work, missing);
}

absl::Status SequenceDecoder::CheckPlanIsCurrent(const StepPlan& plan) const {
  if (finished()) return absl::FailedPreconditionError("decoder: sequence already finished");
  const bool current =
      plan.prefill()
          ? prefilling() && !plan.rows.empty() && plan.rows.front().seq == seq_ && plan.rows.front().position == cached_
          : !prefilling() && !plan.rows.empty() && plan.rows.front().seq == seq_ &&
                plan.committed == static_cast<int64_t>(tokens_.size());
  if (!current) return absl::FailedPreconditionError("decoder: OnForward with a plan not made for its current state");
  return absl::OkStatus();
}

void SequenceDecoder::AskForSummaries(StepPlan& plan) const {
  if (!env_.summarize_greedy_rows || !request_.sampling.greedy()) return;
  // Penalties, logprobs and grammars read whole rows.
  if (request_.adjustments.active() || request_.logprobs >= 0 || grammar_.active()) return;
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
  if (absl::Status s = CheckPlanIsCurrent(plan); !s.ok()) return s;
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
  const RowRequests rows{.adjust = request_.adjustments.active() ? &request_.adjustments : nullptr,
                         .history = &history_,
                         .logprobs = request_.logprobs,
                         .logprobs_mode = request_.logprobs_mode,
                         .grammar = grammar_.active() ? &grammar_ : nullptr};
  // A planted fault (tests only, exactness_fault.h) swaps the verifier; production
  // always takes Verify.
  const ExactnessFault fault = PlantedExactnessFault();
  VerifyOutcome outcome = fault == ExactnessFault::kNone
                              ? Verify(plan, logits, vocab_, TakeDrafts(plan), request_.sampling, acceptor_, rows)
                              : VerifyWithFault(fault, plan, logits, vocab_, TakeDrafts(plan), request_.sampling,
                                                acceptor_, rows);
  // A grammar that cannot be followed here ends the request; nothing is committed.
  if (!outcome.error.ok()) return outcome.error;
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
  }
  if (!plan.forced_drafts) controller_.Observe(plan.decision, plan.ngram_match, outcome.verdicts);
  step.verdicts = std::move(outcome.verdicts);
  buffer_ = std::move(outcome.next_drafts);
  for (size_t i = 0; i < outcome.tokens.size(); ++i) {
    const int32_t t = outcome.tokens[i];
    tokens_.push_back(t);
    ++stats_.committed;
    step.tokens.push_back(t);
    if (i < outcome.logprobs.size()) step.logprobs.push_back(std::move(outcome.logprobs[i]));
    if (request_.adjustments.active()) history_.PushGenerated(t);
    if (grammar_.active()) {
      if (request_.decoding.mode == DecodingMode::kNgram) grammar_.LearnSpelling(t);
      grammar_.Push(t);
    }
    if (const StopReason stop = StopOf(t); stop != StopReason::kNone) {
      finish_ = FinishReason::kStop;
      stop_ = stop;
      break;
    }
    if (grammar_.active() && grammar_.Exhausted()) {  // a complete sentence: nothing may follow
      finish_ = FinishReason::kStop;
      stop_ = StopReason::kGrammarComplete;
      break;
    }
    if (stats_.committed >= request_.max_new_tokens) {
      finish_ = FinishReason::kLength;
      break;
    }
  }
  if (UsesNgrams()) ngrams_.Update(tokens_);
  if (grammar_.active()) grammar_.Commit();
  if (finished()) return;
  // The next forward's first row (x_last) must fit in the context.
  if (static_cast<int64_t>(tokens_.size()) - 1 >= env_.model->max_position) finish_ = FinishReason::kContext;
}

StopReason SequenceDecoder::StopOf(int32_t token) const {
  if (request_.stop_at_eos) {
    const auto& eos = env_.model->eos_token_ids;
    if (std::find(eos.begin(), eos.end(), token) != eos.end()) return StopReason::kEos;
  }
  const bool stop_id = std::find(request_.stop_ids.begin(), request_.stop_ids.end(), token) != request_.stop_ids.end();
  return stop_id ? StopReason::kStopToken : StopReason::kNone;
}

}  // namespace crossreg
