// The event-driven HTTP server alone (server/http/http_server.h), in process, with
// deadlines short enough to watch: whole-phase deadlines (a trickle of bytes does not
// extend them), connection caps, keep-alive, chunked streaming from another thread,
// and the close callback that lets a handler stop work for a client that left.
#include "server/http/http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/loopback_socket.h"

namespace crossreg::server {
namespace {

using Clock = std::chrono::steady_clock;

int Connect(int port) {
  const int fd = testing::ConnectLoopback(port, 5);
  EXPECT_GE(fd, 0);
  return fd;
}

void Send(int fd, const std::string& bytes) { ASSERT_TRUE(testing::SendAll(fd, bytes)); }

// Everything until the peer closes (or 5 s pass).
std::string ReadToClose(int fd) {
  std::string all;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) all.append(buffer, static_cast<size_t>(n));
  return all;
}

// Reads until `marker` arrives.
std::string ReadUntil(int fd, const std::string& marker) {
  std::string all;
  char buffer[4096];
  while (all.find(marker) == std::string::npos) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    all.append(buffer, static_cast<size_t>(n));
  }
  return all;
}

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(HttpServerOptions options, HttpHandler handler = nullptr) {
    options.host = "127.0.0.1";
    if (!handler) {
      handler = [](std::shared_ptr<HttpExchange> e) {
        e->Respond(200, "text/plain", absl::StrCat("you asked for ", e->request().path));
      };
    }
    server_ = std::make_unique<HttpServer>(std::move(options), std::move(handler));
    ASSERT_TRUE(server_->Start().ok());
  }
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, ATrickleOfHeaderBytesGets408AtTheWholeRequestsDeadline) {
  HttpServerOptions o;
  o.header_timeout_s = 0.4;
  Start(o);
  const int fd = Connect(server_->port());
  const Clock::time_point start = Clock::now();
  Send(fd, "GET / HTTP/1.1\r\n");
  // One byte every 50 ms would keep a per-read timeout alive forever.
  for (int i = 0; i < 12; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    send(fd, "X", 1, MSG_NOSIGNAL);
  }
  const std::string reply = ReadToClose(fd);
  const double seconds = SecondsSince(start);
  EXPECT_EQ(reply.rfind("HTTP/1.1 408 ", 0), 0u) << reply;
  EXPECT_NE(reply.find("Connection: close"), std::string::npos);
  EXPECT_LT(seconds, 1.5);
  close(fd);
}

TEST_F(HttpServerTest, ASilentConnectionIsClosedAndABodyThatStallsGets408) {
  HttpServerOptions o;
  o.header_timeout_s = 0.3;
  o.body_timeout_s = 0.3;
  Start(o);
  const int silent = Connect(server_->port());
  const int stalled = Connect(server_->port());
  Send(stalled, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
  EXPECT_EQ(ReadToClose(silent), "");
  const std::string reply = ReadToClose(stalled);
  EXPECT_EQ(reply.rfind("HTTP/1.1 408 ", 0), 0u) << reply;
  EXPECT_NE(reply.find("body"), std::string::npos) << reply;
  close(silent);
  close(stalled);
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsThenIdleConnectionsClose) {
  HttpServerOptions o;
  o.idle_timeout_s = 0.3;
  Start(o);
  const int fd = Connect(server_->port());
  Send(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(ReadUntil(fd, "you asked for /a").find("200 OK"), std::string::npos);
  Send(fd, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(ReadUntil(fd, "you asked for /b").find("200 OK"), std::string::npos);
  const Clock::time_point idle = Clock::now();
  EXPECT_EQ(ReadToClose(fd), "");
  EXPECT_LT(SecondsSince(idle), 1.5);
  close(fd);
  // Connection: close is honoured.
  const int once = Connect(server_->port());
  Send(once, "GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string reply = ReadToClose(once);
  EXPECT_NE(reply.find("you asked for /c"), std::string::npos) << reply;
  close(once);
}

TEST_F(HttpServerTest, ConnectionsOverTheCapAre503AndFreedSlotsAreReused) {
  HttpServerOptions o;
  o.max_connections_per_client = 2;
  Start(o);
  const int a = Connect(server_->port());
  const int b = Connect(server_->port());
  Send(a, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");  // both are accepted before the third arrives
  ReadUntil(a, "you asked for /a");
  const int c = Connect(server_->port());
  const std::string refused = ReadToClose(c);
  EXPECT_EQ(refused.rfind("HTTP/1.1 503 ", 0), 0u) << refused;
  EXPECT_EQ(server_->connections(), 2u);
  close(b);
  close(c);
  for (int i = 0; i < 50 && server_->connections() > 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const int d = Connect(server_->port());
  Send(d, "GET /d HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(ReadUntil(d, "you asked for /d").find("200 OK"), std::string::npos);
  close(a);
  close(d);
}

TEST_F(HttpServerTest, AStreamWrittenFromAnotherThreadIsChunkedAndAClientThatLeavesIsReported) {
  std::promise<void> closed;
  std::shared_ptr<HttpExchange> held;
  std::promise<void> begun;
  Start({}, [&](std::shared_ptr<HttpExchange> e) {
    e->OnClose([&closed] { closed.set_value(); });
    e->BeginStream(200, "text/event-stream");
    held = e;
    begun.set_value();
  });
  const int fd = Connect(server_->port());
  Send(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  begun.get_future().wait();
  std::thread writer([&] {
    held->Write("data: one\n\n");
    held->Write("data: two\n\n");
  });
  writer.join();
  const std::string got = ReadUntil(fd, "data: two\n\n\r\n");
  EXPECT_NE(got.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << got;
  EXPECT_NE(got.find("b\r\ndata: one\n\n\r\n"), std::string::npos) << got;
  close(fd);
  EXPECT_EQ(closed.get_future().wait_for(std::chrono::seconds(2)), std::future_status::ready);
  EXPECT_TRUE(held->closed());
  held->Write("ignored");  // after the close: nothing, no crash
  // A callback registered after the close runs at once.
  bool late = false;
  held->OnClose([&late] { late = true; });
  EXPECT_TRUE(late);
}

TEST_F(HttpServerTest, MalformedRequestsGetTheParsersStatusAndTheConnectionCloses) {
  Start({});
  const int fd = Connect(server_->port());
  Send(fd, "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab");
  const std::string reply = ReadToClose(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.1 400 ", 0), 0u) << reply;
  EXPECT_NE(reply.find("Content-Length"), std::string::npos) << reply;
  close(fd);
}

}  // namespace
}  // namespace crossreg::server
