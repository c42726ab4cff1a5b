// A request's structured-output constraint: the compiled grammar with the masker of
// its states (shared by every request with the same grammar), and the per-sequence
// GrammarState the decoder advances as tokens commit. Verification judges the draft
// d_k in the state after the committed tokens and d_1 .. d_{k-1}: Push them while a
// forward is verified and Pop them after (the state rolls back on rejection).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/grammar/forced_spelling.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/token_mask.h"

namespace crossreg::grammar {

struct GrammarConstraint {
  std::string description;  // what the request asked for, for logs: "json_schema", "grammar", ...
  std::shared_ptr<const CompiledGrammar> grammar;
  std::shared_ptr<TokenMasker> masker;
  std::shared_ptr<ForcedSpelling> spelling = std::make_shared<ForcedSpelling>();
};

// Parses GBNF text into a constraint over `vocab`.
absl::StatusOr<std::shared_ptr<const GrammarConstraint>> MakeGrammarConstraint(
    std::string_view gbnf, std::string description, std::shared_ptr<const GrammarVocabulary> vocab);

class GrammarState {
 public:
  GrammarState() = default;
  explicit GrammarState(std::shared_ptr<const GrammarConstraint> constraint);
  bool active() const { return constraint_ != nullptr; }

  // Whether `token` may come next.
  bool Allows(int32_t token) const;
  // The whole mask of the current state: prepared (PrepareMasks), cached across
  // requests, or computed now within kMaxMaskWork; null when over that budget.
  std::shared_ptr<const TokenMask> Mask() const;
  // The mask if prepared or cached, never computed: null otherwise.
  std::shared_ptr<const TokenMask> CachedMask() const;
  // Sets every disallowed logit to -inf (every logit when the mask is over budget).
  void MaskLogits(float* logits, int vocab) const;
  // The most likely allowed token of `logits` (ties: the lower id); -1 if none is, or
  // (`compute` false) if the likeliest token is not allowed and no mask is at hand.
  int32_t MaskedArgmax(const float* logits, int vocab, bool compute = true) const;

  // Before a forward: makes sure the masks its verification reads are at hand, so that
  // verification computes none on the scheduler's thread. Those are the masks of the
  // current state and of the states after each of `drafts` in turn, up to the first
  // draft the grammar forbids (a forbidden draft is rejected at its own row). Each is
  // taken from the cache or computed within `work` and kept until Commit; the states
  // whose masks are neither are appended to `missing` (for a worker to compute). True
  // when none is missing.
  bool PrepareMasks(absl::Span<const int32_t> drafts, MaskWork& work, std::vector<GrammarMatcher>* missing);
  const std::shared_ptr<TokenMasker>& masker() const { return constraint_->masker; }

  // Appends `token` (it must be allowed): a commit, or a draft under verification
  // (undone by Pop in reverse order).
  void Push(int32_t token);
  void Pop();
  // Makes the pushed tokens permanent (a commit).
  void Commit();
  // The tokens spelling the text the grammar forces next, at most `max_tokens`; empty
  // where the model has a choice. At each point the token the model chose there before
  // (ForcedSpelling), else the longest token that fits.
  std::vector<int32_t> ForcedTokens(int max_tokens) const;
  // Files `token`, about to be committed, as the model's spelling of the forced text
  // here (if any).
  void LearnSpelling(int32_t token) const;
  // Nothing but the end may follow.
  bool Exhausted() const { return current().Exhausted(); }

 private:
  const GrammarMatcher& current() const { return saved_.empty() ? committed_ : saved_.back(); }

  std::shared_ptr<const GrammarConstraint> constraint_;
  GrammarMatcher committed_;
  std::vector<GrammarMatcher> saved_;  // the states after each pushed token
  // PrepareMasks' masks, by state, until the next Commit.
  std::vector<std::pair<GrammarMatcher, std::shared_ptr<const TokenMask>>> prepared_;
};

// Sets every logit `mask` does not admit to -inf (and any past the grammar's vocabulary).
void ApplyMask(const TokenMask& mask, float* logits, int vocab);

// Why a control row's state cannot be masked: `mask` null or over its work budget, or
// admitting no token. FAILED_PRECONDITION starting "grammar: " (the request's grammar
// cannot be followed here), for the request's error.
absl::Status UnmaskableState(const TokenMask* mask);

}  // namespace crossreg::grammar
