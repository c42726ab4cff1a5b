#include "engine/kv/kv_transaction.h"

#include <algorithm>

namespace crossreg {

absl::StatusOr<int64_t> KvTransaction::AttachCachedPrefix(SequenceId seq, absl::Span<const int32_t> tokens,
                                                          int64_t max_positions) {
  return kv_->AttachCachedPrefix(seq, tokens, max_positions);
}

absl::Status KvTransaction::Reserve(SequenceId seq, int64_t end) {
  if (absl::Status s = kv_->Reserve(seq, end); !s.ok()) return s;
  if (std::find(open_.begin(), open_.end(), seq) == open_.end()) open_.push_back(seq);
  return absl::OkStatus();
}

void KvTransaction::RecordToken(SequenceId seq, int64_t position, int32_t token) {
  kv_->RecordToken(seq, position, token);
}

absl::Status KvTransaction::Commit(SequenceId seq, int64_t length) {
  Close(seq);
  return kv_->Commit(seq, length);
}

void KvTransaction::RollBack() {
  for (SequenceId seq : open_) {
    // Committing the length a sequence has only gives back blocks past it: it cannot
    // fail for a live sequence (the length is within its capacity, and no registered
    // block lies past it).
    if (kv_->IsLive(seq)) (void)kv_->Commit(seq, kv_->length(seq));
  }
  open_.clear();
}

void KvTransaction::Close(SequenceId seq) {
  open_.erase(std::remove(open_.begin(), open_.end(), seq), open_.end());
}

}  // namespace crossreg
