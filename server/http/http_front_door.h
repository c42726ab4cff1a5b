// The OpenAI-compatible HTTP front door (--http_port): POST /v1/completions and
// /v1/chat/completions (JSON, or server-sent events with "stream": true), GET
// /v1/models and GET /health, on the same scheduler as the gRPC API, with the same
// request rules, bearer tokens, TLS files, per-client stream limits and metrics.
// Served by crossreg's event-driven HTTP server (server/http/http_server.h), where a
// connection costs no thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "scheduler/scheduler.h"
#include "server/chat/chat_formatter.h"
#include "server/request_from_proto.h"
#include "server/security/client_stream_limiter.h"
#include "server/security/server_credentials.h"
#include "server/security/token_authenticator.h"
#include "server/server_metrics.h"

namespace crossreg::server {

struct HttpFrontDoorOptions {
  std::string host = "0.0.0.0";
  int port = 0;                 // 0: any free port (see port())
  int workers = 4;              // threads turning requests and events into replies; connections cost none
  size_t max_body_bytes = 4 << 20;
  double header_timeout_s = 10;  // a request's headers must all arrive within this
  double body_timeout_s = 30;    // ... and its body within this after them
  size_t max_connections = 4096;
  size_t max_connections_per_client = 512;  // per IP address
  bool ignore_unknown_fields = false;       // unknown JSON fields ignored instead of refused
  TlsFiles tls;                 // empty: plain HTTP
  std::string served_model_name;  // what /v1/models lists and "model" may name
  int64_t context_length = 0;
  // The model's chat template; null: chat requests are refused, saying why.
  std::shared_ptr<const chat::ChatFormatter> chat;
  std::string chat_refusal = "this model has no chat template; use /v1/completions with a prompt";
  // Shared with the gRPC service; must outlive the front door.
  Scheduler* scheduler = nullptr;
  DecodingEnvironment env;
  RequestDefaults defaults;
  const TokenAuthenticator* tokens = nullptr;
  ClientStreamLimiter* stream_limiter = nullptr;
  ServerMetrics* metrics = nullptr;           // may be null
  const std::atomic<bool>* draining = nullptr;  // true: new requests get 503
};

class HttpFrontDoor {
 public:
  explicit HttpFrontDoor(HttpFrontDoorOptions options);
  ~HttpFrontDoor();  // stops and joins

  // Checks the TLS files, binds host:port and serves on threads of its own.
  absl::Status Start();
  // Stops accepting; requests in flight are cut (call after the scheduler drained).
  void Stop();
  int port() const;
  // The chat template in one line ("jinja, tools in the template, ..."), or "none".
  std::string ChatDescription() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace crossreg::server
