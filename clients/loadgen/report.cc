#include "clients/loadgen/report.h"

#include "absl/strings/str_format.h"
#include "clients/common/status_text.h"
#include "clients/loadgen/percentile.h"

namespace crossreg::clients {
namespace {

LatencySummary Latency(std::vector<double> seconds) {
  LatencySummary s;
  if (seconds.empty()) return s;
  double sum = 0;
  for (double v : seconds) sum += v;
  s.mean_ms = sum / static_cast<double>(seconds.size()) * 1e3;
  s.p50_ms = Percentile(seconds, 50) * 1e3;
  s.p99_ms = Percentile(seconds, 99) * 1e3;
  return s;
}

double Ratio(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0;
}

GroupSummary SummarizeGroup(const std::vector<const StreamResult*>& group, double wall_s) {
  GroupSummary g;
  std::vector<double> ttft, itl, e2e, queue;
  double stream_speed_sum = 0;
  int64_t tokens = 0, committed = 0, forwards = 0, drafted = 0, accepted = 0;
  for (const StreamResult* r : group) {
    ++g.requests;
    tokens += r->tokens_received;
    if (r->ttft_s >= 0) ttft.push_back(r->ttft_s);
    itl.insert(itl.end(), r->itl_s.begin(), r->itl_s.end());
    if (r->code != grpc::StatusCode::OK) {
      auto& e = g.errors[StatusCodeName(r->code)];
      if (e.count++ == 0) e.example = r->error_message;
      continue;
    }
    ++g.ok;
    e2e.push_back(r->e2e_s);
    if (r->e2e_s > 0) stream_speed_sum += static_cast<double>(r->completion_tokens) / r->e2e_s;
    queue.push_back(r->server_queue_s);
    // tokens_per_forward x forwards = committed tokens, as the server counts them.
    committed += static_cast<int64_t>(r->tokens_per_forward * static_cast<double>(r->forwards) + 0.5);
    forwards += r->forwards;
    drafted += r->drafted;
    accepted += r->accepted;
    g.prompt_tokens += r->prompt_tokens;
    g.cached_prompt_tokens += r->cached_prompt_tokens;
    if (r->turn >= 2) {
      g.reusable_prompt_tokens += r->reusable_prompt_tokens;
      g.reused_prompt_tokens += r->cached_prompt_tokens;
    }
  }
  if (wall_s > 0) {
    g.requests_per_s = g.ok / wall_s;
    g.output_tokens_per_s = static_cast<double>(tokens) / wall_s;
  }
  if (g.ok > 0) g.stream_tokens_per_s = stream_speed_sum / g.ok;
  g.ttft = Latency(std::move(ttft));
  g.itl = Latency(std::move(itl));
  g.e2e = Latency(std::move(e2e));
  g.server_queue = Latency(std::move(queue));
  g.tokens_per_forward = forwards > 0 ? static_cast<double>(committed) / static_cast<double>(forwards) : 0;
  g.acceptance = drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0;
  g.cache_hit_rate = Ratio(g.cached_prompt_tokens, g.prompt_tokens);
  g.reuse = Ratio(g.reused_prompt_tokens, g.reusable_prompt_tokens);
  return g;
}

std::string Row(const std::string& name, const GroupSummary& g) {
  return absl::StrFormat("%-9s %5d %4d %8.2f %9.1f %9.1f %8.1f %8.1f %7.2f %7.2f %8.1f %8.1f %5.2f %6.1f%%\n", name,
                         g.ok, g.requests - g.ok, g.requests_per_s, g.output_tokens_per_s, g.stream_tokens_per_s, g.ttft.p50_ms,
                         g.ttft.p99_ms, g.itl.p50_ms, g.itl.p99_ms, g.e2e.p50_ms, g.e2e.p99_ms,
                         g.tokens_per_forward, 100.0 * g.acceptance);
}

std::string CacheHeader(bool conversations) {
  std::string out = absl::StrFormat("%-9s %9s %9s %6s", "mode", "prompt", "cached", "hit");
  if (conversations) out += absl::StrFormat(" %9s %9s %6s", "reusable", "reused", "reuse");
  return out + "\n";
}

std::string CacheRow(const std::string& name, const GroupSummary& g, bool conversations) {
  std::string out = absl::StrFormat("%-9s %9d %9d %5.1f%%", name, g.prompt_tokens, g.cached_prompt_tokens,
                                    100.0 * g.cache_hit_rate);
  if (conversations) {
    out += absl::StrFormat(" %9d %9d %5.1f%%", g.reusable_prompt_tokens, g.reused_prompt_tokens, 100.0 * g.reuse);
  }
  return out + "\n";
}

nlohmann::json LatencyJson(const LatencySummary& s) {
  return {{"p50", s.p50_ms}, {"p99", s.p99_ms}, {"mean", s.mean_ms}};
}

nlohmann::json GroupJson(const GroupSummary& g, bool conversations) {
  nlohmann::json errors = nlohmann::json::object();
  for (const auto& [code, e] : g.errors) errors[code] = {{"count", e.count}, {"example", e.example}};
  nlohmann::json out = {{"requests", g.requests},
          {"ok", g.ok},
          {"requests_per_s", g.requests_per_s},
          {"output_tokens_per_s", g.output_tokens_per_s},
          {"stream_tokens_per_s", g.stream_tokens_per_s},
          {"ttft_ms", LatencyJson(g.ttft)},
          {"itl_ms", LatencyJson(g.itl)},
          {"e2e_ms", LatencyJson(g.e2e)},
          {"server_queue_ms", LatencyJson(g.server_queue)},
          {"tokens_per_forward", g.tokens_per_forward},
          {"acceptance", g.acceptance},
          {"prompt_tokens", g.prompt_tokens},
          {"cached_prompt_tokens", g.cached_prompt_tokens},
          {"cache_hit_rate", g.cache_hit_rate},
          {"errors", errors}};
  if (conversations) {
    out["reusable_prompt_tokens"] = g.reusable_prompt_tokens;
    out["reused_prompt_tokens"] = g.reused_prompt_tokens;
    out["reuse"] = g.reuse;
  }
  return out;
}

}  // namespace

LoadReport Summarize(const std::vector<StreamResult>& results, double wall_s) {
  LoadReport report;
  report.wall_s = wall_s;
  std::map<std::string, std::vector<const StreamResult*>> by_mode;
  std::map<int, std::vector<const StreamResult*>> by_turn;
  std::vector<const StreamResult*> all;
  for (const auto& r : results) {
    by_mode[r.mode].push_back(&r);
    if (r.turn > 0) by_turn[r.turn].push_back(&r);
    all.push_back(&r);
  }
  for (const auto& [mode, group] : by_mode) report.modes[mode] = SummarizeGroup(group, wall_s);
  for (const auto& [turn, group] : by_turn) report.turns[turn] = SummarizeGroup(group, wall_s);
  report.overall = SummarizeGroup(all, wall_s);
  return report;
}

std::string FormatReportText(const LoadReport& report) {
  std::string out = absl::StrFormat(
      "%-9s %5s %4s %8s %9s %9s %8s %8s %7s %7s %8s %8s %5s %7s\n", "mode", "ok", "err", "req/s", "tok/s", "tok/s/req",
      "ttft50", "ttft99", "itl50", "itl99", "e2e50", "e2e99", "tpf", "accept");
  for (const auto& [mode, g] : report.modes) out += Row(mode, g);
  if (report.modes.size() > 1) out += Row("all", report.overall);
  for (const auto& [turn, g] : report.turns) out += Row(absl::StrFormat("turn %d", turn), g);
  out += "(latencies in ms, client-side; tok/s/req = mean per-request speed; itl per token;\n"
         " tpf = tokens per forward; accept = accepted/drafted)\n";
  // The prefix cache's share of the prompts, same rows.
  const bool conversations = !report.turns.empty();
  out += CacheHeader(conversations);
  for (const auto& [mode, g] : report.modes) out += CacheRow(mode, g, conversations);
  if (report.modes.size() > 1) out += CacheRow("all", report.overall, conversations);
  for (const auto& [turn, g] : report.turns) out += CacheRow(absl::StrFormat("turn %d", turn), g, conversations);
  out += conversations ? "(prompt tokens of successful requests; hit = cached/prompt; reusable = the previous turn's\n"
                         " prompt + output, turns >= 2; reused = their cached tokens; reuse = reused/reusable)\n"
                       : "(prompt tokens of successful requests; hit = cached/prompt)\n";
  for (const auto& [code, e] : report.overall.errors) {
    out += absl::StrFormat("errors: %s x%d, e.g. \"%s\"\n", code, e.count, e.example);
  }
  return out;
}

nlohmann::json ReportToJson(const LoadReport& report) {
  const bool conversations = !report.turns.empty();
  nlohmann::json modes = nlohmann::json::object();
  for (const auto& [mode, g] : report.modes) modes[mode] = GroupJson(g, conversations);
  nlohmann::json out = {
      {"wall_s", report.wall_s}, {"overall", GroupJson(report.overall, conversations)}, {"modes", modes}};
  if (conversations) {
    nlohmann::json turns = nlohmann::json::object();
    for (const auto& [turn, g] : report.turns) turns[std::to_string(turn)] = GroupJson(g, conversations);
    out["turns"] = turns;
  }
  return out;
}

}  // namespace crossreg::clients
