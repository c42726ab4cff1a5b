// OpenAI's log-probability objects from the engine's TokenLogprobs: the completions
// API's parallel lists (tokens, token_logprobs, top_logprobs, text_offset) and the chat
// API's content list (token, logprob, bytes, top_logprobs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/decoding/token_logprobs.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/http/openai_response.h"

namespace crossreg::server {

// A token as text: its bytes when they are valid UTF-8, else "bytes:\xNN..." (as
// OpenAI writes a token that is part of a character).
std::string TokenText(const Tokenizer& tokenizer, int32_t id);

// What JSON can hold for a log-probability: -inf (a token the processed
// distribution cut) is written -9999.0, as OpenAI does.
double JsonLogprob(float logprob);

// Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}; the
// offsets count bytes of the output text from `text_offset`.
OpenAiJson CompletionLogprobs(const std::vector<TokenLogprob>& logprobs, const Tokenizer& tokenizer,
                              int64_t text_offset);
// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...]}.
OpenAiJson ChatLogprobs(const std::vector<TokenLogprob>& logprobs, const Tokenizer& tokenizer);

}  // namespace crossreg::server
