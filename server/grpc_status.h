// The one place absl::Status becomes grpc::Status (the codes share their numbers).
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace crossreg::server {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace crossreg::server
