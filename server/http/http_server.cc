#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "server/http/tls_transport.h"
#include "server/http/worker_pool.h"
#include "spdlog/spdlog.h"

namespace crossreg::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kListenKey = 0;
constexpr uint64_t kWakeKey = 1;
// How often deadlines are checked: their resolution.
constexpr auto kSweepInterval = std::chrono::milliseconds(100);

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string StatusLine(int status) {
  return absl::StrCat("HTTP/1.1 ", status, " ", HttpServer::ReasonPhrase(status), "\r\n");
}

struct Connection;

// Where exchanges on other threads hand the I/O thread a connection with new output.
struct Mailbox {
  std::mutex mu;
  std::vector<std::shared_ptr<Connection>> dirty;
  bool stopped = false;
  int wake_fd = -1;

  void Notify(std::shared_ptr<Connection> connection) {
    std::lock_guard<std::mutex> lock(mu);
    if (stopped) return;
    dirty.push_back(std::move(connection));
    const uint64_t one = 1;
    ssize_t ignored = write(wake_fd, &one, sizeof(one));
    (void)ignored;  // a full counter already wakes the loop
  }
};

struct Connection {
  // The I/O thread's alone.
  uint64_t key = 0;
  int fd = -1;
  std::string peer;
  std::unique_ptr<TlsSession> tls;
  std::string identity;
  std::string in;
  std::string out;
  HttpRequestParser parser;
  Clock::time_point accepted;
  Clock::time_point request_start;  // the first byte of the request being read
  Clock::time_point headers_done;
  Clock::time_point idle_since;
  Clock::time_point last_write;     // the last write progress, or when output appeared
  int64_t served = 0;               // requests answered on this connection
  bool reading_request = false;     // a request's first byte has arrived, its headers have not all
  bool reading_body = false;
  bool handling = false;            // a request is with its handler
  bool tls_wants_write = false;
  bool peer_closed = false;
  bool close_after_write = false;
  bool closed = false;
  uint32_t interest = 0;

  // Shared with the exchange (under mu).
  std::mutex mu;
  std::string outbox;
  bool response_ended = false;
  bool keep_alive = true;
  bool gone = false;
  std::function<void()> on_close;

  explicit Connection(HttpParserLimits limits) : parser(limits) {}
};

class Exchange : public HttpExchange {
 public:
  Exchange(std::shared_ptr<Connection> connection, std::shared_ptr<Mailbox> mailbox, HttpRequest request,
           std::string peer, std::string identity)
      : connection_(std::move(connection)),
        mailbox_(std::move(mailbox)),
        request_(std::move(request)),
        peer_(std::move(peer)),
        identity_(std::move(identity)) {}

  const HttpRequest& request() const override { return request_; }
  const std::string& peer_address() const override { return peer_; }
  const std::string& peer_identity() const override { return identity_; }

  void Respond(int status, std::string_view content_type, std::string body, const Headers& headers) override {
    {
      std::lock_guard<std::mutex> lock(connection_->mu);
      if (connection_->gone || status_ != 0) return;
      status_ = status;
      std::string& o = connection_->outbox;
      o += StatusLine(status);
      AppendHeaders(content_type, headers, request_.keep_alive, &o);
      absl::StrAppend(&o, "Content-Length: ", body.size(), "\r\n\r\n");
      if (request_.method != "HEAD") o += body;  // HEAD: the length a GET would have, no body
      EndLocked(request_.keep_alive);
    }
    mailbox_->Notify(connection_);
  }

  void BeginStream(int status, std::string_view content_type, const Headers& headers) override {
    {
      std::lock_guard<std::mutex> lock(connection_->mu);
      if (connection_->gone || status_ != 0) return;
      status_ = status;
      // HTTP/1.0 has no chunked coding: the stream ends with the connection.
      chunked_ = request_.version_minor >= 1;
      std::string& o = connection_->outbox;
      o += StatusLine(status);
      AppendHeaders(content_type, headers, request_.keep_alive && chunked_, &o);
      if (chunked_) o += "Transfer-Encoding: chunked\r\n";
      o += "\r\n";
    }
    mailbox_->Notify(connection_);
  }

  void Write(std::string_view data) override {
    if (data.empty()) return;
    {
      std::lock_guard<std::mutex> lock(connection_->mu);
      if (connection_->gone || status_ == 0 || ended_) return;
      std::string& o = connection_->outbox;
      if (chunked_) {
        char size[24];
        snprintf(size, sizeof(size), "%zx\r\n", data.size());
        o += size;
      }
      o.append(data.data(), data.size());
      if (chunked_) o += "\r\n";
    }
    mailbox_->Notify(connection_);
  }

  void End() override {
    {
      std::lock_guard<std::mutex> lock(connection_->mu);
      if (connection_->gone || status_ == 0 || ended_) return;
      if (chunked_) connection_->outbox += "0\r\n\r\n";
      EndLocked(request_.keep_alive && chunked_);
    }
    mailbox_->Notify(connection_);
  }

  bool closed() const override {
    std::lock_guard<std::mutex> lock(connection_->mu);
    return connection_->gone;
  }

  void OnClose(std::function<void()> callback) override {
    {
      std::lock_guard<std::mutex> lock(connection_->mu);
      if (!connection_->gone) {
        if (!ended_) connection_->on_close = std::move(callback);
        return;
      }
    }
    callback();
  }

  int status() const override {
    std::lock_guard<std::mutex> lock(connection_->mu);
    return status_;
  }

 private:
  static void AppendHeaders(std::string_view content_type, const Headers& headers, bool keep_alive, std::string* o) {
    if (!content_type.empty()) {
      // (Debian's Abseil has its own string_view, which StrAppend takes and std's does not convert to.)
      o->append("Content-Type: ").append(content_type).append("\r\n");
    }
    for (const auto& [name, value] : headers) absl::StrAppend(o, name, ": ", value, "\r\n");
    if (!keep_alive) *o += "Connection: close\r\n";
  }

  void EndLocked(bool keep_alive) {
    ended_ = true;
    connection_->response_ended = true;
    connection_->keep_alive = keep_alive;
    connection_->on_close = nullptr;
  }

  std::shared_ptr<Connection> connection_;
  std::shared_ptr<Mailbox> mailbox_;
  const HttpRequest request_;
  const std::string peer_;
  const std::string identity_;
  // Under connection_->mu.
  int status_ = 0;
  bool chunked_ = false;
  bool ended_ = false;
};

std::string PeerAddress(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (address.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text, sizeof(text));
  } else if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
      inet_ntop(AF_INET, &v6.sin6_addr.s6_addr[12], text, sizeof(text));
    } else {
      inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
    }
  }
  return text;
}

}  // namespace

struct HttpServer::Impl {
  Impl(HttpServerOptions options, HttpHandler handler) : o(std::move(options)), handler(std::move(handler)) {}

  absl::Status Listen();
  void Loop();
  void Accept();
  void Refuse(int fd);
  void OnEvents(Connection& c, uint32_t events);
  void ReadAvailable(Connection& c);
  void Advance(const std::shared_ptr<Connection>& c);
  void ParseRequests(const std::shared_ptr<Connection>& c);
  void StartExchange(const std::shared_ptr<Connection>& c);
  void Flush(Connection& c);
  void TakeOutput(const std::shared_ptr<Connection>& c);
  void Fail(Connection& c, int status, const std::string& message);
  void Close(Connection& c);
  void Sweep();
  void UpdateInterest(Connection& c);

  HttpServerOptions o;
  HttpHandler handler;
  std::unique_ptr<TlsContext> tls;
  std::unique_ptr<WorkerPool> workers;
  std::shared_ptr<Mailbox> mailbox = std::make_shared<Mailbox>();
  int listen_fd = -1;
  int epoll_fd = -1;
  int port = 0;
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> open{0};
  uint64_t next_key = 2;
  std::unordered_map<uint64_t, std::shared_ptr<Connection>> connections;
  std::unordered_map<std::string, size_t> per_client;
};

absl::Status HttpServer::Impl::Listen() {
  std::string host = o.host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(o.port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(o.name, " ", o.host, ":", o.port, ": ", gai_strerror(rc)));
  }
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && listen_fd < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0) {
      listen_fd = fd;
    } else {
      why = std::strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(found);
  if (listen_fd < 0) {
    return absl::UnavailableError(absl::StrCat(o.name, " ", o.host, ":", o.port, ": cannot bind (", why, ")"));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &length);
  port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                           : reinterpret_cast<sockaddr_in&>(bound).sin_port);
  return absl::OkStatus();
}

void HttpServer::Impl::Loop() {
  epoll_event events[256];
  Clock::time_point last_sweep = Clock::now();
  while (!stopping.load()) {
    const int n = epoll_wait(epoll_fd, events, 256, static_cast<int>(kSweepInterval.count()));
    for (int i = 0; i < n; ++i) {
      const uint64_t key = events[i].data.u64;
      if (key == kListenKey) {
        Accept();
      } else if (key == kWakeKey) {
        uint64_t count;
        ssize_t ignored = read(mailbox->wake_fd, &count, sizeof(count));
        (void)ignored;
        std::vector<std::shared_ptr<Connection>> dirty;
        {
          std::lock_guard<std::mutex> lock(mailbox->mu);
          dirty.swap(mailbox->dirty);
        }
        for (const auto& c : dirty) TakeOutput(c);
      } else if (auto it = connections.find(key); it != connections.end()) {
        std::shared_ptr<Connection> c = it->second;  // Close() erases it from the map
        OnEvents(*c, events[i].events);
        if (!c->closed) Advance(c);
      }
    }
    if (Clock::now() - last_sweep >= kSweepInterval) {
      last_sweep = Clock::now();
      Sweep();
    }
  }
  std::vector<std::shared_ptr<Connection>> all;
  for (auto& [key, c] : connections) all.push_back(c);
  for (auto& c : all) Close(*c);
}

void HttpServer::Impl::Accept() {
  for (;;) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&address), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // EMFILE and friends: the backlog keeps the rest until descriptors free up.
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        spdlog::warn("{}: accept failed: {}", o.name, std::strerror(errno));
      }
      return;
    }
    std::string peer = PeerAddress(address);
    size_t& from_peer = per_client[peer];
    if (connections.size() >= o.max_connections || from_peer >= o.max_connections_per_client) {
      const bool total = connections.size() >= o.max_connections;
      if (from_peer == 0) per_client.erase(peer);
      Refuse(fd);
      if (o.on_refused) o.on_refused(total ? "total" : "per_client");
      continue;
    }
    ++from_peer;
    const int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    auto c = std::make_shared<Connection>(o.limits);
    c->key = next_key++;
    c->fd = fd;
    c->peer = std::move(peer);
    c->accepted = c->request_start = c->idle_since = Clock::now();
    if (tls != nullptr) c->tls = std::make_unique<TlsSession>(*tls, fd);
    c->interest = EPOLLIN | EPOLLRDHUP;
    epoll_event e{};
    e.events = c->interest;
    e.data.u64 = c->key;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &e);
    connections.emplace(c->key, c);
    open.store(connections.size());
  }
}

// Over a connection limit: plain HTTP gets a 503 it can read, TLS a closed socket (a
// reply would need a handshake, which is the cost the limit avoids).
void HttpServer::Impl::Refuse(int fd) {
  if (tls == nullptr) {
    const std::string message = "too many connections; retry later";
    auto [type, body] = o.error_body(503, message);
    const std::string reply = absl::StrCat(StatusLine(503), "Content-Type: ", type, "\r\nContent-Length: ",
                                           body.size(), "\r\nConnection: close\r\nRetry-After: 1\r\n\r\n", body);
    ssize_t ignored = send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)ignored;
  }
  close(fd);
}

void HttpServer::Impl::OnEvents(Connection& c, uint32_t events) {
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) ReadAvailable(c);
  if (!c.closed && (events & EPOLLOUT)) Flush(c);
}

void HttpServer::Impl::ReadAvailable(Connection& c) {
  if (c.peer_closed || c.closed) return;
  const size_t before = c.in.size();
  if (c.tls != nullptr) {
    const bool was_handshaking = !c.tls->handshake_done();
    c.tls_wants_write = false;
    switch (c.tls->Read(&c.in)) {
      case TlsSession::Io::kWantWrite:
        c.tls_wants_write = true;
        break;
      case TlsSession::Io::kClosed:
        c.peer_closed = true;
        break;
      case TlsSession::Io::kError:
        Close(c);
        return;
      default:
        break;
    }
    if (was_handshaking && c.tls->handshake_done()) c.identity = c.tls->PeerIdentity();
  } else {
    char buffer[65536];
    for (;;) {
      const ssize_t n = recv(c.fd, buffer, sizeof(buffer), 0);
      if (n > 0) {
        c.in.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) {
        c.peer_closed = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        Close(c);
        return;
      }
      break;
    }
  }
  if (c.in.size() > before && !c.reading_request && !c.handling) {
    c.reading_request = true;
    if (c.served > 0) c.request_start = Clock::now();
  }
  // A client may queue requests behind the one being handled, but not without bound.
  if (c.in.size() > o.limits.max_header_bytes + o.limits.max_body_bytes + (1 << 20)) Close(c);
}

void HttpServer::Impl::Advance(const std::shared_ptr<Connection>& c) {
  if (!c->handling && !c->close_after_write) ParseRequests(c);
  if (c->closed) return;
  if (c->peer_closed) {
    // A client that closes its side while its request is handled has left: the
    // handler's OnClose cancels the work. Otherwise finish writing, then close.
    if (c->handling || c->out.empty()) {
      Close(*c);
      return;
    }
    c->close_after_write = true;
  }
  Flush(*c);
  if (c->closed) return;
  if (c->close_after_write && c->out.empty()) {
    Close(*c);
    return;
  }
  UpdateInterest(*c);
}

void HttpServer::Impl::ParseRequests(const std::shared_ptr<Connection>& c) {
  while (!c->handling && !c->close_after_write && !c->in.empty()) {
    const bool had_headers = c->parser.headers_complete();
    const size_t used = c->parser.Feed(c->in);
    c->in.erase(0, used);
    if (!had_headers && c->parser.headers_complete()) {
      c->headers_done = Clock::now();
      c->reading_body = true;
      if (c->parser.state() == HttpRequestParser::State::kNeedMore && c->parser.expects_continue()) {
        c->out += "HTTP/1.1 100 Continue\r\n\r\n";
      }
    }
    switch (c->parser.state()) {
      case HttpRequestParser::State::kNeedMore:
        return;
      case HttpRequestParser::State::kError:
        Fail(*c, c->parser.error_status(), c->parser.error_message());
        return;
      case HttpRequestParser::State::kComplete:
        StartExchange(c);
        break;
    }
  }
}

void HttpServer::Impl::StartExchange(const std::shared_ptr<Connection>& c) {
  HttpRequest request = c->parser.TakeRequest();
  c->parser.Reset();
  c->reading_request = c->reading_body = false;
  c->handling = true;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->response_ended = false;
  }
  auto exchange = std::make_shared<Exchange>(c, mailbox, std::move(request), c->peer, c->identity);
  if (!workers->Post([this, exchange] { handler(exchange); })) Close(*c);
}

// Moves what an exchange wrote into the connection's output; a finished response
// frees the connection for the next (maybe already received) request.
void HttpServer::Impl::TakeOutput(const std::shared_ptr<Connection>& c) {
  if (c->closed) return;
  bool ended = false;
  bool keep_alive = true;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (!c->outbox.empty()) {
      if (c->out.empty()) c->last_write = Clock::now();
      c->out += c->outbox;
      c->outbox.clear();
    }
    ended = c->response_ended && c->handling;
    keep_alive = c->keep_alive;
  }
  if (c->out.size() > o.max_buffered_output_bytes) {
    spdlog::debug("{}: {} reads too slowly ({} bytes unsent): closed", o.name, c->peer, c->out.size());
    Close(*c);
    return;
  }
  if (ended) {
    c->handling = false;
    ++c->served;
    c->idle_since = Clock::now();
    if (!keep_alive) c->close_after_write = true;
    if (!c->in.empty()) {
      c->reading_request = true;
      c->request_start = Clock::now();
    }
  }
  Advance(c);
}

void HttpServer::Impl::Flush(Connection& c) {
  while (!c.out.empty()) {
    size_t written = 0;
    if (c.tls != nullptr) {
      const TlsSession::Io io = c.tls->Write(c.out.data(), c.out.size(), &written);
      if (io == TlsSession::Io::kError || io == TlsSession::Io::kClosed) {
        Close(c);
        return;
      }
      c.tls_wants_write = io == TlsSession::Io::kWantWrite;
    } else {
      const ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        Close(c);
        return;
      }
      written = n > 0 ? static_cast<size_t>(n) : 0;
    }
    if (written == 0) return;
    c.out.erase(0, written);
    c.last_write = Clock::now();
  }
}

// The server's own reply to a request it will not hand on (malformed, too large,
// too slow); the connection closes after it.
void HttpServer::Impl::Fail(Connection& c, int status, const std::string& message) {
  spdlog::debug("{}: {} from {}: {}", o.name, status, c.peer, message);
  auto [type, body] = o.error_body(status, message);
  if (c.out.empty()) c.last_write = Clock::now();
  c.out += absl::StrCat(StatusLine(status), "Content-Type: ", type, "\r\nContent-Length: ", body.size(),
                        "\r\nConnection: close\r\n\r\n", body);
  c.close_after_write = true;
  c.in.clear();
}

void HttpServer::Impl::Close(Connection& c) {
  if (c.closed) return;
  c.closed = true;
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
  c.tls.reset();
  close(c.fd);
  std::function<void()> on_close;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.gone = true;
    on_close = std::move(c.on_close);
    c.on_close = nullptr;
  }
  if (on_close) workers->Post(std::move(on_close));
  if (auto it = per_client.find(c.peer); it != per_client.end() && --it->second == 0) per_client.erase(it);
  connections.erase(c.key);
  open.store(connections.size());
}

void HttpServer::Impl::Sweep() {
  const Clock::time_point now = Clock::now();
  std::vector<std::shared_ptr<Connection>> expired;
  std::vector<std::shared_ptr<Connection>> timed_out;
  for (auto& [key, c] : connections) {
    if (!c->out.empty() && now - c->last_write > Seconds(o.write_timeout_s)) {
      expired.push_back(c);
    } else if (c->handling || c->close_after_write) {
      continue;
    } else if (c->tls != nullptr && !c->tls->handshake_done()) {
      if (now - c->accepted > Seconds(o.header_timeout_s)) expired.push_back(c);
    } else if (c->reading_body) {
      if (now - c->headers_done > Seconds(o.body_timeout_s)) timed_out.push_back(c);
    } else if (c->reading_request || c->served == 0) {
      // The first request's clock starts at accept: a connection that sends nothing
      // is as slow as one that sends a byte at a time.
      if (now - c->request_start > Seconds(o.header_timeout_s)) {
        (c->reading_request ? timed_out : expired).push_back(c);
      }
    } else if (now - c->idle_since > Seconds(o.idle_timeout_s)) {
      expired.push_back(c);
    }
  }
  for (auto& c : expired) Close(*c);
  for (auto& c : timed_out) {
    Fail(*c, 408, c->reading_body ? "the request body did not arrive in time" : "the request headers did not arrive in time");
    Advance(c);
  }
}

void HttpServer::Impl::UpdateInterest(Connection& c) {
  uint32_t interest = c.peer_closed ? 0 : (EPOLLIN | EPOLLRDHUP);
  if (!c.out.empty() || c.tls_wants_write) interest |= EPOLLOUT;
  if (interest == c.interest) return;
  c.interest = interest;
  epoll_event e{};
  e.events = interest;
  e.data.u64 = c.key;
  epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c.fd, &e);
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {
  if (!impl_->o.error_body) {
    impl_->o.error_body = [](int, const std::string& message) {
      return std::make_pair(std::string("text/plain"), message + "\n");
    };
  }
}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Start() {
  Impl& s = *impl_;
  if (s.o.tls.enabled()) {
    auto tls = TlsContext::Create(s.o.tls);
    if (!tls.ok()) return tls.status();
    s.tls = std::move(*tls);
  }
  if (absl::Status listening = s.Listen(); !listening.ok()) return listening;
  s.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  s.mailbox->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.epoll_fd < 0 || s.mailbox->wake_fd < 0) {
    return absl::InternalError(absl::StrCat(s.o.name, ": epoll: ", std::strerror(errno)));
  }
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = kListenKey;
  epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, s.listen_fd, &e);
  e.data.u64 = kWakeKey;
  epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, s.mailbox->wake_fd, &e);
  s.workers = std::make_unique<WorkerPool>(s.o.workers);
  s.thread = std::thread([&s] { s.Loop(); });
  return absl::OkStatus();
}

void HttpServer::Stop() {
  Impl& s = *impl_;
  if (!s.thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(s.mailbox->mu);
    s.mailbox->stopped = true;
    s.mailbox->dirty.clear();
  }
  s.stopping.store(true);
  s.thread.join();
  s.workers->Stop();  // runs the OnClose callbacks of the connections just closed
  close(s.listen_fd);
  close(s.epoll_fd);
  close(s.mailbox->wake_fd);
  s.listen_fd = s.epoll_fd = -1;
}

int HttpServer::port() const { return impl_->port; }

bool HttpServer::Post(std::function<void()> task) {
  return impl_->workers != nullptr && impl_->workers->Post(std::move(task));
}

size_t HttpServer::connections() const { return impl_->open.load(); }

const char* HttpServer::ReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

}  // namespace crossreg::server
