// The metrics an operator relies on, on a live server: the speedup over AR per mode
// (docs/metrics.md) alone and under mixed traffic, request ends by reason (cancelled,
// deadline, disconnected) in the counter and the log, and every metric and label the
// Grafana dashboard and the Prometheus rules use, exported.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/model/peft_writer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/generation_client.h"
#include "tests/integration/prometheus_text.h"
#include "tests/integration/random_adapter_server.h"
#include "tests/integration/server_process.h"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {
namespace {

using Metrics = std::map<std::string, double>;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The series of `name` whose labels include every pair of `labels`, summed.
double Sum(const Metrics& m, const std::string& name, const std::map<std::string, std::string>& labels = {}) {
  double total = 0;
  for (const auto& [key, value] : m) {
    const size_t brace = key.find('{');
    if (key.substr(0, brace) != name) continue;
    bool match = true;
    for (const auto& [label, want] : labels) match &= key.find(label + "=\"" + want + "\"") != std::string::npos;
    if (match) total += value;
  }
  return total;
}

Metrics Scrape(int port) {
  auto m = ScrapeMetrics(port);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : Metrics{};
}

// For polling loops: a scrape that fails under load (a slow connect or read) is one
// poll lost, not a failure; the assertions that follow scrape with Scrape().
Metrics ScrapeOrEmpty(int port) {
  auto m = ScrapeMetrics(port);
  return m.ok() ? *m : Metrics{};
}

// Every series of `name`, one per line, for failure messages.
std::string Series(const Metrics& m, const std::string& name) {
  std::string out;
  for (const auto& [key, value] : m) {
    if (key.substr(0, key.find('{')) == name) out += key + " " + std::to_string(value) + "\n";
  }
  return out;
}

// Speedup of `mode` between two scrapes, from the counters (what the recording rule does).
double SpeedupBetween(const Metrics& before, const Metrics& after, const std::string& mode) {
  const double ar_equivalent = Sum(after, "crossreg_decode_ar_equivalent_seconds_total", {{"mode", mode}}) -
                               Sum(before, "crossreg_decode_ar_equivalent_seconds_total", {{"mode", mode}});
  const double charged = Sum(after, "crossreg_decode_seconds_total", {{"mode", mode}}) -
                         Sum(before, "crossreg_decode_seconds_total", {{"mode", mode}});
  return charged > 0 ? ar_equivalent / charged : 0;
}

class DashboardMetricsTest : public RandomAdapterServerTest<DashboardMetricsTest> {
 public:
  static constexpr const char* kName = "dash";
  static constexpr uint64_t kAdapterSeed = 11;
};

void RunMany(ServerProcess& server, v1::DecodingMode mode, const std::string& prompt, int requests, int tokens) {
  auto stub = server.NewStub();
  for (int i = 0; i < requests; ++i) {
    v1::GenerateRequest request = GreedyRequest(prompt, mode, tokens, 8);
    request.mutable_sampling()->set_ignore_eos(true);
    StreamResult r = RunGenerate(*stub, request);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }
}

TEST_F(DashboardMetricsTest, SpeedupIsBelowOneForAPoorAdapterAloneAndMixed) {
  // Alone: lossless with a random adapter (about one token per forward at 2γ+1 rows).
  Metrics before = Scrape(server_->metrics_port());
  RunMany(*server_, v1::DECODING_MODE_LOSSLESS, "Once upon a time", 4, 64);
  Metrics after = Scrape(server_->metrics_port());
  const double alone = SpeedupBetween(before, after, "lossless");

  // Mixed: the same lossless traffic beside three streams of AR traffic.
  before = after;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([] { RunMany(*server_, v1::DECODING_MODE_AR, "The little dog", 6, 64); });
  }
  RunMany(*server_, v1::DECODING_MODE_LOSSLESS, "Once upon a time", 4, 64);
  for (auto& t : threads) t.join();
  after = Scrape(server_->metrics_port());
  const double mixed = SpeedupBetween(before, after, "lossless");
  const double ar_mixed = SpeedupBetween(before, after, "ar");

  std::printf("[ figures  ] speedup vs AR of lossless with a random adapter: alone %.3f, mixed with AR %.3f (ar %.3f); "
              "cost model fixed %.3f ms + %.3f ms/row\n",
              alone, mixed, ar_mixed, Sum(after, "crossreg_forward_cost_seconds", {{"term", "fixed"}}) * 1e3,
              Sum(after, "crossreg_forward_cost_seconds", {{"term", "per_row"}}) * 1e3);
  EXPECT_GT(alone, 0);
  EXPECT_LT(alone, 1);
  EXPECT_GT(mixed, 0);
  EXPECT_LT(mixed, 1);
  EXPECT_NEAR(ar_mixed, 1.0, 1e-6);
  // The gauge shows the same quantity over the last minute.
  EXPECT_GT(Sum(after, "crossreg_speedup_vs_ar", {{"mode", "lossless"}}), 0);
  EXPECT_LT(Sum(after, "crossreg_speedup_vs_ar", {{"mode", "lossless"}}), 1);
}

// N-gram drafting where code repeats, on the default (code) model: its drafts come
// from the prompt and are accepted, its tokens/s beats AR's, and the speedup says so.
TEST(NgramSpeedupTest, AboveOneWhereNgramBeatsAr) {
  ServerProcess server({}, SourceDir() + "/models/default");
  ASSERT_TRUE(server.Start()) << server.Log();
  std::string prompt;
  for (int i = 1; i <= 8; ++i) absl::StrAppend(&prompt, "def add_", i, "(x):\n    return x + ", i, "\n\n");
  auto stub = server.NewStub();
  auto rate = [&](v1::DecodingMode mode) {
    double tokens = 0, seconds = 0;
    for (int i = 0; i < 3; ++i) {
      v1::GenerateRequest request = GreedyRequest(prompt, mode, 96, 8);
      request.mutable_sampling()->set_ignore_eos(true);
      // Fixed γ: the drafts and the accounting are what is tested. (Adaptive, the server's
      // default, runs AR where a sanitized build's instrumented rows make drafts dear.)
      if (mode != v1::DECODING_MODE_AR) request.mutable_decoding()->set_adaptive_gamma(false);
      StreamResult r = RunGenerate(*stub, request);
      EXPECT_TRUE(r.status.ok()) << r.status.error_message();
      tokens += r.complete.usage().completion_tokens() - 1;
      seconds += r.complete.timings().total_seconds() - r.complete.timings().time_to_first_token_seconds();
    }
    return seconds > 0 ? tokens / seconds : 0;
  };
  const Metrics before = Scrape(server.metrics_port());
  const double ar_rate = rate(v1::DECODING_MODE_AR);
  const double ngram_rate = rate(v1::DECODING_MODE_NGRAM);
  const Metrics after = Scrape(server.metrics_port());
  const double ngram = SpeedupBetween(before, after, "ngram");
  const double tpf = Sum(after, "crossreg_tokens_per_forward_sum", {{"mode", "ngram"}}) /
                     Sum(after, "crossreg_tokens_per_forward_count", {{"mode", "ngram"}});
  std::printf("[ figures  ] default model, repetitive code: ngram %.0f tokens/s vs AR %.0f (%.2fx), mean TPF %.2f; "
              "speedup vs AR from the accounting %.3f\n",
              ngram_rate, ar_rate, ngram_rate / ar_rate, tpf, ngram);
  EXPECT_GT(tpf, 1.5);
  EXPECT_GT(ngram, 0);
  EXPECT_NEAR(SpeedupBetween(before, after, "ar"), 1.0, 1e-6);
  EXPECT_EQ(server.Terminate(), 0);
  // The speedup is measured time, and under AddressSanitizer each row's instrumented
  // arithmetic costs several times more against the fixed per-forward cost, so a
  // 9-row verify forward no longer pays for its 6 tokens (0.99 measured): the claim
  // holds for the product's build, not for the instrumented one.
#if defined(__SANITIZE_ADDRESS__)
  std::printf("[ skipped  ] speedup > 1: a sanitized build times instrumented kernels\n");
#else
  EXPECT_GT(ngram, 1);
#endif
}

// A server slowed to 20 ms per forward, so that requests can be cancelled, time out
// and lose their client while running.
TEST(RequestEndsTest, CancelledDeadlineAndDisconnectedRequestsAreCountedAndLogged) {
  ServerProcess server({"--debug_forward_delay_ms=20"});
  ASSERT_TRUE(server.Start()) << server.Log();
  auto stub = server.NewStub();
  v1::GenerateRequest long_request = GreedyRequest("Once upon a time", v1::DECODING_MODE_AR, 1500);
  long_request.mutable_sampling()->set_ignore_eos(true);
  {  // Cancelled by the client after its first tokens.
    grpc::ClientContext context;
    v1::GenerateRequest request = long_request;
    request.set_request_id("will-cancel");
    auto reader = stub->Generate(&context, request);
    v1::GenerateResponse response;
    ASSERT_TRUE(reader->Read(&response));
    context.TryCancel();
    while (reader->Read(&response)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  {  // Past its deadline.
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
    v1::GenerateRequest request = long_request;
    request.set_request_id("will-expire");
    EXPECT_EQ(RunGenerate(*stub, request, &context).status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  // Both ends recorded and nothing running, so the next running request is the client's.
  for (int i = 0; i < 200; ++i) {
    const Metrics now = ScrapeOrEmpty(server.metrics_port());
    if (Sum(now, "crossreg_requests_ended_total") >= 2 && Sum(now, "crossreg_num_requests_running") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string killed_client_output;
  ASSERT_TRUE(std::filesystem::exists(BinDir() + "/crossreg")) << "the crossreg client is not built in " << BinDir();
  {  // The client process dies mid-stream.
    const std::string cli_log = std::filesystem::temp_directory_path() / ("crossreg_cli_" + std::to_string(getpid()));
    const pid_t child = fork();
    if (child == 0) {
      const int fd = open(cli_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(fd, 1);
      dup2(fd, 2);
      const std::string server_flag = "--server=" + server.address();
      execl((BinDir() + "/crossreg").c_str(), "crossreg", server_flag.c_str(), "--prompt=Once upon a time",
            "--max_tokens=1500", "--ignore_eos", "--request_id=will-vanish", static_cast<char*>(nullptr));
      std::perror("exec crossreg");
      _exit(127);
    }
    // Kill it once its request runs (the process may take a while to start under load).
    for (int i = 0; i < 200; ++i) {
      if (Sum(ScrapeOrEmpty(server.metrics_port()), "crossreg_num_requests_running") >= 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    killed_client_output = ReadFile(cli_log);
    std::filesystem::remove(cli_log);
  }
  SCOPED_TRACE("the killed client's output: " + killed_client_output);
  {  // And one that finishes.
    StreamResult r = RunGenerate(*stub, GreedyRequest("Once upon a time", v1::DECODING_MODE_AR, 3));
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  }
  // The ends are recorded as the server notices them.
  Metrics m;
  for (int i = 0; i < 300; ++i) {
    if (Sum(ScrapeOrEmpty(server.metrics_port()), "crossreg_requests_ended_total") >= 4) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  m = Scrape(server.metrics_port());
  SCOPED_TRACE("the request ends counted:\n" + Series(m, "crossreg_requests_ended_total"));
  EXPECT_EQ(Sum(m, "crossreg_requests_ended_total"), 4) << server.Log();
  EXPECT_EQ(Sum(m, "crossreg_requests_ended_total", {{"reason", "cancelled"}}) +
                Sum(m, "crossreg_requests_ended_total", {{"reason", "disconnected"}}),
            2);
  EXPECT_EQ(Sum(m, "crossreg_requests_ended_total", {{"reason", "deadline"}}), 1);
  EXPECT_EQ(Sum(m, "crossreg_requests_ended_total", {{"reason", "length"}}), 1);
  const std::string log = server.Log();
  for (const char* id : {"will-cancel", "will-expire", "will-vanish"}) {
    const std::regex once(std::string("request ended request_id=") + id + " .*reason=(cancelled|deadline|disconnected)");
    const auto lines = std::distance(std::sregex_iterator(log.begin(), log.end(), once), std::sregex_iterator());
    EXPECT_EQ(lines, 1) << id << "\n" << log;
  }
  EXPECT_NE(log.find("request ended request_id=will-expire api=grpc client=peer:127.0.0.1 mode=ar reason=deadline"),
            std::string::npos)
      << log;
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(RequestEndsTest, JsonLogLinesCarryTheEventFields) {
  ServerProcess server({"--log_format=json"});
  ASSERT_TRUE(server.Start()) << server.Log();
  auto stub = server.NewStub();
  v1::GenerateRequest request = GreedyRequest("Once upon a time", v1::DECODING_MODE_AR, 3);
  request.set_request_id("json-\"quoted\"");
  ASSERT_TRUE(RunGenerate(*stub, request).status.ok());
  EXPECT_EQ(server.Terminate(), 0);
  int events = 0;
  std::istringstream lines(server.Log());
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;  // gRPC core may print before logging is set up
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    EXPECT_TRUE(j.contains("time") && j.contains("level") && j.contains("msg")) << line;
    if (j.value("event", "") != "request_end") continue;
    ++events;
    EXPECT_EQ(j["request_id"], "json-\"quoted\"");
    EXPECT_EQ(j["reason"], "length");
    EXPECT_EQ(j["completion_tokens"], 3);
    EXPECT_EQ(j["mode"], "ar");
  }
  EXPECT_EQ(events, 1) << server.Log();
}

// Every crossreg_* metric and label that deploy/grafana/*.json and
// deploy/prometheus/*.yaml use must be exported by the server (after traffic that
// makes every family appear), and every crossreg:* recording rule they use must be
// defined by the rules file.
TEST_F(DashboardMetricsTest, EveryMetricAndLabelTheDashboardAndRulesUseIsExported) {
  RunMany(*server_, v1::DECODING_MODE_LOSSLESS, "Once upon a time", 1, 16);
  RunMany(*server_, v1::DECODING_MODE_NGRAM, "Once upon a time", 1, 16);
  RunMany(*server_, v1::DECODING_MODE_AR, "Once upon a time", 1, 16);
  const Metrics m = Scrape(server_->metrics_port());
  // name -> label names seen on it
  std::map<std::string, std::set<std::string>> exported;
  for (const auto& [key, value] : m) {
    const size_t brace = key.find('{');
    auto& labels = exported[key.substr(0, brace)];
    if (brace == std::string::npos) continue;
    static const std::regex label_re("([a-zA-Z_][a-zA-Z0-9_]*)=\"");
    const std::string inside = key.substr(brace);
    for (auto it = std::sregex_iterator(inside.begin(), inside.end(), label_re); it != std::sregex_iterator(); ++it) {
      labels.insert((*it)[1]);
    }
  }
  const std::string rules = ReadFile(SourceDir() + "/deploy/prometheus/crossreg-rules.yaml");
  ASSERT_FALSE(rules.empty());
  std::set<std::string> recorded;
  static const std::regex record_re("record:\\s*(crossreg:[a-zA-Z0-9_:]+)");
  for (auto it = std::sregex_iterator(rules.begin(), rules.end(), record_re); it != std::sregex_iterator(); ++it) {
    recorded.insert((*it)[1]);
  }
  // The PromQL expressions: the dashboard's targets[].expr, and the rules file.
  std::vector<std::pair<std::string, std::string>> expressions = {{"crossreg-rules.yaml", rules}};
  for (const auto& entry : std::filesystem::directory_iterator(SourceDir() + "/deploy/grafana")) {
    if (entry.path().extension() != ".json") continue;
    const auto dashboard = nlohmann::json::parse(ReadFile(entry.path()));
    std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& j) {
      if (j.is_object()) {
        if (j.contains("expr") && j["expr"].is_string()) {
          expressions.push_back({entry.path().filename().string(), j["expr"].get<std::string>()});
        }
        for (const auto& [k, v] : j.items()) walk(v);
      } else if (j.is_array()) {
        for (const auto& v : j) walk(v);
      }
    };
    walk(dashboard);
  }
  ASSERT_GT(expressions.size(), 5u);
  int checked = 0;
  static const std::regex metric_re("(crossreg[_:][a-zA-Z0-9_:]*)(\\{([^}]*)\\})?");
  static const std::regex label_use_re("([a-zA-Z_][a-zA-Z0-9_]*)\\s*(=~|!=|!~|=)");
  static const std::regex by_re("\\b(by|without)\\s*\\(([^)]*)\\)");
  for (const auto& [file, expr] : expressions) {
    std::set<std::string> names_in_expr;
    for (auto it = std::sregex_iterator(expr.begin(), expr.end(), metric_re); it != std::sregex_iterator(); ++it) {
      const std::string name = (*it)[1];
      ++checked;
      if (name.find(':') != std::string::npos) {
        EXPECT_TRUE(recorded.count(name)) << file << ": recording rule " << name << " is not defined";
        continue;
      }
      names_in_expr.insert(name);
      ASSERT_TRUE(exported.count(name)) << file << ": " << name << " is not exported by the server";
      const std::string selector = (*it)[3];
      for (auto l = std::sregex_iterator(selector.begin(), selector.end(), label_use_re); l != std::sregex_iterator();
           ++l) {
        EXPECT_TRUE(exported[name].count((*l)[1])) << file << ": " << name << " has no label " << (*l)[1];
      }
    }
    // Labels aggregated by must exist on some metric of the expression (or be "le").
    for (auto it = std::sregex_iterator(expr.begin(), expr.end(), by_re); it != std::sregex_iterator(); ++it) {
      for (absl::string_view label : absl::StrSplit(std::string((*it)[2]), ',', absl::SkipWhitespace())) {
        const std::string l(absl::StripAsciiWhitespace(label));
        bool found = l == "le" || l == "instance" || l == "pod" || l == "job" || l == "namespace";
        for (const auto& name : names_in_expr) found |= exported[name].count(l) > 0;
        EXPECT_TRUE(found) << file << ": 'by (" << l << ")' but no metric of the expression has it: " << expr;
      }
    }
  }
  EXPECT_GT(checked, 10);
}

}  // namespace
}  // namespace crossreg::testing
