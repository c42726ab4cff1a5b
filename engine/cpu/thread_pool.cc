#include "engine/cpu/thread_pool.h"

#include <algorithm>

#include "engine/cpu/usable_cores.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CROSSREG_CPU_RELAX() _mm_pause()
#else
#define CROSSREG_CPU_RELAX() std::this_thread::yield()
#endif

namespace crossreg::cpu {
namespace {
// Tens of microseconds of spinning before a worker sleeps: enough to bridge the
// gap between two loops of one forward, short enough not to starve other processes
// when the machine is oversubscribed.
constexpr int kSpinIterations = 2000;
// The caller spins this long for stragglers, then yields its core to them.
constexpr int kCallerSpinIterations = 200;
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) {
    num_threads = UsableCores();
  }
  num_threads_ = num_threads;
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunChunk(int chunk_index) {
  if (dynamic_) {
    for (;;) {
      const int64_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
      if (begin >= n_) return;
      (*fn_)(begin, std::min(n_, begin + chunk_));
    }
  }
  const int64_t begin = chunk_ * chunk_index;
  const int64_t end = std::min(n_, begin + chunk_);
  if (begin < end) (*fn_)(begin, end);
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  Run(n, grain, /*dynamic=*/false, fn);
}

void ThreadPool::ParallelForDynamic(int64_t n, int64_t grain,
                                    const std::function<void(int64_t, int64_t)>& fn) {
  Run(n, grain, /*dynamic=*/true, fn);
}

void ThreadPool::Run(int64_t n, int64_t grain, bool dynamic, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t units = (n + grain - 1) / grain;
  const int chunks = static_cast<int>(std::min<int64_t>(units, num_threads_));
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  fn_ = &fn;
  n_ = n;
  dynamic_ = dynamic;
  chunk_ = dynamic ? grain : ((units + chunks - 1) / chunks) * grain;
  next_.store(0, std::memory_order_relaxed);
  num_chunks_ = chunks;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  {
    // The lock orders the publication against a worker about to sleep.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleepers_.load(std::memory_order_acquire) > 0) wake_.notify_all();
  RunChunk(0);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kCallerSpinIterations) {
      CROSSREG_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int worker_index) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIterations) {
      CROSSREG_CPU_RELAX();
      ++spins;
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    if (worker_index < num_chunks_) RunChunk(worker_index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void SpinBarrier::Wait() {
  const uint32_t generation = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == parties_) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  for (int spins = 0; generation_.load(std::memory_order_acquire) == generation; ++spins) {
    if (spins < kSpinIterations) {
      CROSSREG_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace crossreg::cpu
