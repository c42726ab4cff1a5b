#include "engine/grammar/grammar_probe.h"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/grammar/grammar_budget.h"

namespace crossreg::grammar {
namespace {

// How far and how wide the exploration goes: ambiguous repetition multiplies parses
// with every character, so a few dozen characters along the most ambiguous path show
// it; the beam keeps the states holding the most positions.
constexpr int kProbeDepth = 64;
constexpr size_t kBeamWidth = 6;
constexpr size_t kCodePointsPerState = 16;
// States masked along the way (the start's mask always is).
constexpr int kMaskEvery = 24;

// A rule as errors name it: its text where the parser made it, else its name.
std::string RuleShown(const Grammar& grammar, int32_t rule) {
  if (rule < 0) return "the grammar";
  const Rule& r = grammar.rules[static_cast<size_t>(rule)];
  return r.source.empty() ? absl::StrCat("rule '", r.name, "'") : r.source;
}

std::string Printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// Code points the state admits next, a few: printable ASCII first (where most
// grammars' ambiguity lives), then a newline, a tab and two non-ASCII letters.
std::vector<uint32_t> Continuations(const GrammarMatcher& state) {
  std::vector<uint32_t> out;
  for (uint32_t cp = 0x20; cp < 0x7f && out.size() < kCodePointsPerState; ++cp) {
    if (state.CouldAcceptByte(static_cast<uint8_t>(cp))) out.push_back(cp);
  }
  for (uint32_t cp : {0x0au, 0x09u, 0xe9u, 0x4e2du}) {
    if (out.size() >= kCodePointsPerState) break;
    std::string bytes;
    AppendUtf8(cp, bytes);
    if (state.CouldAcceptByte(static_cast<uint8_t>(bytes[0]))) out.push_back(cp);
  }
  return out;
}

absl::Status Refuse(const Grammar& grammar, const GrammarMatcher& before, const std::string& text,
                    const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "grammar: ", RuleShown(grammar, before.BusiestRule()), " is too ambiguous to follow: ",
      text.empty() ? "at the start" : absl::StrCat("after \"", Printable(text), "\""), " ", what,
      " (nest repetitions only around something that cannot be empty and has one length, or write a single "
      "repetition)"));
}

absl::Status CheckMask(const GrammarConstraint& c, const GrammarMatcher& state, const std::string& text) {
  const std::shared_ptr<const TokenMask> mask = c.masker->Mask(state);
  if (mask == nullptr || mask->over_budget) {
    return absl::InvalidArgumentError(absl::StrCat(
        "grammar: computing which tokens may follow \"", Printable(text), "\" takes more than ", kMaxMaskWork,
        " steps of work (", RuleShown(c.grammar->grammar(), state.BusiestRule()), " keeps ", state.stacks(),
        " parses alive); simplify the grammar"));
  }
  if (mask->allowed == 0 && text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "grammar: no token of the model's vocabulary can begin the text this grammar requires",
        mask->hit_limit ? " (the grammar is too ambiguous at its start)" : ""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ProbeGrammar(const GrammarConstraint& c) {
  const Grammar& grammar = c.grammar->grammar();
  GrammarMatcher start(c.grammar);
  if (start.Dead()) {
    if (start.hit_limit()) {
      return Refuse(grammar, start, "",
                    absl::StrCat("more than ", kMaxParseStacks, " parses (or ", kMaxStatePositions,
                                 " grammar positions) would be alive"));
    }
    return absl::InvalidArgumentError("grammar: it matches no text at all");
  }
  if (absl::Status s = CheckMask(c, start, ""); !s.ok()) return s;

  struct Node {
    GrammarMatcher state;
    std::string text;
  };
  std::vector<Node> frontier{{start, ""}};
  for (int depth = 1; depth <= kProbeDepth && !frontier.empty(); ++depth) {
    std::vector<Node> next;
    std::unordered_set<uint64_t> seen;
    for (const Node& node : frontier) {
      std::unordered_set<uint64_t> stepped;  // code points admitted by the same stacks step alike
      for (uint32_t cp : Continuations(node.state)) {
        if (!stepped.insert(node.state.AdmittingStacks(cp)).second) continue;
        std::string bytes;
        AppendUtf8(cp, bytes);
        GrammarMatcher after = node.state;
        if (!after.AcceptBytes(bytes)) {
          if (after.hit_limit()) {
            return Refuse(grammar, node.state, node.text + bytes,
                          absl::StrCat("more than ", kMaxParseStacks, " parses (or ", kMaxStatePositions,
                                       " grammar positions) would stay alive"));
          }
          continue;
        }
        if (!seen.insert(after.Hash()).second) continue;
        next.push_back({std::move(after), node.text + bytes});
      }
    }
    // The widest states go on: that is where ambiguity grows.
    std::sort(next.begin(), next.end(),
              [](const Node& a, const Node& b) { return a.state.positions() > b.state.positions(); });
    if (next.size() > kBeamWidth) next.resize(kBeamWidth);
    if (depth % kMaskEvery == 0 && !next.empty()) {
      if (absl::Status s = CheckMask(c, next.front().state, next.front().text); !s.ok()) return s;
    }
    frontier = std::move(next);
  }
  return absl::OkStatus();
}

}  // namespace crossreg::grammar
