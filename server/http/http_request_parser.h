// A strict, incremental HTTP/1.1 request parser: bytes in, whole requests out. It
// owns no socket and allocates only the request it builds, so the event loop
// (server/http/http_server.h) feeds it whatever arrived and the fuzzer feeds it
// anything.
//
// Strict where leniency lets two readers of the same bytes disagree (request
// smuggling behind a proxy): a message is framed by exactly one Content-Length (one
// header, one value, digits only) or by `Transfer-Encoding: chunked` (exactly that
// coding), never both; anything else about framing is a 400 and the connection
// closes. Bare LF line ends, obsolete line folding, whitespace before a header's
// colon and control characters in names or values are refused too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crossreg::server {

struct HttpRequest {
  std::string method;   // as sent ("GET", "POST", ...)
  std::string target;   // the request target as sent ("/v1/completions?x=1")
  std::string path;     // the target up to '?'
  int version_minor = 1;  // HTTP/1.<minor>: 0 or 1
  // Header names lower-cased, values with surrounding spaces and tabs removed, in the
  // order received.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;     // de-chunked
  // HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with "Connection: keep-alive".
  bool keep_alive = true;

  // The first header of that (lower-case) name, or empty.
  std::string_view Header(std::string_view lower_case_name) const;
};

struct HttpParserLimits {
  size_t max_header_bytes = 16 << 10;  // request line and headers together; more: 431
  size_t max_headers = 100;            // more: 431
  size_t max_body_bytes = 4 << 20;     // declared or de-chunked; more: 413
};

class HttpRequestParser {
 public:
  enum class State {
    kNeedMore,  // everything fed so far is consumed; feed more
    kComplete,  // request() is whole; TakeRequest() and Reset() before the next one
    kError,     // error_status() / error_message() say why; the connection must close
  };

  explicit HttpRequestParser(HttpParserLimits limits = {});

  // Consumes bytes from `data` (stopping at the end of one request, so pipelined
  // bytes after it are left unconsumed) and returns how many it consumed. Call again
  // with the rest once the request is taken. Feeding in kComplete or kError consumes
  // nothing.
  size_t Feed(std::string_view data);

  State state() const { return state_; }
  // True once any byte of the current request arrived (its header deadline runs).
  bool started() const { return started_; }
  // True once the headers are whole (the body, if any, is what is left).
  bool headers_complete() const { return headers_complete_; }
  // The headers are whole and ask for "100 Continue" before the client sends the body
  // (curl does for bodies over 1 KiB, and waits a second without one).
  bool expects_continue() const {
    if (!headers_complete_) return false;
    const std::string_view expect = request_.Header("expect");
    constexpr std::string_view kContinue = "100-continue";
    if (expect.size() != kContinue.size()) return false;
    for (size_t i = 0; i < expect.size(); ++i) {
      const char c = expect[i] >= 'A' && expect[i] <= 'Z' ? static_cast<char>(expect[i] - 'A' + 'a') : expect[i];
      if (c != kContinue[i]) return false;
    }
    return true;
  }

  // kError: 400 (malformed, framing), 413 (body too large), 431 (headers too
  // large), 501 (a Transfer-Encoding other than chunked), 505 (not HTTP/1.0 or 1.1).
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  HttpRequest TakeRequest();  // kComplete only
  void Reset();               // ready for the next request on the same connection

 private:
  // Implementation-defined state below (see the .cc).
  enum class Phase { kHeaders, kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kDone };
  enum class Line { kPartial, kWhole, kFailed };
  bool Fail(int status, std::string message);
  bool FinishHeaders();  // framing checks; false on error
  bool CheckFraming();
  bool CheckTransferEncoding(std::string_view value);
  bool ParseContentLength(std::string_view value);
  bool CheckHost();
  bool ParseRequestLine(std::string_view line);
  bool AddHeader(std::string_view line);
  bool ParseFieldLine(std::string_view line, std::string* name, std::string* value);
  bool ParseChunkSize(std::string_view line);
  void Complete();
  size_t TakeLineBytes(std::string_view data);
  Line WholeLine(std::string_view* line);
  size_t FeedHead(std::string_view data);
  size_t FeedBody(std::string_view data);
  size_t FeedChunkSize(std::string_view data);
  size_t FeedChunkData(std::string_view data);
  size_t FeedChunkDataEnd(std::string_view data);
  size_t FeedTrailers(std::string_view data);

  HttpParserLimits limits_;
  State state_ = State::kNeedMore;
  Phase phase_ = Phase::kHeaders;
  bool started_ = false;
  bool headers_complete_ = false;
  int error_status_ = 0;
  std::string error_message_;
  size_t head_bytes_ = 0;     // whole lines of the request line and headers so far
  HttpRequest request_;
  bool chunked_ = false;
  uint64_t remaining_ = 0;    // body or chunk bytes still to come
  std::string line_;          // the line being read (head, chunk size, CRLF after chunk data, trailer)
  size_t trailer_bytes_ = 0;
};

}  // namespace crossreg::server
