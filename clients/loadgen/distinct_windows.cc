#include "clients/loadgen/distinct_windows.h"

#include <set>
#include <utility>

#include "absl/strings/str_format.h"

namespace crossreg::clients {
namespace {

// SplitMix64: fully specified, so a seed shuffles alike on every platform (the
// algorithm behind std::shuffle is the library's choice).
uint64_t NextRandom(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

absl::StatusOr<std::vector<std::vector<int32_t>>> DistinctWindows(const std::vector<int32_t>& pool, int length,
                                                                  int count, int first_offset, int* shuffled) {
  if (length < 1 || count < 0 || first_offset < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bad window request: length %d, count %d, first offset %d", length, count, first_offset));
  }
  if (pool.size() < static_cast<size_t>(length)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("a pool of %zu token ids is shorter than a window of %d", pool.size(), length));
  }
  const size_t windows = pool.size() - static_cast<size_t>(length) + 1;
  const size_t wanted = static_cast<size_t>(count);
  auto window = [&](size_t offset, int n) {
    return std::vector<int32_t>(pool.begin() + static_cast<std::ptrdiff_t>(offset),
                                pool.begin() + static_cast<std::ptrdiff_t>(offset) + n);
  };
  std::vector<size_t> order(windows);
  for (size_t j = 0; j < windows; ++j) order[j] = (static_cast<size_t>(first_offset) + j) % windows;

  // Passes with ever longer starts; they stop once every different window is taken.
  std::set<std::vector<int32_t>> different;
  for (size_t o = 0; o < windows; ++o) different.insert(window(o, length));
  std::vector<size_t> taken;
  std::vector<bool> used(windows, false);
  for (int k = 1; k <= length && taken.size() < wanted && taken.size() < different.size(); ++k) {
    std::set<std::vector<int32_t>> starts;
    for (size_t o : taken) starts.insert(window(o, k));
    for (size_t o : order) {
      if (taken.size() == wanted) break;
      if (!used[o] && starts.insert(window(o, k)).second) {
        used[o] = true;
        taken.push_back(o);
      }
    }
  }

  std::vector<std::vector<int32_t>> out;
  for (size_t o : taken) out.push_back(window(o, length));
  // Too few different windows: shuffled copies, kept when new. The attempt cap ends
  // the loop for pools with (almost) nothing to shuffle.
  std::set<std::vector<int32_t>> seen(out.begin(), out.end());
  uint64_t state = 0x10adc0de;
  for (size_t attempt = 0; out.size() < wanted && attempt < 64 * wanted; ++attempt) {
    std::vector<int32_t> w = window(order[attempt % windows], length);
    for (size_t i = w.size() - 1; i > 0; --i) std::swap(w[i], w[NextRandom(state) % (i + 1)]);
    if (seen.insert(w).second) out.push_back(std::move(w));
  }
  if (out.size() < wanted) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the setup text repeats too much: its %zu token ids give only %zu distinct windows of %d, %d needed",
        pool.size(), out.size(), length, count));
  }
  if (shuffled != nullptr) *shuffled += static_cast<int>(out.size() - taken.size());
  return out;
}

}  // namespace crossreg::clients
