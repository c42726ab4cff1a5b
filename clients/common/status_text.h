// gRPC status codes by their canonical names, so errors read "UNAVAILABLE: ..."
// rather than "14: ...".
#pragma once

#include <string>

#include <grpcpp/support/status.h>

namespace crossreg::clients {

// "OK", "CANCELLED", ..., "UNAUTHENTICATED"; "CODE_<n>" for values gRPC does not define.
std::string StatusCodeName(grpc::StatusCode code);

// "<CODE_NAME>: <message>" (just the name when the message is empty).
std::string FormatStatus(const grpc::Status& status);

}  // namespace crossreg::clients
