#include "tests/integration/server_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "grpcpp/generic/generic_stub.h"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {

std::vector<int> FreeLoopbackPorts(int count) {
  // Every socket stays bound until all are chosen: bound and closed one at a time, the
  // kernel may hand out the same port twice (a server's --port and --http_port once
  // collided that way under ASan).
  std::vector<int> fds, ports;
  for (int i = 0; i < count; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    int port = 0;
    if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      socklen_t len = sizeof(addr);
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
      port = ntohs(addr.sin_port);
    }
    fds.push_back(fd);
    ports.push_back(port);
  }
  for (const int fd : fds) {
    if (fd >= 0) close(fd);
  }
  return ports;
}

int FreeLoopbackPort() { return FreeLoopbackPorts(1)[0]; }

std::string CheckHealth(const std::shared_ptr<grpc::Channel>& channel, double timeout_s) {
  // grpc.health.v1.HealthCheckRequest{service=""} is the empty message; the
  // response's field 1 (varint) is the status: 1 SERVING, 2 NOT_SERVING. Hand-coded
  // bytes spare the test a copy of health.proto.
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  grpc::ByteBuffer request, response;
  grpc::Slice empty("");
  request = grpc::ByteBuffer(&empty, 1);
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(s); });
  grpc::Status status = done.get_future().get();
  if (!status.ok()) return "error " + std::to_string(status.error_code()) + ": " + status.error_message();
  std::vector<grpc::Slice> slices;
  (void)response.Dump(&slices);
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (bytes.size() == 2 && bytes[0] == 0x08 && bytes[1] == 0x01) return "SERVING";
  if (bytes.size() == 2 && bytes[0] == 0x08 && bytes[1] == 0x02) return "NOT_SERVING";
  return "UNKNOWN";
}

ServerProcess::ServerProcess(std::vector<std::string> extra_flags, std::string model,
                             std::shared_ptr<grpc::ChannelCredentials> credentials, std::string host, int port)
    : host_(std::move(host)) {
  // Distinct ports, none of them a given --port (which may be free again by now).
  std::vector<int> ports = FreeLoopbackPorts(4);
  ports.erase(std::remove(ports.begin(), ports.end(), port), ports.end());
  ports.resize(std::max<size_t>(ports.size(), 3), 0);  // a failed bind reads 0, as FreeLoopbackPort's
  grpc_port_ = port > 0 ? port : ports[0];
  metrics_port_ = ports[1];
  http_port_ = ports[2];
  args_ = {BinDir() + "/crossreg-server",
           "--model=" + (model.empty() ? Stories260KGguf() : model),
           "--host=" + host_,
           "--port=" + std::to_string(grpc_port_),
           "--metrics_port=" + std::to_string(metrics_port_),
           "--http_port=" + std::to_string(http_port_),
           "--threads=1"};
  args_.insert(args_.end(), extra_flags.begin(), extra_flags.end());
  char path[] = "/tmp/crossreg_server_log_XXXXXX";
  const int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  log_path_ = path;
  channel_ = NewChannel(credentials ? credentials : grpc::InsecureChannelCredentials());
}

std::shared_ptr<grpc::Channel> ServerProcess::NewChannel(const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                                                         grpc::ChannelArguments args) const {
  // A distinct argument keeps gRPC from sharing one subchannel (connection) between channels.
  static std::atomic<int> channel_number{0};
  args.SetInt("crossreg.test_channel", channel_number++);
  return grpc::CreateCustomChannel(address(), credentials, args);
}

ServerProcess::~ServerProcess() {
  if (Running()) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  unlink(log_path_.c_str());
}

bool ServerProcess::Start(double timeout_s) {
  pid_ = fork();
  if (pid_ == 0) {
    const int log = open(log_path_.c_str(), O_WRONLY | O_TRUNC);
    dup2(log, 1);
    dup2(log, 2);
    std::vector<char*> argv;
    for (auto& a : args_) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < until) {
    if (!Running()) return false;
    if (CheckHealth(channel_, 0.5) == "SERVING") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

bool ServerProcess::Running() {
  if (pid_ <= 0 || exit_status_ >= 0) return false;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return false;
}

void ServerProcess::SendSignal(int signal_number) {
  if (Running()) kill(pid_, signal_number);
}

int ServerProcess::Terminate(double timeout_s) {
  SendSignal(SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (Running()) {
    if (std::chrono::steady_clock::now() > until) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return exit_status_;
}

std::string ServerProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace crossreg::testing
