// Running numbered jobs on a few threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>
#include <vector>

namespace crossreg::clients {

// Calls body(0) ... body(count - 1), at most `concurrency` at once, and returns when all
// have returned. A thread per slot: simple, and at tens of streams the threads cost
// nothing next to the server's work. Each thread takes the next index until none is
// left, so a slow job holds up only its own thread.
inline void ForEachConcurrently(int count, int concurrency, const std::function<void(int)>& body) {
  std::atomic<int> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < std::min(concurrency, count); ++w) {
    workers.emplace_back([&] {
      for (int i = next.fetch_add(1); i < count; i = next.fetch_add(1)) body(i);
    });
  }
  for (auto& t : workers) t.join();
}

}  // namespace crossreg::clients
