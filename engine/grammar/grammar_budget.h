// What a grammar may cost the server, whoever wrote it. A structured-output request's
// grammar runs on the server's threads (compiled at admission, matched as tokens
// commit, turned into token masks), so every one of those is bounded by limits that no
// request can raise. Growth happens in two places: expansion (counted repetition copies
// its item) and ambiguity (a nested repetition such as (x{0,n}){0,m} keeps every way
// of splitting the text alive as its own parse). The compiler refuses what exceeds
// the limits at admission (grammar_probe.h); a state that reaches one anyway admits less
// than its grammar says (never more), and a request left with no legal token ends
// with an error rather than continuing unconstrained.
#pragma once

#include <cstddef>
#include <cstdint>

namespace crossreg::grammar {

// Grammar elements (terminals and references) after repetition is expanded: what the
// compiled grammar costs in memory and what one matcher step may have to look at.
inline constexpr size_t kMaxGrammarElements = size_t{1} << 18;

// Parses alive in one matcher state after a character, duplicates merged: a wide
// alternation (an enum of a few hundred strings) keeps one per alternative until a
// character tells them apart, an ambiguous repetition multiplies them with every
// character.
inline constexpr size_t kMaxParseStacks = 1024;

// What one state costs to copy or step, in grammar positions: its stacks' sizes (the
// nesting depth of the text) plus kStackCost for each stack (its allocation).
inline constexpr size_t kStackCost = 8;
inline constexpr size_t kMaxStatePositions = size_t{1} << 16;

// One token mask's work, in grammar positions stepped through while walking the
// vocabulary (a state's positions each time the walk advances it by a byte; 30-50
// million a second on one core). Masks past this are not computed: the request ends
// with an error naming the grammar, or the probe refuses it at admission.
inline constexpr int64_t kMaxMaskWork = int64_t{1} << 22;

// What a scheduler step computes of masks on its own thread, all sequences together;
// masks that would take more are computed by the mask worker while other sequences
// run, and the sequence waits for them (scheduler/mask_worker.h).
inline constexpr int64_t kInlineMaskWorkPerStep = int64_t{1} << 18;

}  // namespace crossreg::grammar
