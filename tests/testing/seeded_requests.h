// Seeded sampled requests for the identity tests of seed-exact decoding (a seed fixes
// the text in every exact mode): stories260K with a random drafter adapter, and a
// spread of sampling settings (temperatures 0.7-1.2, top-p, top-k, min-p, penalties,
// a grammar).
#pragma once

#include <memory>
#include <vector>

#include "engine/decoding/generation_request.h"
#include "engine/decoding/ngram_table.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"

namespace crossreg::testing {

struct SeedIdentityModel {
  std::unique_ptr<Model> model;          // stories260K
  std::unique_ptr<LoraAdapter> drafter;  // random and small: its drafts often agree with the model
  // Words of letters and commas, separated by spaces, an optional full stop at the end.
  std::shared_ptr<const grammar::GrammarConstraint> grammar;
  std::vector<std::vector<int32_t>> prompts;  // the stories reference prompts
};
// Fails the calling test (and returns a model with null members) when the shared data is missing.
SeedIdentityModel LoadSeedIdentityModel();

// Request i (any i >= 0), greedy never: temperature 0.7, 0.85, 1.0 or 1.2; top-p 1,
// 0.95 or 0.9; a top-k or min-p cut on some; presence, frequency and repetition
// penalties and a logit bias on some; every sixth under the grammar; the prompt is a
// reference prompt, longer for later i (so prompts share prefixes); seed fixed by i.
// AR decoding, EOS ignored; the caller sets the decoding.
GenerationRequest SeededSampledRequest(const SeedIdentityModel& m, int i);

// A corpus n-gram table (2- and 3-token contexts) whose continuations are those of
// `texts`, every `wrong_every`-th one replaced by another token: fed AR's texts, it
// drafts mostly the tokens AR drew, so forwards commit several tokens and the
// numbering of every position of a forward is exercised (a random drafter on
// stories260K is rarely right at T ~ 1). The first text to have a context wins.
std::unique_ptr<NgramTable> TableOfTexts(const std::vector<std::vector<int32_t>>& texts, int vocab, int wrong_every);

}  // namespace crossreg::testing
