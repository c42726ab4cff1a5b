#include "server/security/client_stream_limiter.h"

#include "absl/strings/str_cat.h"

namespace crossreg::server {

ClientStreamLimiter::Lease::~Lease() { limiter_->Release(principal_); }

absl::StatusOr<std::unique_ptr<ClientStreamLimiter::Lease>> ClientStreamLimiter::Acquire(
    const std::string& principal) {
  std::lock_guard<std::mutex> lock(mu_);
  int& open = open_[principal];
  if (limit_ > 0 && open >= limit_) {
    return absl::ResourceExhaustedError(absl::StrCat("this client already has ", open,
                                                     " streams open (--max_streams_per_client ", limit_,
                                                     "); wait for one to finish"));
  }
  ++open;
  return std::unique_ptr<Lease>(new Lease(this, principal));
}

void ClientStreamLimiter::Release(const std::string& principal) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(principal);
  if (it != open_.end() && --it->second <= 0) open_.erase(it);
}

int ClientStreamLimiter::open_streams(const std::string& principal) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(principal);
  return it == open_.end() ? 0 : it->second;
}

}  // namespace crossreg::server
