// GET /metrics over HTTP, serving a prometheus-cpp registry in the text exposition
// format, plus plain-HTTP probes: GET /health (200 while the process serves) and
// GET /ready (200 when ready for traffic, else 503) for Kubernetes httpGet probes,
// which, unlike its gRPC probes, keep working when the gRPC port serves TLS. Served by
// the same event-driven server as the OpenAI front door (server/http/http_server.h),
// with the registry serialised here, instead of prometheus-cpp's civetweb exposer:
//  * slow or idle connections cost no thread, so they cannot block a scrape
//    (half-open sockets can hold civetweb's few threads, freezing every scrape);
//  * civetweb starts its threads with a 100 KB stack, which cannot hold the static TLS
//    of a process that links cuBLAS: in the CUDA build the exposer fails to start.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "prometheus/registry.h"
#include "server/http/http_server.h"

namespace crossreg::server {

struct MetricsHttpOptions {
  int threads = 2;               // workers serialising scrapes; connections cost none
  double read_timeout_s = 2.0;   // a connection that sends no complete request in this long is closed
  double write_timeout_s = 5.0;
  size_t max_connections = 1024;
  // GET /ready answers 200 when it returns true; null: /ready is always 200.
  std::function<bool()> ready;
};

class MetricsHttpServer {
 public:
  MetricsHttpServer(std::shared_ptr<prometheus::Registry> registry, const MetricsHttpOptions& options = {});
  ~MetricsHttpServer();  // stops and joins

  // Binds host:port (port 0: any free port, see port()) and serves on a thread of its
  // own. UNAVAILABLE naming the address when it cannot bind.
  absl::Status Start(const std::string& host, int port);
  void Stop();
  int port() const;

 private:
  void Handle(HttpExchange& exchange) const;

  std::shared_ptr<prometheus::Registry> registry_;
  MetricsHttpOptions options_;
  std::unique_ptr<HttpServer> http_;
};

}  // namespace crossreg::server
