#include "engine/cpu/memory_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/large_buffer.h"

namespace crossreg::cpu {
namespace internal {
uint64_t XorReduceAvx512(const uint64_t* p, int64_t n);
}  // namespace internal

namespace {
uint64_t XorReducePortable(const uint64_t* p, int64_t n) {
  // Eight independent accumulators: the loop is bound by loads, not by a chain.
  uint64_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] ^= p[i + j];
  }
  for (; i < n; ++i) acc[0] ^= p[i];
  uint64_t x = 0;
  for (uint64_t a : acc) x ^= a;
  return x;
}
}  // namespace

double MeasureReadBandwidth(ThreadPool& pool, int64_t bytes, int repeats) {
  const int64_t n = bytes / static_cast<int64_t>(sizeof(uint64_t));
  // The same kind of memory as the weights (huge pages where granted): a 4 KiB-page
  // buffer would measure the TLB's limit, not the memory's, and the weights outrun it.
  // LargeBuffer commits (zeroes) every page already.
  LargeBuffer storage(static_cast<size_t>(n) * sizeof(uint64_t));
  const uint64_t* const buf = reinterpret_cast<const uint64_t*>(storage.data());
  std::atomic<uint64_t> sink{0};
  const bool avx512 = DetectedSimdLevel() >= SimdLevel::kAvx512;
  double best = 0.0;
  for (int rep = 0; rep < repeats; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.ParallelFor(n, 4096, [&](int64_t b, int64_t e) {
      const uint64_t x = avx512 ? internal::XorReduceAvx512(buf + b, e - b)
                                : XorReducePortable(buf + b, e - b);
      sink.fetch_xor(x, std::memory_order_relaxed);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n) * sizeof(uint64_t) / s);
  }
  if (sink.load() == 0x5eed) std::fputs("", stderr);  // keeps the reads observable
  return best;
}

}  // namespace crossreg::cpu
