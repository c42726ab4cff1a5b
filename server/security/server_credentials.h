// The gRPC listening credentials from --tls_cert_file, --tls_key_file and
// --tls_client_ca_file: plaintext, TLS, or mutual TLS (client certificates required
// and verified against the CA bundle). The files are checked here, with OpenSSL,
// so that a wrong path, a key that does not belong to the certificate or an expired
// certificate is one clear error (or warning) at startup instead of a port that
// fails to bind.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

namespace crossreg::server {

struct TlsFiles {
  std::string cert_file;       // PEM certificate chain, leaf first
  std::string key_file;        // PEM private key of the leaf
  std::string client_ca_file;  // PEM CA bundle; set: clients must present a certificate it signed
  bool enabled() const { return !cert_file.empty(); }
  bool mutual() const { return !client_ca_file.empty(); }
};

// The PEM texts, checked: certificate and key parse and match, the CA bundle holds
// at least one certificate. `warnings` gets what is legal but likely wrong (an
// expired or not yet valid certificate).
struct TlsMaterial {
  std::string cert_chain;
  std::string private_key;
  std::string client_ca;
};
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFiles& files, std::vector<std::string>* warnings);

// Insecure credentials when TLS is off.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& files,
                                                                               std::vector<std::string>* warnings);

}  // namespace crossreg::server
