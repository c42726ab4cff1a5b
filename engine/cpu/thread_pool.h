// A fixed pool of worker threads for data-parallel loops inside one forward.
// The caller's thread takes part, so a pool of N threads starts N-1 workers.
// Workers spin briefly between loops (a forward issues ~100 of them back to back,
// and a sleeping worker takes tens of microseconds to wake), then sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace crossreg::cpu {

class ThreadPool {
 public:
  // num_threads <= 0: one per usable core (affinity mask and cgroup CPU limit,
  // engine/cpu/usable_cores.h).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) over [0, n) split into at most num_threads contiguous
  // chunks whose boundaries are multiples of `grain`. Returns when all are done.
  // Not reentrant: call from one thread at a time.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // The same with dynamic chunks: every thread (the caller too) takes the next `grain`
  // items until none are left, so work of uneven cost (attention rows of growing
  // context, a straggling core) spreads evenly.
  void ParallelForDynamic(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Like ParallelFor (one contiguous chunk per thread), but the chunks are sized by each
  // thread's measured speed, and a thread that finishes its own takes what is left of the
  // others' from their backs. The cores of a shared machine run the same work at different
  // rates: on the 2-core CI machines one core streams the weights 12-20% slower than the
  // other, whichever thread runs on it, and an equal split leaves the faster one waiting
  // for the slower at the end of every layer. Each call times its threads and moves the
  // estimate a step towards the rates it saw, so the items of one call must cost about
  // the same (the panels of one linear layer). The estimate is right on average, not per
  // call: a decode step's calls last tens of microseconds and their chunks end a few
  // apart (a batch-1 decode of the ~110M Q4_K_M model on 2 cores: the caller waited 8% of
  // its linear calls' time for the worker; 3.5% with the taking, the step 1-2% faster).
  // Hence the taking: an owner runs its chunk front to back in pieces of half what is
  // left, so its reads stay sequential, and whoever runs out takes single grains from the
  // back of the chunk with the most left. Every item runs once, on some thread, with
  // boundaries at multiples of `grain`.
  void ParallelForBalanced(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Each thread's share of a balanced call's items, as the next call would split them
  // (sums to 1; equal until calls have measured the threads). For tests and logs.
  std::vector<double> BalancedShares() const;

 private:
  enum class Split { kEqual, kDynamic, kBalanced };
  void WorkerLoop(int worker_index);
  void RunChunk(int chunk_index);
  void Run(int64_t n, int64_t grain, Split split, const std::function<void(int64_t, int64_t)>& fn);
  void UpdateSpeeds();
  // A balanced call's share of this thread (its chunk, then others' backs); returns the
  // items it ran.
  int64_t RunBalancedChunk(int chunk_index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  // The current job, published before generation_ is bumped.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  int num_chunks_ = 0;
  Split split_ = Split::kEqual;
  std::atomic<int64_t> next_{0};  // dynamic: first item not yet taken
  // Balanced calls: chunk i's units (of chunk_ items) not yet taken; each thread writes
  // how long it ran and how many items into its own slots before it signals completion
  // through pending_.
  struct alignas(64) ChunkRange {
    std::atomic<uint64_t> left{0};
  };
  std::unique_ptr<ChunkRange[]> ranges_;
  std::vector<double> chunk_seconds_;
  std::vector<int64_t> chunk_items_;
  std::vector<double> speed_;  // relative items per second, mean 1
};

// A barrier for the threads of one ParallelFor region that split a forward's rows
// between them (they meet once per layer). Spins, then yields its core.
class SpinBarrier {
 public:
  explicit SpinBarrier(int parties) : parties_(parties) {}
  void Wait();

 private:
  const int parties_;
  std::atomic<int> arrived_{0};
  std::atomic<uint32_t> generation_{0};
};

}  // namespace crossreg::cpu
