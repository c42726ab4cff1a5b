// A complete tiny llama model as a GGUF file in memory: one layer, hidden 8, two heads
// over one KV head, context 64, and a vocabulary of a few hundred tokens that encodes
// every byte. Small enough to corrupt at every offset in a test or to seed a fuzzer.
#pragma once

#include <cstdint>
#include <vector>

#include "tests/testing/gguf_writer.h"

namespace crossreg::testing {

enum class TinyVocab {
  kSentencePiece,  // "llama": <unk> <s> </s>, byte fallback <0x00>..<0xFF>, scored pieces
  kByteLevel,      // "gpt2": the 256 byte symbols, merges, <|endoftext|> as BOS and EOS
};

// n values uniform in center +- spread from a 64-bit LCG whose state the caller keeps.
std::vector<float> DeterministicValues(uint64_t& state, int64_t n, float center, float spread);

// Weights are deterministic from `seed`.
GgufWriter TinyLlamaGguf(TinyVocab vocab, uint64_t seed = 1);

// The same tiny llama with a byte-level BPE vocabulary of `vocab_size` tokens (the 256
// byte symbols, then merges of random pairs of earlier tokens, each at most 12 bytes:
// the shape of a 128k GPT-4/Llama-3 vocabulary, not its contents) and a context of
// `context` positions. Deterministic from `seed`.
GgufWriter TinyLlamaGgufLargeVocab(int vocab_size, int context, uint64_t seed = 1);

}  // namespace crossreg::testing
