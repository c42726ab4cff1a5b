#include "server/metrics_http_server.h"

#include <httplib.h>

#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace crossreg::server {
namespace {

void SetTimeout(double seconds, const std::function<void(time_t, time_t)>& set) {
  const double whole = std::floor(seconds);
  set(static_cast<time_t>(whole), static_cast<time_t>((seconds - whole) * 1e6));
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(std::shared_ptr<prometheus::Registry> registry, const MetricsHttpOptions& options)
    : registry_(std::move(registry)), options_(options), http_(std::make_unique<httplib::Server>()) {
  const int threads = std::max(1, options_.threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  SetTimeout(options_.read_timeout_s, [this](time_t s, time_t us) { http_->set_read_timeout(s, us); });
  SetTimeout(options_.write_timeout_s, [this](time_t s, time_t us) { http_->set_write_timeout(s, us); });
  // A scraper reconnects every interval anyway; holding idle keep-alive connections
  // only ties up workers.
  http_->set_keep_alive_max_count(1);
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    std::ostringstream text;
    prometheus::TextSerializer().Serialize(text, registry_->Collect());
    response.set_content(text.str(), "text/plain; version=0.0.4; charset=utf-8");
  });
  http_->Get("/health", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok\n", "text/plain");
  });
  http_->Get("/ready", [this](const httplib::Request&, httplib::Response& response) {
    const bool ready = !options_.ready || options_.ready();
    response.status = ready ? 200 : 503;
    response.set_content(ready ? "ready\n" : "not ready (loading or draining)\n", "text/plain");
  });
  http_->Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("crossreg metrics: GET /metrics; probes: GET /health, GET /ready\n", "text/plain");
  });
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::Status MetricsHttpServer::Start(const std::string& host, int port) {
  // IPv6 literals come bracketed in a host:port address; httplib wants them bare.
  std::string bind_host = host;
  if (bind_host.size() > 2 && bind_host.front() == '[' && bind_host.back() == ']') {
    bind_host = bind_host.substr(1, bind_host.size() - 2);
  }
  port_ = port == 0 ? http_->bind_to_any_port(bind_host) : (http_->bind_to_port(bind_host, port) ? port : -1);
  if (port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("metrics endpoint ", host, ":", port, ": cannot bind (in use?)"));
  }
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return absl::OkStatus();
}

void MetricsHttpServer::Stop() {
  if (http_ != nullptr) http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace crossreg::server
