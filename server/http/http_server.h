// An event-driven HTTP/1.1 server (epoll, one I/O thread, optional TLS through
// OpenSSL) under the OpenAI front door and the /metrics endpoint.
//
// Why its own and not a library: a connection must cost a file descriptor and a few
// kilobytes, never a thread, so that slow or idle clients cannot starve the others
// (thread-per-connection servers lose every worker to a few hundred slow senders);
// deadlines must bound a whole request, not each read; framing must be strict
// (server/http/http_request_parser.h) and the parser fuzzed. Debian's choices were
// Boost.Beast (a large dependency for one loop) and libevent's evhttp (lenient
// framing, per-read timeouts); the loop here is a few hundred lines over the parser.
//
// Threads: the I/O thread reads, parses, writes and enforces deadlines; handlers run
// on a small worker pool and answer through their HttpExchange from any thread, at
// any later time (a streaming generation answers from the scheduler's events).
// Pipelined requests on one connection are answered in order, one at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/http/http_request_parser.h"
#include "server/security/server_credentials.h"

namespace crossreg::server {

struct HttpServerOptions {
  std::string name = "HTTP";   // in errors and logs ("--http_port", "metrics endpoint")
  std::string host = "0.0.0.0";
  int port = 0;                // 0: any free port (see HttpServer::port())
  TlsFiles tls;                // empty: plain HTTP
  int workers = 4;             // threads running handlers (they must not block)
  HttpParserLimits limits;
  // Deadlines, each for a whole phase rather than each read: a client that trickles
  // bytes cannot stretch them.
  double header_timeout_s = 10;   // accept (or the first byte of a later request) to the end of the headers,
                                  // the TLS handshake included
  double body_timeout_s = 30;     // end of the headers to the end of the body
  double idle_timeout_s = 60;     // a keep-alive connection between requests
  double write_timeout_s = 30;    // a response that makes no write progress for this long is cut
  size_t max_connections = 4096;            // open connections in all; more are refused at accept
  size_t max_connections_per_client = 512;  // open connections from one IP address
  size_t max_buffered_output_bytes = 16 << 20;  // a client reading slower than this far behind is cut
  // Called on the I/O thread for each connection refused at accept for a limit:
  // "total" or "per_client". May be empty.
  std::function<void(const char* limit)> on_refused;
  // The body of the responses the server itself writes (parse errors, refused
  // connections): content type and body for a status and message.
  std::function<std::pair<std::string, std::string>(int status, const std::string& message)> error_body;
};

// One request and its response. Thread-safe; a response is either Respond() once, or
// BeginStream(), Write()... and End(). Calls after the connection closed do nothing.
class HttpExchange {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;
  virtual ~HttpExchange() = default;

  virtual const HttpRequest& request() const = 0;
  virtual const std::string& peer_address() const = 0;  // IP address, without the port
  // The verified client certificate's identity (first DNS/URI subject alternative
  // name, else the common name); empty without mutual TLS.
  virtual const std::string& peer_identity() const = 0;

  virtual void Respond(int status, std::string_view content_type, std::string body, const Headers& headers = {}) = 0;
  virtual void BeginStream(int status, std::string_view content_type, const Headers& headers = {}) = 0;
  virtual void Write(std::string_view data) = 0;
  virtual void End() = 0;

  // True once the client is gone (closed, reset, or cut by a deadline or a limit).
  virtual bool closed() const = 0;
  // Runs once, on a worker, when the connection closes before the response ended; at
  // once (on the caller's thread) when it already has.
  virtual void OnClose(std::function<void()> callback) = 0;
  // The status sent, or 0 before the response began.
  virtual int status() const = 0;
};

using HttpHandler = std::function<void(std::shared_ptr<HttpExchange>)>;

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();  // stops and joins

  // Checks the TLS files, binds host:port and starts the I/O thread and workers.
  absl::Status Start();
  // Stops accepting and closes every connection (exchanges in flight see closed()).
  void Stop();
  int port() const;
  // Runs `task` on a worker (for handlers' continuations). False after Stop().
  bool Post(std::function<void()> task);

  // Open connections now (for tests and metrics).
  size_t connections() const;

  static const char* ReasonPhrase(int status);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace crossreg::server
