#include "engine/cpu/large_buffer.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace crossreg::cpu {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kSmallAlignment = 128;  // a WeightArena slice's alignment

// CROSSREG_HUGE_PAGES=0 keeps 4 KiB pages (to compare, or where huge pages are unwanted).
bool HugePagesWanted() {
  static const bool wanted = [] {
    const char* v = std::getenv("CROSSREG_HUGE_PAGES");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return wanted;
}
}  // namespace

LargeBuffer::LargeBuffer(size_t bytes) {
  if (bytes == 0) return;
#if defined(__linux__)
  if (kLargeBuffersMapped && bytes >= kHugePage) {
    // Map enough to find a 2 MiB boundary inside, then give back the ends around it: the
    // mapping left starts on a huge page, so every whole 2 MiB of it can be one. Its
    // length stays `bytes` rounded to 4 KiB: the last partial 2 MiB is 4 KiB pages, not
    // a huge page mostly unused.
    const size_t length = (bytes + 4095) / 4096 * 4096;
    void* raw = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) munmap(raw, aligned - start);
    const size_t tail = start + length + kHugePage - (aligned + length);
    if (tail > 0) munmap(reinterpret_cast<void*>(aligned + length), tail);
    mapping_ = reinterpret_cast<void*>(aligned);
    mapped_ = length;
    // Advice only: refused (THP compiled out), the mapping keeps 4 KiB pages. Not wanted,
    // it keeps them even where THP is `always`.
    madvise(mapping_, mapped_, HugePagesWanted() ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    data_ = static_cast<unsigned char*>(mapping_);
    size_ = bytes;
    // Anonymous pages read as zero already; writing them commits the memory here (the
    // faults, and a failure to find the memory, at start-up).
    std::memset(data_, 0, size_);
    return;
  }
#endif
  mapping_ = std::aligned_alloc(kSmallAlignment, (bytes + kSmallAlignment - 1) / kSmallAlignment * kSmallAlignment);
  if (mapping_ == nullptr) throw std::bad_alloc();
  data_ = static_cast<unsigned char*>(mapping_);
  size_ = bytes;
  std::memset(data_, 0, size_);
}

LargeBuffer::~LargeBuffer() { Release(); }

LargeBuffer::LargeBuffer(LargeBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapped_(std::exchange(other.mapped_, 0)) {}

LargeBuffer& LargeBuffer::operator=(LargeBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

void LargeBuffer::Release() {
  if (mapping_ == nullptr) return;
#if defined(__linux__)
  if (mapped_ > 0) {
    munmap(mapping_, mapped_);
  } else {
    std::free(mapping_);
  }
#else
  std::free(mapping_);
#endif
  data_ = nullptr;
  size_ = 0;
  mapping_ = nullptr;
  mapped_ = 0;
}

int64_t ProcessHugePageBytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  if (!in) return -1;
  std::string key;
  while (in >> key) {
    if (key == "AnonHugePages:") {
      int64_t kb = 0;
      if (!(in >> kb)) return -1;
      return kb * 1024;
    }
    in.ignore(1 << 20, '\n');
  }
  return -1;
}

std::string TransparentHugePageMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line)) return "unknown";
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "unknown";
  return line.substr(open + 1, close - open - 1);
}

std::string HugePageSummary() {
  const std::string mode = TransparentHugePageMode();
  const int64_t bytes = ProcessHugePageBytes();
  std::string out = "transparent huge pages: " + mode;
  if (bytes >= 0) out += ", " + std::to_string(bytes >> 20) + " MiB of this process on them";
  if (!HugePagesWanted()) {
    out += " (CROSSREG_HUGE_PAGES=0: weights and K/V on 4 KiB pages)";
  } else if (mode == "never") {
    out += " (weights and K/V on 4 KiB pages: a batch-1 forward of a large model can be ~25% slower)";
  }
  return out;
}

}  // namespace crossreg::cpu
