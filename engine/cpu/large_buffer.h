// Memory for the large, long-lived arrays a forward streams through: the packed weights
// and the K/V store. Each buffer is its own 2 MiB-aligned anonymous mapping that the
// kernel is asked (MADV_HUGEPAGE) to back with transparent huge pages.
//
// Why: a forward of the ~110M model reads 219 MB of weights, 53,000 distinct 4 KiB pages,
// far more than the TLBs map. On 4 KiB pages every page costs a page walk (two-level in
// a virtual machine) and the hardware prefetchers stop at each page's end; on 2 MiB pages
// the same weights are 105 pages, and a batch-1 forward is markedly faster on them
// (`crossreg-bench-decode --batches 1` times it, with CROSSREG_HUGE_PAGES=0 for 4 KiB
// pages; docs/benchmarks.md, "Zen 5: huge pages").
//
// Where transparent huge pages are off (`never` in
// /sys/kernel/mm/transparent_hugepage/enabled) or the kernel finds no free 2 MiB page,
// the buffer is plain 4 KiB pages: slower, never wrong. CROSSREG_HUGE_PAGES=0 in the
// environment asks for 4 KiB pages (for comparison, or where huge pages are unwanted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace crossreg::cpu {

// Whether large buffers are their own mappings (advised for huge pages). Not under
// AddressSanitizer: heap memory keeps its redzones there, so a kernel that reads past a
// weight matrix or the K/V store is still caught in the sanitizer CI.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kLargeBuffersMapped = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kLargeBuffersMapped = false;
#else
inline constexpr bool kLargeBuffersMapped = true;
#endif
#else
inline constexpr bool kLargeBuffersMapped = true;
#endif

class LargeBuffer {
 public:
  LargeBuffer() = default;
  // `bytes` zero bytes, 128-byte aligned (2 MiB aligned from 2 MiB up), every page
  // touched now, so that the memory is committed at start-up rather than inside a
  // forward. Throws std::bad_alloc when the system has no such memory.
  explicit LargeBuffer(size_t bytes);
  ~LargeBuffer();
  LargeBuffer(LargeBuffer&& other) noexcept;
  LargeBuffer& operator=(LargeBuffer&& other) noexcept;
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;

  unsigned char* data() { return data_; }
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  void Release();

  unsigned char* data_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;  // what to unmap (or free): the mapping's start
  size_t mapped_ = 0;        // its length; 0 for heap memory
};

// Bytes of this process's memory on transparent huge pages (AnonHugePages of
// /proc/self/smaps_rollup), or -1 where that is not readable.
int64_t ProcessHugePageBytes();

// The kernel's transparent huge page mode ("always", "madvise", "never"), or "unknown".
std::string TransparentHugePageMode();

// One line for start-up logs: how much of the process sits on huge pages, and why not
// more where it could ("THP never: the weights stream on 4 KiB pages").
std::string HugePageSummary();

}  // namespace crossreg::cpu
