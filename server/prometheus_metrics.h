// The scheduler's MetricsSink as Prometheus metrics (prometheus-cpp), exposed as
// text on GET /metrics of their own port. Every metric is named crossreg_* and its
// HELP text is its definition; docs/api.md lists them.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "scheduler/scheduler.h"
#include "server/metrics_http_server.h"

namespace crossreg::server {

class PrometheusMetrics final : public MetricsSink {
 public:
  PrometheusMetrics();
  ~PrometheusMetrics() override;

  // Starts GET /metrics on host:port (server/metrics_http_server.h); UNAVAILABLE if it
  // cannot bind.
  absl::Status Serve(const std::string& host, int port);

  void OnForward(int rows, double seconds) override;
  void OnTokensCommitted(DecodingMode mode, int tokens, double seconds_since_last) override;
  void OnRequestFinished(DecodingMode mode, const RequestEvent& finished) override;
  void OnQueueState(const QueueState& state) override;

  // "1", "2-4", "5-8", ..., "129+": the forward_duration_seconds{rows} label.
  static std::string RowsBucketLabel(int rows);

 private:
  // Decode rate of recent finished requests, per mode, for the speedup gauge.
  void RecordDecodeRate(DecodingMode mode, const RequestEvent& finished);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<MetricsHttpServer> http_;

  prometheus::Counter* num_drafts_ = nullptr;
  prometheus::Counter* num_draft_tokens_ = nullptr;
  prometheus::Counter* num_accepted_tokens_ = nullptr;
  prometheus::Counter* ar_fallback_forwards_ = nullptr;
  prometheus::Family<prometheus::Counter>* accepted_per_pos_ = nullptr;
  prometheus::Family<prometheus::Histogram>* tokens_per_forward_ = nullptr;
  prometheus::Histogram* time_to_first_token_ = nullptr;
  prometheus::Histogram* inter_token_latency_ = nullptr;
  prometheus::Histogram* e2e_latency_ = nullptr;
  prometheus::Histogram* queue_time_ = nullptr;
  prometheus::Gauge* running_ = nullptr;
  prometheus::Gauge* waiting_ = nullptr;
  prometheus::Gauge* preempted_ = nullptr;
  prometheus::Gauge* kv_usage_ = nullptr;
  prometheus::Family<prometheus::Histogram>* forward_duration_ = nullptr;
  prometheus::Counter* generation_tokens_ = nullptr;
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Family<prometheus::Counter>* request_success_ = nullptr;
  prometheus::Family<prometheus::Gauge>* speedup_ = nullptr;

  std::mutex mu_;  // guards the rate windows (sink calls come from one thread, but cheaply safe)
  std::map<DecodingMode, std::deque<double>> decode_rates_;
};

}  // namespace crossreg::server
