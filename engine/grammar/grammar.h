// A context-free grammar over Unicode code points, the form every structured-output
// constraint compiles to (GBNF text, JSON Schema, regular expressions). Rules are
// alternatives of sequences; a sequence's elements are code-point sets (terminals) or
// references to rules. Repetition and grouping are already expanded into rules of
// their own by whoever built the grammar (gbnf_parser.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace crossreg::grammar {

// A set of code points as sorted, disjoint, non-adjacent closed ranges.
struct CodePointSet {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  bool Contains(uint32_t cp) const;
  // Whether any member lies in [lo, hi] (a partially decoded UTF-8 character).
  bool Intersects(uint32_t lo, uint32_t hi) const;
  // Sorts, merges and, for a negated class, complements over [0, 0x10FFFF].
  static CodePointSet FromRanges(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated);
};

// Appends the UTF-8 encoding of `cp` (at most 0x10FFFF) to `out`.
void AppendUtf8(uint32_t cp, std::string& out);

struct Element {
  enum class Kind : uint8_t { kChars, kRule };
  Kind kind = Kind::kChars;
  int32_t index = 0;  // kChars: into Grammar::char_sets; kRule: the rule referred to
};

using Sequence = std::vector<Element>;  // empty = matches the empty string

struct Rule {
  std::string name;
  std::vector<Sequence> alternatives;
  // Where a rule the parser made (a group, a repetition) came from in the grammar's
  // text, as "`(x){0,9}` (line 1, column 9)", for errors; empty for named rules.
  std::string source;
};

struct Grammar {
  std::vector<Rule> rules;
  std::vector<CodePointSet> char_sets;
  int32_t root = 0;

  // References resolve, every rule has an alternative, no rule is left-recursive
  // (directly or through rules that may match the empty string: a top-down matcher
  // would never finish expanding it). The message names the rule.
  absl::Status Validate() const;
  // GBNF text that parses back to an equivalent grammar (for logs and tests).
  std::string ToGbnf() const;
};

}  // namespace crossreg::grammar
