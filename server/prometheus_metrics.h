// The scheduler's MetricsSink and the server's own events as Prometheus metrics
// (prometheus-cpp), exposed as text on GET /metrics of their own port. Every metric
// is named crossreg_*, follows vLLM's names where vLLM has one, and its HELP text is
// its definition; docs/metrics.md lists them with the PromQL the dashboard uses.
#pragma once

#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "scheduler/scheduler.h"
#include "scheduler/speedup_accounting.h"
#include "server/metrics_http_server.h"
#include "server/server_metrics.h"

namespace crossreg::server {

// What the info metric crossreg_model_info carries.
struct ModelInfoLabels {
  std::string model_name;  // the model's directory or file name
  std::string backend;     // "cpu", "cuda"
  std::string device;      // what the backend runs on
  std::string adapter;     // the adapter's directory name, or "none"
};

class PrometheusMetrics final : public MetricsSink, public ServerMetrics {
 public:
  explicit PrometheusMetrics(const ModelInfoLabels& info = {});
  ~PrometheusMetrics() override;

  // Starts GET /metrics (and /health, /ready) on host:port
  // (server/metrics_http_server.h); UNAVAILABLE if it cannot bind.
  absl::Status Serve(const std::string& host, int port, std::function<bool()> ready = nullptr);

  // MetricsSink (the scheduler thread).
  void OnForward(const ForwardReport& forward) override;
  void OnTokensCommitted(DecodingMode mode, int tokens, double seconds_since_last) override;
  void OnRequestFinished(DecodingMode mode, const RequestEvent& finished) override;
  void OnQueueState(const QueueState& state) override;

  // ServerMetrics (gRPC threads).
  void OnRequestEnded(DecodingMode mode, RequestEndReason reason) override;
  void OnGrpcCall(const std::string& method, int code) override;
  void OnHttpCall(const std::string& route, int status) override;
  void OnHttpConnectionRefused(const char* limit) override;

  // "1", "2-4", "5-8", ..., "129+": the forward_duration_seconds{rows} label.
  static std::string RowsBucketLabel(int rows);

  // The speedup of `mode` over the last `window` of forwards (what the gauge shows);
  // 0 when the mode ran no decode step in it. For tests and logs.
  double RecentSpeedup(DecodingMode mode) const;

 private:
  // The constructor's parts: the metric families by subject, then every known series
  // at 0 (so that rates and the dashboard's queries resolve before the first event).
  void RegisterSpeculativeFamilies();
  void RegisterLatencyFamilies();
  void RegisterQueueFamilies();
  void RegisterForwardFamilies();
  void RegisterRequestFamilies();
  void StartKnownSeriesAtZero();
  // Per-mode charges of the speedup accounting in one-second buckets, for the gauge.
  struct SpeedupBucket {
    int64_t second = 0;
    std::array<ModeSeconds, kNumDecodingModes> modes{};
  };
  void UpdateSpeedupGauges(const std::array<ModeSeconds, kNumDecodingModes>& charges);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<MetricsHttpServer> http_;

  prometheus::Family<prometheus::Counter>* num_drafts_ = nullptr;
  prometheus::Family<prometheus::Counter>* num_draft_tokens_ = nullptr;
  prometheus::Family<prometheus::Counter>* num_accepted_tokens_ = nullptr;
  prometheus::Family<prometheus::Counter>* ar_fallback_forwards_ = nullptr;
  prometheus::Family<prometheus::Counter>* accepted_per_pos_ = nullptr;
  prometheus::Family<prometheus::Counter>* draft_tokens_per_pos_ = nullptr;
  prometheus::Family<prometheus::Histogram>* tokens_per_forward_ = nullptr;
  prometheus::Histogram* time_to_first_token_ = nullptr;
  prometheus::Histogram* inter_token_latency_ = nullptr;
  prometheus::Histogram* e2e_latency_ = nullptr;
  prometheus::Histogram* queue_time_ = nullptr;
  prometheus::Gauge* running_ = nullptr;
  prometheus::Gauge* waiting_ = nullptr;
  prometheus::Gauge* preempted_ = nullptr;
  prometheus::Gauge* kv_usage_ = nullptr;
  prometheus::Counter* preemptions_ = nullptr;
  prometheus::Gauge* kv_cached_blocks_ = nullptr;
  prometheus::Gauge* kv_evictable_blocks_ = nullptr;
  prometheus::Counter* prefix_cache_queries_ = nullptr;
  prometheus::Counter* prefix_cache_hits_ = nullptr;
  prometheus::Family<prometheus::Histogram>* forward_duration_ = nullptr;
  prometheus::Family<prometheus::Counter>* step_seconds_ = nullptr;
  prometheus::Family<prometheus::Counter>* generation_tokens_ = nullptr;
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Family<prometheus::Counter>* request_success_ = nullptr;
  prometheus::Family<prometheus::Counter>* requests_ended_ = nullptr;
  prometheus::Family<prometheus::Counter>* grpc_requests_ = nullptr;
  prometheus::Family<prometheus::Counter>* http_requests_ = nullptr;
  prometheus::Family<prometheus::Counter>* http_connections_refused_ = nullptr;
  prometheus::Family<prometheus::Counter>* decode_seconds_ = nullptr;
  prometheus::Family<prometheus::Counter>* ar_equivalent_seconds_ = nullptr;
  prometheus::Family<prometheus::Gauge>* speedup_ = nullptr;
  prometheus::Family<prometheus::Gauge>* forward_cost_ = nullptr;
  prometheus::Family<prometheus::Gauge>* cost_curve_scale_ = nullptr;

  // Scheduler thread only.
  SpeedupAccounting speedup_accounting_;
  int64_t preemptions_seen_ = 0;
  int64_t prefix_cache_queries_seen_ = 0;
  int64_t prefix_cache_hits_seen_ = 0;

  mutable std::mutex speedup_mu_;  // the window, read by RecentSpeedup
  std::deque<SpeedupBucket> speedup_window_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace crossreg::server
