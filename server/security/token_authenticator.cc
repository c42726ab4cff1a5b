#include "server/security/token_authenticator.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace crossreg::server {
namespace {

// Equal contents, in time that depends only on the lengths (a token's length is not
// a secret worth protecting; its bytes are).
bool SameBytes(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) {
    diff |= static_cast<unsigned char>(b[i] ^ (i < a.size() ? a[i] : 0));
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::string> TokenAuthenticator::Authenticate(absl::string_view authorization) const {
  if (!enabled()) return std::string();
  if (authorization.empty()) {
    return absl::UnauthenticatedError("missing credentials: send the header 'authorization: Bearer <token>'");
  }
  constexpr absl::string_view kScheme = "bearer ";
  if (authorization.size() < kScheme.size() || !absl::StartsWithIgnoreCase(authorization, kScheme)) {
    return absl::UnauthenticatedError("the authorization header must be 'Bearer <token>'");
  }
  const absl::string_view presented = absl::StripAsciiWhitespace(authorization.substr(kScheme.size()));
  const NamedToken* match = nullptr;
  for (const NamedToken& t : tokens_) {
    if (SameBytes(presented, t.token)) match = &t;  // no early exit
  }
  if (match == nullptr) return absl::UnauthenticatedError("invalid bearer token");
  return match->name;
}

}  // namespace crossreg::server
