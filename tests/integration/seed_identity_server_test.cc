// A seed fixes the text through the real server (docs/api.md "Seeds"): seeded sampled
// requests over gRPC and HTTP (streaming or not) give AR's text in NGRAM and LOSSLESS
// mode, with adaptive_gamma on or off, alone or sixteen at once; a request without a
// seed is told the seed the server drew, and that seed replays its text.
#include <httplib.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/generation_client.h"
#include "tests/integration/random_adapter_server.h"
#include "tests/integration/server_process.h"

namespace crossreg::testing {
namespace {

using Json = nlohmann::json;

struct Sampled {
  std::string prompt;
  float temperature;
  float top_p;
  float repetition_penalty;  // 1: off
  uint64_t seed;
  std::string regex;  // empty: free text
};
const Sampled kRequests[] = {
    {"Once upon a time", 0.8f, 0.95f, 1.1f, 3, ""},
    {"The little dog", 1.0f, 1.0f, 1.0f, 77, ""},
    {"Lily wanted to", 1.2f, 0.9f, 1.0f, 123456789012345ull, ""},
    {"Tom had a red ball", 0.7f, 1.0f, 1.3f, 5, ""},
    {"One day", 0.9f, 0.95f, 1.0f, 42, "[a-z ]{1,60}\\."},
};

// The server's speculative configurations besides AR: every exact mode, adaptive or not.
struct Configuration {
  v1::DecodingMode mode;
  const char* http;
  bool adaptive;
};
const Configuration kExact[] = {{v1::DECODING_MODE_NGRAM, "ngram", false},
                                {v1::DECODING_MODE_NGRAM, "ngram", true},
                                {v1::DECODING_MODE_LOSSLESS, "lossless", false},
                                {v1::DECODING_MODE_LOSSLESS, "lossless", true}};

v1::GenerateRequest GrpcRequest(const Sampled& s, v1::DecodingMode mode, bool adaptive, bool seeded = true) {
  v1::GenerateRequest r = GreedyRequest(s.prompt, mode, 40);
  v1::SamplingParams& sp = *r.mutable_sampling();
  sp.set_temperature(s.temperature);
  sp.set_top_p(s.top_p);
  if (s.repetition_penalty != 1.0f) sp.set_repetition_penalty(s.repetition_penalty);
  if (seeded) sp.set_seed(s.seed);
  if (!s.regex.empty()) r.mutable_structured_output()->set_regex(s.regex);
  if (mode != v1::DECODING_MODE_AR) r.mutable_decoding()->set_adaptive_gamma(adaptive);
  return r;
}

Json HttpBody(const Sampled& s, const char* mode, bool adaptive, bool stream) {
  Json body = {{"prompt", s.prompt}, {"max_tokens", 40},     {"temperature", s.temperature},
               {"top_p", s.top_p},   {"seed", s.seed},       {"mode", mode},
               {"gamma", 4},         {"stream", stream}};
  if (s.repetition_penalty != 1.0f) body["repetition_penalty"] = s.repetition_penalty;
  if (!s.regex.empty()) body["regex"] = s.regex;
  if (std::string(mode) != "ar") body["adaptive_gamma"] = adaptive;
  if (stream) body["stream_options"] = {{"include_usage", true}};
  return body;
}

// The reply's text and usage, streamed (server-sent events) or whole.
struct HttpText {
  int status = 0;
  std::string text;
  Json usage;
  std::string raw;
};

HttpText PostCompletion(int port, const Json& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  auto res = client.Post("/v1/completions", body.dump(), "application/json");
  HttpText out;
  if (!res) return out;
  out.status = res->status;
  out.raw = res->body;
  if (!body.value("stream", false)) {
    const Json reply = Json::parse(res->body, nullptr, false);
    if (reply.is_discarded() || !reply.contains("choices")) return out;
    out.text = reply["choices"][0]["text"].get<std::string>();
    out.usage = reply["usage"];
    return out;
  }
  for (absl::string_view line : absl::StrSplit(res->body, '\n')) {
    if (!absl::ConsumePrefix(&line, "data: ") || line == "[DONE]") continue;
    const Json event = Json::parse(line, nullptr, false);
    if (event.is_discarded()) continue;
    if (event.contains("usage") && !event["usage"].is_null()) out.usage = event["usage"];
    for (const Json& choice : event["choices"]) out.text += choice.value("text", "");
  }
  return out;
}

class SeedIdentityServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // --adaptive_gamma measures the cost curve that adaptive requests need.
    auto started = RandomAdapterServer::Start("seed", 11, {"--adaptive_gamma"});
    ASSERT_TRUE(started.ok()) << started.status();
    holder_ = started->release();
    server_ = &holder_->server();
  }
  static void TearDownTestSuite() {
    if (holder_ != nullptr) EXPECT_EQ(server_->Terminate(), 0) << server_->Log();
    delete holder_;
    holder_ = nullptr;
    server_ = nullptr;
  }
  static inline RandomAdapterServer* holder_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
};

TEST_F(SeedIdentityServerTest, EveryExactModeGivesArsTextOverGrpcAndHttp) {
  auto stub = server_->NewStub();
  for (const Sampled& s : kRequests) {
    SCOPED_TRACE(absl::StrCat(s.prompt, " seed ", s.seed));
    const StreamResult ar = RunGenerate(*stub, GrpcRequest(s, v1::DECODING_MODE_AR, false));
    ASSERT_TRUE(ar.status.ok()) << ar.status.error_message();
    ASSERT_FALSE(ar.ids.empty());
    EXPECT_EQ(ar.complete.usage().seed(), s.seed);
    for (const Configuration& c : kExact) {
      SCOPED_TRACE(absl::StrCat(c.http, c.adaptive ? " adaptive" : ""));
      const StreamResult grpc = RunGenerate(*stub, GrpcRequest(s, c.mode, c.adaptive));
      ASSERT_TRUE(grpc.status.ok()) << grpc.status.error_message();
      EXPECT_EQ(grpc.ids, ar.ids);
      EXPECT_EQ(grpc.text, ar.text);
      EXPECT_EQ(grpc.complete.usage().seed(), s.seed);
      for (bool stream : {false, true}) {
        const HttpText http = PostCompletion(server_->http_port(), HttpBody(s, c.http, c.adaptive, stream));
        ASSERT_EQ(http.status, 200) << http.raw;
        EXPECT_EQ(http.text, ar.text) << (stream ? "streamed" : "whole");
        EXPECT_EQ(http.usage.value("seed", uint64_t{0}), s.seed) << http.raw;
      }
    }
  }
}

// Sixteen streams at once, mixed modes and adaptive draft lengths: each request's
// text is the one AR wrote for it alone.
TEST_F(SeedIdentityServerTest, SixteenConcurrentStreamsKeepTheirArTexts) {
  auto stub = server_->NewStub();
  std::vector<std::string> alone;
  for (const Sampled& s : kRequests) {
    const StreamResult ar = RunGenerate(*stub, GrpcRequest(s, v1::DECODING_MODE_AR, false));
    ASSERT_TRUE(ar.status.ok()) << ar.status.error_message();
    alone.push_back(ar.text);
  }
  constexpr int kStreams = 16;
  std::vector<StreamResult> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      auto own = server_->NewStub();
      const Configuration& c = kExact[i % 4];
      const v1::DecodingMode mode = i % 5 == 4 ? v1::DECODING_MODE_AR : c.mode;
      results[static_cast<size_t>(i)] = RunGenerate(*own, GrpcRequest(kRequests[i % 5], mode, c.adaptive));
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(results[static_cast<size_t>(i)].status.ok());
    EXPECT_EQ(results[static_cast<size_t>(i)].text, alone[static_cast<size_t>(i % 5)]);
  }
}

// Without a seed the server draws one, reports it, and it replays the text in any
// exact mode; two unseeded requests draw different seeds.
TEST_F(SeedIdentityServerTest, AnUnseededRequestIsToldTheSeedThatReplaysIt) {
  auto stub = server_->NewStub();
  const Sampled& s = kRequests[0];
  const StreamResult first = RunGenerate(*stub, GrpcRequest(s, v1::DECODING_MODE_NGRAM, true, /*seeded=*/false));
  const StreamResult second = RunGenerate(*stub, GrpcRequest(s, v1::DECODING_MODE_NGRAM, true, /*seeded=*/false));
  ASSERT_TRUE(first.status.ok() && second.status.ok());
  const uint64_t drawn = first.complete.usage().seed();
  EXPECT_NE(drawn, second.complete.usage().seed());
  EXPECT_LT(drawn, uint64_t{1} << 53);
  Sampled replay = s;
  replay.seed = drawn;
  const StreamResult again = RunGenerate(*stub, GrpcRequest(replay, v1::DECODING_MODE_LOSSLESS, false));
  ASSERT_TRUE(again.status.ok());
  EXPECT_EQ(again.ids, first.ids);

  Json body = HttpBody(s, "ngram", false, false);
  body.erase("seed");
  const HttpText http = PostCompletion(server_->http_port(), body);
  ASSERT_EQ(http.status, 200) << http.raw;
  ASSERT_TRUE(http.usage.contains("seed")) << http.raw;
  replay.seed = http.usage["seed"].get<uint64_t>();
  const HttpText replayed = PostCompletion(server_->http_port(), HttpBody(replay, "ar", false, false));
  EXPECT_EQ(replayed.text, http.text);
}

}  // namespace
}  // namespace crossreg::testing
