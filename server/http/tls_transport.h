// TLS for the event-driven HTTP server: one SSL_CTX from the same files and checks as
// gRPC's credentials, and non-blocking reads and writes that report "try again when
// readable/writable" instead of blocking (the I/O thread serves every connection).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/security/server_credentials.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace crossreg::server {

class TlsContext {
 public:
  // INVALID_ARGUMENT naming the file when the certificate, key or CA cannot be used.
  static absl::StatusOr<std::unique_ptr<TlsContext>> Create(const TlsFiles& files);
  ~TlsContext();
  SSL_CTX* get() const { return ctx_; }

 private:
  explicit TlsContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

// One connection's TLS session over a non-blocking socket.
class TlsSession {
 public:
  enum class Io { kDone, kWantRead, kWantWrite, kClosed, kError };

  TlsSession(const TlsContext& context, int fd);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Reads what is available (the handshake first) into `out`; kWantRead/kWantWrite
  // when it would block, kClosed at the peer's close, kError on a TLS error.
  Io Read(std::string* out);
  // Writes from `data`; `*written` bytes were taken.
  Io Write(const char* data, size_t size, size_t* written);
  bool handshake_done() const;
  // The verified client certificate's identity, empty without one.
  std::string PeerIdentity() const;

 private:
  SSL* ssl_;
};

}  // namespace crossreg::server
