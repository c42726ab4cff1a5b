// The admission check of a compiled grammar against its budgets (grammar_budget.h): a
// grammar that would exceed them is refused when the request arrives, with the
// construct named, rather than found out while other requests wait on it. The probe
// computes the mask of the start (which every request with this grammar needs first,
// and which stays cached) and explores the text the grammar admits, a few characters
// deep along the continuations that keep the most parses alive (where ambiguous
// repetition shows), masking some of the states it reaches. It is a probe, not a
// proof: what it misses still meets the limits at run time, where the request then
// ends with an error instead of continuing unconstrained.
#pragma once

#include "absl/status/status.h"
#include "engine/grammar/grammar_constraint.h"

namespace crossreg::grammar {

// OK, or INVALID_ARGUMENT "grammar: ..." naming the rule (and its text) that
// exceeded a limit, the start that no token can begin, or a mask over budget.
absl::Status ProbeGrammar(const GrammarConstraint& constraint);

}  // namespace crossreg::grammar
