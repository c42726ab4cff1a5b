// Summaries of a load run, per decoding mode and overall, as text or JSON.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "clients/loadgen/stream_result.h"
#include "nlohmann/json.hpp"

namespace crossreg::clients {

struct LatencySummary {
  double p50_ms = 0, p99_ms = 0, mean_ms = 0;
};

struct ErrorSummary {
  int count = 0;
  std::string example;  // the first message seen with this code
};

struct GroupSummary {
  int requests = 0;
  int ok = 0;
  // Rates divide by the whole run's wall time, also per mode: modes run interleaved
  // on the same server, so per-mode rates add up to the overall one.
  double requests_per_s = 0;
  double output_tokens_per_s = 0;  // tokens received in chunks, failed streams included
  // Mean over successful requests of completion tokens / client end-to-end time: the
  // speed one user sees, which is where the decoding modes differ at equal load.
  double stream_tokens_per_s = 0;
  LatencySummary ttft, itl, e2e, server_queue;
  double tokens_per_forward = 0;  // committed tokens / forwards, over successful requests
  double acceptance = 0;          // accepted / drafted drafts; 0 when nothing was drafted
  // Prefix caching, over successful requests: prompt tokens, those whose K/V came from
  // the server's cache, and their ratio.
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  double cache_hit_rate = 0;
  // multi_turn, over successful turns 2 and later: the tokens the previous turn left
  // cacheable (its prompt + output), those of the turn's cached tokens, and their ratio:
  // how much of what a prefix cache could serve it did.
  int64_t reusable_prompt_tokens = 0;
  int64_t reused_prompt_tokens = 0;
  double reuse = 0;
  std::map<std::string, ErrorSummary> errors;  // by gRPC code name
};

struct LoadReport {
  double wall_s = 0;
  std::map<std::string, GroupSummary> modes;  // by mode name
  GroupSummary overall;
  std::map<int, GroupSummary> turns;  // multi_turn only: by turn number (1 = the openings)
};

LoadReport Summarize(const std::vector<StreamResult>& results, double wall_s);

// A table, one row per mode and an "all" row (and one per turn for multi_turn), then a
// prefix-cache table of the same rows, then error details.
std::string FormatReportText(const LoadReport& report);

nlohmann::json ReportToJson(const LoadReport& report);

}  // namespace crossreg::clients
