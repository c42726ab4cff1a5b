#include "server/prometheus_metrics.h"

#include <exception>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace crossreg::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using Buckets = prometheus::Histogram::BucketBoundaries;

// Requests per mode whose decode rate the speedup gauge averages.
constexpr size_t kSpeedupWindow = 64;

const Buckets kLatencyBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                 1,     2.5,    5,     10,   20,    40,   80,  160, 320};
const Buckets kInterTokenBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                    0.1,    0.15,  0.2,    0.3,   0.5,  0.75, 1.0,  2.5};
const Buckets kForwardBuckets = {0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                 0.05,   0.1,    0.2,   0.5,   1,     2,    5};
const Buckets kTokensPerForwardBuckets = {1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64};

}  // namespace

std::string PrometheusMetrics::RowsBucketLabel(int rows) {
  if (rows <= 1) return "1";
  int lo = 2, hi = 4;
  while (hi < 128) {
    if (rows <= hi) return absl::StrCat(lo, "-", hi);
    lo = hi + 1;
    hi *= 2;
  }
  if (rows <= hi) return absl::StrCat(lo, "-", hi);
  return absl::StrCat(hi + 1, "+");
}

PrometheusMetrics::PrometheusMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  num_drafts_ = &BuildCounter()
                     .Name("crossreg_spec_decode_num_drafts_total")
                     .Help("Draft verifications: decode forwards of finished requests in a speculative mode "
                           "(lossless, lossy, ngram); each verifies one draft. Mean acceptance length = "
                           "1 + num_accepted_tokens / num_drafts = tokens per forward.")
                     .Register(r)
                     .Add({});
  num_draft_tokens_ = &BuildCounter()
                           .Name("crossreg_spec_decode_num_draft_tokens_total")
                           .Help("Draft tokens tested by verification, summed over finished requests.")
                           .Register(r)
                           .Add({});
  ar_fallback_forwards_ = &BuildCounter()
                              .Name("crossreg_spec_decode_ar_fallback_forwards_total")
                              .Help("Decode forwards of speculative requests that the adaptive draft length "
                                    "(decoding.adaptive_gamma) ran as plain AR because drafting did not pay on the "
                                    "measured cost curve; part of num_drafts.")
                              .Register(r)
                              .Add({});
  num_accepted_tokens_ = &BuildCounter()
                              .Name("crossreg_spec_decode_num_accepted_tokens_total")
                              .Help("Draft tokens accepted by verification, summed over finished requests. "
                                    "Acceptance rate = this / num_draft_tokens.")
                              .Register(r)
                              .Add({});
  accepted_per_pos_ = &BuildCounter()
                           .Name("crossreg_spec_decode_num_accepted_tokens_per_pos_total")
                           .Help("Draft tokens accepted at draft position {position} (1 = first draft after the "
                                 "last committed token), summed over finished requests. Per-position acceptance "
                                 "rate = this / num_drafts.")
                           .Register(r);
  tokens_per_forward_ = &BuildHistogram()
                             .Name("crossreg_tokens_per_forward")
                             .Help("Per finished request: committed tokens / decode forwards (TPF, the paper's "
                                   "acceptance length; 1 for AR), by decoding mode.")
                             .Register(r);
  time_to_first_token_ = &BuildHistogram()
                              .Name("crossreg_time_to_first_token_seconds")
                              .Help("Per finished request: seconds from arrival to its first committed token.")
                              .Register(r)
                              .Add({}, kLatencyBuckets);
  inter_token_latency_ = &BuildHistogram()
                              .Name("crossreg_inter_token_latency_seconds")
                              .Help("Per committed token after a request's first: seconds since that request's "
                                    "previous commit divided by the tokens this commit added (one observation "
                                    "per token).")
                              .Register(r)
                              .Add({}, kInterTokenBuckets);
  e2e_latency_ = &BuildHistogram()
                      .Name("crossreg_e2e_request_latency_seconds")
                      .Help("Per finished request: seconds from arrival to its last token.")
                      .Register(r)
                      .Add({}, kLatencyBuckets);
  queue_time_ = &BuildHistogram()
                     .Name("crossreg_request_queue_time_seconds")
                     .Help("Per finished request: seconds from arrival to admission into the running batch.")
                     .Register(r)
                     .Add({}, kLatencyBuckets);
  running_ = &BuildGauge()
                  .Name("crossreg_num_requests_running")
                  .Help("Requests admitted and decoding (holding KV blocks), after the last scheduler step.")
                  .Register(r)
                  .Add({});
  waiting_ = &BuildGauge()
                  .Name("crossreg_num_requests_waiting")
                  .Help("Requests queued and never admitted yet (at most --max_queue), after the last scheduler "
                        "step.")
                  .Register(r)
                  .Add({});
  preempted_ = &BuildGauge()
                    .Name("crossreg_num_requests_preempted")
                    .Help("Requests sent back from the running batch to free KV blocks, waiting to resume (they "
                          "resume before new requests), after the last scheduler step.")
                    .Register(r)
                    .Add({});
  kv_usage_ = &BuildGauge()
                   .Name("crossreg_kv_cache_usage_perc")
                   .Help("Fraction of KV cache blocks in use, 0 to 1 (1 = full), after the last scheduler step.")
                   .Register(r)
                   .Add({});
  forward_duration_ = &BuildHistogram()
                           .Name("crossreg_forward_duration_seconds")
                           .Help("Seconds of one engine forward, labelled by its row count (prefill + decode + "
                                 "draft rows) in buckets {rows}=1, 2-4, 5-8, ..., 65-128, 129+: the measured cost "
                                 "curve T(rows) that decides speculative speedup.")
                           .Register(r);
  generation_tokens_ = &BuildCounter()
                            .Name("crossreg_generation_tokens_total")
                            .Help("Tokens committed (generated) across all requests, as they are committed.")
                            .Register(r)
                            .Add({});
  prompt_tokens_ = &BuildCounter()
                        .Name("crossreg_prompt_tokens_total")
                        .Help("Prompt tokens of finished requests.")
                        .Register(r)
                        .Add({});
  request_success_ = &BuildCounter()
                          .Name("crossreg_request_success_total")
                          .Help("Requests that finished normally, by {finish_reason} (stop = EOS or a stop token, "
                                "length = max_tokens, context = the model's context length).")
                          .Register(r);
  speedup_ = &BuildGauge()
                  .Name("crossreg_speedup_vs_ar")
                  .Help("Measured speedup of {mode} over AR on this server: mean decode rate of the last 64 "
                        "finished requests of the mode divided by that of the last 64 finished AR requests. "
                        "A request's decode rate = (completion tokens - 1) / (total - time to first token) "
                        "seconds. 0 until both have a finished request with two or more tokens.")
                  .Register(r);
}

PrometheusMetrics::~PrometheusMetrics() = default;

absl::Status PrometheusMetrics::Serve(const std::string& host, int port) {
  http_ = std::make_unique<MetricsHttpServer>(registry_);
  return http_->Start(host, port);
}

void PrometheusMetrics::OnForward(int rows, double seconds) {
  forward_duration_->Add({{"rows", RowsBucketLabel(rows)}}, kForwardBuckets).Observe(seconds);
}

void PrometheusMetrics::OnTokensCommitted(DecodingMode mode, int tokens, double seconds_since_last) {
  if (tokens <= 0) return;
  generation_tokens_->Increment(tokens);
  const double per_token = seconds_since_last / tokens;
  for (int i = 0; i < tokens; ++i) inter_token_latency_->Observe(per_token);
}

void PrometheusMetrics::OnRequestFinished(DecodingMode mode, const RequestEvent& finished) {
  const SpeculativeStats& s = finished.stats;
  if (mode != DecodingMode::kAutoregressive) {
    num_drafts_->Increment(static_cast<double>(s.forwards));
    num_draft_tokens_->Increment(static_cast<double>(s.drafted));
    num_accepted_tokens_->Increment(static_cast<double>(s.accepted));
    ar_fallback_forwards_->Increment(static_cast<double>(s.ar_forwards));
    for (size_t k = 0; k < s.accepted_per_position.size(); ++k) {
      if (s.accepted_per_position[k] == 0) continue;
      accepted_per_pos_->Add({{"position", absl::StrCat(k + 1)}}).Increment(static_cast<double>(s.accepted_per_position[k]));
    }
  }
  if (s.forwards > 0) {
    tokens_per_forward_->Add({{"mode", DecodingModeName(mode)}}, kTokensPerForwardBuckets).Observe(s.tokens_per_forward());
  }
  time_to_first_token_->Observe(finished.timings.time_to_first_token);
  e2e_latency_->Observe(finished.timings.total_seconds);
  queue_time_->Observe(finished.timings.queue_seconds);
  prompt_tokens_->Increment(static_cast<double>(finished.prompt_tokens));
  request_success_->Add({{"finish_reason", FinishReasonName(finished.finish_reason)}}).Increment();
  RecordDecodeRate(mode, finished);
}

void PrometheusMetrics::RecordDecodeRate(DecodingMode mode, const RequestEvent& finished) {
  const double decode_seconds = finished.timings.total_seconds - finished.timings.time_to_first_token;
  if (finished.stats.committed < 2 || decode_seconds <= 0) return;
  const double rate = static_cast<double>(finished.stats.committed - 1) / decode_seconds;
  std::lock_guard<std::mutex> lock(mu_);
  auto& window = decode_rates_[mode];
  window.push_back(rate);
  if (window.size() > kSpeedupWindow) window.pop_front();
  auto mean = [](const std::deque<double>& w) { return std::accumulate(w.begin(), w.end(), 0.0) / w.size(); };
  auto ar = decode_rates_.find(DecodingMode::kAutoregressive);
  if (ar == decode_rates_.end() || ar->second.empty()) return;
  const double ar_rate = mean(ar->second);
  for (const auto& [m, w] : decode_rates_) {
    if (m == DecodingMode::kAutoregressive || w.empty()) continue;
    speedup_->Add({{"mode", DecodingModeName(m)}}).Set(mean(w) / ar_rate);
  }
}

void PrometheusMetrics::OnQueueState(const QueueState& state) {
  running_->Set(state.running);
  waiting_->Set(state.waiting);
  preempted_->Set(state.preempted);
  kv_usage_->Set(state.kv_usage);
}

}  // namespace crossreg::server
