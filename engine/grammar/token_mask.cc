#include "engine/grammar/token_mask.h"

#include <algorithm>
#include <array>
#include <limits>
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
  // Preorder: a token's nodes follow the path it shares with the previous token.
  std::vector<int32_t> path;  // path[d]: the node of the current token's first d + 1 bytes
  for (size_t i = 0; i < order_.size(); ++i) {
    const std::string& b = bytes_[static_cast<size_t>(order_[i])];
    const size_t keep = std::min<size_t>(shared_[i], path.size());
    for (size_t d = keep; d < path.size(); ++d) {
      trie_[static_cast<size_t>(path[d])].subtree_end = static_cast<int32_t>(trie_.size());
    }
    path.resize(keep);
    if (keep == b.size() && !path.empty()) {  // the same bytes as the previous token
      TrieNode& node = trie_[static_cast<size_t>(path.back())];
      if (node.token_count < 255) ++node.token_count;
      continue;
    }
    for (size_t d = keep; d < b.size() && d < 65535; ++d) {
      path.push_back(static_cast<int32_t>(trie_.size()));
      const bool last = d + 1 == b.size();
      trie_.push_back({.subtree_end = 0,
                       .first_token = last ? static_cast<int32_t>(i) : -1,
                       .depth = static_cast<uint16_t>(d),
                       .byte = static_cast<uint8_t>(b[d]),
                       .token_count = static_cast<uint8_t>(last ? 1 : 0)});
    }
  }
  for (int32_t node : path) trie_[static_cast<size_t>(node)].subtree_end = static_cast<int32_t>(trie_.size());
}

int32_t GrammarVocabulary::LongestMatch(std::string_view text, size_t* length) const {
  // Down the trie along `text`: the deepest node with tokens wins.
  int32_t best = -1;
  size_t best_length = 0;
  size_t n = 0;
  const size_t end = trie_.size();
  for (size_t d = 0; d < text.size() && n < end;) {
    const TrieNode& node = trie_[n];
    if (node.depth != d) break;  // no sibling left at this depth
    if (node.byte != static_cast<uint8_t>(text[d])) {
      n = static_cast<size_t>(node.subtree_end);
      continue;
    }
    if (node.token_count > 0) {
      best = order_[static_cast<size_t>(node.first_token)];
      for (int k = 1; k < node.token_count; ++k) best = std::min(best, order_[static_cast<size_t>(node.first_token + k)]);
      best_length = d + 1;
    }
    ++n;
    ++d;
  }
  if (length != nullptr) *length = best_length;
  return best;
}

namespace {

// The states a vocabulary walk passes through, each with its transitions by byte
// computed at most once: a walk visits every live node of the trie but few distinct
// states (inside a string every ordinary character leads back to the same one), so most
// nodes cost a table lookup instead of a matcher step. Each step is charged its
// state's positions to `work`.
class StateTable {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr int32_t kUnknown = -2;
  // Past this many states a walk gives up interning (a grammar whose states never
  // repeat) and steps matchers directly.
  static constexpr size_t kMaxStates = 1 << 14;

  StateTable(const GrammarMatcher& start, MaskWork& work) : work_(work) { Intern(GrammarMatcher(start)); }
  bool full() const { return matchers_.size() >= kMaxStates; }
  bool hit_limit() const { return hit_limit_; }

  // The state after `byte` from state `id`, or kDead.
  int32_t Next(int32_t id, uint8_t byte) {
    const int32_t known = next_[static_cast<size_t>(id) * 256 + byte];
    return known != kUnknown ? known : Step(id, byte);
  }

 private:
  int32_t Step(int32_t id, uint8_t byte) {
    int32_t found = kDead;
    const GrammarMatcher& from = matchers_[static_cast<size_t>(id)];
    if (from.CouldAcceptByte(byte)) {
      work_.used += static_cast<int64_t>(from.positions());
      GrammarMatcher to = from;
      if (to.AcceptByte(byte)) {
        found = Intern(std::move(to));
      } else {
        hit_limit_ = hit_limit_ || to.hit_limit();
      }
    }
    next_[static_cast<size_t>(id) * 256 + byte] = found;
    return found;
  }
  int32_t Intern(GrammarMatcher matcher) {
    const uint64_t hash = matcher.Hash();
    auto [begin, end] = index_.equal_range(hash);
    for (auto it = begin; it != end; ++it) {
      if (matchers_[static_cast<size_t>(it->second)] == matcher) return it->second;
    }
    const int32_t id = static_cast<int32_t>(matchers_.size());
    matchers_.push_back(std::move(matcher));
    next_.resize(next_.size() + 256, kUnknown);
    index_.emplace(hash, id);
    return id;
  }

  MaskWork& work_;
  std::vector<GrammarMatcher> matchers_;
  std::vector<int32_t> next_;  // [state * 256 + byte]: the state after it, kDead or kUnknown
  std::unordered_multimap<uint64_t, int32_t> index_;
  bool hit_limit_ = false;
};

// The walk without the state table: a matcher per depth of the path, stepped at every
// live node. False once `work` runs out.
bool WalkWithMatchers(const GrammarMatcher& state, const GrammarVocabulary& vocab, TokenMask& mask, MaskWork& work) {
  std::vector<GrammarMatcher> states;  // states[d]: after the d bytes of the path to the current node
  states.push_back(state);
  const std::vector<GrammarVocabulary::TrieNode>& trie = vocab.trie();
  const std::vector<int32_t>& order = vocab.order();
  for (size_t n = 0; n < trie.size();) {
    const GrammarVocabulary::TrieNode& node = trie[n];
    const size_t d = node.depth;
    if (!states[d].CouldAcceptByte(node.byte)) {
      n = static_cast<size_t>(node.subtree_end);
      continue;
    }
    work.used += static_cast<int64_t>(states[d].positions());
    if (work.used > work.budget) return false;
    if (states.size() < d + 2) states.resize(d + 2);
    states[d + 1] = states[d];
    if (!states[d + 1].AcceptByte(node.byte)) {
      mask.hit_limit = mask.hit_limit || states[d + 1].hit_limit();
      n = static_cast<size_t>(node.subtree_end);
      continue;
    }
    for (int k = 0; k < node.token_count; ++k) mask.set(order[static_cast<size_t>(node.first_token + k)]);
    ++n;
  }
  return true;
}

enum class TableWalk { kDone, kTableFull, kOutOfWork };

// The walk over interned states; kTableFull if the table filled up (the mask is then
// incomplete and the caller walks again with matchers).
TableWalk WalkWithStateTable(const GrammarMatcher& state, const GrammarVocabulary& vocab, TokenMask& mask,
                             MaskWork& work) {
  StateTable table(state, work);
  std::vector<int32_t> path(1, 0);  // path[d]: the state after the d bytes of the path to the current node
  const std::vector<GrammarVocabulary::TrieNode>& trie = vocab.trie();
  const std::vector<int32_t>& order = vocab.order();
  for (size_t n = 0; n < trie.size();) {
    const GrammarVocabulary::TrieNode& node = trie[n];
    const size_t d = node.depth;
    const int32_t next = table.Next(path[d], node.byte);
    if (work.used > work.budget) return TableWalk::kOutOfWork;
    if (next == StateTable::kDead) {
      n = static_cast<size_t>(node.subtree_end);
      continue;
    }
    if (table.full()) return TableWalk::kTableFull;
    for (int k = 0; k < node.token_count; ++k) mask.set(order[static_cast<size_t>(node.first_token + k)]);
    if (path.size() < d + 2) path.resize(d + 2);
    path[d + 1] = next;
    ++n;
  }
  mask.hit_limit = table.hit_limit();
  return TableWalk::kDone;
}

}  // namespace

std::optional<TokenMask> ComputeTokenMask(const GrammarMatcher& state, const GrammarVocabulary& vocab, MaskWork& work,
                                          bool intern_states) {
  TokenMask mask;
  mask.bits.assign((static_cast<size_t>(vocab.size()) + 63) / 64, 0);
  const TableWalk walked = intern_states ? WalkWithStateTable(state, vocab, mask, work) : TableWalk::kTableFull;
  if (walked == TableWalk::kOutOfWork) return std::nullopt;
  if (walked == TableWalk::kTableFull) {
    std::fill(mask.bits.begin(), mask.bits.end(), 0);
    mask.hit_limit = false;
    if (!WalkWithMatchers(state, vocab, mask, work)) return std::nullopt;
  }
  if (state.CanEnd()) {
    for (int32_t id : vocab.eos_ids()) mask.set(id);
  }
  mask.allowed = 0;
  for (uint64_t w : mask.bits) mask.allowed += __builtin_popcountll(w);
  return mask;
}

TokenMask ComputeTokenMask(const GrammarMatcher& state, const GrammarVocabulary& vocab, bool intern_states) {
  MaskWork unbounded{.budget = std::numeric_limits<int64_t>::max()};
  return *ComputeTokenMask(state, vocab, unbounded, intern_states);
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

std::shared_ptr<const TokenMask> TokenMasker::Mask(const GrammarMatcher& state, MaskWork* work) {
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
  MaskWork whole;
  std::optional<TokenMask> computed = ComputeTokenMask(state, *vocab_, work != nullptr ? *work : whole);
  if (!computed.has_value()) {
    // A partial budget ran out: someone may compute it with the whole one. The whole
    // one ran out: the state is filed as over budget, and the requests reaching it fail.
    if (work != nullptr && work->budget < kMaxMaskWork) return nullptr;
    computed.emplace();
    computed->over_budget = true;
    computed->bits.assign((static_cast<size_t>(vocab_->size()) + 63) / 64, 0);
  }
  auto mask = std::make_shared<const TokenMask>(*std::move(computed));
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
