// One generation request, the same struct from the API down to the decoder: the
// server fills it from its protocol, the scheduler queues it, Generate and the
// SequenceDecoder run it. The rules it must satisfy (ranges, combinations, what the
// engine can do) are written once, in ValidateGenerationRequest.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/decoding/decoding_config.h"
#include "engine/decoding/forward_cost_curve.h"
#include "engine/decoding/logit_adjustments.h"
#include "engine/decoding/token_logprobs.h"
#include "engine/decoding/ngram_table.h"
#include "engine/decoding/verify.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/model/model_config.h"
#include "engine/sampler.h"

namespace crossreg {

class AcceptanceMemory;  // engine/decoding/acceptance_memory.h

struct GenerationRequest {
  std::string request_id;           // unique among the owner's live requests
  // Who submitted it (the server's principal: "token:alice"); only the same owner may
  // abort it. Requests of different owners may share an id. Empty in-process.
  std::string owner;
  std::vector<int32_t> prompt_ids;  // non-empty, ids in the vocabulary, shorter than the context
  int max_new_tokens = 128;
  SamplingParams sampling;
  // Penalties and biases on every control row (engine/decoding/logit_adjustments.h).
  LogitAdjustments adjustments;
  // Each generated token's log-probability and the top `logprobs` at its position;
  // -1: none, at most kMaxTopLogprobs.
  int logprobs = -1;
  LogprobsMode logprobs_mode = LogprobsMode::kRaw;
  // Structured output: every generated token keeps the text a prefix of a sentence
  // of this grammar, EOS only where it may end; the request stops when nothing more
  // may follow. Null: unconstrained.
  std::shared_ptr<const grammar::GrammarConstraint> grammar;
  DecodingConfig decoding;          // default: AR
  bool stop_at_eos = true;          // the model's EOS ids end generation
  std::vector<int32_t> stop_ids;    // further ids that end it (kept in the output)
  // Text that ends it: the scheduler detokenizes the output and ends the request where
  // one of these first appears, which is left out of the text (scheduler/stop_text_stream.h).
  std::vector<std::string> stop_strings;
  // Control tokens (BOS, a turn marker, the draft placeholder) are left out of the
  // text the scheduler streams; false writes their pieces.
  bool skip_special_tokens = true;
  // Scheduler: cancelled with DEADLINE_EXCEEDED once passed.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// What the engine a request runs on can do, and the limits it sets.
struct DecodingEnvironment {
  const ModelConfig* model = nullptr;
  bool has_adapter = false;        // lossless/lossy need a predictive-stream adapter
  int32_t placeholder_token = 0;   // fills predictive slots with no draft (the adapter's)
  int max_gamma = kMaxGamma;       // largest gamma a request may ask for
  // Measured forward cost (engine/decoding/forward_cost_curve.h): the shape of a
  // scheduler's one cost model, which prices draft rows and splits each forward's time
  // for the speedup accounting. adaptive_gamma needs one. Not owned.
  const ForwardCostCurve* cost_curve = nullptr;
  // Requests may adapt their draft length (with cost_curve): a server started with
  // --adaptive_gamma=false keeps its curve for the accounting and refuses them.
  bool adaptive_gamma = true;
  // The model's corpus n-gram table (engine/decoding/ngram_table.h): n-gram drafts
  // (n-gram mode, n-gram assist) come from it where the context has no match of 2+
  // tokens. Null: the context alone. Not owned.
  const NgramTable* ngram_table = nullptr;
  // Acceptance shared by the engine's requests (engine/decoding/acceptance_memory.h):
  // speculative requests record their verdicts there, adaptive ones start from it and
  // share its probe schedule. Null: each request learns alone. Not owned.
  AcceptanceMemory* acceptance_memory = nullptr;
  // Greedy requests ask the backend for row summaries (argmax, max logit, the logit of
  // the draft a row tests: engine/forward_output.h) instead of whole rows of logits,
  // which a GPU then keeps on the device. Off: every row comes back whole (A/B tests).
  bool summarize_greedy_rows = true;
};

// Every check a request must pass before it runs. Each message starts with the field
// it is about, as "field: what is wrong": prompt_ids, max_new_tokens, stop_ids,
// sampling.temperature / top_k / top_p, decoding.mode / beta / tau / gamma /
// fork_outcomes / fork_depth / ngram_assist / adaptive_gamma. INVALID_ARGUMENT for bad
// values; FAILED_PRECONDITION for what this engine cannot do (no adapter, no cost curve).
absl::Status ValidateGenerationRequest(const GenerationRequest& request, const DecodingEnvironment& env);

// KV positions one decode iteration may append beyond the committed tokens: x_last
// plus up to gamma drafts (AR: x_last only).
int64_t DecodeHeadroom(const DecodingConfig& decoding);

}  // namespace crossreg
