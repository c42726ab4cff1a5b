#include "clients/common/channel.h"

#include <chrono>
#include <string>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"

ABSL_FLAG(std::string, server, "localhost:50051", "crossreg-server address, host:port");
ABSL_FLAG(double, connect_timeout_s, 5.0, "How long to wait for the server to accept the connection");

namespace crossreg::clients {

std::string ServerAddressFromFlags() { return absl::GetFlag(FLAGS_server); }

absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectFromFlags() {
  const std::string target = absl::GetFlag(FLAGS_server);
  if (target.empty()) return absl::InvalidArgumentError("--server is empty; give host:port");
  grpc::ChannelArguments args;
  // Streams carry small messages; no reason to differ from the server's defaults.
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  const double timeout = absl::GetFlag(FLAGS_connect_timeout_s);
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(
                            std::chrono::duration<double>(timeout));
  if (!channel->WaitForConnected(deadline)) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot connect to crossreg-server at %s within %.1f s (is it running? --server host:port)",
        target, timeout));
  }
  return channel;
}

}  // namespace crossreg::clients
