#include "engine/kv/paged_kv_cache.h"

#include "absl/strings/str_cat.h"

namespace crossreg {

PagedKvCache::PagedKvCache(KvCacheConfig config)
    : config_(config),
      refs_(static_cast<size_t>(std::max(0, config.num_blocks)), 0),
      evictable_pos_(static_cast<size_t>(std::max(0, config.num_blocks))) {
  free_list_.reserve(static_cast<size_t>(config_.num_blocks));
  // Lowest block ids are handed out first.
  for (int b = config_.num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
  if (config_.prefix_caching) index_.emplace(config_.num_blocks, config_.block_size, config_.prefix_hash_bits);
}

SequenceId PagedKvCache::CreateSequence() {
  SequenceId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<SequenceId>(sequences_.size());
    sequences_.emplace_back();
  }
  sequences_[static_cast<size_t>(id)] = SequenceState{};
  sequences_[static_cast<size_t>(id)].live = true;
  if (index_) sequences_[static_cast<size_t>(id)].chain_key = index_->RootKey();
  return id;
}

bool PagedKvCache::IsLive(SequenceId seq) const {
  return seq >= 0 && static_cast<size_t>(seq) < sequences_.size() && sequences_[static_cast<size_t>(seq)].live;
}

absl::Status PagedKvCache::CheckLive(SequenceId seq) const {
  if (!IsLive(seq)) return absl::NotFoundError(absl::StrCat("KV cache: no live sequence ", seq));
  return absl::OkStatus();
}

int32_t PagedKvCache::Allocate() {
  int32_t block;
  if (!free_list_.empty()) {
    block = free_list_.back();
    free_list_.pop_back();
  } else {
    block = evictable_.front();
    evictable_.pop_front();
    index_->Erase(block);
  }
  refs_[static_cast<size_t>(block)] = 1;
  return block;
}

void PagedKvCache::Release(int32_t block) {
  if (--refs_[static_cast<size_t>(block)] > 0) return;
  if (index_ && index_->Contains(block)) {
    evictable_pos_[static_cast<size_t>(block)] = evictable_.insert(evictable_.end(), block);
  } else {
    free_list_.push_back(block);
  }
}

int64_t PagedKvCache::BlocksNeeded(SequenceId seq, int64_t num_tokens) const {
  const auto& blocks = sequences_[static_cast<size_t>(seq)].blocks;
  return KvExtraBlocks(num_tokens, static_cast<int64_t>(blocks.size()), config_.block_size);
}

absl::Status PagedKvCache::Reserve(SequenceId seq, int64_t num_tokens) {
  if (auto s = CheckLive(seq); !s.ok()) return s;
  const int64_t needed = BlocksNeeded(seq, num_tokens);
  if (needed > free_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat("KV cache full: need ", needed, " more blocks of ",
                                                     config_.block_size, " tokens, ", free_blocks(), " free of ",
                                                     config_.num_blocks));
  }
  auto& st = sequences_[static_cast<size_t>(seq)];
  for (int64_t i = 0; i < needed; ++i) st.blocks.push_back(Allocate());
  if (index_) st.tokens.resize(st.blocks.size() * static_cast<size_t>(config_.block_size), -1);
  return absl::OkStatus();
}

void PagedKvCache::RecordToken(SequenceId seq, int64_t position, int32_t token) {
  if (!index_ || !IsLive(seq)) return;
  auto& tokens = sequences_[static_cast<size_t>(seq)].tokens;
  if (position >= 0 && static_cast<size_t>(position) < tokens.size()) tokens[static_cast<size_t>(position)] = token;
}

void PagedKvCache::RegisterFullBlocks(SequenceState& st) {
  const int bs = config_.block_size;
  const int64_t full = st.length / bs;
  while (st.chain_open && st.registered < full) {
    const size_t i = static_cast<size_t>(st.registered);
    const absl::Span<const int32_t> tokens(st.tokens.data() + i * static_cast<size_t>(bs), static_cast<size_t>(bs));
    const int32_t parent = i == 0 ? KvPrefixIndex::kNoParent : st.blocks[i - 1];
    const uint64_t key = index_->Key(st.chain_key, tokens);
    // Another sequence computed the same block first: ours stays private, and so do
    // the blocks after it (their parent is not in the index).
    if (!index_->Insert(st.blocks[i], key, parent, tokens)) {
      st.chain_open = false;
      break;
    }
    st.chain_key = key;
    ++st.registered;
  }
}

absl::Status PagedKvCache::Commit(SequenceId seq, int64_t length) {
  if (auto s = CheckLive(seq); !s.ok()) return s;
  auto& st = sequences_[static_cast<size_t>(seq)];
  if (length < 0 || length > capacity(seq)) {
    return absl::FailedPreconditionError(absl::StrCat("KV cache: cannot commit ", length, " positions of sequence ",
                                                      seq, ", it has ", capacity(seq), " reserved"));
  }
  if (length < st.registered * config_.block_size) {
    // Positions of registered blocks go back only where nobody else holds them: the
    // blocks leave the cache and are the sequence's own again.
    const int64_t first = length / config_.block_size;
    for (int64_t i = first; i < st.registered; ++i) {
      const int32_t block = st.blocks[static_cast<size_t>(i)];
      if (refs_[static_cast<size_t>(block)] > 1) {
        return absl::FailedPreconditionError(absl::StrCat("KV cache: cannot commit ", length,
                                                          " positions of sequence ", seq, ": block ", i,
                                                          " is in the prefix cache, shared with another sequence"));
      }
    }
    for (int64_t i = first; i < st.registered; ++i) index_->Erase(st.blocks[static_cast<size_t>(i)]);
    st.registered = first;
    st.chain_key = first == 0 ? index_->RootKey() : index_->KeyOf(st.blocks[static_cast<size_t>(first - 1)]);
    st.chain_open = true;
  }
  st.length = length;
  const size_t keep = static_cast<size_t>(KvBlocksFor(length, config_.block_size));
  while (st.blocks.size() > keep) {
    Release(st.blocks.back());
    st.blocks.pop_back();
  }
  if (index_) {
    st.tokens.resize(st.blocks.size() * static_cast<size_t>(config_.block_size), -1);
    RegisterFullBlocks(st);
  }
  return absl::OkStatus();
}

void PagedKvCache::Free(SequenceId seq) {
  if (!IsLive(seq)) return;
  auto& st = sequences_[static_cast<size_t>(seq)];
  // The tail first: it is released longest ago, so it is evicted before the prefix
  // that more requests share.
  while (!st.blocks.empty()) {
    Release(st.blocks.back());
    st.blocks.pop_back();
  }
  st = SequenceState{};
  free_ids_.push_back(seq);
}

PrefixMatch PagedKvCache::MatchPrefix(absl::Span<const int32_t> tokens, int64_t max_positions) const {
  PrefixMatch match;
  if (!index_) return match;
  const int64_t bs = config_.block_size;
  const int64_t limit = std::min<int64_t>(max_positions, static_cast<int64_t>(tokens.size()));
  uint64_t key = index_->RootKey();
  int32_t parent = KvPrefixIndex::kNoParent;
  for (int64_t i = 0; (i + 1) * bs <= limit; ++i) {
    const absl::Span<const int32_t> block_tokens = tokens.subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs));
    key = index_->Key(key, block_tokens);
    const int32_t block = index_->Find(key, parent, block_tokens);
    if (block < 0) break;
    match.blocks.push_back(block);
    if (refs_[static_cast<size_t>(block)] == 0) ++match.evictable;
    parent = block;
  }
  match.positions = static_cast<int64_t>(match.blocks.size()) * bs;
  return match;
}

absl::StatusOr<int64_t> PagedKvCache::AttachCachedPrefix(SequenceId seq, absl::Span<const int32_t> tokens,
                                                         int64_t max_positions) {
  if (auto s = CheckLive(seq); !s.ok()) return s;
  auto& st = sequences_[static_cast<size_t>(seq)];
  if (!st.blocks.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("KV cache: a cached prefix goes only to an empty sequence; sequence ", seq, " holds blocks"));
  }
  const PrefixMatch match = MatchPrefix(tokens, max_positions);
  for (int32_t block : match.blocks) {
    if (refs_[static_cast<size_t>(block)]++ == 0) evictable_.erase(evictable_pos_[static_cast<size_t>(block)]);
    st.blocks.push_back(block);
  }
  st.length = match.positions;
  st.registered = static_cast<int64_t>(match.blocks.size());
  if (!match.blocks.empty()) st.chain_key = index_->KeyOf(match.blocks.back());
  st.tokens.assign(tokens.begin(), tokens.begin() + match.positions);
  return match.positions;
}

int64_t PagedKvCache::FreeableBlocks(SequenceId seq) const {
  if (!IsLive(seq)) return 0;
  int64_t n = 0;
  for (int32_t block : sequences_[static_cast<size_t>(seq)].blocks) n += refs_[static_cast<size_t>(block)] == 1 ? 1 : 0;
  return n;
}

int64_t PagedKvCache::length(SequenceId seq) const {
  return IsLive(seq) ? sequences_[static_cast<size_t>(seq)].length : 0;
}

int64_t PagedKvCache::capacity(SequenceId seq) const {
  return IsLive(seq) ? static_cast<int64_t>(sequences_[static_cast<size_t>(seq)].blocks.size()) * config_.block_size
                     : 0;
}

const std::vector<int32_t>& PagedKvCache::block_table(SequenceId seq) const {
  return sequences_[static_cast<size_t>(seq)].blocks;
}

KvCacheStats PagedKvCache::Stats() const {
  KvCacheStats s;
  s.total_blocks = config_.num_blocks;
  s.free_blocks = static_cast<int>(free_list_.size());
  s.evictable_blocks = static_cast<int>(evictable_.size());
  s.cached_blocks = index_ ? index_->size() : 0;
  s.used_blocks = s.total_blocks - s.free_blocks - s.evictable_blocks;
  for (const auto& st : sequences_) {
    if (!st.live) continue;
    ++s.num_sequences;
    s.cached_tokens += st.length;
  }
  return s;
}

}  // namespace crossreg
