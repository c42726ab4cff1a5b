// Collects the events of many requests, thread-safely, for the scheduler tests:
// per request the streamed tokens and the final event, plus the orders in which
// requests produced their first token and finished.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/scheduler.h"

namespace crossreg::testing {

class EventRecorder {
 public:
  struct Record {
    std::vector<int32_t> tokens;               // every kTokens event, concatenated
    std::string text;                          // every event's text, concatenated
    int token_events = 0;
    std::optional<RequestEvent> final_event;   // kFinished or kError
    int events_after_final = 0;                // must stay 0
  };

  EventHandler HandlerFor(const std::string& id) {
    return [this, id](const RequestEvent& e) {
      std::lock_guard<std::mutex> lock(mu_);
      Record& r = records_[id];
      if (r.final_event.has_value()) {
        ++r.events_after_final;
        return;
      }
      r.text += e.text;
      if (e.kind == RequestEvent::Kind::kTokens) {
        if (r.tokens.empty()) first_token_order_.push_back(id);
        r.tokens.insert(r.tokens.end(), e.tokens.begin(), e.tokens.end());
        ++r.token_events;
      } else {
        r.final_event = e;
        completion_order_.push_back(id);
        cv_.notify_all();
      }
    };
  }

  // Waits until `count` requests have their final event.
  bool WaitForFinals(size_t count, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return completion_order_.size() >= count; });
  }
  bool WaitForFinal(const std::string& id, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return records_[id].final_event.has_value(); });
  }

  Record Get(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return records_[id];
  }
  std::vector<std::string> first_token_order() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_token_order_;
  }
  std::vector<std::string> completion_order() {
    std::lock_guard<std::mutex> lock(mu_);
    return completion_order_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Record> records_;
  std::vector<std::string> first_token_order_;
  std::vector<std::string> completion_order_;
};

}  // namespace crossreg::testing
