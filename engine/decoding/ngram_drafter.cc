#include "engine/decoding/ngram_drafter.h"

#include <algorithm>

namespace crossreg {

NgramIndex::NgramIndex(int max_n, int min_n)
    : max_n_(std::max(1, max_n)), min_n_(std::clamp(min_n, 1, std::max(1, max_n))),
      latest_(static_cast<size_t>(max_n_) + 1) {}

uint64_t NgramIndex::Key(const int32_t* tokens, int n) {
  // FNV-1a over the ids; n is part of the table choice, not of the key.
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 1099511628211ull;
  }
  return h;
}

void NgramIndex::Update(const std::vector<int32_t>& context) {
  // Position p gets indexed when p + 1 exists: its n-grams end at p.
  for (; indexed_ + 1 < context.size(); ++indexed_) {
    const int64_t end = static_cast<int64_t>(indexed_);
    for (int n = 1; n <= max_n_ && end - n + 1 >= 0; ++n) {
      latest_[static_cast<size_t>(n)][Key(context.data() + end - n + 1, n)] = end;
    }
  }
}

std::vector<int32_t> NgramIndex::Draft(const std::vector<int32_t>& context, int max_tokens, int* match,
                                       const NgramTable* table, bool* from_table) const {
  std::vector<int32_t> drafts;
  if (match != nullptr) *match = 0;
  if (from_table != nullptr) *from_table = false;
  if (max_tokens <= 0 || context.empty()) return drafts;
  // The suffix being matched: the context's tail followed by the drafts so far.
  const int keep = std::max(max_n_, table != nullptr ? table->max_n() : 0);
  std::vector<int32_t> tail(context.end() - std::min<int64_t>(static_cast<int64_t>(context.size()), keep),
                            context.end());
  // The context's latest continuation of its longest suffix of n in [lo, hi] tokens.
  auto local = [&](int lo, int hi, int* n_found) -> int32_t {
    for (int n = std::min<int>(hi, static_cast<int>(tail.size())); n >= lo; --n) {
      const auto& map = latest_[static_cast<size_t>(n)];
      const auto it = map.find(Key(tail.data() + tail.size() - n, n));
      // Hash collisions are possible: confirm the n-gram before trusting it.
      if (it == map.end() || !std::equal(tail.end() - n, tail.end(), context.begin() + (it->second - n + 1))) {
        continue;
      }
      *n_found = n;
      return context[static_cast<size_t>(it->second + 1)];
    }
    return -1;
  };
  while (static_cast<int>(drafts.size()) < max_tokens) {
    int n = 0;
    int32_t next = local(std::max(min_n_, 2), max_n_, &n);
    bool tabled = false;
    if (next < 0 && table != nullptr) {
      next = table->Next(tail.data(), static_cast<int>(tail.size()), 2, &n);
      tabled = next >= 0;
    }
    if (next < 0 && min_n_ <= 1) next = local(1, 1, &n);
    if (next < 0) break;
    if (drafts.empty() && match != nullptr) *match = n;
    if (drafts.empty() && from_table != nullptr) *from_table = tabled;
    drafts.push_back(next);
    tail.push_back(next);
    if (static_cast<int>(tail.size()) > keep) tail.erase(tail.begin());
  }
  return drafts;
}

int NgramMatchClass(int length, bool from_table, int ngram_max) {
  if (length <= 0) return 0;
  if (from_table) return ngram_max + std::min(length, kNgramTableClasses);
  return std::min(length, ngram_max);
}

std::vector<int32_t> NgramDrafts(const std::vector<int32_t>& context, int ngram_max, int max_tokens) {
  NgramIndex index(ngram_max);
  index.Update(context);
  return index.Draft(context, max_tokens);
}

}  // namespace crossreg
