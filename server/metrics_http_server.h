// GET /metrics over HTTP, serving a prometheus-cpp registry in the text exposition
// format, plus plain-HTTP probes: GET /health (200 while the process serves) and
// GET /ready (200 when ready for traffic, else 503) for Kubernetes httpGet probes,
// which, unlike its gRPC probes, keep working when the gRPC port serves TLS. On cpp-httplib (the same library as the OpenAI front door) instead of
// prometheus-cpp's civetweb exposer, for two reasons:
//  * idle or slow connections cannot block a scrape: a pool of worker threads, and
//    read/write timeouts that close a connection that sends nothing (civetweb's default
//    two threads were held by two half-open sockets, freezing every scrape);
//  * civetweb starts its threads with a 100 KB stack, which cannot hold the static TLS
//    of a process that links cuBLAS: in the CUDA build the exposer failed to start.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "prometheus/registry.h"

namespace httplib {
class Server;
}

namespace crossreg::server {

struct MetricsHttpOptions {
  int threads = 4;               // concurrent connections served; more wait in the accept queue
  double read_timeout_s = 2.0;   // a connection that sends no complete request in this long is closed
  double write_timeout_s = 5.0;
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
  int port() const { return port_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  MetricsHttpOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace crossreg::server
