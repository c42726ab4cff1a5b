// The HTTP ports under slow clients, ambiguous framing, pipelining and typos, as an
// attacker and a careful operator would try them: slow connections cost no thread
// (a completion and a scrape still answer within a second), framing a proxy could
// read differently is refused, requests pipelined on one connection (plain or TLS)
// are each answered, unknown fields are named, and an owner's Abort and a deadline
// end with the statuses docs/api.md gives, in both request counters.
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/generation_client.h"
#include "tests/integration/prometheus_text.h"
#include "tests/integration/raw_http.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_certificates.h"
#include "tests/testing/loopback_socket.h"

namespace crossreg::testing {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

const char kHardeningToken[] = "alice-0123456789abcdef-token";

double SecondsAfter(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string WriteTokenFile() {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("crossreg_hardening_tokens_" + std::to_string(getpid()))).string();
  std::ofstream(path) << "alice:" << kHardeningToken << "\n";
  return path;
}

class HttpHardeningTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    token_file_ = new std::string(WriteTokenFile());
    server_ = new ServerProcess({"--auth_token_file=" + *token_file_});
    ASSERT_TRUE(server_->Start()) << server_->Log();
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Terminate(), 0) << server_->Log();
    delete server_;
    std::filesystem::remove(*token_file_);
    delete token_file_;
  }
  static ServerProcess* server_;
  static std::string* token_file_;
};

ServerProcess* HttpHardeningTest::server_ = nullptr;
std::string* HttpHardeningTest::token_file_ = nullptr;

TEST_F(HttpHardeningTest, SlowHeaderConnectionsBlockNeitherCompletionsNorScrapes) {
  // 256 connections on the API port and 32 on the metrics port, each sending one
  // header line every half second and never finishing its headers.
  std::vector<int> slow;
  for (int i = 0; i < 256 + 32; ++i) {
    const int port = i < 256 ? server_->http_port() : server_->metrics_port();
    const int fd = ConnectLoopback(port);
    ASSERT_GE(fd, 0) << "connection " << i;
    ASSERT_TRUE(SendAll(fd, i < 256 ? "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" : "GET /metrics HTTP/1.1\r\n"));
    slow.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    for (int line = 0; !stop.load(); ++line) {
      for (int fd : slow) SendAll(fd, absl::StrCat("X-Slow-", line, ": 1\r\n"));
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(600));

  Clock::time_point start = Clock::now();
  const RawResponse completion = Exchange(
      server_->http_port(), PostText("/v1/completions", R"({"prompt": "Once", "max_tokens": 4})", kHardeningToken));
  const double completion_s = SecondsAfter(start);
  start = Clock::now();
  const RawResponse scrape = Exchange(server_->metrics_port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  const double scrape_s = SecondsAfter(start);
  start = Clock::now();
  const RawResponse health = Exchange(server_->http_port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  const double health_s = SecondsAfter(start);
  stop.store(true);
  trickle.join();
  for (int fd : slow) close(fd);

  std::printf("[ figures  ] with 256 + 32 slow-header connections open: completion %.3f s, scrape %.3f s, "
              "/health %.3f s\n",
              completion_s, scrape_s, health_s);
  EXPECT_EQ(completion.status, 200) << completion.body;
  EXPECT_LT(completion_s, 1.0);
  EXPECT_EQ(scrape.status, 200);
  EXPECT_NE(scrape.body.find("crossreg_requests_ended_total"), std::string::npos);
  EXPECT_LT(scrape_s, 1.0);
  EXPECT_EQ(health.status, 200);
  EXPECT_LT(health_s, 1.0);
}

TEST_F(HttpHardeningTest, AmbiguousFramingIs400AndClosesTheConnection) {
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
  const std::string body = R"({"prompt": "Once", "max_tokens": 2})";
  const std::string length = absl::StrCat("Content-Length: ", body.size(), "\r\n");
  const struct {
    const char* what;
    std::string request;
    int status;
  } cases[] = {
      {"two different Content-Length", head + length + "Content-Length: 5\r\n\r\n" + body, 400},
      {"two equal Content-Length", head + length + length + "\r\n" + body, 400},
      {"chunked, identity with Content-Length",
       head + "Transfer-Encoding: chunked, identity\r\n" + length + "\r\n" + body, 400},
      {"chunked with Content-Length", head + "Transfer-Encoding: chunked\r\n" + length + "\r\n" + body, 400},
      {"a Content-Length list", head + "Content-Length: 35, 35\r\n\r\n" + body, 400},
      {"a bare LF", "GET /health HTTP/1.1\nHost: x\n\n", 400},
      {"headers over 16 KiB", head + "X-Big: " + std::string(20000, 'a') + "\r\n\r\n", 431},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const int fd = ConnectLoopback(server_->http_port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, c.request));
    ResponseReader reader = PlainReader(fd);
    RawResponse response;
    ASSERT_TRUE(reader.Next(&response));
    EXPECT_EQ(response.status, c.status) << response.body;
    EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(response.head), "connection: close")) << response.head;
    EXPECT_TRUE(reader.Closed());
    close(fd);
  }
  // The same request framed once is served.
  EXPECT_EQ(Exchange(server_->http_port(), PostText("/v1/completions", body, kHardeningToken)).status, 200);
  // Chunked alone is served too.
  const std::string chunked = absl::StrCat(head, "Authorization: Bearer ", kHardeningToken,
                                           "\r\nTransfer-Encoding: chunked\r\n\r\n", absl::Hex(body.size()), "\r\n",
                                           body, "\r\n0\r\n\r\n");
  EXPECT_EQ(Exchange(server_->http_port(), chunked).status, 200);
}

TEST_F(HttpHardeningTest, PipelinedRequestsAreEachAnsweredInOrder) {
  const int fd = ConnectLoopback(server_->http_port());
  ASSERT_GE(fd, 0);
  const std::string requests =
      absl::StrCat("GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
                   PostText("/v1/completions", R"({"prompt": "Once", "max_tokens": 3, "temperature": 0})", kHardeningToken),
                   "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ", kHardeningToken, "\r\n\r\n",
                   PostText("/v1/completions", R"({"prompt": "The dog", "max_tokens": 2, "temperature": 0})",
                            kHardeningToken));
  ASSERT_TRUE(SendAll(fd, requests));
  ResponseReader reader = PlainReader(fd);
  RawResponse r[4];
  for (RawResponse& response : r) ASSERT_TRUE(reader.Next(&response));
  EXPECT_EQ(r[0].status, 200);
  EXPECT_EQ(r[0].body, "ok\n");
  EXPECT_EQ(r[1].status, 200);
  EXPECT_EQ(Json::parse(r[1].body)["usage"]["completion_tokens"], 3);
  EXPECT_EQ(r[2].status, 200);
  EXPECT_EQ(Json::parse(r[2].body)["object"], "list");
  EXPECT_EQ(r[3].status, 200);
  EXPECT_EQ(Json::parse(r[3].body)["usage"]["completion_tokens"], 2);
  close(fd);
}

TEST_F(HttpHardeningTest, UnknownAndOutOfRangeFieldsAre400NamingThem) {
  const struct {
    const char* body;
    const char* field;
  } cases[] = {
      // Every unknown field is named, in key order; param is the first.
      {R"({"prompt": "def f():", "temprature": 0, "max_token": 5})", "temprature"},  // the first, in body order
      {R"({"prompt": "x", "top_k": -2})", "top_k"},
      {R"({"prompt": "x", "seed": -1})", "seed"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"prompt": "x", "temperature": 1e400})", "temperature"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    const RawResponse r = Exchange(server_->http_port(), PostText("/v1/completions", c.body, kHardeningToken));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(ErrorParam(r), c.field) << r.body;
    EXPECT_EQ(ErrorType(r), "invalid_request_error") << r.body;
  }
  const RawResponse typo = Exchange(server_->http_port(),
                                    PostText("/v1/completions", cases[0].body, kHardeningToken));
  EXPECT_NE(typo.body.find("temprature: unknown field (did you mean \\\"temperature\\\"?)"), std::string::npos)
      << typo.body;
  EXPECT_NE(typo.body.find("max_token: unknown field (did you mean \\\"max_tokens\\\"?)"), std::string::npos)
      << typo.body;
  // A bad deadline header is named too.
  const RawResponse timeout = Exchange(
      server_->http_port(),
      PostText("/v1/completions", R"({"prompt": "x"})", kHardeningToken, "X-Request-Timeout: soon\r\n"));
  EXPECT_EQ(timeout.status, 400);
  EXPECT_EQ(ErrorParam(timeout), "X-Request-Timeout") << timeout.body;
}

// A TLS client that writes several requests in one record batch, for pipelining.
class TlsClient {
 public:
  TlsClient(int port, const std::string& ca_file) : ctx_(SSL_CTX_new(TLS_client_method())) {
    SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    fd_ = ConnectLoopback(port);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set1_host(ssl_, "localhost");
    connected_ = SSL_connect(ssl_) == 1;
  }
  ~TlsClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    close(fd_);
  }
  bool connected() const { return connected_; }
  bool Send(const std::string& bytes) {
    return SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) == static_cast<int>(bytes.size());
  }
  ResponseReader Reader() {
    return ResponseReader([this](char* data, size_t size) -> ssize_t {
      const int n = SSL_read(ssl_, data, static_cast<int>(size));
      return n > 0 ? n : (SSL_get_error(ssl_, n) == SSL_ERROR_ZERO_RETURN ? 0 : -1);
    });
  }

 private:
  SSL_CTX* ctx_;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool connected_ = false;
};

TEST(HttpHardeningProcessTest, TlsPipeliningAndUnknownFieldsWhenAskedToIgnoreThem) {
  std::string error;
  auto pki = MakeTestPki(&error);
  ASSERT_NE(pki, nullptr) << error << " (the TLS tests need the openssl command)";
  ServerProcess server({"--tls_cert_file=" + pki->server_pem, "--tls_key_file=" + pki->server_key,
                        "--http_ignore_unknown_fields"},
                       "", pki->Credentials());
  ASSERT_TRUE(server.Start()) << server.Log();
  TlsClient tls(server.http_port(), pki->ca_pem);
  ASSERT_TRUE(tls.connected());
  const std::string body = R"({"prompt": "Once", "max_tokens": 3, "temprature": 0, "x_vendor_extra": 1})";
  ASSERT_TRUE(tls.Send(absl::StrCat(PostText("/v1/completions", body), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
                                    PostText("/v1/completions", body))));
  ResponseReader reader = tls.Reader();
  RawResponse r[3];
  for (RawResponse& response : r) ASSERT_TRUE(reader.Next(&response)) << server.Log();
  EXPECT_EQ(r[0].status, 200) << r[0].body;
  EXPECT_EQ(r[1].body, "ok\n");
  EXPECT_EQ(r[2].status, 200) << r[2].body;
  EXPECT_EQ(server.Terminate(), 0);
}

grpc::Status AbortOverGrpc(ServerProcess& server, const std::string& request_id) {
  auto stub = server.NewStub();
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", kHardeningToken));
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::AbortRequest request;
  request.set_request_id(request_id);
  v1::AbortResponse response;
  return stub->Abort(&context, request, &response);
}

TEST(HttpHardeningProcessTest, AbortIs499DeadlineIs504AndBothCountersSayWhich) {
  const std::string tokens = WriteTokenFile();
  // 20 ms per forward: 1500 tokens would take 30 s.
  ServerProcess server({"--auth_token_file=" + tokens, "--debug_forward_delay_ms=20"});
  ASSERT_TRUE(server.Start()) << server.Log();
  const int port = server.http_port();

  // The owner aborts a non-streaming request over gRPC: 499, "cancelled".
  RawResponse aborted;
  std::thread waiter([&] {
    aborted = Exchange(port, PostText("/v1/completions",
                                      R"({"prompt": "Once", "max_tokens": 1500, "ignore_eos": true, )"
                                      R"("request_id": "abort-me"})",
                                      kHardeningToken));
  });
  grpc::Status abort;
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    abort = AbortOverGrpc(server, "abort-me");
    if (abort.ok()) break;
  }
  waiter.join();
  EXPECT_TRUE(abort.ok()) << abort.error_message();
  EXPECT_EQ(aborted.status, 499) << aborted.body;
  EXPECT_EQ(ErrorType(aborted), "cancelled") << aborted.body;

  // A client deadline (X-Request-Timeout) that passes: 504, "timeout_error".
  const Clock::time_point start = Clock::now();
  const RawResponse late =
      Exchange(port, PostText("/v1/completions", R"({"prompt": "Once", "max_tokens": 1500, "ignore_eos": true})",
                              kHardeningToken, "X-Request-Timeout: 0.5\r\n"));
  EXPECT_EQ(late.status, 504) << late.body;
  EXPECT_EQ(ErrorType(late), "timeout_error") << late.body;
  EXPECT_LT(SecondsAfter(start), 5.0);

  // A gRPC deadline that passes: DEADLINE_EXCEEDED, in the call's status and counter.
  auto stub = server.NewStub();
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", kHardeningToken));
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  v1::GenerateRequest request = GreedyRequest("Once", v1::DECODING_MODE_AR, 1500);
  request.mutable_sampling()->set_ignore_eos(true);
  const StreamResult grpc_late = RunGenerate(*stub, request, &context);
  EXPECT_EQ(grpc_late.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);

  // A non-streaming client that hangs up: its KV is freed at once. It hangs up once its
  // request runs (a fixed wait could end before a loaded server has read it).
  const int fd = ConnectLoopback(port);
  ASSERT_TRUE(SendAll(fd, PostText("/v1/completions",
                                   R"({"prompt": "Once", "max_tokens": 1500, "ignore_eos": true})", kHardeningToken)));
  EXPECT_TRUE(MetricReaches(server.metrics_port(), "crossreg_num_requests_running", 1, 10));
  close(fd);
  EXPECT_TRUE(KvReturnsToZero(server.metrics_port(), 10));
  // The ends are counted as each request's handler finishes, which can trail the freed KV.
  EXPECT_TRUE(MetricReaches(server.metrics_port(), "crossreg_requests_ended_total{mode=\"ar\",reason=\"disconnected\"}",
                            1, 10));
  EXPECT_TRUE(MetricReaches(server.metrics_port(), "crossreg_requests_ended_total{mode=\"ar\",reason=\"deadline\"}", 2,
                            10));

  auto m = ScrapeMetrics(server.metrics_port());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)["crossreg_http_requests_total{route=\"/v1/completions\",status=\"499\"}"], 1);
  EXPECT_EQ((*m)["crossreg_http_requests_total{route=\"/v1/completions\",status=\"504\"}"], 1);
  // The deadline may end the call a moment before or after the scheduler sees it;
  // either way the status is DEADLINE_EXCEEDED, never CANCELLED.
  EXPECT_EQ((*m)["crossreg_grpc_requests_total{code=\"DEADLINE_EXCEEDED\",method=\"Generate\"}"], 1);
  EXPECT_EQ((*m)["crossreg_grpc_requests_total{code=\"CANCELLED\",method=\"Generate\"}"], 0);
  EXPECT_EQ((*m)["crossreg_requests_ended_total{mode=\"ar\",reason=\"aborted\"}"], 1);
  EXPECT_EQ((*m)["crossreg_requests_ended_total{mode=\"ar\",reason=\"deadline\"}"], 2);
  EXPECT_EQ((*m)["crossreg_requests_ended_total{mode=\"ar\",reason=\"disconnected\"}"], 1);
  EXPECT_EQ(server.Terminate(), 0) << server.Log();
  std::filesystem::remove(tokens);
}

}  // namespace
}  // namespace crossreg::testing
