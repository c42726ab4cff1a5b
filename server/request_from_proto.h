// Turns a crossreg.v1.GenerateRequest into the engine's GenerationRequest: fills the
// server's defaults for unset fields, tokenizes a text prompt, then applies the
// engine's own rules (ValidateGenerationRequest), the one place they are written.
// Every refusal names the field by its proto path ("decoding.beta",
// "sampling.max_tokens", "prompt.token_ids"), so a client can fix the request
// without reading server logs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "crossreg/v1/generation.pb.h"
#include "engine/decoding/generation_request.h"
#include "engine/grammar/grammar_compiler.h"
#include "engine/tokenizer/tokenizer.h"

namespace crossreg::server {

// What the server fills in for fields a request leaves unset (its flags).
struct RequestDefaults {
  const Tokenizer* tokenizer = nullptr;
  int gamma = 8;                 // decoding.gamma = 0
  int max_tokens = 128;          // sampling.max_tokens unset
  bool adaptive_gamma = false;   // decoding.adaptive_gamma unset (speculative modes)
  // decoding.draft_layout unset (lossless and lossy): the adapter's.
  DraftLayout draft_layout = DraftLayout::kChain;
  // decoding.fork_depth unset on the blocks layout: min(gamma, this) when > 0 (the rows
  // per block a self-drafting model was trained with, ModelConfig::draft_block_rows).
  int block_rows = 0;
  // Longest prompt.text accepted, checked before tokenizing so that a huge prompt
  // costs no tokenizer time; 0: no limit. See PromptByteBound.
  size_t max_prompt_bytes = 0;
  // Compiles structured_output constraints over the served vocabulary; null: requests
  // with one are refused (FAILED_PRECONDITION).
  grammar::GrammarCompiler* grammars = nullptr;
};

// The most bytes a text prompt can have and still fit the context: no token covers
// more input bytes than the tokenizer's longest token (at least 4, a UTF-8
// character mapped to <unk>), so a longer text needs more than `context_length`
// tokens.
size_t PromptByteBound(const Tokenizer& tokenizer, int64_t context_length);

// The refusal of a prompt.text of `bytes` over `limit`.
absl::Status PromptTooLong(size_t bytes, size_t limit);

struct ApiRequest {
  GenerationRequest request;  // request_id left as given (may be empty)
};

// INVALID_ARGUMENT naming the field for bad values; FAILED_PRECONDITION for what the
// engine cannot do (a Cross-Regression mode without an adapter, adaptive_gamma
// without a cost curve).
absl::StatusOr<ApiRequest> RequestFromProto(const v1::GenerateRequest& request, const DecodingEnvironment& env,
                                            const RequestDefaults& defaults);

DecodingMode ToDecodingMode(v1::DecodingMode mode);

// The seed of a request that gives none: drawn at random, below 2^53 (exact as a JSON
// number), reported back in its usage so that its text can be replayed.
uint64_t DrawSeed();

}  // namespace crossreg::server
