#include "engine/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

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
// How far one balanced call moves the speed estimate towards the rates it measured: a
// tenth, so that one chunk stalled by the host (a preempted core) barely moves it, while
// a lasting difference between the cores is learnt within a forward (~50 linear layers).
constexpr double kSpeedStep = 0.1;
// A thread is never credited with less than half or more than twice the mean speed.
constexpr double kMinSpeed = 0.5, kMaxSpeed = 2.0;
// Calls whose chunks hold fewer items than this are split but do not update the
// estimate (a chunk of one or two panels times mostly its start-up).
constexpr int64_t kMinTimedItems = 4;

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) {
    num_threads = UsableCores();
  }
  num_threads_ = num_threads;
  ranges_ = std::make_unique<ChunkRange[]>(static_cast<size_t>(num_threads_));
  chunk_items_.assign(static_cast<size_t>(num_threads_), 0);
  chunk_seconds_.assign(static_cast<size_t>(num_threads_), 0.0);
  speed_.assign(static_cast<size_t>(num_threads_), 1.0);
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
  if (split_ == Split::kBalanced) {
    const auto start = std::chrono::steady_clock::now();
    const int64_t items = RunBalancedChunk(chunk_index);
    chunk_seconds_[static_cast<size_t>(chunk_index)] = Seconds(start, std::chrono::steady_clock::now());
    chunk_items_[static_cast<size_t>(chunk_index)] = items;
    return;
  }
  if (split_ == Split::kDynamic) {
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

namespace {
// A balanced chunk's units not yet taken, [front, back), in one word so that its owner
// (taking from the front) and a thread taking from its back claim by one compare-exchange.
constexpr uint64_t Pack(uint64_t front, uint64_t back) { return front | (back << 32); }
constexpr int64_t Front(uint64_t word) { return static_cast<int64_t>(word & 0xffffffffu); }
constexpr int64_t Back(uint64_t word) { return static_cast<int64_t>(word >> 32); }
}  // namespace

int64_t ThreadPool::RunBalancedChunk(int chunk_index) {
  const auto run_units = [this](int64_t first, int64_t last) {
    const int64_t begin = std::min(n_, first * chunk_), end = std::min(n_, last * chunk_);
    (*fn_)(begin, end);
    return end - begin;
  };
  int64_t items = 0;
  // The own chunk from its front, half of what is left at a time: the first pieces are
  // long runs of sequential reads, and the last unit is taken alone.
  std::atomic<uint64_t>& own = ranges_[static_cast<size_t>(chunk_index)].left;
  for (uint64_t word = own.load(std::memory_order_acquire);;) {
    const int64_t front = Front(word), back = Back(word);
    if (front >= back) break;
    const int64_t take = std::max<int64_t>(1, (back - front) / 2);
    if (own.compare_exchange_weak(word, Pack(front + take, back), std::memory_order_acq_rel, std::memory_order_acquire)) {
      items += run_units(front, front + take);
      word = own.load(std::memory_order_acquire);
    }
  }
  // Then single units from the back of the chunk with the most left, until none is.
  for (;;) {
    int victim = -1;
    int64_t most = 0;
    for (int i = 0; i < num_chunks_; ++i) {
      const uint64_t word = ranges_[static_cast<size_t>(i)].left.load(std::memory_order_acquire);
      if (Back(word) - Front(word) > most) {
        most = Back(word) - Front(word);
        victim = i;
      }
    }
    if (victim < 0) return items;
    std::atomic<uint64_t>& left = ranges_[static_cast<size_t>(victim)].left;
    uint64_t word = left.load(std::memory_order_acquire);
    while (Front(word) < Back(word)) {
      const int64_t back = Back(word);
      if (left.compare_exchange_weak(word, Pack(Front(word), back - 1), std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
        items += run_units(back - 1, back);
        break;
      }
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  Run(n, grain, Split::kEqual, fn);
}

void ThreadPool::ParallelForDynamic(int64_t n, int64_t grain,
                                    const std::function<void(int64_t, int64_t)>& fn) {
  Run(n, grain, Split::kDynamic, fn);
}

void ThreadPool::ParallelForBalanced(int64_t n, int64_t grain,
                                     const std::function<void(int64_t, int64_t)>& fn) {
  Run(n, grain, Split::kBalanced, fn);
}

std::vector<double> ThreadPool::BalancedShares() const {
  const double total = std::accumulate(speed_.begin(), speed_.end(), 0.0);
  std::vector<double> shares;
  for (double s : speed_) shares.push_back(s / total);
  return shares;
}

// Moves each thread's speed a step towards the rate its chunk ran at in the call just
// finished (items per second, relative to the threads' mean). Called after every
// balanced call (~50 per forward): no allocation, each chunk's time becomes its rate in
// place (the next call writes the times afresh).
void ThreadPool::UpdateSpeeds() {
  std::vector<double>& rate = chunk_seconds_;
  double mean = 0;
  for (size_t i = 0; i < rate.size(); ++i) {
    const int64_t items = chunk_items_[i];
    if (items < kMinTimedItems || chunk_seconds_[i] <= 0) return;
    rate[i] = static_cast<double>(items) / chunk_seconds_[i];
    mean += rate[i] / static_cast<double>(rate.size());
  }
  double total = 0;
  for (size_t i = 0; i < rate.size(); ++i) {
    const double measured = std::clamp(rate[i] / mean, kMinSpeed, kMaxSpeed);
    speed_[i] += kSpeedStep * (measured - speed_[i]);
    total += speed_[i];
  }
  for (double& s : speed_) s *= static_cast<double>(speed_.size()) / total;
}

void ThreadPool::Run(int64_t n, int64_t grain, Split split, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t units = (n + grain - 1) / grain;
  const int chunks = static_cast<int>(std::min<int64_t>(units, num_threads_));
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  // Fewer items than threads: a balanced split would leave a thread nothing to time. (A
  // chunk's range packs into 32-bit halves: more units than that split equally.)
  if (split == Split::kBalanced && (chunks < num_threads_ || units > int64_t{0xffffffff})) split = Split::kEqual;
  fn_ = &fn;
  n_ = n;
  split_ = split;
  // Equal calls: the items of one chunk; dynamic and balanced calls: the unit a thread takes.
  chunk_ = split == Split::kEqual ? ((units + chunks - 1) / chunks) * grain : grain;
  if (split == Split::kBalanced) {
    // Chunks of whole units in proportion to the threads' speeds.
    const double total = std::accumulate(speed_.begin(), speed_.end(), 0.0);
    double cumulative = speed_[0];
    int64_t front = 0;
    for (int i = 0; i < chunks; ++i) {
      const int64_t back =
          i + 1 == chunks ? units
                          : std::clamp<int64_t>(std::llround(static_cast<double>(units) * cumulative / total), front, units);
      ranges_[static_cast<size_t>(i)].left.store(Pack(static_cast<uint64_t>(front), static_cast<uint64_t>(back)),
                                                 std::memory_order_relaxed);
      front = back;
      if (i + 1 < chunks) cumulative += speed_[static_cast<size_t>(i) + 1];
    }
  }
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
  if (split == Split::kBalanced) UpdateSpeeds();
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
