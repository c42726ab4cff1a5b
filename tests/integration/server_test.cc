// The real crossreg-server on loopback, driven over gRPC with the generated stubs.
#include <atomic>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_features.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "gtest/gtest.h"
#include "tests/integration/generation_client.h"
#include "tests/integration/prometheus_text.h"
#include "tests/integration/random_adapter_server.h"
#include "tests/integration/server_process.h"
#include "engine/model/peft_writer.h"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {
namespace {

using v1::DecodingMode;

const std::vector<std::string> kPrompts = {"Once upon a time", "The little dog", "Lily wanted to"};

struct ModeCase {
  DecodingMode mode;
  const char* cli_name;
};
const ModeCase kCliModes[] = {{v1::DECODING_MODE_AR, "ar"},
                           {v1::DECODING_MODE_LOSSLESS, "lossless"},
                           {v1::DECODING_MODE_LOSSY, "lossy"},  // beta=0, tau=0
                           {v1::DECODING_MODE_NGRAM, "ngram"}};

class ServerTest : public RandomAdapterServerTest<ServerTest> {
 public:
  static constexpr const char* kName = "it";
  static constexpr uint64_t kAdapterSeed = 7;
};

TEST_F(ServerTest, GreedyStreamsEqualTheCliInEveryMode) {
  auto stub = server_->NewStub();
  for (const auto& m : kCliModes) {
    for (const auto& prompt : kPrompts) {
      SCOPED_TRACE(std::string(m.cli_name) + " / " + prompt);
      CliResult cli = RunCli(Stories260KGguf(), adapter_dir(), prompt, m.cli_name, 48);
      ASSERT_TRUE(cli.ok) << cli.error;
      StreamResult r = RunGenerate(*stub, GreedyRequest(prompt, m.mode, 48));
      ASSERT_TRUE(r.status.ok()) << r.status.error_message();
      ASSERT_TRUE(r.has_complete);
      EXPECT_EQ(r.ids, cli.ids);
      EXPECT_EQ(r.text, cli.text);
      EXPECT_EQ(r.complete.usage().completion_tokens(), static_cast<int64_t>(r.ids.size()));
      EXPECT_GT(r.complete.usage().prompt_tokens(), 0);
      EXPECT_GE(r.complete.spec().forwards(), 1);
      EXPECT_LE(r.complete.spec().forwards(), static_cast<int64_t>(r.ids.size()));
    }
  }
}

TEST_F(ServerTest, ConcurrentMixedModeStreamsEqualTheirSequentialResults) {
  auto stub = server_->NewStub();
  std::map<std::pair<int, int>, std::vector<int32_t>> sequential;
  for (int m = 0; m < 4; ++m) {
    for (int p = 0; p < static_cast<int>(kPrompts.size()); ++p) {
      StreamResult r = RunGenerate(*stub, GreedyRequest(kPrompts[p], kCliModes[m].mode, 40));
      ASSERT_TRUE(r.status.ok()) << r.status.error_message();
      sequential[{m, p}] = r.ids;
    }
  }
  constexpr int kStreams = 32;
  std::vector<StreamResult> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      auto own_stub = server_->NewStub();
      results[i] = RunGenerate(*own_stub, GreedyRequest(kPrompts[i % 3], kCliModes[i % 4].mode, 40));
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE("stream " + std::to_string(i));
    ASSERT_TRUE(results[i].status.ok()) << results[i].status.error_message();
    EXPECT_TRUE(results[i].has_complete);
    EXPECT_EQ(results[i].ids, (sequential[{i % 4, i % 3}]));
  }
}

v1::GenerateRequest LongRequest(const std::string& id) {
  v1::GenerateRequest request = GreedyRequest("Once upon a time", v1::DECODING_MODE_AR, 1500);
  request.set_request_id(id);
  request.mutable_sampling()->set_ignore_eos(true);
  return request;
}

TEST_F(ServerTest, ClientCancelFreesTheKvCache) {
  auto stub = server_->NewStub();
  grpc::ClientContext context;
  auto reader = stub->Generate(&context, LongRequest("cancel-me"));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  context.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(KvReturnsToZero(server_->metrics_port()));
}

TEST_F(ServerTest, AbortRpcEndsTheStreamAndFreesTheKvCache) {
  auto stub = server_->NewStub();
  grpc::ClientContext context;
  auto reader = stub->Generate(&context, LongRequest("abort-me"));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  grpc::ClientContext abort_context;
  v1::AbortRequest abort;
  abort.set_request_id("abort-me");
  v1::AbortResponse abort_response;
  ASSERT_TRUE(stub->Abort(&abort_context, abort, &abort_response).ok());
  EXPECT_TRUE(abort_response.found());
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(KvReturnsToZero(server_->metrics_port()));

  grpc::ClientContext again;
  EXPECT_EQ(stub->Abort(&again, abort, &abort_response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(ServerProcessTest, ShortDeadlineExpiresAndFreesTheKvCache) {
  // 20 ms per forward: the 1500-token request cannot finish within its deadline.
  ServerProcess server({"--debug_forward_delay_ms=20"});
  ASSERT_TRUE(server.Start()) << server.Log();
  auto stub = server.NewStub();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  StreamResult r = RunGenerate(*stub, LongRequest("deadline"), &context);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(KvReturnsToZero(server.metrics_port()));
  EXPECT_EQ(server.Terminate(), 0);
}

TEST_F(ServerTest, TextStopSequenceTruncatesAndStops) {
  auto stub = server_->NewStub();
  StreamResult full = RunGenerate(*stub, GreedyRequest("Once upon a time", v1::DECODING_MODE_LOSSLESS, 60));
  ASSERT_TRUE(full.status.ok());
  ASSERT_GT(full.text.size(), 30u);
  const std::string stop = full.text.substr(20, 5);
  const std::string expected = full.text.substr(0, full.text.find(stop));
  v1::GenerateRequest request = GreedyRequest("Once upon a time", v1::DECODING_MODE_LOSSLESS, 60);
  request.mutable_sampling()->add_stop(stop);
  StreamResult r = RunGenerate(*stub, request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text, expected);
  EXPECT_EQ(r.complete.finish_reason(), v1::FINISH_REASON_STOP);
  // The scheduler's own statistics, complete as for a request ended by its length:
  // drafts and acceptances included, not only the forwards this call saw.
  const v1::SpeculativeStats& spec = r.complete.spec();
  EXPECT_GT(spec.forwards(), 0);
  EXPECT_GT(spec.drafted(), 0);
  EXPECT_LE(spec.accepted(), spec.drafted());
  EXPECT_LE(spec.forwards(), full.complete.spec().forwards());
  EXPECT_GT(r.complete.timings().queue_seconds() + r.complete.timings().total_seconds(), 0);
  EXPECT_TRUE(KvReturnsToZero(server_->metrics_port()));
}

TEST_F(ServerTest, MalformedRequestsAreInvalidArgumentNamingTheField) {
  auto stub = server_->NewStub();
  struct Case {
    const char* name;
    std::function<void(v1::GenerateRequest&)> edit;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"empty prompt", [](v1::GenerateRequest& r) { r.set_text(""); }, "prompt"},
      {"no prompt", [](v1::GenerateRequest& r) { r.clear_prompt(); }, "prompt"},
      {"unknown mode", [](v1::GenerateRequest& r) { r.mutable_decoding()->set_mode(static_cast<DecodingMode>(42)); },
       "decoding.mode"},
      {"beta=1", [](v1::GenerateRequest& r) {
         r.mutable_decoding()->set_mode(v1::DECODING_MODE_LOSSY);
         r.mutable_decoding()->set_beta(1.0f);
       }, "decoding.beta"},
      {"tau=0.5", [](v1::GenerateRequest& r) {
         r.mutable_decoding()->set_mode(v1::DECODING_MODE_LOSSY);
         r.mutable_decoding()->set_tau(0.5f);
       }, "decoding.tau"},
      {"beta with lossless", [](v1::GenerateRequest& r) {
         r.mutable_decoding()->set_mode(v1::DECODING_MODE_LOSSLESS);
         r.mutable_decoding()->set_beta(0.5f);
       }, "decoding.beta"},
      {"gamma=-1", [](v1::GenerateRequest& r) { r.mutable_decoding()->set_gamma(-1); }, "decoding.gamma"},
      {"gamma>max", [](v1::GenerateRequest& r) { r.mutable_decoding()->set_gamma(17); }, "decoding.gamma"},
      {"fork_outcomes>gamma", [](v1::GenerateRequest& r) {
         r.mutable_decoding()->set_mode(v1::DECODING_MODE_LOSSLESS);
         r.mutable_decoding()->set_gamma(4);
         r.mutable_decoding()->set_fork_outcomes(5);
       }, "fork_outcomes"},
      {"ngram_assist with ar", [](v1::GenerateRequest& r) { r.mutable_decoding()->set_ngram_assist(true); },
       "ngram_assist"},
      {"blocks with ngram", [](v1::GenerateRequest& r) {
         r.mutable_decoding()->set_mode(v1::DECODING_MODE_NGRAM);
         r.mutable_decoding()->set_draft_layout(v1::DRAFT_LAYOUT_BLOCKS);
       }, "decoding.draft_layout"},
      {"unknown draft_layout", [](v1::GenerateRequest& r) {
         r.mutable_decoding()->set_mode(v1::DECODING_MODE_LOSSLESS);
         r.mutable_decoding()->set_draft_layout(static_cast<v1::DraftLayout>(7));
       }, "decoding.draft_layout"},
      {"temperature=-1", [](v1::GenerateRequest& r) { r.mutable_sampling()->set_temperature(-1); },
       "sampling.temperature"},
      {"top_p=1.5", [](v1::GenerateRequest& r) { r.mutable_sampling()->set_top_p(1.5f); }, "sampling.top_p"},
      {"top_k=-1", [](v1::GenerateRequest& r) { r.mutable_sampling()->set_top_k(-1); }, "sampling.top_k"},
      {"max_tokens=0", [](v1::GenerateRequest& r) { r.mutable_sampling()->set_max_tokens(0); }, "sampling.max_tokens"},
      {"token id out of vocab", [](v1::GenerateRequest& r) { r.mutable_token_ids()->add_ids(100000); },
       "prompt.token_ids"},
      {"prompt over the context", [](v1::GenerateRequest& r) {
         for (int i = 0; i < 2100; ++i) r.mutable_token_ids()->add_ids(100);
       }, "prompt"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    v1::GenerateRequest request = GreedyRequest("Once upon a time", v1::DECODING_MODE_AR, 8);
    c.edit(request);
    StreamResult r = RunGenerate(*stub, request);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << r.status.error_message();
    EXPECT_NE(r.status.error_message().find(c.field), std::string::npos) << r.status.error_message();
  }
  EXPECT_EQ(CheckHealth(server_->channel()), "SERVING");
}

TEST_F(ServerTest, GetModelInfoDescribesTheModel) {
  auto stub = server_->NewStub();
  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.vocab_size(), 512);
  EXPECT_EQ(info.num_layers(), 5);
  EXPECT_TRUE(info.has_adapter());
  EXPECT_EQ(info.adapter_rank(), 4);
  EXPECT_EQ(info.max_gamma(), 16);
  EXPECT_GT(info.context_length(), 0);
  // The host stays private without --expose_model_paths: a file name, no CPU name.
  EXPECT_EQ(info.model_path(), "stories260K.gguf");
  EXPECT_EQ(info.backend_device().find(cpu::CpuModelName()), std::string::npos) << info.backend_device();
  EXPECT_NE(info.backend_device().find("threads"), std::string::npos) << info.backend_device();
}

TEST_F(ServerTest, MetricsParseAndSpecCountersEqualPerRequestStats) {
  // A fresh server, so that the counters start at zero.
  ServerProcess server({"--adapter=" + adapter_dir()});
  ASSERT_TRUE(server.Start()) << server.Log();
  auto stub = server.NewStub();
  // Per mode: forwards, drafted, accepted, and accepted per 0-based position.
  std::map<std::string, std::array<int64_t, 3>> sums;
  std::map<std::pair<std::string, int>, int64_t> per_position;
  for (const auto& m : kCliModes) {
    for (const auto& prompt : kPrompts) {
      StreamResult r = RunGenerate(*stub, GreedyRequest(prompt, m.mode, 32));
      ASSERT_TRUE(r.status.ok());
      if (m.mode == v1::DECODING_MODE_AR) continue;
      auto& s = sums[m.cli_name];
      s[0] += r.complete.spec().forwards();
      s[1] += r.complete.spec().drafted();
      s[2] += r.complete.spec().accepted();
      for (int k = 0; k < r.complete.spec().accepted_per_position_size(); ++k) {
        per_position[{m.cli_name, k}] += r.complete.spec().accepted_per_position(k);
      }
    }
  }
  auto metrics = ScrapeMetrics(server.metrics_port());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  auto& m = *metrics;
  for (const auto& [mode, s] : sums) {
    const std::string label = "{mode=\"" + mode + "\"}";
    EXPECT_EQ(m["crossreg_spec_decode_num_drafts_total" + label], s[0]) << mode;
    EXPECT_EQ(m["crossreg_spec_decode_num_draft_tokens_total" + label], s[1]) << mode;
    EXPECT_EQ(m["crossreg_spec_decode_num_accepted_tokens_total" + label], s[2]) << mode;
  }
  for (const auto& [key, count] : per_position) {
    const std::string series = "crossreg_spec_decode_num_accepted_tokens_per_pos_total{mode=\"" + key.first +
                               "\",position=\"" + std::to_string(key.second) + "\"}";
    if (count == 0 && m.count(series) == 0) continue;
    EXPECT_EQ(m[series], count) << series;
  }
  for (const char* name : {"crossreg_time_to_first_token_seconds_count", "crossreg_e2e_request_latency_seconds_count",
                           "crossreg_request_queue_time_seconds_count"}) {
    EXPECT_EQ(m[name], 12) << name;
  }
  EXPECT_GT(m["crossreg_generation_tokens_total{mode=\"ar\"}"], 0);
  EXPECT_GT(m["crossreg_prompt_tokens_total"], 0);
  EXPECT_EQ(m.count("crossreg_num_requests_running"), 1u);
  EXPECT_EQ(m.count("crossreg_num_requests_waiting"), 1u);
  EXPECT_EQ(m["crossreg_grpc_requests_total{code=\"OK\",method=\"Generate\"}"], 12);
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(ServerProcessTest, AdaptiveGammaMeasuresItsCostCurveAndKeepsGreedyOutputs) {
  ServerProcess server({});  // adaptive γ is the default
  ASSERT_TRUE(server.Start()) << server.Log();
  EXPECT_NE(server.Log().find("forward cost curve (adaptive gamma, speedup metrics): 1 rows"), std::string::npos)
      << server.Log();
  auto stub = server.NewStub();
  int64_t ar_forwards = 0;
  for (int p = 0; p < 2; ++p) {
    CliResult cli = RunCli(Stories260KGguf(), "", kPrompts[p], "ngram", 48);
    ASSERT_TRUE(cli.ok) << cli.error;
    for (bool adaptive : {true, false}) {
      SCOPED_TRACE(std::string(kPrompts[p]) + (adaptive ? " adaptive" : " fixed gamma"));
      v1::GenerateRequest request = GreedyRequest(kPrompts[p], v1::DECODING_MODE_NGRAM, 48);
      if (!adaptive) request.mutable_decoding()->set_adaptive_gamma(false);  // unset = the server's default (on)
      StreamResult r = RunGenerate(*stub, request);
      ASSERT_TRUE(r.status.ok()) << r.status.error_message();
      EXPECT_EQ(r.ids, cli.ids);
      if (!adaptive) {
        EXPECT_EQ(r.complete.spec().ar_forwards(), 0);
      }
      ar_forwards += r.complete.spec().ar_forwards();
    }
  }
  auto m = ScrapeMetrics(server.metrics_port());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)["crossreg_spec_decode_ar_fallback_forwards_total{mode=\"ngram\"}"], static_cast<double>(ar_forwards));
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(ServerProcessTest, TinyKvCacheServesSixteenConcurrentRequests) {
  // 12 blocks x 16 tokens: a fraction of what 16 requests of ~70 tokens need at once.
  ServerProcess server({"--kv_blocks=12", "--kv_block_size=16"});
  ASSERT_TRUE(server.Start()) << server.Log();
  auto stub = server.NewStub();
  std::vector<std::vector<int32_t>> expected;
  for (int p = 0; p < 3; ++p) {
    CliResult cli = RunCli(Stories260KGguf(), "", kPrompts[p], p % 2 ? "ngram" : "ar", 60);
    ASSERT_TRUE(cli.ok) << cli.error;
    expected.push_back(cli.ids);
  }
  std::vector<StreamResult> results(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      auto own = server.NewStub();
      const int p = i % 3;
      results[i] = RunGenerate(*own, GreedyRequest(kPrompts[p], p % 2 ? v1::DECODING_MODE_NGRAM : v1::DECODING_MODE_AR, 60));
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 16; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    ASSERT_TRUE(results[i].status.ok()) << results[i].status.error_message();
    EXPECT_EQ(results[i].ids, expected[i % 3]);
  }
  EXPECT_TRUE(KvReturnsToZero(server.metrics_port()));
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(ServerProcessTest, FullQueueIsResourceExhaustedAndNoAdapterIsFailedPrecondition) {
  // 20 ms per forward keeps the first two requests busy while the others arrive.
  ServerProcess server({"--max_queue=1", "--max_running=1", "--debug_forward_delay_ms=20", "--adaptive_gamma=false"});
  ASSERT_TRUE(server.Start()) << server.Log();
  auto stub = server.NewStub();
  {
    StreamResult r = RunGenerate(*stub, GreedyRequest("Once upon a time", v1::DECODING_MODE_LOSSLESS, 8));
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << r.status.error_message();
  }
  {  // Adaptive gamma needs the cost curve that --adaptive_gamma (the default) measures.
    v1::GenerateRequest request = GreedyRequest("Once upon a time", v1::DECODING_MODE_NGRAM, 8);
    request.mutable_decoding()->set_adaptive_gamma(true);
    StreamResult r = RunGenerate(*stub, request);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << r.status.error_message();
    EXPECT_NE(r.status.error_message().find("adaptive_gamma"), std::string::npos) << r.status.error_message();
  }
  constexpr int kCalls = 5;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<StreamResult> results(kCalls);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) contexts.push_back(std::make_unique<grpc::ClientContext>());
  std::atomic<int> ended{0};
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      auto own = server.NewStub();
      results[i] = RunGenerate(*own, LongRequest(absl::StrCat("q", i)), contexts[i].get());
      ++ended;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // One call runs and one waits (each for seconds); the other three are refused at
  // once. Once they are, cancel the two.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ended.load() < kCalls - 2 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto& c : contexts) c->TryCancel();
  for (auto& t : threads) t.join();
  int exhausted = 0, cancelled = 0;
  for (const auto& r : results) {
    exhausted += r.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    cancelled += r.status.error_code() == grpc::StatusCode::CANCELLED;
  }
  EXPECT_EQ(exhausted, kCalls - 2);
  EXPECT_EQ(cancelled, 2);
  EXPECT_EQ(CheckHealth(server.channel()), "SERVING");
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(ServerProcessTest, SigtermDrainsRefusesNewCallsAndExitsZero) {
  // 20 ms per forward: the in-flight request outlasts the 1 s drain.
  ServerProcess server({"--drain_timeout_s=1", "--debug_forward_delay_ms=20"});
  ASSERT_TRUE(server.Start()) << server.Log();
  auto ready = HttpGet(server.metrics_port(), "/ready");
  EXPECT_TRUE(ready.ok()) << ready.status();
  auto stub = server.NewStub();
  grpc::ClientContext context;
  auto reader = stub->Generate(&context, LongRequest("in-flight"));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  server.SendSignal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Draining: the HTTP probes say "not ready", so no new traffic is routed here.
  auto draining = HttpGet(server.metrics_port(), "/ready");
  EXPECT_FALSE(draining.ok());
  EXPECT_NE(draining.status().message().find("503"), std::string::npos) << draining.status();
  EXPECT_TRUE(HttpGet(server.metrics_port(), "/health").ok());
  StreamResult refused = RunGenerate(*stub, GreedyRequest("Once upon a time", v1::DECODING_MODE_AR, 8));
  EXPECT_TRUE(refused.status.error_code() == grpc::StatusCode::UNAVAILABLE ||
              refused.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.status.error_code() << " " << refused.status.error_message();
  bool complete = false;
  while (reader->Read(&response)) complete |= response.has_complete();
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE((status.ok() && complete) || status.error_code() == grpc::StatusCode::CANCELLED)
      << status.error_code() << " " << status.error_message();
  EXPECT_EQ(server.Terminate(20), 0) << server.Log();
}

TEST(ServerProcessTest, CorruptModelFileExitsNonZeroWithAClearError) {
  const std::string path = std::filesystem::temp_directory_path() / ("crossreg_bad_" + std::to_string(getpid()) + ".gguf");
  { std::ofstream(path) << "GGUF this is not a model"; }
  ServerProcess server({}, path);
  EXPECT_FALSE(server.Start(10));
  EXPECT_NE(server.Terminate(10), 0);
  EXPECT_NE(server.Log().find("cannot load model"), std::string::npos) << server.Log();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace crossreg::testing
