#include "engine/grammar/grammar_matcher.h"

#include <algorithm>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/hash/hash.h"
#include "engine/grammar/grammar_budget.h"

namespace crossreg::grammar {

CompiledGrammar::CompiledGrammar(Grammar grammar) : grammar_(std::move(grammar)) {
  ascii_.resize(grammar_.char_sets.size(), {0, 0});
  for (size_t c = 0; c < grammar_.char_sets.size(); ++c) {
    for (const auto& [lo, hi] : grammar_.char_sets[c].ranges) {
      for (uint32_t cp = lo; cp <= std::min<uint32_t>(hi, 127); ++cp) ascii_[c][cp >> 6] |= uint64_t{1} << (cp & 63);
    }
  }
  starts_.resize(grammar_.rules.size());
  for (size_t r = 0; r < grammar_.rules.size(); ++r) {
    for (const Sequence& seq : grammar_.rules[r].alternatives) {
      starts_[r].push_back(static_cast<int32_t>(kinds_.size()));
      for (const Element& e : seq) {
        kinds_.push_back(e.kind == Element::Kind::kChars ? 0 : 1);
        operands_.push_back(e.index);
      }
      kinds_.push_back(kEnd);
      operands_.push_back(0);
    }
  }
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  size_t positions = 0;
  for (int32_t start : grammar_->starts(grammar_->grammar().root)) {
    Stack stack;
    if (grammar_->kind(start) != CompiledGrammar::kEnd) stack.push_back(start);
    if (!Expand(std::move(stack), stacks_, &positions)) {
      // Even the start exceeds the limits: a state that accepts nothing (the
      // admission probe refuses such a grammar).
      stacks_.clear();
      hit_limit_ = true;
      break;
    }
  }
  Normalize();
}

void GrammarMatcher::Normalize() {
  std::sort(stacks_.begin(), stacks_.end());
  stacks_.erase(std::unique(stacks_.begin(), stacks_.end()), stacks_.end());
  positions_ = 0;
  for (const Stack& s : stacks_) positions_ += s.size() + kStackCost;
}

int32_t GrammarMatcher::BusiestRule() const {
  // A position's rule: the last rule whose first alternative starts at or before it.
  const CompiledGrammar& g = *grammar_;
  const std::vector<Rule>& rules = g.grammar().rules;
  std::vector<std::pair<int32_t, int32_t>> first;  // (first position, rule), sorted
  for (size_t r = 0; r < rules.size(); ++r) {
    const std::vector<int32_t>& starts = g.starts(static_cast<int32_t>(r));
    if (!starts.empty()) first.emplace_back(starts.front(), static_cast<int32_t>(r));
  }
  std::sort(first.begin(), first.end());
  // Counted by construct (the rules one repetition expands to share its source text):
  // the construct holding the most distinct positions is the one whose expansion
  // multiplies the parses; a longer source (the enclosing construct) wins a tie.
  struct Tally {
    std::unordered_set<int32_t> positions;
    int32_t rule;
  };
  std::unordered_map<std::string_view, Tally> count;
  for (const Stack& s : stacks_) {
    for (int32_t pos : s) {
      auto it = std::upper_bound(first.begin(), first.end(), std::make_pair(pos, std::numeric_limits<int32_t>::max()));
      if (it == first.begin()) continue;
      const int32_t rule = std::prev(it)->second;
      const Rule& r = rules[static_cast<size_t>(rule)];
      const std::string_view key = r.source.empty() ? std::string_view(r.name) : std::string_view(r.source);
      count.try_emplace(key, Tally{{}, rule}).first->second.positions.insert(pos);
    }
  }
  int32_t best = -1;
  size_t most = 0, longest = 0;
  for (const auto& [key, tally] : count) {
    const size_t n = tally.positions.size();
    if (n > most || (n == most && key.size() > longest)) {
      most = n;
      longest = key.size();
      best = tally.rule;
    }
  }
  return best;
}

bool GrammarMatcher::Expand(Stack stack, std::vector<Stack>& out, size_t* positions) const {
  const CompiledGrammar& g = *grammar_;
  // Depth first with an explicit worklist, not recursion: a chain of rule references
  // that consume nothing (nested repetitions, optional groups) is as deep as the
  // grammar is long, and a request's grammar must not be able to overflow a thread's
  // stack. Alternatives are pushed last first, so they expand first to last.
  std::vector<Stack> pending;
  pending.push_back(std::move(stack));
  while (!pending.empty()) {
    Stack s = std::move(pending.back());
    pending.pop_back();
    // Positions on a stack never point at an end marker: a finished sequence is popped
    // before its end would be pushed, so right recursion keeps stacks flat.
    if (s.empty() || g.kind(s.back()) == 0) {
      *positions += s.size() + kStackCost;
      // Counted before duplicates go: an ambiguous grammar's copies of one parse cost
      // their expansion too.
      if (out.size() >= kMaxParseStacks * 4 || *positions > kMaxStatePositions * 4) return false;
      out.push_back(std::move(s));
      continue;
    }
    // A stack deeper than a whole state may hold can only end over the limits.
    if (s.size() > kMaxStatePositions * 4) return false;
    const int32_t pos = s.back();
    s.pop_back();
    if (g.kind(pos + 1) != CompiledGrammar::kEnd) s.push_back(pos + 1);
    const std::vector<int32_t>& starts = g.starts(g.operand(pos));
    for (size_t a = starts.size(); a-- > 0;) {
      Stack next = a == 0 ? std::move(s) : s;
      if (g.kind(starts[a]) != CompiledGrammar::kEnd) next.push_back(starts[a]);
      pending.push_back(std::move(next));
    }
    // Every pending stack ends as one stack or more (a rule has an alternative), so
    // this many cannot fit either; checked here so a wide alternation is not copied out
    // in full first.
    if (out.size() + pending.size() > kMaxParseStacks * 4) return false;
  }
  return true;
}

bool GrammarMatcher::AcceptCodePoint(uint32_t cp) {
  const CompiledGrammar& g = *grammar_;
  // The stacks that admit `cp`, advanced past it and deduplicated before they expand:
  // the alternatives of a wide alternation that all admit `cp` often continue alike.
  std::vector<Stack> advanced;
  for (const Stack& stack : stacks_) {
    if (stack.empty()) continue;
    const int32_t top = stack.back();
    if (!g.Admits(top, cp)) continue;
    Stack a(stack.begin(), stack.end() - 1);
    if (g.kind(top + 1) != CompiledGrammar::kEnd) a.push_back(top + 1);
    advanced.push_back(std::move(a));
  }
  if (advanced.empty()) return false;
  std::sort(advanced.begin(), advanced.end());
  advanced.erase(std::unique(advanced.begin(), advanced.end()), advanced.end());
  std::vector<Stack> next;
  size_t positions = 0;
  for (Stack& a : advanced) {
    if (!Expand(std::move(a), next, &positions)) {
      hit_limit_ = true;
      return false;
    }
  }
  std::swap(stacks_, next);
  Normalize();
  if (stacks_.size() > kMaxParseStacks) {
    std::swap(stacks_, next);
    Normalize();
    hit_limit_ = true;
    return false;
  }
  return true;
}

namespace {
// The smallest code point a UTF-8 character of `length` bytes may encode (shorter
// forms are overlong, not UTF-8).
uint32_t MinCodePoint(int length) { return length == 2 ? 0x80 : length == 3 ? 0x800 : length == 4 ? 0x10000 : 0; }
}  // namespace

bool GrammarMatcher::Fits(uint32_t bits, int left, int len) const {
  // The code points a character beginning with these bits may still become.
  const int shift = 6 * left;
  const uint32_t lo = std::max(bits << shift, MinCodePoint(len + left));
  const uint32_t hi = std::min((bits << shift) | ((1u << shift) - 1), uint32_t{0x10FFFF});
  if (lo > hi) return false;
  for (const Stack& stack : stacks_) {
    if (!stack.empty() && grammar_->chars(stack.back()).Intersects(lo, hi)) return true;
  }
  return false;
}

uint64_t GrammarMatcher::AdmittingStacks(uint32_t cp) const {
  std::vector<uint32_t> admitting;
  for (size_t i = 0; i < stacks_.size(); ++i) {
    if (!stacks_[i].empty() && grammar_->Admits(stacks_[i].back(), cp)) admitting.push_back(static_cast<uint32_t>(i));
  }
  return absl::HashOf(admitting);
}

bool GrammarMatcher::TopAdmits(uint32_t cp) const {
  for (const Stack& stack : stacks_) {
    if (!stack.empty() && grammar_->Admits(stack.back(), cp)) return true;
  }
  return false;
}

namespace {
// The length of the UTF-8 character `lead` begins; 0 if it begins none.
int Utf8Length(uint8_t lead) {
  const int n = (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xe ? 3 : (lead >> 3) == 0x1e ? 4 : 0;
  return n == 0 || lead == 0xc0 || lead == 0xc1 || lead > 0xf4 ? 0 : n;
}
bool ValidCodePoint(uint32_t cp, int length) {  // not overlong, not a surrogate
  return cp >= MinCodePoint(length) && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
}
}  // namespace

// Mirrors AcceptByte's verdicts exactly: AcceptCodePoint(cp) succeeds iff some top
// admits cp (expanding a stack always yields at least one stack).
bool GrammarMatcher::CouldAcceptByte(uint8_t byte) const {
  if (partial_left_ == 0) {
    if (byte < 0x80) return TopAdmits(byte);
    const int n = Utf8Length(byte);
    return n != 0 && Fits(byte & (0x7fu >> n), n - 1, 1);
  }
  if ((byte & 0xc0) != 0x80) return false;
  const uint32_t bits = (partial_ << 6) | (byte & 0x3f);
  if (partial_left_ == 1) return ValidCodePoint(bits, partial_len_ + 1) && TopAdmits(bits);
  return Fits(bits, partial_left_ - 1, partial_len_ + 1);
}

std::string GrammarMatcher::ForcedText(size_t max_bytes) const {
  std::string text;
  if (partial_left_ != 0) return text;
  GrammarMatcher walk = *this;
  while (text.size() + 4 <= max_bytes && !walk.CanEnd()) {
    uint32_t only = 0;
    bool found = false;
    for (const Stack& stack : walk.stacks_) {
      const CodePointSet& set = walk.grammar_->chars(stack.back());  // not empty: !CanEnd()
      if (set.ranges.size() != 1 || set.ranges[0].first != set.ranges[0].second) return text;
      if (found && set.ranges[0].first != only) return text;
      only = set.ranges[0].first;
      found = true;
    }
    if (!found || !ValidCodePoint(only, only < 0x80 ? 1 : only < 0x800 ? 2 : only < 0x10000 ? 3 : 4)) return text;
    if (!walk.AcceptCodePoint(only)) return text;
    AppendUtf8(only, text);
  }
  return text;
}

bool GrammarMatcher::AcceptByte(uint8_t byte) {
  hit_limit_ = false;
  if (partial_left_ == 0) {
    if (byte < 0x80) return AcceptCodePoint(byte);
    const int n = Utf8Length(byte);
    if (n == 0 || !Fits(byte & (0x7fu >> n), n - 1, 1)) return false;
    partial_ = byte & (0x7fu >> n);
    partial_left_ = n - 1;
    partial_len_ = 1;
    return true;
  }
  if ((byte & 0xc0) != 0x80) return false;
  const uint32_t bits = (partial_ << 6) | (byte & 0x3f);
  if (partial_left_ == 1) {
    if (!ValidCodePoint(bits, partial_len_ + 1) || !AcceptCodePoint(bits)) return false;
    partial_ = 0;
    partial_left_ = 0;
    partial_len_ = 0;
    return true;
  }
  if (!Fits(bits, partial_left_ - 1, partial_len_ + 1)) return false;
  partial_ = bits;
  --partial_left_;
  ++partial_len_;
  return true;
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  GrammarMatcher saved = *this;
  for (char c : bytes) {
    if (!AcceptByte(static_cast<uint8_t>(c))) {
      const bool limit = hit_limit_;
      *this = std::move(saved);
      hit_limit_ = limit;
      return false;
    }
  }
  return true;
}

bool GrammarMatcher::CanEnd() const {
  return partial_left_ == 0 && !stacks_.empty() && stacks_.front().empty();  // sorted: the empty stack first
}

bool GrammarMatcher::Exhausted() const { return partial_left_ == 0 && stacks_.size() == 1 && stacks_[0].empty(); }

bool GrammarMatcher::operator==(const GrammarMatcher& other) const {
  return grammar_ == other.grammar_ && partial_ == other.partial_ && partial_left_ == other.partial_left_ &&
         stacks_ == other.stacks_;
}

uint64_t GrammarMatcher::Hash() const {
  return absl::HashOf(stacks_, partial_, partial_left_);
}

bool GrammarAccepts(const Grammar& grammar, std::string_view text) {
  if (!grammar.Validate().ok()) return false;
  GrammarMatcher matcher(std::make_shared<const CompiledGrammar>(grammar));
  return matcher.AcceptBytes(text) && matcher.CanEnd();
}

}  // namespace crossreg::grammar
