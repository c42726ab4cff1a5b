// Computes grammar token masks off the scheduler's thread. A sequence whose next
// forward needs masks that a step cannot compute within its inline budget
// (grammar_budget.h, kInlineMaskWorkPerStep) sits that forward out while this worker
// computes them into its grammar's shared cache, so one request's costly grammar
// delays its own tokens, never the other sequences' forwards. A mask past
// kMaxMaskWork is filed as over budget and the request reaching it fails.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/token_mask.h"

namespace crossreg {

class MaskWorker {
 public:
  // `on_done` runs on the worker's thread after each mask is filed (the scheduler
  // wakes its loop there).
  explicit MaskWorker(std::function<void()> on_done);
  ~MaskWorker();  // stops; queued masks are dropped
  MaskWorker(const MaskWorker&) = delete;
  MaskWorker& operator=(const MaskWorker&) = delete;

  // Queues the mask of `state` for `masker`, unless it is queued already.
  void Post(std::shared_ptr<grammar::TokenMasker> masker, grammar::GrammarMatcher state);
  // Masks queued or being computed.
  size_t pending() const;

 private:
  struct Job {
    std::shared_ptr<grammar::TokenMasker> masker;
    grammar::GrammarMatcher state;
  };
  void Run();

  std::function<void()> on_done_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  size_t running_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace crossreg
