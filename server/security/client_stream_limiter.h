// --max_streams_per_client: how many Generate streams one principal
// (server/security/call_principal.h) may have open at once, queued or running, so
// that one client cannot fill the queue and lock everyone else out.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"

namespace crossreg::server {

class ClientStreamLimiter {
 public:
  // A stream slot; giving it back (destroying it) lets the principal open another.
  class Lease {
   public:
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

   private:
    friend class ClientStreamLimiter;
    Lease(ClientStreamLimiter* limiter, std::string principal)
        : limiter_(limiter), principal_(std::move(principal)) {}
    ClientStreamLimiter* limiter_;
    std::string principal_;
  };

  // 0: no limit.
  explicit ClientStreamLimiter(int max_streams_per_client) : limit_(max_streams_per_client) {}

  // A lease, or RESOURCE_EXHAUSTED when `principal` already holds the limit.
  absl::StatusOr<std::unique_ptr<Lease>> Acquire(const std::string& principal);

  int open_streams(const std::string& principal) const;

 private:
  void Release(const std::string& principal);

  const int limit_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, int> open_;  // principal -> streams; no zero entries
};

}  // namespace crossreg::server
