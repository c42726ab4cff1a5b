// The server as an attacker and a demanding operator would try it: bearer tokens,
// reflection behind them, ownership of requests, per-client stream limits, prompt
// and message limits, malformed bytes, idle connections to /metrics, keepalive, and
// TLS / mutual TLS with right and wrong credentials (docs/security.md).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/integration/generation_client.h"
#include "tests/integration/prometheus_text.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_certificates.h"
#include "tests/testing/loopback_socket.h"

namespace crossreg::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

const char kAliceToken[] = "alice-0123456789abcdef-token";
const char kBobToken[] = "bob-0123456789abcdef-token00";

double MillisecondsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string WriteTempFile(const std::string& name, const std::string& text) {
  const std::string path =
      (std::filesystem::temp_directory_path() / absl::StrCat("crossreg_", getpid(), "_", name)).string();
  std::ofstream(path) << text;
  return path;
}

// A context that carries `token` (none when empty), with a deadline.
std::unique_ptr<grpc::ClientContext> Context(const std::string& token, double timeout_s = 30) {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
  context->set_deadline(std::chrono::system_clock::now() + milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  return context;
}

// Generates until cancelled: with --debug_forward_delay_ms each forward takes a while.
v1::GenerateRequest EndlessRequest(const std::string& id) {
  v1::GenerateRequest request = GreedyRequest("Once upon a time", v1::DECODING_MODE_AR, 1500);
  request.set_request_id(id);
  request.mutable_sampling()->set_ignore_eos(true);
  return request;
}

// One open Generate stream, read on demand.
struct OpenStream {
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader;
  bool ReadChunk() {
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
      if (response.has_chunk()) return true;
    }
    return false;
  }
  grpc::Status Cancel() {
    context->TryCancel();
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
    }
    return reader->Finish();
  }
};

OpenStream Open(v1::Generation::Stub& stub, const std::string& token, const v1::GenerateRequest& request) {
  OpenStream s;
  s.context = Context(token, 120);
  s.reader = stub.Generate(s.context.get(), request);
  return s;
}

grpc::Status Abort(v1::Generation::Stub& stub, const std::string& token, const std::string& id) {
  v1::AbortRequest request;
  request.set_request_id(id);
  v1::AbortResponse response;
  auto context = Context(token);
  return stub.Abort(context.get(), request, &response);
}

grpc::Status ModelInfo(v1::Generation::Stub& stub, const std::string& token) {
  v1::ModelInfo info;
  auto context = Context(token, 5);
  return stub.GetModelInfo(context.get(), v1::GetModelInfoRequest(), &info);
}

// A raw Generate call with hand-made request bytes.
grpc::Status GenerateRawBytes(const std::shared_ptr<grpc::Channel>& channel, const std::string& token,
                              const std::string& bytes) {
  grpc::GenericStub stub(channel);
  auto context = Context(token, 10);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(context.get(), "/crossreg.v1.Generation/Generate", &cq);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  call->Write(request, reinterpret_cast<void*>(2));
  cq.Next(&tag, &ok);
  call->WritesDone(reinterpret_cast<void*>(3));
  cq.Next(&tag, &ok);
  grpc::ByteBuffer response;
  for (;;) {
    call->Read(&response, reinterpret_cast<void*>(4));
    cq.Next(&tag, &ok);
    if (!ok) break;
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    token_file_ = new std::string(
        WriteTempFile("tokens", absl::StrCat("# test tokens\nalice:", kAliceToken, "\nbob:", kBobToken, "\n")));
    server_ = new ServerProcess({"--auth_token_file=" + *token_file_, "--max_streams_per_client=2",
                                 "--debug_forward_delay_ms=20"});
    ASSERT_TRUE(server_->Start()) << server_->Log();
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) {
      EXPECT_EQ(server_->Terminate(), 0) << server_->Log();
    }
    delete server_;
    server_ = nullptr;
    std::filesystem::remove(*token_file_);
    delete token_file_;
  }
  static ServerProcess* server_;
  static std::string* token_file_;
};
ServerProcess* SecurityTest::server_ = nullptr;
std::string* SecurityTest::token_file_ = nullptr;

TEST_F(SecurityTest, EveryCallNeedsAValidTokenButHealthChecksStayOpen) {
  auto stub = server_->NewStub();
  const grpc::Status none = ModelInfo(*stub, "");
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(none.error_message().find("authorization: Bearer"), std::string::npos) << none.error_message();
  const grpc::Status wrong = ModelInfo(*stub, "not-a-token-0123456789");
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(wrong.error_message().find("not-a-token"), std::string::npos) << "the error echoes the token";
  {
    auto context = Context("");
    context->AddMetadata("authorization", absl::StrCat("Basic ", kAliceToken));
    v1::ModelInfo info;
    EXPECT_EQ(stub->GetModelInfo(context.get(), v1::GetModelInfoRequest(), &info).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(Abort(*stub, "", "anything").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  {
    auto context = Context("");
    StreamResult r = RunGenerate(*stub, GreedyRequest("Once", v1::DECODING_MODE_AR, 2), context.get());
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(r.chunks, 0);
  }
  EXPECT_EQ(CheckHealth(server_->channel()), "SERVING");
  EXPECT_TRUE(ModelInfo(*stub, kAliceToken).ok());
  {
    auto context = Context(kBobToken);
    StreamResult r = RunGenerate(*stub, GreedyRequest("Once", v1::DECODING_MODE_AR, 3), context.get());
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.ids.size(), 3u);
  }
}

TEST_F(SecurityTest, ReflectionFollowsAuthentication) {
  using grpc::reflection::v1alpha::ServerReflection;
  using grpc::reflection::v1alpha::ServerReflectionRequest;
  using grpc::reflection::v1alpha::ServerReflectionResponse;
  auto stub = ServerReflection::NewStub(server_->channel());
  {
    auto context = Context("");
    auto stream = stub->ServerReflectionInfo(context.get());
    ServerReflectionRequest request;
    request.set_list_services("");
    stream->Write(request);
    stream->WritesDone();
    ServerReflectionResponse response;
    EXPECT_FALSE(stream->Read(&response));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  auto context = Context(kAliceToken);
  auto stream = stub->ServerReflectionInfo(context.get());
  ServerReflectionRequest list;
  list.set_list_services("");
  ASSERT_TRUE(stream->Write(list));
  ServerReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  std::vector<std::string> services;
  for (const auto& s : response.list_services_response().service()) services.push_back(s.name());
  EXPECT_NE(std::find(services.begin(), services.end(), "crossreg.v1.Generation"), services.end());
  EXPECT_NE(std::find(services.begin(), services.end(), "grpc.health.v1.Health"), services.end());

  ServerReflectionRequest symbol;
  symbol.set_file_containing_symbol("crossreg.v1.Generation");
  ASSERT_TRUE(stream->Write(symbol));
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_EQ(response.file_descriptor_response().file_descriptor_proto_size(), 1);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(response.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.name(), "crossreg/v1/generation.proto");
  ASSERT_EQ(file.service_size(), 1);
  EXPECT_EQ(file.service(0).method_size(), 3);

  ServerReflectionRequest missing;
  missing.set_file_containing_symbol("no.such.Symbol");
  ASSERT_TRUE(stream->Write(missing));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(SecurityTest, OnlyTheOwnerCanAbortARequest) {
  auto stub = server_->NewStub();
  OpenStream alice = Open(*stub, kAliceToken, EndlessRequest("shared-id"));
  ASSERT_TRUE(alice.ReadChunk());
  // Bob cannot see or cancel it, and may use the same id for his own request.
  const grpc::Status by_bob = Abort(*stub, kBobToken, "shared-id");
  EXPECT_EQ(by_bob.error_code(), grpc::StatusCode::NOT_FOUND) << by_bob.error_message();
  OpenStream bob = Open(*stub, kBobToken, EndlessRequest("shared-id"));
  ASSERT_TRUE(bob.ReadChunk());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(alice.ReadChunk()) << "alice's stream ended after bob's Abort";
  EXPECT_TRUE(Abort(*stub, kAliceToken, "shared-id").ok());
  v1::GenerateResponse response;
  while (alice.reader->Read(&response)) {
  }
  EXPECT_EQ(alice.reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(bob.ReadChunk()) << "aborting alice's request ended bob's";
  EXPECT_EQ(bob.Cancel().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(Abort(*stub, kAliceToken, "shared-id").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(SecurityTest, ServerAssignedIdsAre128RandomBits) {
  auto stub = server_->NewStub();
  std::set<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto context = Context(kAliceToken);
    StreamResult r = RunGenerate(*stub, GreedyRequest("Once", v1::DECODING_MODE_AR, 1), context.get());
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_TRUE(std::regex_match(r.complete.request_id(), std::regex("[0-9a-f]{32}"))) << r.complete.request_id();
    ids.insert(r.complete.request_id());
  }
  EXPECT_EQ(ids.size(), 3u);
}

TEST_F(SecurityTest, StreamsBeyondAClientsLimitAreRefusedWhileOthersAreServed) {
  auto stub = server_->NewStub();
  OpenStream first = Open(*stub, kAliceToken, EndlessRequest("limit-1"));
  OpenStream second = Open(*stub, kAliceToken, EndlessRequest("limit-2"));
  ASSERT_TRUE(first.ReadChunk());
  ASSERT_TRUE(second.ReadChunk());
  {
    auto context = Context(kAliceToken);
    StreamResult third = RunGenerate(*stub, GreedyRequest("Once", v1::DECODING_MODE_AR, 2), context.get());
    EXPECT_EQ(third.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(third.status.error_message().find("max_streams_per_client"), std::string::npos)
        << third.status.error_message();
  }
  {
    auto context = Context(kBobToken);
    StreamResult other = RunGenerate(*stub, GreedyRequest("Once", v1::DECODING_MODE_AR, 2), context.get());
    EXPECT_TRUE(other.status.ok()) << other.status.error_message();
  }
  EXPECT_EQ(first.Cancel().error_code(), grpc::StatusCode::CANCELLED);
  // The slot comes back when the call is done on the server, a moment later.
  grpc::Status again;
  for (int i = 0; i < 50; ++i) {
    auto context = Context(kAliceToken);
    again = RunGenerate(*stub, GreedyRequest("Once", v1::DECODING_MODE_AR, 2), context.get()).status;
    if (again.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(again.ok()) << again.error_message();
  EXPECT_EQ(second.Cancel().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(SecurityTest, HugePromptIsRefusedBeforeTokenizing) {
  auto stub = server_->NewStub();
  v1::GenerateRequest huge = GreedyRequest(std::string(4'000'000, 'a'), v1::DECODING_MODE_AR, 1);
  std::vector<double> refusal_ms;
  for (int i = 0; i < 5; ++i) {
    auto context = Context(kAliceToken);
    const auto start = Clock::now();
    StreamResult r = RunGenerate(*stub, huge, context.get());
    refusal_ms.push_back(MillisecondsSince(start));
    ASSERT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(r.status.error_message().find("prompt.text: 4000000 bytes"), std::string::npos)
        << r.status.error_message();
  }
  std::sort(refusal_ms.begin(), refusal_ms.end());
  // The whole round trip, 4 MB over loopback included, bounds the server's time.
  std::printf("[ figures  ] 4 MB prompt refused: round trip median %.1f ms (min %.1f ms)\n", refusal_ms[2],
              refusal_ms[0]);
}

TEST_F(SecurityTest, MalformedBytesAreInvalidArgumentNamingTheField) {
  v1::GenerateRequest request = GreedyRequest("Once", v1::DECODING_MODE_AR, 2);
  request.set_text("placeholder");
  request.mutable_sampling()->add_stop("stopword");
  std::string bytes = request.SerializeAsString();
  // Same length replacements keep the message well-formed but not UTF-8.
  std::string bad_text = bytes;
  bad_text.replace(bad_text.find("placeholder"), 11, "place\xff\xfeolder");
  std::string bad_stop = bytes;
  bad_stop.replace(bad_stop.find("stopword"), 8, "stop\xc3(rd");
  const grpc::Status text = GenerateRawBytes(server_->channel(), kAliceToken, bad_text);
  EXPECT_EQ(text.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(text.error_message().rfind("prompt.text: not valid UTF-8", 0), 0u) << text.error_message();
  const grpc::Status stop = GenerateRawBytes(server_->channel(), kAliceToken, bad_stop);
  EXPECT_EQ(stop.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(stop.error_message().rfind("sampling.stop: not valid UTF-8", 0), 0u) << stop.error_message();
  const grpc::Status garbage = GenerateRawBytes(server_->channel(), kAliceToken, "\xff\xff\xff\xff\x0f");
  EXPECT_EQ(garbage.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(garbage.error_message().find("crossreg.v1.GenerateRequest"), std::string::npos) << garbage.error_message();
  // Without credentials nothing is parsed.
  EXPECT_EQ(GenerateRawBytes(server_->channel(), "", bad_text).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Protobuf's complaint went into the replies, not one log line per call.
  EXPECT_EQ(server_->Log().find("invalid UTF-8"), std::string::npos) << server_->Log();
  EXPECT_TRUE(ModelInfo(*server_->NewStub(), kAliceToken).ok());
}

// Opens a TCP connection and sends an HTTP request line with no blank line after it.
int HalfOpenHttpConnection(int port) {
  const int fd = ConnectLoopback(port);
  if (fd >= 0 && !SendAll(fd, "GET /metrics HTTP/1.1\r\n")) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST_F(SecurityTest, HalfOpenConnectionsDoNotBlockMetrics) {
  std::vector<int> idle;
  for (int i = 0; i < 2; ++i) {
    const int fd = HalfOpenHttpConnection(server_->metrics_port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(100));  // let the server pick them up
  const auto start = Clock::now();
  auto metrics = ScrapeMetrics(server_->metrics_port());
  const double ms = MillisecondsSince(start);
  for (int fd : idle) close(fd);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  std::printf("[ figures  ] scrape with 2 half-open connections: %.1f ms\n", ms);
  EXPECT_LT(ms, 1000);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Clients looping 4 MB prompts: a server that tokenized them all would make an
// unrelated 1-token request wait seconds, so they are refused by their byte count
// (INVALID_ARGUMENT) first. Figures, not a timing assertion; the refusals are checked.
TEST(SecurityProcessTest, HugePromptsCostLittleServerTimeAndDoNotStallOthers) {
  ServerProcess server({"--log_level=debug"});
  ASSERT_TRUE(server.Start()) << server.Log();
  auto stub = server.NewStub();
  auto one_token_ms = [&] {
    const auto start = Clock::now();
    StreamResult r = RunGenerate(*stub, GreedyRequest("Once upon a time", v1::DECODING_MODE_AR, 1));
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    return MillisecondsSince(start);
  };
  std::vector<double> quiet;
  for (int i = 0; i < 20; ++i) quiet.push_back(one_token_ms());
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0}, wrong{0};
  std::vector<std::thread> attackers;
  const v1::GenerateRequest huge = GreedyRequest(std::string(4'000'000, 'a'), v1::DECODING_MODE_AR, 1);
  for (int t = 0; t < 4; ++t) {
    attackers.emplace_back([&] {
      auto own = v1::Generation::NewStub(server.NewChannel(grpc::InsecureChannelCredentials()));
      while (!stop.load()) {
        StreamResult r = RunGenerate(*own, huge);
        (r.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? refused : wrong)++;
      }
    });
  }
  std::this_thread::sleep_for(milliseconds(200));
  std::vector<double> attacked;
  for (int i = 0; i < 20; ++i) attacked.push_back(one_token_ms());
  stop.store(true);
  for (auto& t : attackers) t.join();
  EXPECT_GT(refused.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  // The server's own time per refusal, from its debug log.
  std::vector<double> server_ms;
  const std::regex refusal("Generate refused after ([0-9.]+) ms: .*prompt\\.text: 4000000 bytes");
  const std::string log = server.Log();
  for (auto it = std::sregex_iterator(log.begin(), log.end(), refusal); it != std::sregex_iterator(); ++it) {
    server_ms.push_back(std::stod((*it)[1]));
  }
  ASSERT_FALSE(server_ms.empty()) << log.substr(0, 2000);
  std::printf("[ figures  ] 1-token request median: %.1f ms quiet, %.1f ms while 4 clients loop 4 MB prompts "
              "(%d refused); server time per refusal: median %.2f ms, max %.2f ms\n",
              Median(quiet), Median(attacked), refused.load(), Median(server_ms),
              *std::max_element(server_ms.begin(), server_ms.end()));
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(SecurityProcessTest, IdleClientsMayPingAsOftenAsAllowed) {
  ServerProcess server({"--min_client_ping_interval_s=1"});
  ASSERT_TRUE(server.Start()) << server.Log();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 1200);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  auto channel = server.NewChannel(grpc::InsecureChannelCredentials(), args);
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5)));
  // A server that refused these pings would answer GOAWAY too_many_pings after two
  // strikes (about 3.6 s) and the channel would leave READY.
  const auto until = Clock::now() + std::chrono::milliseconds(5000);
  while (Clock::now() < until) {
    ASSERT_EQ(channel->GetState(false), GRPC_CHANNEL_READY) << server.Log();
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(server.Log().find("too_many_pings"), std::string::npos);
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(SecurityProcessTest, TlsServesTlsClientsOnly) {
  std::string error;
  auto pki = MakeTestPki(&error);
  ASSERT_NE(pki, nullptr) << error << " (the TLS tests need the openssl command)";
  ServerProcess server({"--tls_cert_file=" + pki->server_pem, "--tls_key_file=" + pki->server_key}, "",
                       pki->Credentials());
  ASSERT_TRUE(server.Start()) << server.Log();
  EXPECT_NE(server.Log().find("(TLS, no authentication)"), std::string::npos) << server.Log();
  // Kubernetes' gRPC probes cannot speak TLS; its HTTP probes use the metrics port.
  EXPECT_EQ(HttpGet(server.metrics_port(), "/ready").value_or(""), "ready\n");
  EXPECT_EQ(HttpGet(server.metrics_port(), "/health").value_or(""), "ok\n");
  auto stub = server.NewStub();
  EXPECT_TRUE(ModelInfo(*stub, "").ok());
  StreamResult r = RunGenerate(*stub, GreedyRequest("Once upon a time", v1::DECODING_MODE_AR, 4));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids.size(), 4u);
  // A plaintext client, and one that does not trust the server's CA, get nowhere.
  auto plaintext = v1::Generation::NewStub(server.NewChannel(grpc::InsecureChannelCredentials()));
  EXPECT_EQ(ModelInfo(*plaintext, "").error_code(), grpc::StatusCode::UNAVAILABLE);
  auto distrusting = v1::Generation::NewStub(server.NewChannel(pki->Credentials("", pki->other_ca_pem)));
  EXPECT_EQ(ModelInfo(*distrusting, "").error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(SecurityProcessTest, MutualTlsNeedsACertificateFromTheCaAndItsIdentityOwnsRequests) {
  std::string error;
  auto pki = MakeTestPki(&error);
  ASSERT_NE(pki, nullptr) << error << " (the TLS tests need the openssl command)";
  ServerProcess server({"--tls_cert_file=" + pki->server_pem, "--tls_key_file=" + pki->server_key,
                        "--tls_client_ca_file=" + pki->ca_pem, "--debug_forward_delay_ms=20"},
                       "", pki->Credentials("alice"));
  ASSERT_TRUE(server.Start()) << server.Log();
  auto alice = server.NewStub();
  auto bob = v1::Generation::NewStub(server.NewChannel(pki->Credentials("bob")));
  EXPECT_TRUE(ModelInfo(*alice, "").ok());
  EXPECT_TRUE(ModelInfo(*bob, "").ok());
  auto anonymous = v1::Generation::NewStub(server.NewChannel(pki->Credentials()));
  EXPECT_EQ(ModelInfo(*anonymous, "").error_code(), grpc::StatusCode::UNAVAILABLE);
  auto mallory = v1::Generation::NewStub(server.NewChannel(pki->Credentials("mallory")));
  EXPECT_EQ(ModelInfo(*mallory, "").error_code(), grpc::StatusCode::UNAVAILABLE);

  OpenStream stream = Open(*alice, "", EndlessRequest("cert-owned"));
  ASSERT_TRUE(stream.ReadChunk());
  EXPECT_EQ(Abort(*bob, "", "cert-owned").error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(stream.ReadChunk());
  EXPECT_TRUE(Abort(*alice, "", "cert-owned").ok());
  v1::GenerateResponse response;
  while (stream.reader->Read(&response)) {
  }
  EXPECT_EQ(stream.reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_NE(server.Log().find("client=cert:alice"), std::string::npos) << server.Log();
  EXPECT_EQ(server.Terminate(), 0);
}

TEST(SecurityProcessTest, BadCredentialsFilesStopTheServerWithAClearError) {
  std::string error;
  auto pki = MakeTestPki(&error);
  ASSERT_NE(pki, nullptr) << error << " (the TLS tests need the openssl command)";
  const std::string short_tokens = WriteTempFile("short_tokens", "alice:short\n");
  struct Case {
    std::vector<std::string> flags;
    std::string expected;
  };
  const Case cases[] = {
      {{"--tls_cert_file=" + pki->server_pem, "--tls_key_file=" + pki->Key("bob")},
       "is not the key of the first certificate"},
      {{"--tls_cert_file=/no/such/cert.pem", "--tls_key_file=" + pki->server_key}, "/no/such/cert.pem: cannot open"},
      {{"--tls_cert_file=" + pki->server_pem, "--tls_key_file=" + pki->server_key, "--tls_client_ca_file=" + short_tokens},
       "not a PEM file"},
      {{"--tls_cert_file=" + pki->server_pem}, "--tls_cert_file and --tls_key_file go together"},
      {{"--auth_token_file=" + short_tokens}, "line 1: token shorter than 16 characters"},
      {{"--auth_token_file=/no/such/tokens"}, "cannot open"},
  };
  for (const Case& c : cases) {
    ServerProcess server(c.flags);
    EXPECT_FALSE(server.Start(10)) << c.expected;
    EXPECT_NE(server.Terminate(), 0);
    EXPECT_NE(server.Log().find(c.expected), std::string::npos) << "want: " << c.expected << "\nlog: " << server.Log();
  }
  std::filesystem::remove(short_tokens);
}

}  // namespace
}  // namespace crossreg::testing
