// Connecting to crossreg-server (--server, --connect_timeout_s).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/channel.h>

#include "absl/status/statusor.h"

namespace crossreg::clients {

// A plaintext channel to --server, connected: waits up to --connect_timeout_s so that
// an unreachable server is one clear error here instead of UNAVAILABLE on every call.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectFromFlags();

// --server, for reports.
std::string ServerAddressFromFlags();

}  // namespace crossreg::clients
