#include "server/security/call_principal.h"

#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "grpcpp/security/auth_context.h"

namespace crossreg::server {

std::string PeerHost(std::string_view grpc_peer) {
  absl::string_view peer(grpc_peer.data(), grpc_peer.size());
  auto without_port = [](absl::string_view hostport) {
    const size_t colon = hostport.rfind(':');
    return colon == absl::string_view::npos ? hostport : hostport.substr(0, colon);
  };
  if (absl::ConsumePrefix(&peer, "ipv4:")) return std::string(without_port(peer));
  if (absl::ConsumePrefix(&peer, "ipv6:")) {
    std::string host = absl::StrReplaceAll(std::string(without_port(peer)), {{"%5B", "["}, {"%5D", "]"}});
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return host;
  }
  return std::string(peer);
}

absl::StatusOr<std::string> CallPrincipal(const grpc::ServerContextBase& call, const TokenAuthenticator& tokens) {
  if (tokens.enabled()) {
    absl::string_view authorization;
    const auto& metadata = call.client_metadata();
    if (auto it = metadata.find("authorization"); it != metadata.end()) {
      authorization = absl::string_view(it->second.data(), it->second.size());
    }
    auto name = tokens.Authenticate(authorization);
    if (!name.ok()) return name.status();
    return absl::StrCat("token:", *name);
  }
  if (std::shared_ptr<const grpc::AuthContext> auth = call.auth_context(); auth && auth->IsPeerAuthenticated()) {
    // The peer identity is the SANs when the certificate has any, else the CN.
    const std::vector<grpc::string_ref> identity = auth->GetPeerIdentity();
    if (!identity.empty()) return absl::StrCat("cert:", absl::string_view(identity.front().data(), identity.front().size()));
  }
  return absl::StrCat("peer:", PeerHost(call.peer()));
}

}  // namespace crossreg::server
