// What one sequence puts into the next forward, decided before it runs: a value. The
// batch builder (the scheduler, or Generate for one sequence) appends `rows` to the
// batch, runs it, and hands the plan back with the logits of those rows, as vLLM's
// schedule() output goes back through update_from_output. Nothing about the forward
// in flight is remembered elsewhere.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/decoding/decoding_config.h"
#include "engine/decoding/draft_decision.h"
#include "engine/decoding/token_logprobs.h"
#include "engine/forward_batch.h"

namespace crossreg {

// How the next decode forward decodes, as SequenceDecoder::Choose picked it.
struct DraftChoice {
  DecodingConfig decoding;   // the request's, with γ' when adaptive
  bool ar_fallback = false;  // a speculative request that runs this forward as plain AR
  int ngram_match = 0;       // adaptive n-gram: the match class its drafts come from (NgramMatchClass)
  std::vector<int32_t> ngram_drafts;  // adaptive n-gram: the drafts γ' was chosen for (up to the request's γ)
  // N-gram under a grammar: the tokens spelling the text the grammar forces next (keys,
  // quotes, brackets of a JSON schema), drafted before any n-gram match.
  std::vector<int32_t> forced_drafts;
  DraftDecision decision;  // adaptive requests: what the controller decided (applied after the forward)
};

struct StepPlan {
  enum class Kind { kPrefill, kDecode };
  Kind kind = Kind::kPrefill;
  // In batch order; their want_logits rows come back in this order. Decode layout
  // (ALGORITHM.md "One iteration"), with L committed tokens and m buffered drafts:
  //   control rows      [x_last, d_1 .. d_m]             positions L-1 .. L-1+m   -> P_1 .. P_{m+1}
  //   predictive rows   branch 0: [x_last, d_1 .., placeholders]  positions L-1 ..  -> Q_1 .. Q_g
  //   forked refill     branch n+1: placeholders after d_n        (one per outcome n < R)
  // or, in the outcome-block layout (no predictive chain):
  //   outcome blocks    branch n+1: placeholders after d_n, bidirectional (outcomes 0 .. m)
  std::vector<BatchRow> rows;

  // Decode only.
  int64_t committed = 0;          // L: committed tokens (prompt + generated) before the forward
  int64_t generated = 0;          // of them, generated: the output position P_1 draws for
  DecodingConfig decoding;        // this forward's decoding: the request's, with γ' when adaptive
  int drafts = 0;                 // m: drafts verified
  int main_chain = 0;             // g: predictive rows of branch 0
  std::vector<int> fork_sizes;    // forks / outcome blocks: rows of the chain for outcome n = 0, 1, ... (0: none)
  bool ar_fallback = false;       // a speculative request that runs this forward as plain AR
  int ngram_match = 0;            // n-gram: the match class its drafts came from (NgramMatchClass; 0: not tracked)
  bool forced_drafts = false;     // the drafts spell text the grammar forces (kept out of the n-gram statistics)
  int assisted_drafts = 0;        // n-gram assist: the first drafts, one-hot from the context index
  DraftDecision decision;         // the choice's, for DraftLengthController::Observe

  bool prefill() const { return kind == Kind::kPrefill; }
  // Logit rows this plan expects back (its rows that want logits): m + 1 control, g
  // main-chain and the forks' rows for a decode plan, none for a prefill chunk.
  int logit_rows() const {
    int n = 0;
    for (const BatchRow& r : rows) n += r.want_logits ? 1 : 0;
    return n;
  }
  // Of those, the rows that come back as a RowSummary (greedy requests).
  int summary_rows() const {
    int n = 0;
    for (const BatchRow& r : rows) n += r.want_logits && r.summary ? 1 : 0;
    return n;
  }
};

// What one forward did for a sequence, as the decoder reports it back: the caller
// commits `kv_length` positions (PagedKvCache::Commit, the forward's one KV change),
// delivers `tokens` and reports the verdicts; nobody diffs running statistics.
struct StepOutcome {
  std::vector<int32_t> tokens;  // committed by this forward (a prefill chunk's: none)
  int64_t kv_length = 0;        // positions the sequence keeps in the cache after it
  int drafted = 0;              // decode: drafts verified (m)
  int accepted = 0;             // ... accepted (n)
  std::vector<bool> verdicts;   // [k-1]: d_k accepted, one per depth reached
  std::vector<TokenLogprob> logprobs;  // one per token, when the request asks for them
};

}  // namespace crossreg
