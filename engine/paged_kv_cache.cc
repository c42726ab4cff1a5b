#include "engine/paged_kv_cache.h"

#include "absl/strings/str_cat.h"

namespace crossreg {

PagedKvCache::PagedKvCache(KvCacheConfig config) : config_(config) {
  free_list_.reserve(static_cast<size_t>(config_.num_blocks));
  // Lowest block ids are handed out first.
  for (int b = config_.num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
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
  sequences_[static_cast<size_t>(id)] = SequenceState{true, 0, {}};
  return id;
}

bool PagedKvCache::IsLive(SequenceId seq) const {
  return seq >= 0 && static_cast<size_t>(seq) < sequences_.size() && sequences_[static_cast<size_t>(seq)].live;
}

absl::Status PagedKvCache::CheckLive(SequenceId seq) const {
  if (!IsLive(seq)) return absl::NotFoundError(absl::StrCat("KV cache: no live sequence ", seq));
  return absl::OkStatus();
}

int64_t PagedKvCache::BlocksNeeded(SequenceId seq, int64_t num_tokens) const {
  const auto& blocks = sequences_[static_cast<size_t>(seq)].blocks;
  return KvExtraBlocks(num_tokens, static_cast<int64_t>(blocks.size()), config_.block_size);
}

absl::Status PagedKvCache::Reserve(SequenceId seq, int64_t num_tokens) {
  if (auto s = CheckLive(seq); !s.ok()) return s;
  const int64_t needed = BlocksNeeded(seq, num_tokens);
  if (needed > static_cast<int64_t>(free_list_.size())) {
    return absl::ResourceExhaustedError(absl::StrCat("KV cache full: need ", needed, " more blocks of ",
                                                     config_.block_size, " tokens, ", free_list_.size(), " free of ",
                                                     config_.num_blocks));
  }
  auto& blocks = sequences_[static_cast<size_t>(seq)].blocks;
  for (int64_t i = 0; i < needed; ++i) {
    blocks.push_back(free_list_.back());
    free_list_.pop_back();
  }
  return absl::OkStatus();
}

absl::Status PagedKvCache::Commit(SequenceId seq, int64_t length) {
  if (auto s = CheckLive(seq); !s.ok()) return s;
  auto& st = sequences_[static_cast<size_t>(seq)];
  if (length < 0 || length > capacity(seq)) {
    return absl::FailedPreconditionError(absl::StrCat("KV cache: cannot commit ", length, " positions of sequence ",
                                                      seq, ", it has ", capacity(seq), " reserved"));
  }
  st.length = length;
  const size_t keep = static_cast<size_t>(KvBlocksFor(length, config_.block_size));
  while (st.blocks.size() > keep) {
    free_list_.push_back(st.blocks.back());
    st.blocks.pop_back();
  }
  return absl::OkStatus();
}

void PagedKvCache::Free(SequenceId seq) {
  if (!IsLive(seq)) return;
  auto& st = sequences_[static_cast<size_t>(seq)];
  while (!st.blocks.empty()) {
    free_list_.push_back(st.blocks.back());
    st.blocks.pop_back();
  }
  st.live = false;
  st.length = 0;
  free_ids_.push_back(seq);
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
  s.used_blocks = s.total_blocks - s.free_blocks;
  for (const auto& st : sequences_) {
    if (!st.live) continue;
    ++s.num_sequences;
    s.cached_tokens += st.length;
  }
  return s;
}

}  // namespace crossreg
