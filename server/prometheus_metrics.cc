#include "server/prometheus_metrics.h"

#include <exception>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace crossreg::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using Buckets = prometheus::Histogram::BucketBoundaries;

// The speedup gauge covers the forwards of the last minute.
constexpr int64_t kSpeedupWindowSeconds = 60;

std::string Mode(DecodingMode mode) { return DecodingModeName(mode); }

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

PrometheusMetrics::PrometheusMetrics(const ModelInfoLabels& info)
    : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  BuildGauge()
      .Name("crossreg_model_info")
      .Help("1, with labels saying what this server serves: {model_name} (the model file or directory name), "
            "{backend} (cpu, cuda), {device}, {adapter} (the adapter directory name, or none).")
      .Register(r)
      .Add({{"model_name", info.model_name},
            {"backend", info.backend},
            {"device", info.device},
            {"adapter", info.adapter.empty() ? "none" : info.adapter}})
      .Set(1);
  RegisterSpeculativeFamilies();
  RegisterLatencyFamilies();
  RegisterQueueFamilies();
  RegisterForwardFamilies();
  RegisterRequestFamilies();
  StartKnownSeriesAtZero();
}

void PrometheusMetrics::RegisterSpeculativeFamilies() {
  auto& r = *registry_;
  num_drafts_ = &BuildCounter()
                     .Name("crossreg_spec_decode_num_drafts_total")
                     .Help("Decode forwards of speculative requests (lossless, lossy, ngram) by {mode}, counted as "
                           "each forward runs; each verifies one draft (possibly empty). Mean acceptance length = "
                           "1 + num_accepted_tokens / num_drafts.")
                     .Register(r);
  num_draft_tokens_ = &BuildCounter()
                           .Name("crossreg_spec_decode_num_draft_tokens_total")
                           .Help("Draft tokens verified, by {mode}, counted per forward.")
                           .Register(r);
  num_accepted_tokens_ = &BuildCounter()
                              .Name("crossreg_spec_decode_num_accepted_tokens_total")
                              .Help("Draft tokens accepted by verification, by {mode}, counted per forward. "
                                    "Acceptance rate = this / num_draft_tokens.")
                              .Register(r);
  ar_fallback_forwards_ = &BuildCounter()
                              .Name("crossreg_spec_decode_ar_fallback_forwards_total")
                              .Help("Decode forwards of speculative requests, by {mode}, that the adaptive draft "
                                    "length (decoding.adaptive_gamma) ran as plain AR because drafting did not pay on "
                                    "the cost curve; part of num_drafts.")
                              .Register(r);
  accepted_per_pos_ = &BuildCounter()
                           .Name("crossreg_spec_decode_num_accepted_tokens_per_pos_total")
                           .Help("Draft tokens accepted at 0-based draft {position} (0 = the first draft after the "
                                 "last committed token), by {mode}, counted per forward.")
                           .Register(r);
  draft_tokens_per_pos_ = &BuildCounter()
                               .Name("crossreg_spec_decode_num_draft_tokens_per_pos_total")
                               .Help("Draft tokens verified at 0-based draft {position}, by {mode}. Per-position "
                                     "acceptance rate = num_accepted_tokens_per_pos / this.")
                               .Register(r);
  tokens_per_forward_ = &BuildHistogram()
                             .Name("crossreg_tokens_per_forward")
                             .Help("Per finished request: committed tokens / decode forwards (TPF, the paper's "
                                   "acceptance length; 1 for AR), by {mode}.")
                             .Register(r);
}

void PrometheusMetrics::RegisterLatencyFamilies() {
  auto& r = *registry_;
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
}

void PrometheusMetrics::RegisterQueueFamilies() {
  auto& r = *registry_;
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
  preemptions_ = &BuildCounter()
                      .Name("crossreg_num_preemptions_total")
                      .Help("Preemptions: a running request sent back to the queue (its KV freed, to be "
                            "recomputed) because the KV cache ran out.")
                      .Register(r)
                      .Add({});
  kv_usage_ = &BuildGauge()
                   .Name("crossreg_kv_cache_usage_perc")
                   .Help("Fraction of KV cache blocks held by running requests, 0 to 1 (1 = full), after the last "
                         "scheduler step. Cached blocks no request holds are not counted: they are evicted before "
                         "anyone waits for room.")
                   .Register(r)
                   .Add({});
  kv_cached_blocks_ = &BuildGauge()
                           .Name("crossreg_kv_cache_cached_blocks")
                           .Help("KV blocks in the prefix cache (full blocks of committed tokens, shared by "
                                 "requests with the same prefix), held by running requests or not.")
                           .Register(r)
                           .Add({});
  kv_evictable_blocks_ = &BuildGauge()
                              .Name("crossreg_kv_cache_evictable_blocks")
                              .Help("Of the prefix cache's blocks, those no running request holds: kept for later "
                                    "hits, evicted (least recently used first) when blocks run out.")
                              .Register(r)
                              .Add({});
  prefix_cache_queries_ = &BuildCounter()
                               .Name("crossreg_prefix_cache_queries_total")
                               .Help("Tokens looked up in the prefix cache when requests are admitted (their "
                                     "prompts; a resumed request's generated tokens too).")
                               .Register(r)
                               .Add({});
  prefix_cache_hits_ = &BuildCounter()
                            .Name("crossreg_prefix_cache_hits_total")
                            .Help("Of crossreg_prefix_cache_queries_total, the tokens whose K/V was found cached "
                                  "(not computed again).")
                            .Register(r)
                            .Add({});
}

void PrometheusMetrics::RegisterForwardFamilies() {
  auto& r = *registry_;
  forward_duration_ = &BuildHistogram()
                           .Name("crossreg_forward_duration_seconds")
                           .Help("Seconds of one engine forward, labelled by its row count (prefill + decode + "
                                 "draft rows) in buckets {rows}=1, 2-4, 5-8, ..., 65-128, 129+: the measured cost "
                                 "curve T(rows) that decides speculative speedup.")
                           .Register(r);
  step_seconds_ = &BuildCounter()
                      .Name("crossreg_scheduler_step_seconds_total")
                      .Help("Seconds of the scheduler's steps by {phase}: forward (the engine's forward), "
                            "sequences (each sequence's own planning and applying: choosing its draft length, "
                            "grammar masks, verification, detokenizing, its events) and step (the rest: batch "
                            "planning, preemption, bookkeeping). What speculation costs beyond its rows.")
                      .Register(r);
  for (const char* phase : {"forward", "sequences", "step"}) step_seconds_->Add({{"phase", phase}});
  forward_cost_ = &BuildGauge()
                       .Name("crossreg_forward_cost_seconds")
                       .Help("The server's forward cost model (the startup cost curve calibrated by the forwards "
                             "it runs, which adaptive gamma prices draft rows with) as T(rows) = fixed + per_row x "
                             "rows at the last forward's shape, the split the speedup accounting charges by: "
                             "{term}=fixed or per_row, in seconds.")
                       .Register(r);
  cost_curve_scale_ = &BuildGauge()
                           .Name("crossreg_forward_cost_curve_scale")
                           .Help("How far the startup forward cost curve is off for the forwards this server runs: "
                                 "actual / curve seconds (recent geometric mean), by {kind}=decode (decode-only "
                                 "forwards) or prefill (forwards carrying a prefill chunk); ar_step and "
                                 "drafting_step: whole steps (planning, forward, verification) of one sequence "
                                 "decoding alone over the curve, without and with drafts, once both were seen. "
                                 "Adaptive gamma prices such steps by rows between those two; otherwise it values "
                                 "drafted tokens with the decode scale and shrinks draft rows' margin by a scale "
                                 "below 1.")
                           .Register(r);
}

void PrometheusMetrics::RegisterRequestFamilies() {
  auto& r = *registry_;
  generation_tokens_ = &BuildCounter()
                            .Name("crossreg_generation_tokens_total")
                            .Help("Tokens committed (generated), by {mode}, as they are committed.")
                            .Register(r);
  prompt_tokens_ = &BuildCounter()
                        .Name("crossreg_prompt_tokens_total")
                        .Help("Prompt tokens of finished requests.")
                        .Register(r)
                        .Add({});
  request_success_ = &BuildCounter()
                          .Name("crossreg_request_success_total")
                          .Help("Requests that finished normally, by {finish_reason} (stop = EOS, a stop token or "
                                "a text stop sequence; length = max_tokens; context = the model's context length).")
                          .Register(r);
  requests_ended_ = &BuildCounter()
                         .Name("crossreg_requests_ended_total")
                         .Help("Every submitted request, once, when it ends, by {mode} and {reason}: stop, length, "
                               "context (finished); cancelled (by the client), deadline, aborted (an Abort call), "
                               "disconnected (the stream broke), shutdown (the drain timed out), error.")
                         .Register(r);
  grpc_requests_ = &BuildCounter()
                        .Name("crossreg_grpc_requests_total")
                        .Help("Finished calls of crossreg.v1.Generation by {method} and gRPC status {code} (OK, "
                              "INVALID_ARGUMENT, UNAUTHENTICATED, RESOURCE_EXHAUSTED, ...).")
                        .Register(r);
  http_requests_ = &BuildCounter()
                        .Name("crossreg_http_requests_total")
                        .Help("Finished requests of the OpenAI-compatible HTTP front door by {route} "
                              "(/v1/completions, /v1/chat/completions, /v1/models) and HTTP {status}.")
                        .Register(r);
  http_connections_refused_ = &BuildCounter()
                                   .Name("crossreg_http_connections_refused_total")
                                   .Help("Connections the HTTP front door refused at accept (plain HTTP with a 503, "
                                         "TLS closed) for a connection {limit}: total (--http_max_connections) or "
                                         "per_client (--http_max_connections_per_client).")
                                   .Register(r);
  decode_seconds_ = &BuildCounter()
                         .Name("crossreg_decode_seconds_total")
                         .Help("Forward seconds charged to the decode steps of {mode}: each forward's measured time "
                               "split among its sequences by the cost model (an equal share of the fixed part, "
                               "per_row for each row added). docs/metrics.md.")
                         .Register(r);
  ar_equivalent_seconds_ = &BuildCounter()
                                .Name("crossreg_decode_ar_equivalent_seconds_total")
                                .Help("Seconds AR would have needed for the tokens {mode} committed, at the batch "
                                      "sizes it ran: per token, one row and an equal share of the fixed cost. "
                                      "Speedup over AR = rate(this) / rate(crossreg_decode_seconds_total).")
                                .Register(r);
  speedup_ = &BuildGauge()
                  .Name("crossreg_speedup_vs_ar")
                  .Help("Speedup of {mode} over AR on this server over the last 60 s: AR-equivalent seconds / "
                        "charged decode seconds (docs/metrics.md). Below 1: the mode was slower than AR would "
                        "have been. 1 for ar; absent until the mode ran.")
                  .Register(r);
}

void PrometheusMetrics::StartKnownSeriesAtZero() {
  // Every known series starts at 0, so that rates and ratios are defined (and the
  // dashboard's queries resolve) before the first event of its kind.
  for (DecodingMode mode : {DecodingMode::kAutoregressive, DecodingMode::kLossless, DecodingMode::kLossy,
                            DecodingMode::kNgram}) {
    const std::string m = Mode(mode);
    generation_tokens_->Add({{"mode", m}});
    decode_seconds_->Add({{"mode", m}});
    ar_equivalent_seconds_->Add({{"mode", m}});
    for (int r = 0; r < kNumRequestEndReasons; ++r) {
      requests_ended_->Add({{"mode", m}, {"reason", RequestEndReasonName(static_cast<RequestEndReason>(r))}});
    }
    if (mode == DecodingMode::kAutoregressive) continue;
    num_drafts_->Add({{"mode", m}});
    num_draft_tokens_->Add({{"mode", m}});
    num_accepted_tokens_->Add({{"mode", m}});
    ar_fallback_forwards_->Add({{"mode", m}});
  }
  forward_cost_->Add({{"term", "fixed"}});
  forward_cost_->Add({{"term", "per_row"}});
}

PrometheusMetrics::~PrometheusMetrics() = default;

absl::Status PrometheusMetrics::Serve(const std::string& host, int port, std::function<bool()> ready) {
  MetricsHttpOptions options;
  options.ready = std::move(ready);
  http_ = std::make_unique<MetricsHttpServer>(registry_, options);
  return http_->Start(host, port);
}

void PrometheusMetrics::OnForward(const ForwardReport& forward) {
  forward_duration_->Add({{"rows", RowsBucketLabel(forward.rows)}}, kForwardBuckets).Observe(forward.seconds);
  double sequences = 0;
  for (const SequenceForward& s : forward.sequences) sequences += s.cpu_seconds;
  step_seconds_->Add({{"phase", "forward"}}).Increment(forward.seconds);
  step_seconds_->Add({{"phase", "sequences"}}).Increment(sequences);
  step_seconds_->Add({{"phase", "step"}}).Increment(std::max(0.0, forward.step_seconds - forward.seconds - sequences));
  for (const SequenceForward& s : forward.sequences) {
    if (!s.speculative) continue;
    const std::string mode = Mode(s.mode);
    num_drafts_->Add({{"mode", mode}}).Increment();
    if (s.ar_fallback) ar_fallback_forwards_->Add({{"mode", mode}}).Increment();
    num_draft_tokens_->Add({{"mode", mode}}).Increment(s.drafted);
    num_accepted_tokens_->Add({{"mode", mode}}).Increment(s.accepted);
    for (size_t k = 0; k < s.drafted_at.size(); ++k) {
      const std::string position = absl::StrCat(k);
      draft_tokens_per_pos_->Add({{"mode", mode}, {"position", position}}).Increment(s.drafted_at[k]);
      // Every reached position gets a series, so rates divide cleanly even at 0 accepted.
      accepted_per_pos_->Add({{"mode", mode}, {"position", position}}).Increment(s.accepted_at[k]);
    }
  }
  std::array<ModeSeconds, kNumDecodingModes> charges;
  speedup_accounting_.OnForward(forward, &charges);
  for (int m = 0; m < kNumDecodingModes; ++m) {
    if (charges[m].actual <= 0 && charges[m].ar_equivalent <= 0) continue;
    const std::string mode = Mode(static_cast<DecodingMode>(m));
    decode_seconds_->Add({{"mode", mode}}).Increment(charges[m].actual);
    ar_equivalent_seconds_->Add({{"mode", mode}}).Increment(charges[m].ar_equivalent);
  }
  forward_cost_->Add({{"term", "fixed"}}).Set(forward.fixed_seconds);
  forward_cost_->Add({{"term", "per_row"}}).Set(forward.per_row_seconds);
  cost_curve_scale_->Add({{"kind", "decode"}}).Set(forward.decode_cost_scale);
  cost_curve_scale_->Add({{"kind", "prefill"}}).Set(forward.prefill_cost_scale);
  if (forward.ar_step_scale > 0) {
    cost_curve_scale_->Add({{"kind", "ar_step"}}).Set(forward.ar_step_scale);
    cost_curve_scale_->Add({{"kind", "drafting_step"}}).Set(forward.drafting_step_scale);
  }
  UpdateSpeedupGauges(charges);
}

void PrometheusMetrics::UpdateSpeedupGauges(const std::array<ModeSeconds, kNumDecodingModes>& charges) {
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start_).count();
  std::array<ModeSeconds, kNumDecodingModes> sums{};
  {
    std::lock_guard<std::mutex> lock(speedup_mu_);
    if (speedup_window_.empty() || speedup_window_.back().second != now) speedup_window_.push_back({now, {}});
    for (int m = 0; m < kNumDecodingModes; ++m) {
      speedup_window_.back().modes[m].actual += charges[m].actual;
      speedup_window_.back().modes[m].ar_equivalent += charges[m].ar_equivalent;
    }
    while (!speedup_window_.empty() && speedup_window_.front().second <= now - kSpeedupWindowSeconds) {
      speedup_window_.pop_front();
    }
    for (const SpeedupBucket& b : speedup_window_) {
      for (int m = 0; m < kNumDecodingModes; ++m) {
        sums[m].actual += b.modes[m].actual;
        sums[m].ar_equivalent += b.modes[m].ar_equivalent;
      }
    }
  }
  for (int m = 0; m < kNumDecodingModes; ++m) {
    if (sums[m].actual <= 0) continue;
    speedup_->Add({{"mode", Mode(static_cast<DecodingMode>(m))}}).Set(sums[m].ar_equivalent / sums[m].actual);
  }
}

double PrometheusMetrics::RecentSpeedup(DecodingMode mode) const {
  std::lock_guard<std::mutex> lock(speedup_mu_);
  ModeSeconds sum;
  for (const SpeedupBucket& b : speedup_window_) {
    sum.actual += b.modes[static_cast<size_t>(mode)].actual;
    sum.ar_equivalent += b.modes[static_cast<size_t>(mode)].ar_equivalent;
  }
  return sum.actual > 0 ? sum.ar_equivalent / sum.actual : 0.0;
}

void PrometheusMetrics::OnTokensCommitted(DecodingMode mode, int tokens, double seconds_since_last) {
  if (tokens <= 0) return;
  generation_tokens_->Add({{"mode", Mode(mode)}}).Increment(tokens);
  const double per_token = seconds_since_last / tokens;
  for (int i = 0; i < tokens; ++i) inter_token_latency_->Observe(per_token);
}

void PrometheusMetrics::OnRequestFinished(DecodingMode mode, const RequestEvent& finished) {
  const SpeculativeStats& s = finished.stats;
  if (s.forwards > 0) {
    tokens_per_forward_->Add({{"mode", Mode(mode)}}, kTokensPerForwardBuckets).Observe(s.tokens_per_forward());
  }
  time_to_first_token_->Observe(finished.timings.time_to_first_token);
  e2e_latency_->Observe(finished.timings.total_seconds);
  queue_time_->Observe(finished.timings.queue_seconds);
  prompt_tokens_->Increment(static_cast<double>(finished.prompt_tokens));
  request_success_->Add({{"finish_reason", FinishReasonName(finished.finish_reason)}}).Increment();
}

void PrometheusMetrics::OnQueueState(const QueueState& state) {
  running_->Set(state.running);
  waiting_->Set(state.waiting);
  preempted_->Set(state.preempted);
  kv_usage_->Set(state.kv_usage);
  if (state.preemptions > preemptions_seen_) {
    preemptions_->Increment(static_cast<double>(state.preemptions - preemptions_seen_));
    preemptions_seen_ = state.preemptions;
  }
  kv_cached_blocks_->Set(state.kv_cached_blocks);
  kv_evictable_blocks_->Set(state.kv_evictable_blocks);
  if (state.prefix_cache_queries > prefix_cache_queries_seen_) {
    prefix_cache_queries_->Increment(static_cast<double>(state.prefix_cache_queries - prefix_cache_queries_seen_));
    prefix_cache_queries_seen_ = state.prefix_cache_queries;
  }
  if (state.prefix_cache_hits > prefix_cache_hits_seen_) {
    prefix_cache_hits_->Increment(static_cast<double>(state.prefix_cache_hits - prefix_cache_hits_seen_));
    prefix_cache_hits_seen_ = state.prefix_cache_hits;
  }
}

void PrometheusMetrics::OnRequestEnded(DecodingMode mode, RequestEndReason reason) {
  requests_ended_->Add({{"mode", Mode(mode)}, {"reason", RequestEndReasonName(reason)}}).Increment();
}

void PrometheusMetrics::OnGrpcCall(const std::string& method, int code) {
  static const char* kCodes[] = {"OK",
                                 "CANCELLED",
                                 "UNKNOWN",
                                 "INVALID_ARGUMENT",
                                 "DEADLINE_EXCEEDED",
                                 "NOT_FOUND",
                                 "ALREADY_EXISTS",
                                 "PERMISSION_DENIED",
                                 "RESOURCE_EXHAUSTED",
                                 "FAILED_PRECONDITION",
                                 "ABORTED",
                                 "OUT_OF_RANGE",
                                 "UNIMPLEMENTED",
                                 "INTERNAL",
                                 "UNAVAILABLE",
                                 "DATA_LOSS",
                                 "UNAUTHENTICATED"};
  const std::string name = code >= 0 && code < 17 ? kCodes[code] : absl::StrCat(code);
  grpc_requests_->Add({{"method", method}, {"code", name}}).Increment();
}

void PrometheusMetrics::OnHttpConnectionRefused(const char* limit) {
  http_connections_refused_->Add({{"limit", limit}}).Increment();
}

void PrometheusMetrics::OnHttpCall(const std::string& route, int status) {
  http_requests_->Add({{"route", route}, {"status", absl::StrCat(status)}}).Increment();
}

}  // namespace crossreg::server
