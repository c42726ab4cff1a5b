#include "engine/kv/kv_prefix_index.h"

#include <algorithm>

namespace crossreg {
namespace {

// splitmix64's finalizer: every input bit moves every output bit, so keys of blocks
// that differ in one token land in unrelated buckets.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

KvPrefixIndex::KvPrefixIndex(int num_blocks, int block_size, int hash_bits)
    : block_size_(block_size),
      key_mask_(hash_bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << std::max(0, hash_bits)) - 1),
      entries_(static_cast<size_t>(num_blocks)),
      epochs_(static_cast<size_t>(num_blocks), 0) {}

uint64_t KvPrefixIndex::RootKey() const { return Mix(0x6372657373726567ULL) & key_mask_; }

uint64_t KvPrefixIndex::Key(uint64_t parent_key, absl::Span<const int32_t> tokens) const {
  uint64_t h = Mix(parent_key + 0x9e3779b97f4a7c15ULL);
  for (int32_t t : tokens) h = Mix(h ^ static_cast<uint32_t>(t));
  return h & key_mask_;
}

bool KvPrefixIndex::Matches(const Entry& e, int32_t parent, absl::Span<const int32_t> tokens) const {
  if (!e.registered || e.parent != parent) return false;
  if (parent != kNoParent && e.parent_epoch != epochs_[static_cast<size_t>(parent)]) return false;  // stale
  return std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end());
}

int32_t KvPrefixIndex::Find(uint64_t key, int32_t parent, absl::Span<const int32_t> tokens) const {
  auto [begin, end] = by_key_.equal_range(key);
  for (auto it = begin; it != end; ++it) {
    if (Matches(entries_[static_cast<size_t>(it->second)], parent, tokens)) return it->second;
  }
  return -1;
}

bool KvPrefixIndex::Insert(int32_t block, uint64_t key, int32_t parent, absl::Span<const int32_t> tokens) {
  Entry& e = entries_[static_cast<size_t>(block)];
  if (e.registered || Find(key, parent, tokens) >= 0) return false;
  e.registered = true;
  e.key = key;
  e.parent = parent;
  e.parent_epoch = parent == kNoParent ? 0 : epochs_[static_cast<size_t>(parent)];
  e.tokens.assign(tokens.begin(), tokens.end());
  by_key_.emplace(key, block);
  ++size_;
  return true;
}

void KvPrefixIndex::Erase(int32_t block) {
  Entry& e = entries_[static_cast<size_t>(block)];
  if (!e.registered) return;
  auto [begin, end] = by_key_.equal_range(e.key);
  for (auto it = begin; it != end; ++it) {
    if (it->second == block) {
      by_key_.erase(it);
      break;
    }
  }
  e.registered = false;
  e.tokens.clear();
  ++epochs_[static_cast<size_t>(block)];
  --size_;
}

}  // namespace crossreg
