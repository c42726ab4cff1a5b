// One request must not crash or stall the server. Hostile bodies and grammars, as an
// attacker would send them: nesting 100,000 deep in every field that takes objects or
// arrays, objects of 100,000 members, hundreds of thousands of logit_bias keys, nested
// counted repetition in GBNF, regex and JSON-schema patterns (a different character
// class each time, so that nothing is cached), surrogate escapes, non-canonical token
// ids. Each gets a clean 4xx quickly, while a concurrent client's 16-token completion
// and /health keep answering within a second; the server still serves at the end, and
// connections refused at the connection cap are counted.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/prometheus_text.h"
#include "tests/integration/raw_http.h"
#include "tests/integration/server_process.h"
#include "tests/testing/loopback_socket.h"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Sanitized builds run the server several times slower: the bounds scale with it. ASan's
// allocator is the slowest part for the grammar probe, which copies many short parse
// stacks: refusing the 60-level nesting took 27 times as long as in Release.
#if defined(__SANITIZE_ADDRESS__)
constexpr double kSlowdown = 10;
#elif defined(__SANITIZE_THREAD__)
constexpr double kSlowdown = 4;
#else
constexpr double kSlowdown = 1;
#endif
constexpr double kRefusalSeconds = 0.5 * kSlowdown;
constexpr double kVictimSeconds = 1.0 * kSlowdown;

std::string Repeat(const std::string& s, int n) {
  std::string out;
  out.reserve(s.size() * static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string Nested(int depth) { return Repeat("[", depth) + Repeat("]", depth); }

std::string NestedObjects(int depth) {  // {"a": {"a": ... 1, "b": 1}, "b": 1}: a trailing member at every level
  return Repeat(R"({"a": )", depth) + "1" + Repeat(R"(, "b": 1})", depth);
}

std::string ManyKeys(int n, const std::string& prefix = "") {
  std::string out = "{";
  for (int i = 0; i < n; ++i) absl::StrAppend(&out, i ? "," : "", "\"", prefix, i, "\":1");
  return out + "}";
}

struct Attack {
  std::string name;
  std::string path;
  std::string body;
};

std::vector<Attack> Attacks() {
  const std::string completions = "/v1/completions", chat = "/v1/chat/completions";
  auto completion = [](const std::string& fields) { return absl::StrCat(R"({"prompt": "x", "max_tokens": 8, )", fields, "}"); };
  auto grammar = [&](const std::string& gbnf) { return completion(absl::StrCat(R"("grammar": )", nlohmann::json(gbnf).dump())); };
  std::vector<Attack> a;
  const std::string deep = Nested(100000);
  a.push_back({"schema nested 100k deep", completions,
               completion(absl::StrCat(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"a": )",
                                       deep, "}}}"))});
  a.push_back({"chat schema nested 100k deep", chat,
               absl::StrCat(R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": )",
                            deep, "}}}")});
  // Every field that takes objects or arrays.
  for (const std::string field : {"prompt", "stop", "logit_bias", "stream_options", "response_format", "tools", "messages",
                                  "unknown_field"}) {
    a.push_back({"nested 100k in " + field, field == "messages" ? chat : completions,
                 absl::StrCat(R"({"max_tokens": 4, ")", field, R"(": )", deep,
                              field == "messages" || field == "prompt" ? "" : R"(, "prompt": "x")", "}")});
  }
  a.push_back({"messages content parts nested 100k", chat,
               absl::StrCat(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": )", deep, "}]}]}")});
  for (int depth : {4000, 8000, 16000}) {
    a.push_back({absl::StrCat("objects nested ", depth, " with trailing members"), completions,
                 completion(absl::StrCat(R"("x": )", NestedObjects(depth)))});
  }
  a.push_back({"logit_bias of 100k keys", completions, completion(absl::StrCat(R"("logit_bias": )", ManyKeys(100000)))});
  a.push_back({"logit_bias of 300k keys", completions, completion(absl::StrCat(R"("logit_bias": )", ManyKeys(300000)))});
  a.push_back({"unknown field of 100k keys", completions, completion(absl::StrCat(R"("junk": )", ManyKeys(100000, "k")))});
  a.push_back({"100k unknown top-level fields", completions,
               absl::StrCat(R"({"prompt": "x", )", ManyKeys(100000, "f").substr(1))});
  a.push_back({"logit_bias key \" 5\"", completions, completion(R"("logit_bias": {" 5": 1})")});
  a.push_back({"logit_bias key \"05\"", completions, completion(R"("logit_bias": {"05": 1})")});
  a.push_back({"logit_bias duplicate key", completions, completion(R"("logit_bias": {"5": 1, "5": 2})")});
  // Grammars: nested counted repetition, a different character class each time.
  const char* classes[] = {"[a-z]", "[b-y]", "[0-9a-f]", "[A-Z]", "[c-x]"};
  for (int i = 0; i < 5; ++i) {
    const std::string c = classes[i];
    a.push_back({"nested counts " + c, completions, grammar(absl::StrCat("root ::= ((", c, "){0,1000}){0,1000} \"!\""))});
  }
  std::string twenty = "[a-z]", sixty = "[a-z]";
  for (int i = 0; i < 20; ++i) twenty = absl::StrCat("(", twenty, "){0,3}");
  for (int i = 0; i < 60; ++i) sixty = absl::StrCat("(", sixty, "){1,2}");
  a.push_back({"nested counts, 20 levels", completions, grammar(absl::StrCat("root ::= ", twenty, " \"!\""))});
  a.push_back({"nested counts, 60 levels", completions, grammar(absl::StrCat("root ::= ", sixty, " \"!\""))});
  a.push_back({"non-empty nested counts", completions, grammar("root ::= ([a-z]{1,100}){1,100} \"!\"")});
  a.push_back({"nested counts as regex", completions, completion(R"("regex": "(([a-z]){0,1000}){0,1000}!")")});
  a.push_back({"nested counts as a schema pattern", completions,
               completion(R"("response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "string", "pattern": "^(([a-z]){0,1000}){0,1000}$"}}})")});
  a.push_back({"grammar expanding past its element limit", completions,
               grammar(absl::StrCat("root ::= \"", std::string(300, 'a'), "\"{1000}"))});
  a.push_back({"surrogate literal", completions, grammar(R"(root ::= "\uD800" "yes")")});
  a.push_back({"surrogate then digits", completions, grammar(R"(root ::= "\uDC00" [0-9]+)")});
  return a;
}

// A client that keeps asking for a 16-token completion and /health, recording the
// slowest answer of each.
class Victim {
 public:
  explicit Victim(int port) : port_(port) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        Clock::time_point t = Clock::now();
        const RawResponse c = Exchange(port_, PostText("/v1/completions", R"({"prompt": "def add(a, b):", "max_tokens": 16, "ignore_eos": true})"));
        Record(&completion_, SecondsSince(t), c.status == 200);
        t = Clock::now();
        const RawResponse h = Exchange(port_, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
        Record(&health_, SecondsSince(t), h.status == 200);
      }
    });
  }
  ~Victim() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  struct Slowest {
    double seconds = 0;
    int answered = 0;
    int failed = 0;
  };
  Slowest completion() const { return completion_; }
  Slowest health() const { return health_; }

 private:
  static void Record(Slowest* s, double seconds, bool ok) {
    s->seconds = std::max(s->seconds, seconds);
    (ok ? s->answered : s->failed) += 1;
  }
  int port_;
  std::atomic<bool> stop_{false};
  Slowest completion_, health_;
  std::thread thread_;
};

TEST(HostileRequestTest, EachGetsAQuick4xxWhileOthersKeepTheirLatency) {
  // The embedded default model: its vocabulary's special tokens (16381 <|bos|>, 16383
  // <|draft|>) are forced below.
  ServerProcess server({}, SourceDir() + "/models/default");
  ASSERT_TRUE(server.Start()) << server.Log();
  const int port = server.http_port();
  const std::vector<Attack> attacks = Attacks();
  Victim victim(port);
  double slowest = 0;
  for (const Attack& attack : attacks) {
    const Clock::time_point start = Clock::now();
    const RawResponse r = Exchange(port, PostText(attack.path, attack.body), 60);
    const double seconds = SecondsSince(start);
    slowest = std::max(slowest, seconds);
    std::printf("[ figures  ] %-44s %7.1f KB  HTTP %d in %.3f s  %s\n", attack.name.c_str(),
                static_cast<double>(attack.body.size()) / 1024, r.status, seconds, r.body.substr(0, 120).c_str());
    EXPECT_GE(r.status, 400) << attack.name << ": " << r.body.substr(0, 300);
    EXPECT_LT(r.status, 500) << attack.name << ": " << r.body.substr(0, 300);
    EXPECT_LT(seconds, kRefusalSeconds) << attack.name;
  }
  // Four large bodies at once, twice.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::thread> senders;
    std::atomic<int> refused{0};
    const std::string body = absl::StrCat(R"({"prompt": "x", "logit_bias": )", ManyKeys(60000), "}");
    for (int i = 0; i < 4; ++i) {
      senders.emplace_back([&] {
        if (Exchange(port, PostText("/v1/completions", body), 60).status == 400) refused.fetch_add(1);
      });
    }
    for (std::thread& t : senders) t.join();
    EXPECT_EQ(refused.load(), 4);
  }
  victim.Stop();
  const Victim::Slowest completion = victim.completion(), health = victim.health();
  std::printf("[ figures  ] %zu hostile requests, slowest refusal %.3f s; meanwhile %d completions of 16 tokens "
              "(slowest %.3f s) and %d /health (slowest %.3f s)\n",
              attacks.size() + 8, slowest, completion.answered, completion.seconds, health.answered, health.seconds);
  EXPECT_GT(completion.answered, 0);
  EXPECT_EQ(completion.failed, 0);
  EXPECT_EQ(health.failed, 0);
  EXPECT_LT(completion.seconds, kVictimSeconds);
  EXPECT_LT(health.seconds, kVictimSeconds);
  EXPECT_EQ(CheckHealth(server.channel()), "SERVING");
  EXPECT_TRUE(server.Running());

  // Special tokens forced by a bias: generated (their ids are reported) but not text,
  // unless the request asks for them.
  for (const bool skip : {true, false}) {
    const RawResponse r = Exchange(
        port, PostText("/v1/completions", absl::StrCat(R"({"prompt": "def f", "max_tokens": 3, "return_token_ids": true, )",
                                                       R"("logit_bias": {"16381": 100, "16383": 100}, "skip_special_tokens": )",
                                                       skip ? "true" : "false", "}")));
    ASSERT_EQ(r.status, 200) << r.body;
    const nlohmann::json reply = nlohmann::json::parse(r.body);
    const std::string text = reply["choices"][0]["text"];
    EXPECT_EQ(reply["choices"][0]["token_ids"].size(), 3u);
    if (skip) {
      EXPECT_EQ(text, "") << r.body;
    } else {
      EXPECT_NE(text.find("<|"), std::string::npos) << r.body;
    }
  }
  EXPECT_EQ(server.Terminate(), 0) << server.Log();
}

TEST(HostileRequestTest, ConnectionsRefusedAtTheCapAreCounted) {
  ServerProcess server({"--http_max_connections_per_client=3"});
  ASSERT_TRUE(server.Start()) << server.Log();
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(ConnectLoopback(server.http_port()));
  // Wait until the server has accepted the three before knocking again.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int refused = 0;
  for (int i = 0; i < 4; ++i) {
    const RawResponse r = Exchange(server.http_port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 5);
    refused += r.status == 503 ? 1 : 0;
  }
  for (int fd : held) close(fd);
  EXPECT_EQ(refused, 4);
  EXPECT_TRUE(MetricReaches(server.metrics_port(), R"(crossreg_http_connections_refused_total{limit="per_client"})", 4));
  EXPECT_EQ(server.Terminate(), 0) << server.Log();
}

}  // namespace
}  // namespace crossreg::testing
