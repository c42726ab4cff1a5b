// LargeBuffer (the huge-page memory of the weights and the K/V store) and WeightArena
// (many packed matrices in one such buffer): zeroed, aligned, movable, advised for
// transparent huge pages where the kernel has them, and weights packed into an arena
// byte for byte the weights packed alone.
#include "engine/cpu/large_buffer.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cpu/packed_weights.h"
#include "engine/dtype.h"
#include "engine/sampler.h"
#include "gtest/gtest.h"

namespace crossreg::cpu {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

bool AllZero(const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

TEST(LargeBufferTest, ZeroedWritableAndAlignedAtEverySize) {
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, kHugePage - 1, kHugePage, 5 * kHugePage + 123}) {
    SCOPED_TRACE(bytes);
    LargeBuffer b(bytes);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_EQ(b.size(), bytes);
    EXPECT_FALSE(b.empty());
    EXPECT_TRUE(AllZero(b.data(), bytes));
    const uintptr_t address = reinterpret_cast<uintptr_t>(b.data());
    EXPECT_EQ(address % 128, 0u);
    if (kLargeBuffersMapped && bytes >= kHugePage) {
      EXPECT_EQ(address % kHugePage, 0u);
    }
    std::memset(b.data(), 0xab, bytes);  // every byte is ours to write (ASan checks the heap path)
    EXPECT_EQ(b.data()[bytes - 1], 0xab);
  }
}

TEST(LargeBufferTest, EmptyAndMoved) {
  LargeBuffer none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.data(), nullptr);
  LargeBuffer zero(0);
  EXPECT_TRUE(zero.empty());

  LargeBuffer a(3 * kHugePage);
  unsigned char* const p = a.data();
  p[7] = 42;
  LargeBuffer b(std::move(a));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.data()[7], 42);
  LargeBuffer c(100);
  c = std::move(b);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), 3 * kHugePage);
}

// "THPeligible:" of the mapping that holds `address` in /proc/self/smaps: 1 when the
// kernel may back it with huge pages (for madvise mode: only after MADV_HUGEPAGE).
int ThpEligible(const void* address) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  const uintptr_t a = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  while (std::getline(in, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream header(line);
    if (header >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= a && a < hi;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

TEST(LargeBufferTest, LargeBuffersAreAdvisedForHugePages) {
  if (!kLargeBuffersMapped) GTEST_SKIP() << "AddressSanitizer build: large buffers stay on the heap";
  const std::string mode = TransparentHugePageMode();
  ASSERT_FALSE(mode.empty());
  if (mode != "always" && mode != "madvise") GTEST_SKIP() << "transparent huge pages are '" << mode << "' here";
  const char* wanted = std::getenv("CROSSREG_HUGE_PAGES");
  if (wanted != nullptr && std::string(wanted) == "0") GTEST_SKIP() << "CROSSREG_HUGE_PAGES=0 asks for 4 KiB pages";
  LargeBuffer big(4 * kHugePage);
  const int eligible = ThpEligible(big.data());
  if (eligible < 0) GTEST_SKIP() << "this kernel's smaps has no THPeligible field";
  EXPECT_EQ(eligible, 1) << "THP mode " << mode << ": the weights' mapping is not eligible for huge pages";
  // The start-up line names the mode and the process's huge-page memory.
  const std::string summary = HugePageSummary();
  EXPECT_NE(summary.find(mode), std::string::npos) << summary;
  EXPECT_NE(summary.find("MiB of this process"), std::string::npos) << summary;
}

TEST(WeightArenaTest, TakesAlignedZeroedSlicesInOrderUntilFull) {
  WeightArena arena(1000);
  unsigned char* a = arena.Take(100);
  unsigned char* b = arena.Take(300);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 128, 0u);
  EXPECT_EQ(b - a, 128);  // the next 128-byte boundary after a's 100 bytes
  EXPECT_TRUE(AllZero(b, 300));
  EXPECT_EQ(arena.used(), 428u);
  EXPECT_EQ(arena.Take(1000), nullptr);  // does not fit: nothing taken
  EXPECT_EQ(arena.used(), 428u);
  EXPECT_NE(arena.Take(1000 - 512), nullptr);  // exactly the rest
  EXPECT_EQ(arena.Take(1), nullptr);
}

TEST(WeightArenaTest, PackedIntoAnArenaEqualsPackedAlone) {
  Rng rng(3);
  const int64_t out = 70, in = 45;  // a partial panel and an odd K
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    std::vector<float> f(static_cast<size_t>(out * in));
    for (auto& v : f) v = static_cast<float>(rng.Uniform() - 0.5);
    std::vector<uint16_t> h(f.size());
    for (size_t i = 0; i < f.size(); ++i) h[i] = dtype == DType::kBF16 ? F32ToBf16(f[i]) : F32ToF16(f[i]);
    const TensorRef w{dtype, {out, in}, dtype == DType::kF32 ? static_cast<const void*>(f.data()) : h.data()};
    const PackedWeights alone = PackedWeights::Pack(w);
    // Room for the matrix twice: the second lands after the first, not over it.
    WeightArena arena(2 * PackedWeights::PackedBytes(w) + 128);
    const PackedWeights first = PackedWeights::Pack(w, nullptr, &arena);
    const PackedWeights second = PackedWeights::Pack(w, nullptr, &arena);
    // A third does not fit: it gets a buffer of its own, with the same bytes.
    const PackedWeights third = PackedWeights::Pack(w, nullptr, &arena);
    ASSERT_EQ(static_cast<size_t>(alone.bytes()), PackedWeights::PackedBytes(w));
    for (const PackedWeights* p : {&first, &second, &third}) {
      ASSERT_EQ(p->bytes(), alone.bytes());
      EXPECT_EQ(std::memcmp(p->panel(0), alone.panel(0), static_cast<size_t>(alone.bytes())), 0);
    }
    EXPECT_GE(second.panel(0), first.panel(0) + first.bytes());
  }
}

}  // namespace
}  // namespace crossreg::cpu
