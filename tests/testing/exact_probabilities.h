// The exact distribution a sampler must reproduce, for the χ² tests: the probability
// of every continuation of a prompt, computed by plain AR forwards.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend.h"
#include "engine/decoding/logit_adjustments.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/kv/paged_kv_cache.h"
#include "engine/sampler.h"

namespace crossreg::testing {

// Probability under `sampling`'s processed distribution of every length-`depth`
// continuation of `prompt`, indexed by the continuation read as a base-`vocab`
// number (first token most significant). Uses a sequence of `kv` and frees it.
// `adjust`: penalties and biases applied to every row in the context of the prompt
// and the continuation's tokens before it. `grammar`: every row masked in the state
// after the continuation's tokens before it (left as it came).
std::vector<double> ExactSequenceProbabilities(Backend& backend, PagedKvCache& kv, int vocab,
                                               const std::vector<int32_t>& prompt, int depth,
                                               const SamplingParams& sampling,
                                               const LogitAdjustments* adjust = nullptr,
                                               grammar::GrammarState* grammar = nullptr);

}  // namespace crossreg::testing
