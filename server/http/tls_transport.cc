#include "server/http/tls_transport.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "absl/strings/str_cat.h"

namespace crossreg::server {
namespace {

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  if (code == 0) return "unknown OpenSSL error";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return text;
}

TlsSession::Io Classify(SSL* ssl, int ret) {
  switch (SSL_get_error(ssl, ret)) {
    case SSL_ERROR_WANT_READ:
      return TlsSession::Io::kWantRead;
    case SSL_ERROR_WANT_WRITE:
      return TlsSession::Io::kWantWrite;
    case SSL_ERROR_ZERO_RETURN:
      return TlsSession::Io::kClosed;
    default:
      ERR_clear_error();  // the connection is dropped; its error must not leak into the next one's
      return TlsSession::Io::kError;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsContext>> TlsContext::Create(const TlsFiles& files) {
  // The same checks (and messages) as gRPC's credentials first.
  if (auto material = LoadTlsMaterial(files, nullptr); !material.ok()) return material.status();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError(absl::StrCat("TLS: ", OpenSslError()));
  std::unique_ptr<TlsContext> context(new TlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert_file.c_str()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--tls_cert_file ", files.cert_file, ": ", OpenSslError()));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--tls_key_file ", files.key_file, ": ", OpenSslError()));
  }
  if (files.mutual()) {
    if (SSL_CTX_load_verify_locations(ctx, files.client_ca_file.c_str(), nullptr) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls_client_ca_file ", files.client_ca_file, ": ", OpenSslError()));
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return context;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

TlsSession::TlsSession(const TlsContext& context, int fd) : ssl_(SSL_new(context.get())) {
  SSL_set_fd(ssl_, fd);
  SSL_set_accept_state(ssl_);
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

TlsSession::Io TlsSession::Read(std::string* out) {
  char buffer[16384];
  for (;;) {
    const int n = SSL_read(ssl_, buffer, sizeof(buffer));
    if (n <= 0) return Classify(ssl_, n);
    out->append(buffer, static_cast<size_t>(n));
  }
}

TlsSession::Io TlsSession::Write(const char* data, size_t size, size_t* written) {
  *written = 0;
  while (*written < size) {
    const size_t chunk = std::min<size_t>(size - *written, 1 << 20);
    const int n = SSL_write(ssl_, data + *written, static_cast<int>(chunk));
    if (n <= 0) return Classify(ssl_, n);
    *written += static_cast<size_t>(n);
  }
  return Io::kDone;
}

bool TlsSession::handshake_done() const { return SSL_is_init_finished(ssl_) == 1; }

std::string TlsSession::PeerIdentity() const {
  X509* cert = SSL_get1_peer_certificate(ssl_);
  if (cert == nullptr) return "";
  std::string identity;
  if (auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr))) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names) && identity.empty(); ++i) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
      if (name->type == GEN_DNS || name->type == GEN_URI) {
        const ASN1_STRING* s = name->type == GEN_DNS ? name->d.dNSName : name->d.uniformResourceIdentifier;
        identity.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), ASN1_STRING_length(s));
      }
    }
    GENERAL_NAMES_free(names);
  }
  if (identity.empty()) {
    char cn[256] = {0};
    if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn)) > 0) identity = cn;
  }
  X509_free(cert);
  return identity;
}

}  // namespace crossreg::server
