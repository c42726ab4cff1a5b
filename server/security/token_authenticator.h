// Bearer-token authentication, independent of the transport: the gRPC service and the
// HTTP front door both hand it the value of the caller's `authorization` header.
#pragma once

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "server/security/token_file.h"

namespace crossreg::server {

class TokenAuthenticator {
 public:
  // No tokens: authentication is off and every call is let through.
  explicit TokenAuthenticator(std::vector<NamedToken> tokens = {}) : tokens_(std::move(tokens)) {}

  bool enabled() const { return !tokens_.empty(); }

  // The name of the token in `authorization` ("Bearer <token>", scheme in any case),
  // or UNAUTHENTICATED saying what is wrong (missing header, other scheme, unknown
  // token) without echoing the token. Every configured token is compared, in time
  // independent of where a guess first differs.
  absl::StatusOr<std::string> Authenticate(absl::string_view authorization) const;

 private:
  std::vector<NamedToken> tokens_;
};

}  // namespace crossreg::server
