#include "scheduler/mask_worker.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <utility>

namespace crossreg {

MaskWorker::MaskWorker(std::function<void()> on_done) : on_done_(std::move(on_done)) {
  thread_ = std::thread([this] { Run(); });
}

MaskWorker::~MaskWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MaskWorker::Post(std::shared_ptr<grammar::TokenMasker> masker, grammar::GrammarMatcher state) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Job& job : queue_) {
      if (job.masker == masker && job.state == state) return;
    }
    queue_.push_back(Job{std::move(masker), std::move(state)});
  }
  wake_.notify_one();
}

size_t MaskWorker::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + running_;
}

void MaskWorker::Run() {
  // Below the forward's threads: the worker takes what the forwards leave, so a
  // costly grammar slows the server's arithmetic as little as it can.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    // Within the whole kMaxMaskWork: past it the masker files the state as over budget.
    if (job.masker->Cached(job.state) == nullptr) job.masker->Mask(job.state);
    lock.lock();
    --running_;
    lock.unlock();
    on_done_();
    lock.lock();
  }
}

}  // namespace crossreg
