#include "engine/grammar/grammar.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace crossreg::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// A code point as GBNF writes it inside a class or literal.
std::string Escaped(uint32_t cp) {
  switch (cp) {
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case '\\':
    case '"':
    case ']':
    case '[':
    case '-':
    case '^':
      return std::string("\\") + static_cast<char>(cp);
    default:
      break;
  }
  if (cp < 0x20 || cp == 0x7f) return absl::StrFormat("\\x%02X", cp);
  if (cp < 0x80) return std::string(1, static_cast<char>(cp));
  if (cp <= 0xFFFF) return absl::StrFormat("\\u%04X", cp);
  return absl::StrFormat("\\U%08X", cp);
}

}  // namespace

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool CodePointSet::Contains(uint32_t cp) const {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](uint32_t v, const std::pair<uint32_t, uint32_t>& r) { return v < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->second;
}

bool CodePointSet::Intersects(uint32_t lo, uint32_t hi) const {
  for (const auto& [a, b] : ranges) {
    if (a > hi) return false;
    if (b >= lo) return true;
  }
  return false;
}

CodePointSet CodePointSet::FromRanges(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end());
  CodePointSet merged;
  for (const auto& [a, b] : ranges) {
    if (a > b) continue;
    if (!merged.ranges.empty() && a <= merged.ranges.back().second + 1) {
      merged.ranges.back().second = std::max(merged.ranges.back().second, b);
    } else {
      merged.ranges.emplace_back(a, std::min(b, kMaxCodePoint));
    }
  }
  if (!negated) return merged;
  CodePointSet complement;
  uint32_t next = 0;
  for (const auto& [a, b] : merged.ranges) {
    if (a > next) complement.ranges.emplace_back(next, a - 1);
    next = b + 1;
  }
  if (next <= kMaxCodePoint) complement.ranges.emplace_back(next, kMaxCodePoint);
  return complement;
}

absl::Status Grammar::Validate() const {
  const int32_t n = static_cast<int32_t>(rules.size());
  if (root < 0 || root >= n) return absl::InvalidArgumentError("grammar: no root rule");
  for (const Rule& rule : rules) {
    if (rule.alternatives.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("grammar: rule '", rule.name, "' is used but never defined"));
    }
    for (const Sequence& seq : rule.alternatives) {
      for (const Element& e : seq) {
        const int32_t limit = e.kind == Element::Kind::kRule ? n : static_cast<int32_t>(char_sets.size());
        if (e.index < 0 || e.index >= limit) {
          return absl::InvalidArgumentError(absl::StrCat("grammar: rule '", rule.name, "' refers to a missing ",
                                                         e.kind == Element::Kind::kRule ? "rule" : "character set"));
        }
      }
    }
  }
  // Rules that may match the empty string (a fixpoint).
  std::vector<bool> nullable(static_cast<size_t>(n), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < n; ++r) {
      if (nullable[static_cast<size_t>(r)]) continue;
      for (const Sequence& seq : rules[static_cast<size_t>(r)].alternatives) {
        const bool all = std::all_of(seq.begin(), seq.end(), [&](const Element& e) {
          return e.kind == Element::Kind::kRule && nullable[static_cast<size_t>(e.index)];
        });
        if (all) {
          nullable[static_cast<size_t>(r)] = changed = true;
          break;
        }
      }
    }
  }
  // Rule r reaches rule s at its left edge: s appears after only nullable rules.
  std::vector<std::vector<int32_t>> left(static_cast<size_t>(n));
  for (int32_t r = 0; r < n; ++r) {
    for (const Sequence& seq : rules[static_cast<size_t>(r)].alternatives) {
      for (const Element& e : seq) {
        if (e.kind != Element::Kind::kRule) break;
        left[static_cast<size_t>(r)].push_back(e.index);
        if (!nullable[static_cast<size_t>(e.index)]) break;
      }
    }
  }
  // A cycle in that graph is left recursion: depth-first search, colours 0/1/2, with an
  // explicit stack of (rule, next edge), since a request's chain of rules may be longer
  // than a thread's stack allows recursion.
  std::vector<int> colour(static_cast<size_t>(n), 0);
  std::vector<std::pair<int32_t, size_t>> path;
  for (int32_t root = 0; root < n; ++root) {
    if (colour[static_cast<size_t>(root)] != 0) continue;
    colour[static_cast<size_t>(root)] = 1;
    path.emplace_back(root, 0);
    while (!path.empty()) {
      auto& [r, edge] = path.back();
      const std::vector<int32_t>& out = left[static_cast<size_t>(r)];
      if (edge == out.size()) {
        colour[static_cast<size_t>(r)] = 2;
        path.pop_back();
        continue;
      }
      const int32_t s = out[edge++];
      if (colour[static_cast<size_t>(s)] == 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("grammar: rule '", rules[static_cast<size_t>(s)].name,
                         "' is left-recursive (it can reach itself before matching a character); "
                         "rewrite it right-recursively or with repetition"));
      }
      if (colour[static_cast<size_t>(s)] == 0) {
        colour[static_cast<size_t>(s)] = 1;
        path.emplace_back(s, 0);
      }
    }
  }
  return absl::OkStatus();
}

std::string Grammar::ToGbnf() const {
  std::string out;
  for (const Rule& rule : rules) {
    absl::StrAppend(&out, rule.name, " ::=");
    for (size_t a = 0; a < rule.alternatives.size(); ++a) {
      if (a > 0) out += " |";
      for (const Element& e : rule.alternatives[a]) {
        out += ' ';
        if (e.kind == Element::Kind::kRule) {
          out += rules[static_cast<size_t>(e.index)].name;
          continue;
        }
        const CodePointSet& set = char_sets[static_cast<size_t>(e.index)];
        if (set.ranges.size() == 1 && set.ranges[0].first == set.ranges[0].second) {
          absl::StrAppend(&out, "[", Escaped(set.ranges[0].first), "]");
          continue;
        }
        out += '[';
        for (const auto& [lo, hi] : set.ranges) {
          out += Escaped(lo);
          if (hi != lo) absl::StrAppend(&out, "-", Escaped(hi));
        }
        out += ']';
      }
      if (rule.alternatives[a].empty()) out += " \"\"";
    }
    out += '\n';
  }
  return out;
}

}  // namespace crossreg::grammar
