#include "engine/grammar/token_mask.h"

#include <algorithm>
#include <numeric>

namespace crossreg::grammar {

GrammarVocabulary::GrammarVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> eos_ids)
    : bytes_(std::move(token_bytes)), eos_(bytes_.size(), false) {
  for (int32_t id : eos_ids) {
    if (id >= 0 && id < size() && !eos_[static_cast<size_t>(id)]) {
      eos_[static_cast<size_t>(id)] = true;
      eos_ids_.push_back(id);
    }
  }
  for (int32_t id = 0; id < size(); ++id) {
    if (!bytes_[static_cast<size_t>(id)].empty() && !eos_[static_cast<size_t>(id)]) order_.push_back(id);
  }
  std::sort(order_.begin(), order_.end(),
            [&](int32_t a, int32_t b) { return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)]; });
  shared_.assign(order_.size(), 0);
  for (size_t i = 1; i < order_.size(); ++i) {
    const std::string& a = bytes_[static_cast<size_t>(order_[i - 1])];
    const std::string& b = bytes_[static_cast<size_t>(order_[i])];
    size_t n = 0;
    const size_t limit = std::min({a.size(), b.size(), size_t{65535}});
    while (n < limit && a[n] == b[n]) ++n;
    shared_[i] = static_cast<uint16_t>(n);
  }
}

TokenMask ComputeTokenMask(const GrammarMatcher& state, const GrammarVocabulary& vocab) {
  TokenMask mask;
  mask.bits.assign((static_cast<size_t>(vocab.size()) + 63) / 64, 0);
  if (state.CanEnd()) {
    for (int32_t id : vocab.eos_ids()) mask.set(id);
  }
  // states[d]: the state after the first d bytes of the previous token, for d <= valid.
  std::vector<GrammarMatcher> states;
  states.push_back(state);
  size_t valid = 0;
  size_t dead = SIZE_MAX;  // the previous token's prefix of dead + 1 bytes admits nothing
  const std::vector<int32_t>& order = vocab.order();
  for (size_t i = 0; i < order.size(); ++i) {
    const std::string& bytes = vocab.bytes(order[i]);
    const size_t shared = i == 0 ? 0 : vocab.shared()[i];
    if (dead != SIZE_MAX && shared > dead) continue;  // under the same dead prefix
    dead = SIZE_MAX;
    size_t d = std::min(shared, valid);
    if (states.size() < bytes.size() + 1) states.resize(bytes.size() + 1, state);
    for (; d < bytes.size(); ++d) {
      states[d + 1] = states[d];
      if (!states[d + 1].AcceptByte(static_cast<uint8_t>(bytes[d]))) break;
    }
    valid = d;
    if (d < bytes.size()) {
      dead = d;
      continue;
    }
    mask.set(order[i]);
  }
  mask.allowed = 0;
  for (uint64_t w : mask.bits) mask.allowed += __builtin_popcountll(w);
  return mask;
}

bool TokenAllowed(const GrammarMatcher& state, const GrammarVocabulary& vocab, int32_t id) {
  if (id < 0 || id >= vocab.size()) return false;
  if (vocab.is_eos(id)) return state.CanEnd();
  const std::string& bytes = vocab.bytes(id);
  if (bytes.empty()) return false;
  GrammarMatcher probe = state;
  return probe.AcceptBytes(bytes);
}

TokenMasker::TokenMasker(std::shared_ptr<const GrammarVocabulary> vocab, size_t cache_bytes)
    : vocab_(std::move(vocab)),
      capacity_(std::max<size_t>(16, cache_bytes / (static_cast<size_t>(vocab_->size()) / 8 + 64))) {}

std::shared_ptr<const TokenMask> TokenMasker::LookUpLocked(const GrammarMatcher& state, uint64_t hash) {
  auto [begin, end] = index_.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    if (it->second->state == state) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->mask;
    }
  }
  return nullptr;
}

std::shared_ptr<const TokenMask> TokenMasker::Cached(const GrammarMatcher& state) {
  std::lock_guard<std::mutex> lock(mu_);
  return LookUpLocked(state, state.Hash());
}

std::shared_ptr<const TokenMask> TokenMasker::Mask(const GrammarMatcher& state) {
  const uint64_t hash = state.Hash();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto found = LookUpLocked(state, hash)) {
      ++hits_;
      return found;
    }
    ++misses_;
  }
  // Computed outside the lock: another request may compute the same mask meanwhile.
  auto mask = std::make_shared<const TokenMask>(ComputeTokenMask(state, *vocab_));
  std::lock_guard<std::mutex> lock(mu_);
  if (auto found = LookUpLocked(state, hash)) return found;
  lru_.push_front(Entry{state, mask});
  index_.emplace(hash, lru_.begin());
  while (lru_.size() > capacity_) {
    const uint64_t old = lru_.back().state.Hash();
    auto [begin, end] = index_.equal_range(old);
    for (auto it = begin; it != end; ++it) {
      if (it->second == std::prev(lru_.end())) {
        index_.erase(it);
        break;
      }
    }
    lru_.pop_back();
  }
  return mask;
}

int64_t TokenMasker::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t TokenMasker::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace crossreg::grammar
