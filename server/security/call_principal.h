// Who is calling, as one string: the principal that owns the requests a call starts
// (only it may Abort them) and that per-client stream limits count against.
//   "token:<name>"  when --auth_token_file is set (the token's name)
//   "cert:<id>"     otherwise, with mutual TLS: the client certificate's identity
//                   (its subject alternative name, else its common name)
//   "peer:<host>"   otherwise: the client's address without its port, so every
//                   connection from one host is one client
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"
#include "server/security/token_authenticator.h"

namespace crossreg::server {

// UNAUTHENTICATED when tokens are configured and the call carries no valid one.
absl::StatusOr<std::string> CallPrincipal(const grpc::ServerContextBase& call, const TokenAuthenticator& tokens);

// "ipv4:10.0.0.7:5123" -> "10.0.0.7", "ipv6:[::1]:5123" (or %5B::1%5D) -> "::1";
// anything else (unix sockets) is returned whole.
std::string PeerHost(std::string_view grpc_peer);

}  // namespace crossreg::server
