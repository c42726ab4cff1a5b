// Prompt-lookup drafting (PLD): propose the tokens that followed the most recent
// earlier occurrence of the context's last n tokens. Training-free; the proposal is
// a function of the committed prefix only, so exact verification applies to it.
#pragma once

#include <cstdint>
#include <vector>

namespace crossreg {

// Up to `max_tokens` drafts for the continuation of `context`, trying suffix lengths
// ngram_max down to 1; empty when nothing matches.
std::vector<int32_t> NgramDrafts(const std::vector<int32_t>& context, int ngram_max, int max_tokens);

}  // namespace crossreg
