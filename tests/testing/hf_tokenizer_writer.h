// Writes a TokenizerSpec as a Hugging Face tokenizer.json that TokenizerSpecFromHfJson
// reads back into a tokenizer encoding exactly like the original:
//  - SentencePiece BPE -> Llama-2 style (Prepend/Replace normalizer, byte_fallback,
//    merges from the vocab ranked by the merged token's score, as HF's converter does);
//  - byte-level BPE -> GPT-2 ByteLevel, or Split(regex) + ByteLevel for Llama 3 / Qwen2.
// Control, unknown and unused tokens become special added tokens, user-defined ones
// non-special added tokens. EOS is not representable in tokenizer.json (HF keeps it in
// tokenizer_config.json); the reader picks it by name.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "engine/tokenizer/tokenizer.h"

namespace crossreg::testing {

absl::Status WriteHfTokenizerJson(const TokenizerSpec& spec, const std::string& path);

}  // namespace crossreg::testing
