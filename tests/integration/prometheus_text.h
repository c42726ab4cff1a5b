// A blocking HTTP GET for /metrics and a strict parser of the Prometheus text
// format: every non-comment line must be `name{labels} value`.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace crossreg::testing {

absl::StatusOr<std::string> HttpGet(int port, const std::string& path, const std::string& host = "127.0.0.1");

// Series key: the name plus its labels as written ("a_total{position=\"1\"}").
// INVALID_ARGUMENT naming the first malformed line.
absl::StatusOr<std::map<std::string, double>> ParsePrometheusText(const std::string& body);

// Scrapes host:port/metrics (an IPv4 address) and parses it.
absl::StatusOr<std::map<std::string, double>> ScrapeMetrics(int port, const std::string& host = "127.0.0.1");

// Polls 127.0.0.1:port/metrics until the KV cache is empty and no request runs
// (crossreg_kv_cache_usage_perc and crossreg_num_requests_running both 0); false if
// that takes longer than `timeout_s`.
bool KvReturnsToZero(int metrics_port, double timeout_s = 15);

// Polls 127.0.0.1:port/metrics until `series` (a key as ParsePrometheusText writes it) reads
// `value`; false if that takes longer than `timeout_s`. For counters a request's last steps
// update a moment after the client has its answer.
bool MetricReaches(int metrics_port, const std::string& series, double value, double timeout_s = 15);

}  // namespace crossreg::testing
