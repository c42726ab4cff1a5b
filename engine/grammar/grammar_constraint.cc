#include "engine/grammar/grammar_constraint.h"

#include <cmath>
#include <limits>
#include <utility>

#include "engine/grammar/gbnf_parser.h"

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

std::shared_ptr<const TokenMask> GrammarState::Mask() const { return constraint_->masker->Mask(current()); }

void GrammarState::MaskLogits(float* logits, int vocab) const {
  const auto mask = Mask();
  const int n = std::min(vocab, constraint_->masker->vocab().size());
  for (int i = 0; i < n; ++i) {
    if (!mask->test(i)) logits[i] = -std::numeric_limits<float>::infinity();
  }
  for (int i = n; i < vocab; ++i) logits[i] = -std::numeric_limits<float>::infinity();  // padded rows
}

int32_t GrammarState::MaskedArgmax(const float* logits, int vocab) const {
  // The likeliest few first: usually one of them is allowed, and checking a token
  // costs a walk of its bytes where a whole mask costs a walk of the vocabulary.
  constexpr int kCandidates = 8;
  std::pair<float, int32_t> best[kCandidates];
  int count = 0;
  auto before = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  for (int32_t i = 0; i < vocab; ++i) {
    const std::pair<float, int32_t> c{logits[i], i};
    if (std::isnan(c.first)) continue;
    if (count == kCandidates && !before(c, best[count - 1])) continue;
    int j = count < kCandidates ? count++ : count - 1;
    while (j > 0 && before(c, best[j - 1])) {
      best[j] = best[j - 1];
      --j;
    }
    best[j] = c;
  }
  for (int k = 0; k < count; ++k) {
    if (Allows(best[k].second)) return best[k].second;
  }
  const auto mask = Mask();
  int32_t arg = -1;
  const int n = std::min(vocab, constraint_->masker->vocab().size());
  for (int32_t i = 0; i < n; ++i) {
    if (mask->test(i) && (arg < 0 || logits[i] > logits[arg])) arg = i;
  }
  return arg;
}

void GrammarState::Push(int32_t token) {
  GrammarMatcher next = current();
  const GrammarVocabulary& vocab = constraint_->masker->vocab();
  if (!vocab.is_eos(token)) next.AcceptBytes(vocab.bytes(token));
  saved_.push_back(std::move(next));
}

void GrammarState::Pop() { saved_.pop_back(); }

void GrammarState::Commit() {
  if (saved_.empty()) return;
  committed_ = std::move(saved_.back());
  saved_.clear();
}

}  // namespace crossreg::grammar
