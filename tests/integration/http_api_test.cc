// The OpenAI-compatible HTTP front door on loopback (server/http/): the same text as
// the gRPC stream in every mode, streaming that concatenates to the full text, chat
// prompts built exactly by a Llama-3 template, errors in OpenAI's shape naming the
// field, tokens, limits, TLS, and a client that leaves mid-stream freeing its KV.
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "engine/io/gguf_file.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/model/peft_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/generation_client.h"
#include "tests/integration/prometheus_text.h"
#include "tests/integration/random_adapter_server.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_certificates.h"
#include "tests/testing/hf_model_writer.h"
#include "tests/testing/hf_tokenizer_writer.h"
#include "tests/testing/loopback_socket.h"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {
namespace {

using Json = nlohmann::json;

struct HttpReply {
  int status = 0;
  Json body;
  std::string raw;
};

HttpReply Post(int port, const std::string& path, const Json& body, const std::string& token = "") {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  auto res = client.Post(path.c_str(), headers, body.is_string() ? body.get<std::string>() : body.dump(),
                         "application/json");
  HttpReply reply;
  if (!res) return reply;
  reply.status = res->status;
  reply.raw = res->body;
  reply.body = Json::parse(res->body, nullptr, false);
  return reply;
}

// The server-sent events of a streaming reply: each `data:` payload, in order.
std::vector<std::string> SseEvents(const std::string& raw) {
  std::vector<std::string> events;
  for (absl::string_view block : absl::StrSplit(raw, "\n\n", absl::SkipEmpty())) {
    for (absl::string_view line : absl::StrSplit(block, '\n')) {
      if (absl::ConsumePrefix(&line, "data: ")) events.emplace_back(line);
    }
  }
  return events;
}

// The streamed text, and the usage event if any.
std::string StreamedText(const std::vector<std::string>& events, bool chat, Json* usage = nullptr,
                         std::string* finish_reason = nullptr) {
  std::string text;
  for (const std::string& e : events) {
    if (e == "[DONE]") continue;
    const Json j = Json::parse(e, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << e;
    if (j.contains("usage") && !j["usage"].is_null() && usage != nullptr) *usage = j["usage"];
    for (const Json& choice : j.value("choices", Json::array())) {
      if (chat) {
        text += choice["delta"].value("content", "");
      } else {
        text += choice.value("text", "");
      }
      if (!choice["finish_reason"].is_null() && finish_reason != nullptr) *finish_reason = choice["finish_reason"];
    }
  }
  return text;
}

class HttpApiTest : public RandomAdapterServerTest<HttpApiTest> {
 public:
  static constexpr const char* kName = "http";
  static constexpr uint64_t kAdapterSeed = 7;
};

const struct {
  v1::DecodingMode grpc;
  const char* http;
} kModes[] = {{v1::DECODING_MODE_AR, "ar"},
              {v1::DECODING_MODE_LOSSLESS, "lossless"},
              {v1::DECODING_MODE_LOSSY, "lossy"},
              {v1::DECODING_MODE_NGRAM, "ngram"}};

TEST_F(HttpApiTest, GreedyCompletionsEqualTheGrpcStreamInEveryMode) {
  auto stub = server_->NewStub();
  for (const auto& mode : kModes) {
    for (const char* prompt : {"Once upon a time", "The little dog"}) {
      SCOPED_TRACE(absl::StrCat(mode.http, ": ", prompt));
      StreamResult grpc = RunGenerate(*stub, GreedyRequest(prompt, mode.grpc, 40, 4));
      ASSERT_TRUE(grpc.status.ok()) << grpc.status.error_message();
      const HttpReply http = Post(server_->http_port(), "/v1/completions",
                                  {{"prompt", prompt}, {"max_tokens", 40}, {"temperature", 0}, {"mode", mode.http},
                                   {"gamma", 4}, {"return_token_ids", true}});
      ASSERT_EQ(http.status, 200) << http.raw;
      const Json& choice = http.body["choices"][0];
      EXPECT_EQ(choice["text"].get<std::string>(), grpc.text);
      EXPECT_EQ(choice["token_ids"].get<std::vector<int32_t>>(), grpc.ids);
      EXPECT_EQ(http.body["object"], "text_completion");
      EXPECT_EQ(http.body["model"], "stories260K");
      const Json& usage = http.body["usage"];
      EXPECT_EQ(usage["completion_tokens"], grpc.ids.size());
      EXPECT_EQ(usage["prompt_tokens"], grpc.complete.usage().prompt_tokens());
      EXPECT_EQ(usage["total_tokens"].get<int>(), usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());
      EXPECT_EQ(usage["forwards"], grpc.complete.spec().forwards());
      EXPECT_EQ(usage["drafted_tokens"], grpc.complete.spec().drafted());
      EXPECT_EQ(usage["accepted_tokens"], grpc.complete.spec().accepted());
      EXPECT_NEAR(usage["tokens_per_forward"].get<double>(), grpc.complete.spec().tokens_per_forward(), 1e-9);
      // The scheduler's timings, in order.
      const Json& timings = usage["timings"];
      EXPECT_GE(timings["queue_seconds"].get<double>(), 0.0) << usage;
      EXPECT_GE(timings["time_to_first_token_seconds"].get<double>(), timings["queue_seconds"].get<double>()) << usage;
      EXPECT_GT(timings["total_seconds"].get<double>(), timings["time_to_first_token_seconds"].get<double>()) << usage;
    }
  }
  // Both doors log each request's end with its timings in order: time to first token
  // before the total.
  const std::string log = server_->Log();
  int ends = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (!absl::StrContains(line, "request ended") || !absl::StrContains(line, "ttft_s=")) continue;
    const auto value = [&](absl::string_view key) {
      const size_t at = line.find(key);
      return std::stod(std::string(line.substr(at + key.size(), line.find(' ', at) - at - key.size())));
    };
    EXPECT_LE(value("ttft_s="), value("total_s=")) << line;
    EXPECT_GT(value("total_s="), 0.0) << line;
    ++ends;
  }
  EXPECT_GE(ends, 16) << log;
  // Token ids as the prompt.
  const HttpReply ids = Post(server_->http_port(), "/v1/completions",
                             {{"prompt", {1, 403, 407, 261, 378}}, {"max_tokens", 8}, {"temperature", 0}});
  ASSERT_EQ(ids.status, 200) << ids.raw;
  const HttpReply text = Post(server_->http_port(), "/v1/completions",
                              {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(ids.body["choices"][0]["text"], text.body["choices"][0]["text"]);
}

// A prompt sent again is served from the prefix cache: every full block of 16 tokens
// but the one holding the last prompt token, reported by both APIs and the metrics,
// with the same greedy output in every mode.
TEST_F(HttpApiTest, ARepeatedPromptIsServedFromThePrefixCacheOnBothApis) {
  std::string prompt;  // several full blocks, used by no other test
  for (int i = 0; i < 5; ++i) prompt += "The old cat sat by the warm fire and told a long story to the bird. ";
  auto stub = server_->NewStub();
  auto before = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(before.ok()) << before.status();
  const StreamResult first = RunGenerate(*stub, GreedyRequest(prompt, v1::DECODING_MODE_AR, 16));
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  const int64_t n = first.complete.usage().prompt_tokens();
  ASSERT_GT(n, 33);
  EXPECT_EQ(first.complete.usage().cached_prompt_tokens(), 0);
  const int64_t want = (n - 1) / 16 * 16;
  for (const auto& mode : kModes) {
    SCOPED_TRACE(mode.http);
    const StreamResult again = RunGenerate(*stub, GreedyRequest(prompt, mode.grpc, 16));
    ASSERT_TRUE(again.status.ok()) << again.status.error_message();
    EXPECT_EQ(again.complete.usage().cached_prompt_tokens(), want);
    EXPECT_EQ(again.ids, first.ids);
  }
  const HttpReply http = Post(server_->http_port(), "/v1/completions",
                              {{"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}, {"return_token_ids", true}});
  ASSERT_EQ(http.status, 200) << http.raw;
  EXPECT_EQ(http.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), want) << http.raw;
  EXPECT_EQ(http.body["choices"][0]["token_ids"].get<std::vector<int32_t>>(), first.ids);
  const HttpReply streamed =
      Post(server_->http_port(), "/v1/completions",
           {{"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}, {"stream", true},
            {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(streamed.status, 200) << streamed.raw;
  Json usage;
  StreamedText(SseEvents(streamed.raw), false, &usage);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), want) << usage;
  auto after = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(after.ok()) << after.status();
  const int requests = 1 + static_cast<int>(std::size(kModes)) + 2;
  EXPECT_EQ((*after)["crossreg_prefix_cache_queries_total"] - (*before)["crossreg_prefix_cache_queries_total"],
            n * requests);
  EXPECT_EQ((*after)["crossreg_prefix_cache_hits_total"] - (*before)["crossreg_prefix_cache_hits_total"],
            want * (requests - 1));
  EXPECT_GT((*after)["crossreg_kv_cache_cached_blocks"], 0);
}

// Log-probabilities: every mode reports AR's for the same greedy text (each token's
// from the control row that verified it), the same over gRPC and HTTP, streamed or not.
TEST_F(HttpApiTest, LogprobsAreTheSameInEveryModeOnBothApis) {
  auto stub = server_->NewStub();
  const std::string prompt = "The little dog";
  std::vector<v1::TokenLogprob> ar;
  for (const auto& mode : kModes) {
    SCOPED_TRACE(mode.http);
    v1::GenerateRequest request = GreedyRequest(prompt, mode.grpc, 24, 4);
    request.mutable_sampling()->set_top_logprobs(3);
    const StreamResult grpc = RunGenerate(*stub, request);
    ASSERT_TRUE(grpc.status.ok()) << grpc.status.error_message();
    ASSERT_EQ(grpc.logprobs.size(), grpc.ids.size());
    if (mode.grpc == v1::DECODING_MODE_AR) ar = grpc.logprobs;
    ASSERT_EQ(grpc.logprobs.size(), ar.size());
    for (size_t i = 0; i < ar.size(); ++i) {
      EXPECT_EQ(grpc.logprobs[i].token_id(), grpc.ids[i]);
      EXPECT_NEAR(grpc.logprobs[i].logprob(), ar[i].logprob(), 1e-5) << i;
      ASSERT_EQ(grpc.logprobs[i].top_size(), 3);
      for (int j = 0; j < 3; ++j) {
        EXPECT_EQ(grpc.logprobs[i].top(j).token_id(), ar[i].top(j).token_id());
        if (j > 0) {
          EXPECT_GE(grpc.logprobs[i].top(j - 1).logprob(), grpc.logprobs[i].top(j).logprob());
        }
      }
    }
    const HttpReply http = Post(server_->http_port(), "/v1/completions",
                                {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}, {"mode", mode.http},
                                 {"gamma", 4}, {"logprobs", 3}});
    ASSERT_EQ(http.status, 200) << http.raw;
    const Json& lp = http.body["choices"][0]["logprobs"];
    ASSERT_EQ(lp["token_logprobs"].size(), ar.size()) << http.raw;
    ASSERT_EQ(lp["tokens"].size(), ar.size());
    ASSERT_EQ(lp["top_logprobs"].size(), ar.size());
    ASSERT_EQ(lp["text_offset"].size(), ar.size());
    for (size_t i = 0; i < ar.size(); ++i) {
      EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), ar[i].logprob(), 1e-5);
      EXPECT_EQ(lp["top_logprobs"][i].size(), 3u);
    }
    EXPECT_EQ(lp["text_offset"][0], 0);
  }
  // Streamed: the chunks' logprobs concatenate to the whole reply's.
  const HttpReply streamed = Post(server_->http_port(), "/v1/completions",
                                  {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}, {"mode", "ngram"},
                                   {"logprobs", 3}, {"stream", true}});
  ASSERT_EQ(streamed.status, 200) << streamed.raw;
  std::vector<double> values;
  for (const std::string& e : SseEvents(streamed.raw)) {
    if (e == "[DONE]") continue;
    const Json j = Json::parse(e);
    for (const Json& choice : j["choices"]) {
      if (choice["logprobs"].is_null()) continue;
      for (const Json& v : choice["logprobs"]["token_logprobs"]) values.push_back(v.get<double>());
    }
  }
  ASSERT_EQ(values.size(), ar.size());
  for (size_t i = 0; i < ar.size(); ++i) EXPECT_NEAR(values[i], ar[i].logprob(), 1e-5);
}

// Penalties and biases: greedy ids in every mode equal AR's with the same settings, on
// both APIs; the settings change the text.
TEST_F(HttpApiTest, PenaltiesAndBiasKeepGreedyOutputsEqualInEveryModeOnBothApis) {
  auto stub = server_->NewStub();
  const std::string prompt = "Once upon a time";
  const StreamResult plain = RunGenerate(*stub, GreedyRequest(prompt, v1::DECODING_MODE_AR, 32, 4));
  ASSERT_TRUE(plain.status.ok());
  ASSERT_FALSE(plain.ids.empty());
  struct Setting {
    const char* name;
    std::function<void(v1::SamplingParams&)> grpc;
    Json http;
  };
  const int32_t banned = plain.ids[0];
  const std::vector<Setting> settings = {
      {"presence", [](v1::SamplingParams& s) { s.set_presence_penalty(1.5f); }, {{"presence_penalty", 1.5}}},
      {"frequency", [](v1::SamplingParams& s) { s.set_frequency_penalty(1.0f); }, {{"frequency_penalty", 1.0}}},
      {"repetition", [](v1::SamplingParams& s) { s.set_repetition_penalty(1.5f); }, {{"repetition_penalty", 1.5}}},
      {"logit_bias", [&](v1::SamplingParams& s) { (*s.mutable_logit_bias())[banned] = -100.0f; },
       {{"logit_bias", {{std::to_string(banned), -100}}}}},
  };
  for (const Setting& setting : settings) {
    SCOPED_TRACE(setting.name);
    std::vector<int32_t> ar;
    for (const auto& mode : kModes) {
      SCOPED_TRACE(mode.http);
      v1::GenerateRequest request = GreedyRequest(prompt, mode.grpc, 32, 4);
      setting.grpc(*request.mutable_sampling());
      const StreamResult grpc = RunGenerate(*stub, request);
      ASSERT_TRUE(grpc.status.ok()) << grpc.status.error_message();
      if (mode.grpc == v1::DECODING_MODE_AR) {
        ar = grpc.ids;
        EXPECT_NE(ar, plain.ids) << "the setting changes the greedy text";
      }
      EXPECT_EQ(grpc.ids, ar);
      Json body = {{"prompt", prompt}, {"max_tokens", 32}, {"temperature", 0}, {"mode", mode.http},
                   {"gamma", 4}, {"return_token_ids", true}};
      body.update(setting.http);
      const HttpReply http = Post(server_->http_port(), "/v1/completions", body);
      ASSERT_EQ(http.status, 200) << http.raw;
      EXPECT_EQ(http.body["choices"][0]["token_ids"].get<std::vector<int32_t>>(), ar);
    }
    if (std::string(setting.name) == "logit_bias") {
      for (int32_t id : ar) EXPECT_NE(id, banned) << "a -100 bias bans the token";
    }
  }
}

TEST_F(HttpApiTest, StreamingChunksConcatenateToTheFullText) {
  for (const auto& mode : kModes) {
    SCOPED_TRACE(mode.http);
    const Json request = {{"prompt", "Once upon a time"}, {"max_tokens", 48}, {"temperature", 0},
                          {"mode", mode.http}, {"stop", {" park"}}};
    const HttpReply full = Post(server_->http_port(), "/v1/completions", request);
    ASSERT_EQ(full.status, 200) << full.raw;
    Json streaming = request;
    streaming["stream"] = true;
    streaming["stream_options"] = {{"include_usage", true}};
    const HttpReply stream = Post(server_->http_port(), "/v1/completions", streaming);
    ASSERT_EQ(stream.status, 200) << stream.raw;
    const std::vector<std::string> events = SseEvents(stream.raw);
    ASSERT_GE(events.size(), 3u);
    EXPECT_EQ(events.back(), "[DONE]");
    Json usage;
    std::string finish;
    EXPECT_EQ(StreamedText(events, false, &usage, &finish), full.body["choices"][0]["text"].get<std::string>());
    EXPECT_EQ(finish, full.body["choices"][0]["finish_reason"].get<std::string>());
    EXPECT_EQ(usage["completion_tokens"], full.body["usage"]["completion_tokens"]);
  }
}

TEST_F(HttpApiTest, AStopStringEndsWithTheSchedulersCompleteStatistics) {
  const Json base = {{"prompt", "Once upon a time"}, {"max_tokens", 60}, {"temperature", 0}, {"mode", "lossless"}};
  const HttpReply full = Post(server_->http_port(), "/v1/completions", base);
  ASSERT_EQ(full.status, 200) << full.raw;
  const std::string text = full.body["choices"][0]["text"];
  ASSERT_GT(text.size(), 30u);
  Json stopped = base;
  stopped["stop"] = {text.substr(20, 5)};
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "whole");
    Json request = stopped;
    Json usage;
    std::string finish;
    if (stream) {
      request["stream"] = true;
      request["stream_options"] = {{"include_usage", true}};
      const HttpReply r = Post(server_->http_port(), "/v1/completions", request);
      ASSERT_EQ(r.status, 200) << r.raw;
      EXPECT_EQ(StreamedText(SseEvents(r.raw), false, &usage, &finish), text.substr(0, text.find(text.substr(20, 5))));
    } else {
      const HttpReply r = Post(server_->http_port(), "/v1/completions", request);
      ASSERT_EQ(r.status, 200) << r.raw;
      usage = r.body["usage"];
      finish = r.body["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(finish, "stop");
    EXPECT_GT(usage["forwards"].get<int64_t>(), 0) << usage;
    EXPECT_GT(usage["drafted_tokens"].get<int64_t>(), 0) << usage;
    EXPECT_LE(usage["accepted_tokens"].get<int64_t>(), usage["drafted_tokens"].get<int64_t>()) << usage;
    EXPECT_LE(usage["forwards"].get<int64_t>(), full.body["usage"]["forwards"].get<int64_t>()) << usage;
  }
}

TEST_F(HttpApiTest, ErrorsAre400NamingTheFieldInOpenAisShape) {
  const int port = server_->http_port();
  const std::pair<Json, std::string> cases[] = {
      {Json("{\"prompt\": \"x\", "), "body"},
      {{{"prompt", "x"}, {"mode", "warp"}}, "mode"},
      {{{"prompt", "x"}, {"mode", "lossy"}, {"beta", 1.0}}, "beta"},
      {{{"prompt", "x"}, {"n", 2}}, "n"},
      {{{"prompt", "x"}, {"temperature", "hot"}}, "temperature"},
      {{{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens"},
      {{{"prompt", "x"}, {"gamma", 99}, {"mode", "lossless"}}, "gamma"},
      {{{"prompt", ""}}, "prompt"},
      {{{"prompt", {1, 100000}}}, "prompt"},
      {{{"max_tokens", 3}}, "prompt"},
      {{{"prompt", "x"}, {"logprobs", 30}}, "logprobs"},
      {{{"prompt", "x"}, {"logit_bias", {{"99999", 1}}}}, "logit_bias[99999]"},
  };
  for (const auto& [body, field] : cases) {
    SCOPED_TRACE(body.dump());
    const HttpReply r = Post(port, "/v1/completions", body);
    EXPECT_EQ(r.status, 400) << r.raw;
    ASSERT_TRUE(r.body.contains("error")) << r.raw;
    EXPECT_EQ(r.body["error"]["param"], field) << r.raw;
    EXPECT_EQ(r.body["error"]["type"], "invalid_request_error");
    EXPECT_EQ(r.body["error"]["message"].get<std::string>().rfind(field + ":", 0), 0u) << r.raw;
  }
  const HttpReply chat = Post(port, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  EXPECT_EQ(chat.status, 400) << chat.raw;
  EXPECT_NE(chat.raw.find("no chat template"), std::string::npos) << chat.raw;
  const HttpReply model = Post(port, "/v1/completions", {{"prompt", "x"}, {"model", "gpt-4"}});
  EXPECT_EQ(model.status, 404) << model.raw;
  httplib::Client client("127.0.0.1", port);
  auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(Json::parse(models->body)["data"][0]["id"], "stories260K");
  EXPECT_EQ(client.Get("/nowhere")->status, 404);
  EXPECT_EQ(client.Get("/health")->status, 200);
}

// Sends a streaming request on a raw socket, reads until the first token event,
// then closes the connection.
void StreamAndHangUp(int port, const std::string& body) {
  const int fd = ConnectLoopback(port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: ",
                                       "application/json\r\nContent-Length: ", body.size(), "\r\n\r\n", body)));
  std::string received;
  char buffer[4096];
  while (received.find("\"text\"") == std::string::npos) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    ASSERT_GT(n, 0) << received;
    received.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
}

TEST(HttpProcessTest, AClientLeavingMidStreamFreesItsKv) {
  // 20 ms per forward: 1500 tokens would take 30 s; the KV must be back long before.
  ServerProcess server({"--debug_forward_delay_ms=20"});
  ASSERT_TRUE(server.Start()) << server.Log();
  StreamAndHangUp(server.http_port(), Json{{"prompt", "Once upon a time"}, {"max_tokens", 1500}, {"stream", true},
                                          {"ignore_eos", true}, {"temperature", 0}}
                                          .dump());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(KvReturnsToZero(server.metrics_port(), 10));
  std::printf("[ figures  ] KV back to 0 %.2f s after the client hung up\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  auto m = ScrapeMetrics(server.metrics_port());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)["crossreg_requests_ended_total{mode=\"ar\",reason=\"disconnected\"}"], 1);
  EXPECT_NE(server.Log().find("api=http"), std::string::npos) << server.Log();
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(HttpProcessTest, TokensLimitsAndDraining) {
  const std::string tokens =
      (std::filesystem::temp_directory_path() / ("crossreg_http_tokens_" + std::to_string(getpid()))).string();
  std::ofstream(tokens) << "alice:alice-0123456789abcdef\nbob:bob-0123456789abcdef00\n";
  ServerProcess server({"--auth_token_file=" + tokens, "--max_streams_per_client=1", "--debug_forward_delay_ms=20",
                        "--drain_timeout_s=1"});
  ASSERT_TRUE(server.Start()) << server.Log();
  const int port = server.http_port();
  const Json small = {{"prompt", "Once"}, {"max_tokens", 2}};
  const HttpReply none = Post(port, "/v1/completions", small);
  EXPECT_EQ(none.status, 401) << none.raw;
  EXPECT_EQ(none.body["error"]["type"], "authentication_error");
  EXPECT_EQ(Post(port, "/v1/completions", small, "wrong-0123456789abcdef").status, 401);
  EXPECT_EQ(Post(port, "/v1/completions", small, "alice-0123456789abcdef").status, 200);
  httplib::Client client("127.0.0.1", port);
  EXPECT_EQ(client.Get("/health")->status, 200);  // probes carry no token
  EXPECT_EQ(client.Get("/v1/models")->status, 401);

  // Alice's one stream slot is taken by a long stream; her second request gets 429,
  // Bob is served. The probes below compete for the same slot: when one of them wins
  // the race against the holder (a loaded host starts the holder's thread late), the
  // holder is refused and tries again, so the slot ends up held either way.
  std::thread holder([&] {
    for (int attempt = 0; attempt < 100; ++attempt) {
      const HttpReply held = Post(port, "/v1/completions",
                                  {{"prompt", "Once"}, {"max_tokens", 100}, {"ignore_eos", true}, {"stream", true}},
                                  "alice-0123456789abcdef");
      if (held.status != 429) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  HttpReply second;
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    second = Post(port, "/v1/completions", small, "alice-0123456789abcdef");
    if (second.status == 429) break;
  }
  EXPECT_EQ(second.status, 429) << second.raw;
  EXPECT_EQ(second.body["error"]["type"], "rate_limit_error");
  EXPECT_EQ(Post(port, "/v1/completions", small, "bob-0123456789abcdef00").status, 200);
  holder.join();

  // Draining: 503.
  std::thread stream([&] {
    Post(port, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 500}, {"ignore_eos", true}},
         "bob-0123456789abcdef00");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  server.SendSignal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const HttpReply draining = Post(port, "/v1/completions", small, "alice-0123456789abcdef");
  EXPECT_EQ(draining.status, 503) << draining.raw;
  stream.join();
  EXPECT_EQ(server.Terminate(20), 0) << server.Log();
  std::filesystem::remove(tokens);
}

TEST(HttpProcessTest, HttpsWithTheSameTlsFiles) {
  std::string error;
  auto pki = MakeTestPki(&error);
  ASSERT_NE(pki, nullptr) << error << " (the TLS tests need the openssl command)";
  ServerProcess server({"--tls_cert_file=" + pki->server_pem, "--tls_key_file=" + pki->server_key}, "",
                       pki->Credentials());
  ASSERT_TRUE(server.Start()) << server.Log();
  httplib::SSLClient tls("127.0.0.1", server.http_port());
  tls.set_ca_cert_path(pki->ca_pem.c_str());
  tls.enable_server_certificate_verification(true);
  auto ok = tls.Post("/v1/completions", Json{{"prompt", "Once"}, {"max_tokens", 3}}.dump(), "application/json");
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  EXPECT_EQ(ok->status, 200) << ok->body;
  httplib::Client plain("127.0.0.1", server.http_port());
  plain.set_read_timeout(2, 0);
  auto refused = plain.Get("/health");
  EXPECT_TRUE(!refused || refused->status != 200);
  EXPECT_EQ(server.Terminate(), 0);
}

// A HF directory converted from stories260K whose tokenizer knows Llama 3's turn
// markers and whose tokenizer_config.json carries a Llama-3 style chat template.
std::string MakeLlama3ChatModel() {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("crossreg_chat_model_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  EXPECT_TRUE(WriteHfModelFromGguf(Stories260KGguf(), dir, 1).ok());
  auto gguf = GgufFile::Open(Stories260KGguf());
  EXPECT_TRUE(gguf.ok());
  auto spec = TokenizerSpecFromGguf((*gguf)->metadata());
  EXPECT_TRUE(spec.ok());
  // Rarely used pieces at the end of the vocabulary become the special markers.
  const int n = static_cast<int>(spec->tokens.size());
  const std::pair<int, const char*> specials[] = {
      {1, "<|begin_of_text|>"}, {n - 4, "<|start_header_id|>"}, {n - 3, "<|end_header_id|>"}, {n - 2, "<|eot_id|>"}};
  if (spec->token_types.empty()) spec->token_types.assign(spec->tokens.size(), TokenizerSpec::TokenType::kNormal);
  for (const auto& [id, piece] : specials) {
    spec->tokens[id] = piece;
    spec->token_types[id] = TokenizerSpec::TokenType::kControl;
  }
  EXPECT_TRUE(WriteHfTokenizerJson(*spec, dir + "/tokenizer.json").ok());
  // Our own rendering of the Llama 3 turn format as a Jinja template.
  const std::string chat_template =
      "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
      "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
  std::ofstream(dir + "/tokenizer_config.json") << Json{{"bos_token", "<|begin_of_text|>"},
                                                         {"chat_template", chat_template}}
                                                       .dump(2);
  return dir;
}

TEST(HttpProcessTest, ChatPromptsAreExactlyWhatTheLlama3TemplateDefines) {
  const std::string dir = MakeLlama3ChatModel();
  ServerProcess server({}, dir);
  ASSERT_TRUE(server.Start()) << server.Log();
  EXPECT_NE(server.Log().find("chat template: jinja"), std::string::npos) << server.Log();
  const Json messages = {{{"role", "system"}, {"content", "You are terse. "}},
                         {{"role", "user"}, {"content", "Tell me a story."}}};
  const HttpReply r = Post(server.http_port(), "/v1/chat/completions",
                           {{"messages", messages}, {"max_tokens", 6}, {"temperature", 0}, {"return_token_ids", true}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["object"], "chat.completion");
  EXPECT_EQ(r.body["choices"][0]["message"]["role"], "assistant");
  // The prompt as the template writes it (contents trimmed), tokenized with the
  // markers as special tokens and no BOS added beyond the template's own.
  const std::string expected_text =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nTell me a story.<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  auto model = LoadModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int32_t> expected = (*model)->tokenizer->Encode(expected_text, false, /*parse_special=*/true);
  EXPECT_EQ(r.body["prompt_token_ids"].get<std::vector<int32_t>>(), expected);
  // The markers are single tokens at the right places.
  const int n = (*model)->tokenizer->vocab_size();
  EXPECT_EQ(expected.front(), 1);
  EXPECT_EQ(std::count(expected.begin(), expected.end(), n - 4), 3);  // <|start_header_id|>
  EXPECT_EQ(std::count(expected.begin(), expected.end(), n - 2), 2);  // <|eot_id|>
  // Streaming chat: the deltas concatenate to the message.
  const HttpReply stream = Post(server.http_port(), "/v1/chat/completions",
                                {{"messages", messages}, {"max_tokens", 6}, {"temperature", 0}, {"stream", true}});
  ASSERT_EQ(stream.status, 200) << stream.raw;
  EXPECT_EQ(StreamedText(SseEvents(stream.raw), true), r.body["choices"][0]["message"]["content"].get<std::string>());
  // A Llama-3 template takes any order of turns; a bad role is named.
  const HttpReply bad = Post(server.http_port(), "/v1/chat/completions",
                             {{"messages", {{{"role", "wizard"}, {"content", "x"}}}}});
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(bad.body["error"]["param"], "messages[0].role") << bad.raw;
  EXPECT_EQ(server.Terminate(), 0);
  std::filesystem::remove_all(dir);
}


// A chat request as the OpenAI Python client sends it with logprobs, penalties, a bias,
// stop and seed: accepted; the chat logprobs shape (token, logprob, bytes, top_logprobs)
// with values equal in AR and n-gram drafting, streamed or not.
TEST(HttpProcessTest, ChatLogprobsWithPenaltiesAsTheOpenAiClientSendsThem) {
  const std::string dir = MakeLlama3ChatModel();
  ServerProcess server({}, dir);
  ASSERT_TRUE(server.Start()) << server.Log();
  const Json messages = {{{"role", "user"}, {"content", "Tell me a story."}}};
  Json body = {{"messages", messages}, {"model", std::filesystem::path(dir).filename().string()}, {"max_tokens", 12}, {"temperature", 0},
               {"logprobs", true}, {"top_logprobs", 2}, {"presence_penalty", 0.5}, {"frequency_penalty", 0.25},
               {"logit_bias", {{"5", -100}}}, {"stop", {"\n\n\n"}}, {"seed", 3}, {"n", 1}, {"stream", false}};
  std::vector<double> ar_values;
  for (const char* mode : {"ar", "ngram"}) {
    SCOPED_TRACE(mode);
    Json request = body;
    request["mode"] = mode;
    const HttpReply r = Post(server.http_port(), "/v1/chat/completions", request);
    ASSERT_EQ(r.status, 200) << r.raw;
    const Json& content = r.body["choices"][0]["logprobs"]["content"];
    ASSERT_TRUE(content.is_array()) << r.raw;
    ASSERT_EQ(content.size(), r.body["usage"]["completion_tokens"].get<size_t>()) << r.raw;
    std::string text;
    std::vector<double> values;
    for (const Json& entry : content) {
      const std::string token = entry["token"].get<std::string>();
      const double logprob = entry["logprob"].get<double>();
      EXPECT_LE(logprob, 0.0);
      EXPECT_EQ(entry["bytes"].size(), token.rfind("bytes:", 0) == 0 ? entry["bytes"].size() : token.size());
      for (const Json& b : entry["bytes"]) text.push_back(static_cast<char>(b.get<int>()));
      ASSERT_EQ(entry["top_logprobs"].size(), 2u);
      EXPECT_GE(entry["top_logprobs"][0]["logprob"].get<double>(), entry["top_logprobs"][1]["logprob"].get<double>());
      // The chosen token is listed when it ranks within the top 2.
      if (logprob >= entry["top_logprobs"][1]["logprob"].get<double>()) {
        bool listed = false;
        for (const Json& t : entry["top_logprobs"]) listed |= t["token"] == entry["token"];
        EXPECT_TRUE(listed) << entry.dump();
      }
      values.push_back(logprob);
    }
    EXPECT_EQ(text, r.body["choices"][0]["message"]["content"].get<std::string>());
    if (ar_values.empty()) ar_values = values;
    ASSERT_EQ(values.size(), ar_values.size());
    for (size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(values[i], ar_values[i], 1e-5) << i;
  }
  // Streamed: each chunk carries its tokens' entries.
  body["stream"] = true;
  body["mode"] = "ngram";
  const HttpReply stream = Post(server.http_port(), "/v1/chat/completions", body);
  ASSERT_EQ(stream.status, 200) << stream.raw;
  std::vector<double> streamed;
  for (const std::string& e : SseEvents(stream.raw)) {
    if (e == "[DONE]") continue;
    const Json j = Json::parse(e);
    for (const Json& choice : j["choices"]) {
      if (!choice.contains("logprobs") || choice["logprobs"].is_null()) continue;
      for (const Json& entry : choice["logprobs"]["content"]) streamed.push_back(entry["logprob"].get<double>());
    }
  }
  ASSERT_EQ(streamed.size(), ar_values.size()) << stream.raw;
  for (size_t i = 0; i < streamed.size(); ++i) EXPECT_NEAR(streamed[i], ar_values[i], 1e-5) << i;
  // Sampled with a seed: the same seed gives the same reply.
  body["stream"] = false;
  body["temperature"] = 0.8;
  const HttpReply first = Post(server.http_port(), "/v1/chat/completions", body);
  const HttpReply second = Post(server.http_port(), "/v1/chat/completions", body);
  ASSERT_EQ(first.status, 200) << first.raw;
  ASSERT_EQ(second.status, 200) << second.raw;
  EXPECT_EQ(first.body["choices"][0]["message"]["content"], second.body["choices"][0]["message"]["content"]);
  EXPECT_EQ(server.Terminate(), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace crossreg::testing
