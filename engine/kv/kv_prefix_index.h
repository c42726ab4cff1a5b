// The prefix cache's index: which cached KV block holds the control-stream K/V of a
// given block of tokens after a given parent block. Blocks form chains (block i of a
// sequence's table follows block i - 1), so a block's identity is its parent and its
// tokens; the 64-bit key hashes that chain and only picks the bucket. A lookup
// compares the tokens and the parent block itself, never the hash alone, so a hash
// collision costs a comparison, not a wrong answer. A parent's identity ends when it
// leaves the index (its epoch moves on), which makes the children registered under it
// unreachable: they can no longer be found, and age out of the cache like any
// unused block.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "absl/types/span.h"

namespace crossreg {

class KvPrefixIndex {
 public:
  static constexpr int32_t kNoParent = -1;
  // `hash_bits` < 64 keeps only the key's low bits: tests force collisions with it.
  KvPrefixIndex(int num_blocks, int block_size, int hash_bits = 64);

  int block_size() const { return block_size_; }
  // The key of `tokens` (one block's worth) following the block keyed `parent_key`;
  // a sequence's first block follows RootKey().
  uint64_t RootKey() const;
  uint64_t Key(uint64_t parent_key, absl::Span<const int32_t> tokens) const;

  // The registered block with this key, parent block (kNoParent: the first block of
  // a sequence) and tokens; -1 when there is none.
  int32_t Find(uint64_t key, int32_t parent, absl::Span<const int32_t> tokens) const;
  // Registers `block` (not registered) as holding `tokens` after `parent` (registered,
  // or kNoParent). False, and nothing registered, when an equal entry exists.
  bool Insert(int32_t block, uint64_t key, int32_t parent, absl::Span<const int32_t> tokens);
  // Unregisters `block`: its identity ends (children registered under it become
  // unreachable). A no-op for a block not registered.
  void Erase(int32_t block);

  bool Contains(int32_t block) const { return entries_[static_cast<size_t>(block)].registered; }
  uint64_t KeyOf(int32_t block) const { return entries_[static_cast<size_t>(block)].key; }
  int size() const { return size_; }

 private:
  struct Entry {
    bool registered = false;
    uint64_t key = 0;
    int32_t parent = kNoParent;
    uint64_t parent_epoch = 0;  // the parent's epoch when this entry was made
    std::vector<int32_t> tokens;
  };
  bool Matches(const Entry& e, int32_t parent, absl::Span<const int32_t> tokens) const;

  int block_size_;
  uint64_t key_mask_;
  std::vector<Entry> entries_;     // by block id
  std::vector<uint64_t> epochs_;   // by block id: moves on every Erase
  std::unordered_multimap<uint64_t, int32_t> by_key_;
  int size_ = 0;
};

}  // namespace crossreg
