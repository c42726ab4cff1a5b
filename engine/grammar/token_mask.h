// Which tokens a grammar state admits: a token is allowed when its bytes, appended to
// the text so far, keep some parse alive (a token may end inside a UTF-8 character or
// span several grammar symbols); end-of-sequence tokens only where the grammar may end;
// tokens without bytes (control tokens) never. Computing a mask walks the vocabulary's
// byte trie, so tokens sharing a prefix share its work and a dead prefix skips every
// token under it; masks are cached by grammar state, which repeats (inside a string, between
// fields), so most lookups cost a hash.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/grammar/grammar_budget.h"
#include "engine/grammar/grammar_matcher.h"

namespace crossreg::grammar {

// The vocabulary as grammars see it: each token's bytes, and the end-of-sequence ids.
class GrammarVocabulary {
 public:
  GrammarVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> eos_ids);
  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool is_eos(int32_t id) const { return eos_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  // Ids with bytes, sorted by their bytes; shared[i]: bytes order[i] shares with order[i - 1].
  const std::vector<int32_t>& order() const { return order_; }
  const std::vector<uint16_t>& shared() const { return shared_; }

  // The byte trie of the tokens with bytes, in preorder: node n stands for a byte string
  // (its path, depth(n) + 1 bytes long, the last being byte(n)); its subtree is the nodes
  // [n, subtree_end(n)); the tokens spelled exactly by it are order()[first_token(n)]
  // and the token_count(n) - 1 after it. A dead node skips its whole subtree.
  struct TrieNode {
    int32_t subtree_end;
    int32_t first_token;
    uint16_t depth;
    uint8_t byte;
    uint8_t token_count;  // tokens with identical bytes are rare; more than 255 never
  };
  const std::vector<TrieNode>& trie() const { return trie_; }

  // The id of the longest token that `text` begins with (the lowest id among equals);
  // `length` gets its byte count. -1 if no token begins it.
  int32_t LongestMatch(std::string_view text, size_t* length) const;

 private:
  std::vector<std::string> bytes_;
  std::vector<bool> eos_;
  std::vector<int32_t> eos_ids_;
  std::vector<int32_t> order_;
  std::vector<uint16_t> shared_;
  std::vector<TrieNode> trie_;
};

// A set of token ids, one bit each.
struct TokenMask {
  std::vector<uint64_t> bits;
  int32_t allowed = 0;  // how many bits are set
  // Some token was refused because accepting it would exceed the matcher's state
  // limits (grammar_budget.h), not by the grammar: the mask admits less than it says.
  bool hit_limit = false;
  // Not a mask: computing it would exceed kMaxMaskWork. Cached so that no one tries
  // again; it admits nothing.
  bool over_budget = false;
  bool test(int32_t id) const { return (bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u; }
  void set(int32_t id) { bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }
};

// What a mask computation may spend and has spent, in grammar positions stepped
// through (grammar_budget.h).
struct MaskWork {
  int64_t budget = kMaxMaskWork;
  int64_t used = 0;
};

// The mask of a state, computed without a cache (the reference the cache must agree
// with); nullopt once the walk's work passes work.budget. The walk interns the states
// it passes through and steps each (state, byte) once; `intern_states` false (tests)
// forces the fallback it takes when a grammar's states never repeat: a matcher stepped
// at every live node. A token is in the mask exactly when AcceptBytes of its bytes
// succeeds in `state` (EOS: when the state may end).
std::optional<TokenMask> ComputeTokenMask(const GrammarMatcher& state, const GrammarVocabulary& vocab, MaskWork& work,
                                          bool intern_states = true);
// The same without a budget (tests and tools).
TokenMask ComputeTokenMask(const GrammarMatcher& state, const GrammarVocabulary& vocab, bool intern_states = true);
// Whether one token is allowed in `state` (no mask needed).
bool TokenAllowed(const GrammarMatcher& state, const GrammarVocabulary& vocab, int32_t id);

// Masks of one grammar's states, cached (least recently used out first, within
// `cache_bytes`). Thread-safe: requests with the same grammar share one.
class TokenMasker {
 public:
  TokenMasker(std::shared_ptr<const GrammarVocabulary> vocab, size_t cache_bytes = size_t{64} << 20);
  // The mask of `state`, from the cache or computed within `work` (null: the whole
  // kMaxMaskWork); null when the computation would exceed it (nothing is cached then).
  std::shared_ptr<const TokenMask> Mask(const GrammarMatcher& state, MaskWork* work = nullptr);
  // The cached mask of `state`, or null (never computes one).
  std::shared_ptr<const TokenMask> Cached(const GrammarMatcher& state);
  const GrammarVocabulary& vocab() const { return *vocab_; }
  int64_t hits() const;
  int64_t misses() const;

 private:
  struct Entry {
    GrammarMatcher state;
    std::shared_ptr<const TokenMask> mask;
  };
  std::shared_ptr<const TokenMask> LookUpLocked(const GrammarMatcher& state, uint64_t hash);

  std::shared_ptr<const GrammarVocabulary> vocab_;
  const size_t capacity_;  // masks kept
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_multimap<uint64_t, std::list<Entry>::iterator> index_;
  int64_t hits_ = 0, misses_ = 0;
};

}  // namespace crossreg::grammar
