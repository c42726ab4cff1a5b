// Runs the real crossreg-server binary on loopback ports for integration tests:
// fork/exec, wait until grpc.health.v1 says SERVING, SIGTERM at the end.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "crossreg/v1/generation.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace crossreg::testing {

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreeLoopbackPort();
// `count` distinct free loopback ports.
std::vector<int> FreeLoopbackPorts(int count);

// Health of the whole server (service ""): "SERVING", "NOT_SERVING", or the RPC error.
std::string CheckHealth(const std::shared_ptr<grpc::Channel>& channel, double timeout_s = 2.0);

class ServerProcess {
 public:
  // `extra_flags` are added after --model/--host/--port/--metrics_port.
  // `credentials` are the channel's (TLS servers); null: plaintext.
  // `host`/`port`: where it listens (port 0: a free one).
  explicit ServerProcess(std::vector<std::string> extra_flags, std::string model = "",
                         std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr,
                         std::string host = "127.0.0.1", int port = 0);
  ~ServerProcess();  // SIGKILL if still running

  // Starts the binary and waits up to `timeout_s` for SERVING; false with the log tail.
  bool Start(double timeout_s = 30.0);
  // SIGTERM, then waits up to `timeout_s` for exit. The exit status (-1: timed out,
  // 128+n: killed by signal n).
  int Terminate(double timeout_s = 30.0);
  void SendSignal(int signal_number);
  bool Running();

  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  // A new channel (its own connection) to this server with other credentials.
  std::shared_ptr<grpc::Channel> NewChannel(const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                                            grpc::ChannelArguments args = {}) const;
  std::string address() const { return host_ + ":" + std::to_string(grpc_port_); }
  std::unique_ptr<v1::Generation::Stub> NewStub() const { return v1::Generation::NewStub(channel_); }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  int http_port() const { return http_port_; }
  std::string Log() const;  // everything it wrote to stdout/stderr

 private:
  std::vector<std::string> args_;
  std::string host_;
  std::string log_path_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  int http_port_ = 0;
  pid_t pid_ = -1;
  int exit_status_ = -1;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace crossreg::testing
