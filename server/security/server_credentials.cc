#include "server/security/server_credentials.h"

#include <fstream>
#include <sstream>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"

namespace crossreg::server {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--", flag, " ", path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", path, ": not a PEM file (no -----BEGIN line)"));
  }
  return text.str();
}

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char buffer[256];
  ERR_error_string_n(code, buffer, sizeof(buffer));
  return buffer;
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

BioPtr MemoryBio(const std::string& text) { return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size()))); }

// Every certificate in a PEM bundle; an error names the file when it has none.
absl::StatusOr<std::vector<X509Ptr>> ParseCertificates(const std::string& flag, const std::string& path,
                                                       const std::string& pem) {
  std::vector<X509Ptr> certs;
  BioPtr bio = MemoryBio(pem);
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(cert);
  ERR_clear_error();  // the loop ends on "no start line"
  if (certs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", path, ": no PEM certificate in it"));
  }
  return certs;
}

void CheckValidity(const std::string& path, X509* cert, std::vector<std::string>* warnings) {
  if (warnings == nullptr) return;
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    warnings->push_back(absl::StrCat(path, ": the certificate has expired; clients will refuse it"));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    warnings->push_back(absl::StrCat(path, ": the certificate is not valid yet (check the clock)"));
  }
}

}  // namespace

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFiles& files, std::vector<std::string>* warnings) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert_file and --tls_key_file go together: give both or neither");
  }
  if (files.mutual() && !files.enabled()) {
    return absl::InvalidArgumentError(
        "--tls_client_ca_file needs --tls_cert_file and --tls_key_file (mutual TLS is TLS plus client certificates)");
  }
  TlsMaterial m;
  auto cert = ReadPem("tls_cert_file", files.cert_file);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("tls_key_file", files.key_file);
  if (!key.ok()) return key.status();
  m.cert_chain = std::move(*cert);
  m.private_key = std::move(*key);

  auto chain = ParseCertificates("tls_cert_file", files.cert_file, m.cert_chain);
  if (!chain.ok()) return chain.status();
  BioPtr key_bio = MemoryBio(m.private_key);
  KeyPtr private_key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!private_key) {
    return absl::InvalidArgumentError(absl::StrCat("--tls_key_file ", files.key_file,
                                                   ": not an unencrypted PEM private key (", OpenSslError(), ")"));
  }
  if (X509_check_private_key(chain->front().get(), private_key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat("--tls_key_file ", files.key_file,
                                                   " is not the key of the first certificate in --tls_cert_file ",
                                                   files.cert_file));
  }
  CheckValidity(files.cert_file, chain->front().get(), warnings);

  if (files.mutual()) {
    auto ca = ReadPem("tls_client_ca_file", files.client_ca_file);
    if (!ca.ok()) return ca.status();
    auto roots = ParseCertificates("tls_client_ca_file", files.client_ca_file, *ca);
    if (!roots.ok()) return roots.status();
    for (const X509Ptr& root : *roots) CheckValidity(files.client_ca_file, root.get(), warnings);
    m.client_ca = std::move(*ca);
  }
  return m;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& files,
                                                                               std::vector<std::string>* warnings) {
  if (!files.enabled() && !files.mutual() && files.key_file.empty()) return grpc::InsecureServerCredentials();
  auto material = LoadTlsMaterial(files, warnings);
  if (!material.ok()) return material.status();
  grpc::SslServerCredentialsOptions options(files.mutual() ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                           : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_root_certs = material->client_ca;
  options.pem_key_cert_pairs.push_back({material->private_key, material->cert_chain});
  return grpc::SslServerCredentials(options);
}

}  // namespace crossreg::server
