#include "server/metrics_http_server.h"

#include <sstream>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace crossreg::server {

MetricsHttpServer::MetricsHttpServer(std::shared_ptr<prometheus::Registry> registry, const MetricsHttpOptions& options)
    : registry_(std::move(registry)), options_(options) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Handle(HttpExchange& exchange) const {
  const HttpRequest& request = exchange.request();
  if (request.method != "GET") {
    exchange.Respond(405, "text/plain", "only GET is served here\n", {{"Allow", "GET"}});
  } else if (request.path == "/metrics") {
    std::ostringstream text;
    prometheus::TextSerializer().Serialize(text, registry_->Collect());
    exchange.Respond(200, "text/plain; version=0.0.4; charset=utf-8", text.str());
  } else if (request.path == "/health") {
    exchange.Respond(200, "text/plain", "ok\n");
  } else if (request.path == "/ready") {
    const bool ready = !options_.ready || options_.ready();
    exchange.Respond(ready ? 200 : 503, "text/plain", ready ? "ready\n" : "not ready (loading or draining)\n");
  } else if (request.path == "/") {
    exchange.Respond(200, "text/plain", "crossreg metrics: GET /metrics; probes: GET /health, GET /ready\n");
  } else {
    exchange.Respond(404, "text/plain", absl::StrCat("no such path: ", request.path, " (GET /metrics)\n"));
  }
}

absl::Status MetricsHttpServer::Start(const std::string& host, int port) {
  HttpServerOptions s;
  s.name = "metrics endpoint";
  s.host = host;
  s.port = port;
  s.workers = options_.threads;
  s.limits.max_body_bytes = 64 << 10;  // probes and scrapes send no body
  s.header_timeout_s = options_.read_timeout_s;
  s.body_timeout_s = options_.read_timeout_s;
  s.idle_timeout_s = 30;  // a scraper's keep-alive connection between scrapes
  s.write_timeout_s = options_.write_timeout_s;
  s.max_connections = options_.max_connections;
  s.max_connections_per_client = options_.max_connections;
  http_ = std::make_unique<HttpServer>(std::move(s), [this](std::shared_ptr<HttpExchange> exchange) {
    Handle(*exchange);
  });
  return http_->Start();
}

void MetricsHttpServer::Stop() {
  if (http_ != nullptr) http_->Stop();
}

int MetricsHttpServer::port() const { return http_ != nullptr ? http_->port() : 0; }

}  // namespace crossreg::server
