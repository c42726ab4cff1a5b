// Paged KV cache bookkeeping: fixed-size blocks, a free list and a block table per
// sequence. It holds no tensor memory: a backend owns the K/V storage for
// `num_blocks * block_size` slots and asks this table where each position lives.
// Blocks are metadata only (no pointers), so CPU and GPU storage share the logic.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace crossreg {

using SequenceId = int32_t;

struct KvCacheConfig {
  int block_size = 16;  // token slots per block
  int num_blocks = 0;
};

// The block arithmetic, in one place: blocks that hold `positions` positions, and the
// blocks a sequence holding `held` must still allocate to reach `positions`.
inline int64_t KvBlocksFor(int64_t positions, int block_size) { return (positions + block_size - 1) / block_size; }
inline int64_t KvExtraBlocks(int64_t positions, int64_t held, int block_size) {
  const int64_t want = KvBlocksFor(positions, block_size);
  return want > held ? want - held : 0;
}

struct KvCacheStats {
  int total_blocks = 0;
  int used_blocks = 0;
  int free_blocks = 0;
  int num_sequences = 0;
  int64_t cached_tokens = 0;  // sum of sequence lengths
  double usage() const { return total_blocks ? double(used_blocks) / total_blocks : 0.0; }
};

class PagedKvCache {
 public:
  explicit PagedKvCache(KvCacheConfig config);

  const KvCacheConfig& config() const { return config_; }

  // A new, empty sequence.
  SequenceId CreateSequence();
  bool IsLive(SequenceId seq) const;

  // Makes room for positions [0, num_tokens): allocates blocks as needed. All or
  // nothing: ResourceExhausted leaves the sequence and the free list unchanged.
  absl::Status Reserve(SequenceId seq, int64_t num_tokens);
  // Blocks Reserve(seq, num_tokens) would still have to allocate.
  int64_t BlocksNeeded(SequenceId seq, int64_t num_tokens) const;

  // Ends a forward's KV transaction: the sequence's valid positions become [0, length)
  // (at most its capacity; the forward wrote any new ones) and the blocks past them go
  // back to the free list, so positions written and not kept are as if never written.
  // The one call that moves a sequence's length: a decode step keeps x_last and the
  // accepted drafts, a prefill chunk all of its rows, a failed forward none.
  absl::Status Commit(SequenceId seq, int64_t length);

  // Frees every block of the sequence and retires its id.
  void Free(SequenceId seq);

  int64_t length(SequenceId seq) const;    // valid positions
  int64_t capacity(SequenceId seq) const;  // reserved positions
  const std::vector<int32_t>& block_table(SequenceId seq) const;
  // Storage slot of a reserved position: block * block_size + offset.
  int64_t SlotOf(SequenceId seq, int64_t position) const {
    const auto& table = sequences_[static_cast<size_t>(seq)].blocks;
    return int64_t{table[static_cast<size_t>(position / config_.block_size)]} *
               config_.block_size +
           position % config_.block_size;
  }

  KvCacheStats Stats() const;
  int free_blocks() const { return static_cast<int>(free_list_.size()); }

 private:
  struct SequenceState {
    bool live = false;
    int64_t length = 0;
    std::vector<int32_t> blocks;
  };
  absl::Status CheckLive(SequenceId seq) const;

  KvCacheConfig config_;
  std::vector<int32_t> free_list_;  // LIFO: recently freed blocks are warm in cache
  std::vector<SequenceState> sequences_;
  std::vector<SequenceId> free_ids_;
};

}  // namespace crossreg
