// A fixed pool of threads running posted tasks in order of arrival: where the HTTP
// server runs handlers and their continuations, so the I/O thread never waits on
// them.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace crossreg::server {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();  // runs what is queued, then joins

  // False once stopping: the task is dropped.
  bool Post(std::function<void()> task);
  // Runs what is queued and joins; later Posts are refused.
  void Stop();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace crossreg::server
