#include "engine/tokenizer/symbol_merger.h"

#include <queue>

namespace crossreg {
namespace {

struct Symbol {
  const char* data;
  size_t size;  // 0 once merged into its left neighbour
  int prev;
  int next;
};

struct Candidate {
  double priority;
  int left;
  int right;
  size_t size;  // left.size + right.size when queued; a mismatch later means stale
};

// Max-heap on priority; among equals the leftmost pair wins.
struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.left > b.left;
  }
};

}  // namespace

std::vector<std::string_view> MergeSymbolsByPriority(std::vector<std::string_view> pieces,
                                                     PairPriority priority) {
  if (pieces.size() < 2) return pieces;
  const int n = static_cast<int>(pieces.size());
  std::vector<Symbol> symbols(n);
  for (int i = 0; i < n; ++i) {
    symbols[i] = {pieces[i].data(), pieces[i].size(), i - 1, i + 1 < n ? i + 1 : -1};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    std::optional<double> p =
        priority(std::string_view(l.data, l.size), std::string_view(r.data, r.size));
    if (p.has_value()) queue.push({*p, left, right, l.size + r.size});
  };
  for (int i = 0; i + 1 < n; ++i) try_add(i, i + 1);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = symbols[c.left];
    Symbol& r = symbols[c.right];
    if (l.size == 0 || r.size == 0 || l.next != c.right || l.size + r.size != c.size) continue;
    l.size += r.size;
    r.size = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = c.left;
    try_add(l.prev, c.left);
    try_add(c.left, l.next);
  }

  std::vector<std::string_view> merged;
  for (int i = 0; i >= 0; i = symbols[i].next) {
    merged.emplace_back(symbols[i].data, symbols[i].size);
  }
  return merged;
}

}  // namespace crossreg
