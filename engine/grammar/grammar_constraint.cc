#include "engine/grammar/grammar_constraint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_budget.h"

namespace crossreg::grammar {

absl::StatusOr<std::shared_ptr<const GrammarConstraint>> MakeGrammarConstraint(
    std::string_view gbnf, std::string description, std::shared_ptr<const GrammarVocabulary> vocab) {
  auto parsed = ParseGbnf(gbnf);
  if (!parsed.ok()) return parsed.status();
  auto constraint = std::make_shared<GrammarConstraint>();
  constraint->description = std::move(description);
  constraint->grammar = std::make_shared<const CompiledGrammar>(*std::move(parsed));
  constraint->masker = std::make_shared<TokenMasker>(std::move(vocab));
  return constraint;
}

GrammarState::GrammarState(std::shared_ptr<const GrammarConstraint> constraint)
    : constraint_(std::move(constraint)), committed_(constraint_->grammar) {}

bool GrammarState::Allows(int32_t token) const {
  const GrammarVocabulary& vocab = constraint_->masker->vocab();
  if (token < 0 || token >= vocab.size()) return false;
  if (auto mask = constraint_->masker->Cached(current())) return mask->test(token);
  return TokenAllowed(current(), vocab, token);
}

std::shared_ptr<const TokenMask> GrammarState::CachedMask() const {
  const GrammarMatcher& state = current();
  for (const auto& [prepared, mask] : prepared_) {
    if (prepared == state) return mask;
  }
  return constraint_->masker->Cached(state);
}

std::shared_ptr<const TokenMask> GrammarState::Mask() const {
  if (auto mask = CachedMask()) return mask;
  return constraint_->masker->Mask(current());
}

void ApplyMask(const TokenMask& mask, float* logits, int vocab) {
  const int n = std::min(vocab, static_cast<int>(mask.bits.size() * 64));
  for (int i = 0; i < n; ++i) {
    if (!mask.test(i)) logits[i] = -std::numeric_limits<float>::infinity();
  }
  for (int i = n; i < vocab; ++i) logits[i] = -std::numeric_limits<float>::infinity();  // padded rows
}

void GrammarState::MaskLogits(float* logits, int vocab) const {
  const auto mask = Mask();
  if (mask == nullptr) {
    std::fill(logits, logits + vocab, -std::numeric_limits<float>::infinity());
    return;
  }
  ApplyMask(*mask, logits, std::min(vocab, constraint_->masker->vocab().size()));
  for (int i = constraint_->masker->vocab().size(); i < vocab; ++i) logits[i] = -std::numeric_limits<float>::infinity();
}

absl::Status UnmaskableState(const TokenMask* mask) {
  if (mask == nullptr || mask->over_budget) {
    return absl::FailedPreconditionError(absl::StrCat(
        "grammar: computing which tokens may come next takes more than ", kMaxMaskWork,
        " steps of work at this point of the output; the request's grammar is too costly to follow"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "grammar: no token can continue the output here: ",
      mask->hit_limit ? absl::StrCat("the grammar is too ambiguous (a continuation would keep more than ",
                                     kMaxParseStacks, " parses alive)")
                      : "the model's vocabulary cannot spell what the grammar requires next"));
}

bool GrammarState::PrepareMasks(absl::Span<const int32_t> drafts, MaskWork& work,
                                std::vector<GrammarMatcher>* missing) {
  prepared_.clear();
  bool ready = true;
  GrammarMatcher state = committed_;
  const GrammarVocabulary& vocab = constraint_->masker->vocab();
  for (size_t k = 0;; ++k) {
    std::shared_ptr<const TokenMask> mask = constraint_->masker->Cached(state);
    if (mask == nullptr && work.used < work.budget) {
      MaskWork left{.budget = work.budget - work.used};
      mask = constraint_->masker->Mask(state, &left);
      work.used += left.used;
    }
    if (mask != nullptr) {
      prepared_.emplace_back(state, mask);
    } else {
      ready = false;
      if (missing != nullptr) missing->push_back(state);
    }
    if (k == drafts.size()) break;
    const int32_t d = drafts[k];
    if (d < 0 || d >= vocab.size() || vocab.is_eos(d)) break;  // nothing is verified after an end
    if (mask != nullptr ? !mask->test(d) : !TokenAllowed(state, vocab, d)) break;
    if (!state.AcceptBytes(vocab.bytes(d)) || state.Exhausted()) break;
  }
  return ready;
}

namespace {
// The most likely token of `mask` among the first `n` (ties: the lower id); -1 if none.
int32_t ArgmaxUnder(const TokenMask& mask, const float* logits, int n) {
  int32_t arg = -1;
  for (size_t w = 0; w < mask.bits.size(); ++w) {
    for (uint64_t bits = mask.bits[w]; bits != 0; bits &= bits - 1) {
      const int32_t i = static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
      if (i >= n) return arg;
      if (arg < 0 || logits[i] > logits[arg]) arg = i;
    }
  }
  return arg;
}
}  // namespace

int32_t GrammarState::MaskedArgmax(const float* logits, int vocab, bool compute) const {
  const GrammarVocabulary& words = constraint_->masker->vocab();
  const int n = std::min(vocab, words.size());
  if (auto mask = CachedMask()) return ArgmaxUnder(*mask, logits, n);
  // The likeliest token first: usually allowed (the model follows the format), and
  // checking one token costs a walk of its bytes where a mask costs a walk of the
  // vocabulary (cached for the next request in this state).
  int32_t best = -1;
  for (int32_t i = 0; i < vocab; ++i) {
    if (!std::isnan(logits[i]) && (best < 0 || logits[i] > logits[best])) best = i;
  }
  if (best >= 0 && best < n && TokenAllowed(current(), words, best)) return best;
  if (!compute) return -1;
  const auto mask = Mask();
  return mask != nullptr ? ArgmaxUnder(*mask, logits, n) : -1;
}

void GrammarState::Push(int32_t token) {
  GrammarMatcher next = current();
  const GrammarVocabulary& vocab = constraint_->masker->vocab();
  if (!vocab.is_eos(token)) next.AcceptBytes(vocab.bytes(token));
  saved_.push_back(std::move(next));
}

void GrammarState::Pop() { saved_.pop_back(); }

void GrammarState::Commit() {
  prepared_.clear();
  if (saved_.empty()) return;
  committed_ = std::move(saved_.back());
  saved_.clear();
}

std::vector<int32_t> GrammarState::ForcedTokens(int max_tokens) const {
  std::vector<int32_t> tokens;
  if (max_tokens <= 0) return tokens;
  const std::string text = current().ForcedText();
  const GrammarVocabulary& vocab = constraint_->masker->vocab();
  for (size_t at = 0; at < text.size() && static_cast<int>(tokens.size()) < max_tokens;) {
    const std::string_view rest = std::string_view(text).substr(at);
    const int32_t learned = constraint_->spelling->FirstToken(rest);
    if (learned >= 0 && learned < vocab.size() && !vocab.is_eos(learned) && !vocab.bytes(learned).empty()) {
      const std::string& bytes = vocab.bytes(learned);
      if (rest.substr(0, bytes.size()) == bytes) {  // spells a prefix of the rest
        tokens.push_back(learned);
        at += bytes.size();
        continue;
      }
      if (std::string_view(bytes).substr(0, rest.size()) == rest) {  // spells past it: the last draft
        tokens.push_back(learned);
        break;
      }
    }
    size_t length = 0;
    const int32_t id = vocab.LongestMatch(rest, &length);
    if (id < 0) break;
    tokens.push_back(id);
    at += length;
  }
  return tokens;
}

void GrammarState::LearnSpelling(int32_t token) const {
  const GrammarVocabulary& vocab = constraint_->masker->vocab();
  if (token < 0 || token >= vocab.size() || vocab.is_eos(token) || vocab.bytes(token).empty()) return;
  const std::string text = current().ForcedText();
  if (!text.empty()) constraint_->spelling->Record(text, token);
}

}  // namespace crossreg::grammar
