// The one way a step changes the paged KV cache. A step opens a transaction, and
// everything it does to the cache goes through it: attach a cached prefix to a new
// sequence, reserve the blocks a forward's control rows will write and record the
// tokens they write (PlanForward), then close each sequence once: Commit the length
// it keeps, or RollBack (what the transaction's destructor does for every sequence
// still open), which keeps the length it had. A sequence's length moves nowhere else,
// so "what the cache holds" is read off one place (llama.cpp's apply(), vLLM's KV
// manager: one owner of the mutation).
//
// Sequences are created and freed outside any step (PagedKvCache::CreateSequence and
// Free): admission, completion and cancellation are lifecycle, not a step's change.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/kv/paged_kv_cache.h"

namespace crossreg {

class KvTransaction {
 public:
  explicit KvTransaction(PagedKvCache& kv) : kv_(&kv) {}
  KvTransaction(const KvTransaction&) = delete;
  KvTransaction& operator=(const KvTransaction&) = delete;
  ~KvTransaction() { RollBack(); }

  PagedKvCache& cache() { return *kv_; }
  const PagedKvCache& cache() const { return *kv_; }

  // Gives `seq` (live, holding no blocks) the cached blocks that hold `tokens`' first
  // positions, at most `max_positions` (whole blocks), and returns its length. Final at
  // once: the blocks hold committed K/V that other sequences may share.
  absl::StatusOr<int64_t> AttachCachedPrefix(SequenceId seq, absl::Span<const int32_t> tokens,
                                             int64_t max_positions);
  // Reserves positions [0, end) of `seq` (all or nothing) and opens the sequence: it
  // must be closed by Commit, or it rolls back.
  absl::Status Reserve(SequenceId seq, int64_t end);
  // The token a control row writes at a reserved `position` (for the prefix cache).
  void RecordToken(SequenceId seq, int64_t position, int32_t token);

  // Closes `seq`: its valid positions become [0, length); reserved blocks past them go
  // back. Also the one way to shorten a sequence outside a forward.
  absl::Status Commit(SequenceId seq, int64_t length);
  // Closes every open sequence at the length it had: blocks reserved past it go back,
  // positions written past it are as if never written. Sequences freed meanwhile are
  // skipped.
  void RollBack();

  // Sequences reserved and not yet closed.
  const std::vector<SequenceId>& open() const { return open_; }

 private:
  void Close(SequenceId seq);

  PagedKvCache* kv_;
  std::vector<SequenceId> open_;
};

}  // namespace crossreg
