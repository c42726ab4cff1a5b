// Recognises text against a Grammar incrementally, one byte at a time (a token's
// bytes may end inside a UTF-8 character; the matcher holds the partial character).
// The state is the set of parse stacks still alive, each a path of grammar positions
// whose top is a terminal; accepting a code point advances every stack whose top
// admits it and drops the rest. Grammars must pass Grammar::Validate (no left
// recursion). States are values: copy one to explore, compare and hash them to cache.
// A character whose expansion would exceed kMaxParseStacks or kMaxStatePositions
// (grammar_budget.h) is not accepted, and the refusal says so (hit_limit()): the
// grammar then admits less than it says, never more.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/grammar/grammar.h"

namespace crossreg::grammar {

// The grammar flattened for matching: every sequence laid out in one array, each
// ending in an end marker.
class CompiledGrammar {
 public:
  explicit CompiledGrammar(Grammar grammar);  // grammar.Validate() must be ok
  const Grammar& grammar() const { return grammar_; }

  // Element at `pos`: kEnd closes a sequence.
  static constexpr int32_t kEnd = -1;
  int32_t kind(int32_t pos) const { return kinds_[static_cast<size_t>(pos)]; }  // 0 chars, 1 rule, kEnd
  int32_t operand(int32_t pos) const { return operands_[static_cast<size_t>(pos)]; }
  const std::vector<int32_t>& starts(int32_t rule) const { return starts_[static_cast<size_t>(rule)]; }
  const CodePointSet& chars(int32_t pos) const { return grammar_.char_sets[static_cast<size_t>(operand(pos))]; }
  // chars(pos).Contains(cp), with ASCII answered from a bitmap (the hot case of a
  // vocabulary walk).
  bool Admits(int32_t pos, uint32_t cp) const {
    if (cp < 128) return (ascii_[static_cast<size_t>(operand(pos))][cp >> 6] >> (cp & 63)) & 1u;
    return chars(pos).Contains(cp);
  }

 private:
  Grammar grammar_;
  std::vector<int32_t> kinds_, operands_;
  std::vector<std::vector<int32_t>> starts_;  // rule -> first position of each alternative
  std::vector<std::array<uint64_t, 2>> ascii_;  // char set -> its ASCII members
};

class GrammarMatcher {
 public:
  GrammarMatcher() = default;  // no grammar: dead
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances over `bytes`; false (and the state unchanged) if any prefix of them
  // leaves no stack alive, is not UTF-8, or would exceed the state limits.
  bool AcceptBytes(std::string_view bytes);
  bool AcceptByte(uint8_t byte);
  // Whether some stack's top admits `byte` (AcceptByte(byte) succeeds unless the
  // expansion exceeds the state limits), without advancing.
  bool CouldAcceptByte(uint8_t byte) const;
  // The last refused Accept* was refused for the state limits, not by the grammar.
  bool hit_limit() const { return hit_limit_; }
  // What copying or stepping this state costs: its stacks' positions plus kStackCost
  // per stack (grammar_budget.h).
  size_t positions() const { return positions_; }
  size_t stacks() const { return stacks_.size(); }
  // Which stacks' tops admit the code point `cp`, as a hash: two code points with the
  // same lead to the same state (a step depends on the admitting stacks alone), so an
  // explorer (grammar_probe.h) steps once per distinct value.
  uint64_t AdmittingStacks(uint32_t cp) const;
  // The rule with the most positions on this state's stacks (the likeliest culprit of
  // an oversized state), or -1 when the state holds none.
  int32_t BusiestRule() const;
  // The text every continuation of this state begins with: while exactly one code
  // point may come next and the text may not end here, that code point; at most
  // `max_bytes` bytes, and empty inside a partial UTF-8 character.
  std::string ForcedText(size_t max_bytes = 64) const;
  // The text so far is a complete sentence of the grammar (no partial character).
  bool CanEnd() const;
  // Nothing more may follow: the grammar admits no further character.
  bool Exhausted() const;
  bool Dead() const { return stacks_.empty(); }

  // The state, for caches: equal states admit the same continuations.
  bool operator==(const GrammarMatcher& other) const;
  uint64_t Hash() const;
  const std::shared_ptr<const CompiledGrammar>& compiled() const { return grammar_; }

 private:
  using Stack = std::vector<int32_t>;  // positions, top at the back
  void Normalize();                    // sorts and dedupes stacks_, counts positions_
  // Replaces `stack` by its expansions whose tops are terminals (or the empty stack);
  // false once `out` holds more than the state limits allow (`*positions` counts them).
  bool Expand(Stack stack, std::vector<Stack>& out, size_t* positions) const;
  bool AcceptCodePoint(uint32_t cp);
  // Some top admits a character whose first `len` bytes decode to `bits` with `left`
  // continuation bytes still to come.
  bool Fits(uint32_t bits, int left, int len) const;
  bool TopAdmits(uint32_t cp) const;  // some stack's top admits `cp`

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::vector<Stack> stacks_;  // sorted, unique; an empty stack = the root may end here
  uint32_t partial_ = 0;       // bits of a UTF-8 character begun and not finished
  int partial_left_ = 0;       // continuation bytes still expected
  int partial_len_ = 0;        // bytes of the character seen so far
  size_t positions_ = 0;
  bool hit_limit_ = false;
};

// Whether `text` is a whole sentence of `grammar` (tests and tools).
bool GrammarAccepts(const Grammar& grammar, std::string_view text);

}  // namespace crossreg::grammar
