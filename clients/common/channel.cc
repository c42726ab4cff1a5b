#include "clients/common/channel.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/client_interceptor.h>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

ABSL_FLAG(std::string, server, "localhost:50051",
          "crossreg-server address: host:port, or a gRPC target such as dns:///crossreg-headless.ns.svc:50051 "
          "(every address the name resolves to) or ipv4:10.0.0.1:50051,10.0.0.2:50051");
ABSL_FLAG(std::string, lb, "pick_first",
          "Load balancing over the target's addresses: pick_first (one connection) or round_robin (a connection "
          "to every address, calls spread over them; use with a dns:/// target of a headless Service)");
ABSL_FLAG(double, connect_timeout_s, 5.0, "How long to wait for the server to accept the connection");
ABSL_FLAG(bool, tls, false, "Connect over TLS, trusting the system's CA certificates (see --tls_ca_file)");
ABSL_FLAG(std::string, tls_ca_file, "", "TLS: PEM CA bundle to verify the server with (implies --tls)");
ABSL_FLAG(std::string, tls_cert_file, "", "Mutual TLS: this client's PEM certificate (implies --tls)");
ABSL_FLAG(std::string, tls_key_file, "", "Mutual TLS: this client's PEM private key");
ABSL_FLAG(std::string, tls_server_name, "",
          "TLS: the name the server's certificate must carry, when it differs from --server's host");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the bearer token (its first non-empty line); default: the CROSSREG_AUTH_TOKEN variable");
ABSL_FLAG(std::string, auth_token, "", "Bearer token (visible to other users in ps: prefer --auth_token_file)");

namespace crossreg::clients {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--", flag, " ", path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The token from --auth_token_file, CROSSREG_AUTH_TOKEN or --auth_token; empty: none.
absl::StatusOr<std::string> BearerToken() {
  std::string token = absl::GetFlag(FLAGS_auth_token);
  if (const std::string path = absl::GetFlag(FLAGS_auth_token_file); !path.empty()) {
    auto text = ReadFile("auth_token_file", path);
    if (!text.ok()) return text.status();
    std::istringstream lines(*text);
    token.clear();
    for (std::string line; std::getline(lines, line);) {
      token = std::string(absl::StripAsciiWhitespace(line));
      if (!token.empty()) break;
    }
    if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("--auth_token_file ", path, ": empty"));
  } else if (token.empty()) {
    if (const char* env = std::getenv("CROSSREG_AUTH_TOKEN"); env != nullptr) {
      token = std::string(absl::StripAsciiWhitespace(env));
    }
  }
  return token;
}

// Adds "authorization: Bearer <token>" to every call. An interceptor rather than
// call credentials, which gRPC sends only over TLS: servers behind a mesh that
// encrypts for them take tokens over plaintext too.
class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string& header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", header_});
    }
    methods->Proceed();
  }

 private:
  const std::string& header_;
};

class BearerTokenInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(std::string token) : header_(absl::StrCat("Bearer ", token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new BearerTokenInterceptor(header_);
  }

 private:
  const std::string header_;  // outlives the interceptors: the factory lives as long as the channel
};

// `tls` tells whether the flags ask for TLS.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFromFlags(grpc::ChannelArguments& args,
                                                                                     bool& tls) {
  const std::string ca = absl::GetFlag(FLAGS_tls_ca_file);
  const std::string cert = absl::GetFlag(FLAGS_tls_cert_file);
  const std::string key = absl::GetFlag(FLAGS_tls_key_file);
  const std::string server_name = absl::GetFlag(FLAGS_tls_server_name);
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--tls_cert_file and --tls_key_file go together: give both or neither");
  }
  tls = absl::GetFlag(FLAGS_tls) || !ca.empty() || !cert.empty() || !server_name.empty();
  if (!tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  if (!ca.empty()) {
    auto pem = ReadFile("tls_ca_file", ca);
    if (!pem.ok()) return pem.status();
    ssl.pem_root_certs = std::move(*pem);
  }
  if (!cert.empty()) {
    auto cert_pem = ReadFile("tls_cert_file", cert);
    if (!cert_pem.ok()) return cert_pem.status();
    auto key_pem = ReadFile("tls_key_file", key);
    if (!key_pem.ok()) return key_pem.status();
    ssl.pem_cert_chain = std::move(*cert_pem);
    ssl.pem_private_key = std::move(*key_pem);
  }
  if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
  return grpc::SslCredentials(ssl);
}

}  // namespace

std::string ServerAddressFromFlags() { return absl::GetFlag(FLAGS_server); }

absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectFromFlags() {
  const std::string target = absl::GetFlag(FLAGS_server);
  if (target.empty()) return absl::InvalidArgumentError("--server is empty; give host:port");
  grpc::ChannelArguments args;
  const std::string lb = absl::GetFlag(FLAGS_lb);
  if (lb != "pick_first" && lb != "round_robin") {
    return absl::InvalidArgumentError("--lb must be pick_first or round_robin, got '" + lb + "'");
  }
  args.SetLoadBalancingPolicyName(lb);
  bool tls = false;
  auto credentials = ChannelCredentialsFromFlags(args, tls);
  if (!credentials.ok()) return credentials.status();
  auto token = BearerToken();
  if (!token.ok()) return token.status();
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!token->empty()) interceptors.push_back(std::make_unique<BearerTokenInterceptorFactory>(*token));
  auto channel = grpc::experimental::CreateCustomChannelWithInterceptors(target, *credentials, args,
                                                                         std::move(interceptors));
  const double timeout = absl::GetFlag(FLAGS_connect_timeout_s);
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(
                            std::chrono::duration<double>(timeout));
  if (!channel->WaitForConnected(deadline)) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot connect to crossreg-server at %s within %.1f s (is it running? --server host:port%s)", target,
        timeout, tls ? "; a TLS handshake failure also looks like this: check --tls_ca_file, --tls_server_name and "
                       "the client certificate"
                     : "; if the server serves TLS, add --tls or --tls_ca_file"));
  }
  return channel;
}

}  // namespace crossreg::clients
