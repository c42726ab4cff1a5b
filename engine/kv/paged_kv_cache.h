// Paged KV cache bookkeeping: fixed-size blocks, a free list and a block table per
// sequence. It holds no tensor memory: a backend owns the K/V storage for
// `num_blocks * block_size` slots and asks this table where each position lives.
// Blocks are metadata only (no pointers), so CPU and GPU storage share the logic.
//
// Lengths and reservations change only through a KvTransaction (kv_transaction.h);
// sequences are created and freed here.
//
// Prefix caching (KvCacheConfig::prefix_caching): a block whose every position holds
// committed control-stream K/V is registered in a KvPrefixIndex under its tokens and
// its parent block. Registered blocks are reference-counted and shared read-only by
// every sequence whose prefix they hold (AttachCachedPrefix); a sequence only ever
// writes positions at or past its length, which lie outside its full blocks, so no
// shared block is written. A registered block nobody holds stays cached (evictable)
// until a Reserve needs it: the free list is used first, then the least recently
// released cached block is evicted. Predictive rows never reach the paged storage,
// and positions past a sequence's length (rejected drafts) never belong to a full
// block, so only K/V that AR would also have computed is ever shared.
//
// One cache serves one model: the control stream's K/V depends on the base model and
// the tokens alone (the adapter only drives the predictive rows), so blocks are keyed
// by tokens and position in the chain.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/kv/kv_prefix_index.h"

namespace crossreg {

using SequenceId = int32_t;

struct KvCacheConfig {
  int block_size = 16;  // token slots per block
  int num_blocks = 0;
  // Keep full blocks of committed K/V for later sequences with the same prefix.
  bool prefix_caching = false;
  // Tests only: keep this many low bits of the prefix index's keys (forces collisions).
  int prefix_hash_bits = 64;
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
  int used_blocks = 0;       // held by live sequences (a shared block counts once)
  int free_blocks = 0;       // holding nothing reusable
  int cached_blocks = 0;     // registered in the prefix cache, held or not
  int evictable_blocks = 0;  // registered and held by no sequence: reusable, or evicted on demand
  int num_sequences = 0;
  int64_t cached_tokens = 0;  // sum of sequence lengths
  // Blocks held by live sequences; cached blocks nobody holds do not count: they are
  // given up before any sequence waits for room.
  double usage() const { return total_blocks ? double(used_blocks) / total_blocks : 0.0; }
};

// The cached blocks that hold a token sequence's first positions.
struct PrefixMatch {
  int64_t positions = 0;      // blocks.size() * block_size
  std::vector<int32_t> blocks;
  int64_t evictable = 0;      // of them, held by no sequence: attaching takes them off the free pool
};

class KvTransaction;

class PagedKvCache {
 public:
  explicit PagedKvCache(KvCacheConfig config);

  const KvCacheConfig& config() const { return config_; }

  // A new, empty sequence.
  SequenceId CreateSequence();
  bool IsLive(SequenceId seq) const;

  // Blocks Reserve(seq, num_tokens) would still have to allocate.
  int64_t BlocksNeeded(SequenceId seq, int64_t num_tokens) const;

  // Frees every block of the sequence and retires its id. Registered blocks stay
  // cached (the sequence's last block is the first to be evicted).
  void Free(SequenceId seq);

  // The longest run of cached blocks holding the K/V of `tokens`' first positions,
  // at most `max_positions` of them (whole blocks only). Empty without prefix caching.
  PrefixMatch MatchPrefix(absl::Span<const int32_t> tokens, int64_t max_positions) const;

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
  // Blocks a Reserve can take: free ones, then cached ones nobody holds (evicted).
  int free_blocks() const { return static_cast<int>(free_list_.size() + evictable_.size()); }
  // Blocks Free(seq) would give back to the free pool: those no other sequence holds.
  int64_t FreeableBlocks(SequenceId seq) const;
  // Holders of `block` (tests and invariant checks).
  int refs(int32_t block) const { return refs_[static_cast<size_t>(block)]; }
  bool prefix_caching() const { return index_.has_value(); }

 private:
  // A step's changes, made only through a KvTransaction (engine/kv/kv_transaction.h).
  friend class KvTransaction;
  // Makes room for positions [0, num_tokens): allocates blocks as needed. All or
  // nothing: ResourceExhausted leaves the sequence and the free list unchanged.
  absl::Status Reserve(SequenceId seq, int64_t num_tokens);
  // Closes a sequence's part of a transaction: the sequence's valid positions become [0, length)
  // (at most its capacity; the forward wrote any new ones) and the blocks past them go
  // back to the free list, so positions written and not kept are as if never written.
  // The one call that moves a sequence's length: a decode step keeps x_last and the
  // accepted drafts, a prefill chunk all of its rows, a failed forward none.
  // With prefix caching, each block the new length fills is registered; a length
  // inside the sequence's registered blocks takes them out of the cache, and is
  // refused where another sequence shares one of them.
  absl::Status Commit(SequenceId seq, int64_t length);

  // Prefix caching. The tokens whose K/V a forward writes at `position` of `seq` (a
  // reserved position): the planner records every control row, and Commit registers
  // each block that the committed length fills. A no-op without prefix caching.
  void RecordToken(SequenceId seq, int64_t position, int32_t token);
  // Gives `seq` (live, holding no blocks) the match for `tokens` as its first
  // positions, shared read-only; returns the positions it now holds (its length).
  absl::StatusOr<int64_t> AttachCachedPrefix(SequenceId seq, absl::Span<const int32_t> tokens,
                                             int64_t max_positions);

  struct SequenceState {
    bool live = false;
    int64_t length = 0;
    std::vector<int32_t> blocks;
    // Prefix caching: the token at each reserved position, and the sequence's chain
    // of registered blocks (its first `registered` blocks; `chain_key` is the last
    // one's key). `chain_open` turns false when a block the sequence filled was
    // already cached elsewhere: its later blocks then have no registered parent.
    std::vector<int32_t> tokens;
    int64_t registered = 0;
    uint64_t chain_key = 0;
    bool chain_open = true;
  };
  absl::Status CheckLive(SequenceId seq) const;
  int32_t Allocate();           // refs 1; from the free list, else evicts the oldest cached block
  void Release(int32_t block);  // one holder fewer; unheld blocks go to the cache or the free list
  void RegisterFullBlocks(SequenceState& st);

  KvCacheConfig config_;
  std::vector<int32_t> free_list_;  // LIFO: recently freed blocks are warm in cache
  std::vector<int32_t> refs_;       // holders per block
  std::optional<KvPrefixIndex> index_;
  std::list<int32_t> evictable_;    // registered, unheld; front = released longest ago
  std::vector<std::list<int32_t>::iterator> evictable_pos_;
  std::vector<SequenceState> sequences_;
  std::vector<SequenceId> free_ids_;
};

}  // namespace crossreg
