// A complete tiny llama model as a GGUF file in memory: one layer, hidden 8, two heads
// over one KV head, context 64, and a vocabulary of a few hundred tokens that encodes
// every byte. Small enough to corrupt at every offset in a test or to seed a fuzzer.
#pragma once

#include <cstdint>

#include "tests/testing/gguf_writer.h"

namespace crossreg::testing {

enum class TinyVocab {
  kSentencePiece,  // "llama": <unk> <s> </s>, byte fallback <0x00>..<0xFF>, scored pieces
  kByteLevel,      // "gpt2": the 256 byte symbols, merges, <|endoftext|> as BOS and EOS
};

// Weights are deterministic from `seed`.
GgufWriter TinyLlamaGguf(TinyVocab vocab, uint64_t seed = 1);

}  // namespace crossreg::testing
