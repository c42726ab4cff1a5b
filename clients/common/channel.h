// Connecting to crossreg-server: --server (an address or a gRPC target), --lb
// (pick_first, or round_robin over every address), --connect_timeout_s, and the transport's
// security: TLS (--tls, --tls_ca_file, --tls_server_name), a client certificate for
// mutual TLS (--tls_cert_file, --tls_key_file) and a bearer token (--auth_token_file,
// or the CROSSREG_AUTH_TOKEN environment variable, or --auth_token).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/channel.h>

#include "absl/status/statusor.h"

namespace crossreg::clients {

// A channel to --server with the flags' credentials, connected: waits up to
// --connect_timeout_s so that an unreachable server (or a TLS handshake that fails)
// is one clear error here instead of UNAVAILABLE on every call. Every call on it
// carries the bearer token, if one is given.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectFromFlags();

// --server, for reports.
std::string ServerAddressFromFlags();

}  // namespace crossreg::clients
