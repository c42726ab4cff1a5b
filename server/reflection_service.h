// gRPC server reflection (grpc.reflection.v1alpha.ServerReflection), so grpcurl and
// grpc_cli work without the .proto files. It is served here instead of by
// grpc++_reflection's plugin because reflection must answer to the same bearer
// tokens as the API (the plugin's service cannot be guarded), and it describes only
// what the process's generated descriptor pool holds (crossreg.v1 and itself).
#pragma once

#include <string>
#include <vector>

#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "server/security/token_authenticator.h"

namespace crossreg::server {

class ReflectionService final : public grpc::reflection::v1alpha::ServerReflection::CallbackService {
 public:
  // `services`: the fully qualified names ListServices reports. `tokens` must
  // outlive the service; when enabled, calls need a valid bearer token.
  ReflectionService(std::vector<std::string> services, const TokenAuthenticator* tokens)
      : services_(std::move(services)), tokens_(tokens) {}

  grpc::ServerBidiReactor<grpc::reflection::v1alpha::ServerReflectionRequest,
                          grpc::reflection::v1alpha::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* call) override;

 private:
  class Reactor;
  const std::vector<std::string> services_;
  const TokenAuthenticator* tokens_;
};

}  // namespace crossreg::server
