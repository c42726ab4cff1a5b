// The strict HTTP/1.1 request parser: requests whole, fed at once or byte by byte, and
// every refusal with its status (framing refusals are what keeps a proxy in front and
// this server from seeing different request boundaries).
#include "server/http/http_request_parser.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace crossreg::server {
namespace {

using State = HttpRequestParser::State;

struct Outcome {
  State state = State::kNeedMore;
  int status = 0;
  std::string message;
  size_t consumed = 0;
  HttpRequest request;
};

Outcome Finish(HttpRequestParser& parser, size_t consumed) {
  Outcome out;
  out.state = parser.state();
  out.status = parser.error_status();
  out.message = parser.error_message();
  out.consumed = consumed;
  if (out.state == State::kComplete) out.request = parser.TakeRequest();
  return out;
}

Outcome ParseWhole(std::string_view bytes, HttpParserLimits limits = {}) {
  HttpRequestParser parser(limits);
  const size_t consumed = parser.Feed(bytes);
  return Finish(parser, consumed);
}

Outcome ParseByteByByte(std::string_view bytes, HttpParserLimits limits = {}) {
  HttpRequestParser parser(limits);
  size_t consumed = 0;
  for (size_t i = 0; i < bytes.size() && parser.state() == State::kNeedMore; ++i) {
    consumed += parser.Feed(bytes.substr(i, 1));
  }
  return Finish(parser, consumed);
}

void ExpectSameRequest(const HttpRequest& a, const HttpRequest& b) {
  EXPECT_EQ(a.method, b.method);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.version_minor, b.version_minor);
  EXPECT_EQ(a.headers, b.headers);
  EXPECT_EQ(a.body, b.body);
  EXPECT_EQ(a.keep_alive, b.keep_alive);
}

using Headers = std::vector<std::pair<std::string, std::string>>;

TEST(HttpRequestParserTest, SimpleGet) {
  const std::string bytes = "GET /v1/models?verbose=1 HTTP/1.1\r\nHost: example.com\r\nAccept:  */*  \r\n\r\n";
  const Outcome out = ParseWhole(bytes);
  ASSERT_EQ(out.state, State::kComplete) << out.message;
  EXPECT_EQ(out.consumed, bytes.size());
  EXPECT_EQ(out.request.method, "GET");
  EXPECT_EQ(out.request.target, "/v1/models?verbose=1");
  EXPECT_EQ(out.request.path, "/v1/models");
  EXPECT_EQ(out.request.version_minor, 1);
  EXPECT_EQ(out.request.headers, (Headers{{"host", "example.com"}, {"accept", "*/*"}}));
  EXPECT_EQ(out.request.body, "");
  EXPECT_TRUE(out.request.keep_alive);
}

TEST(HttpRequestParserTest, PostWithContentLength) {
  const std::string bytes =
      "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n"
      "{\"prompt\":\"\"}";
  const Outcome out = ParseWhole(bytes);
  ASSERT_EQ(out.state, State::kComplete) << out.message;
  EXPECT_EQ(out.consumed, bytes.size());
  EXPECT_EQ(out.request.method, "POST");
  EXPECT_EQ(out.request.path, "/v1/completions");
  EXPECT_EQ(out.request.body, "{\"prompt\":\"\"}");
  EXPECT_EQ(out.request.Header("content-type"), "application/json");
}

TEST(HttpRequestParserTest, ByteByByteGivesTheSameRequests) {
  const std::vector<std::string> requests = {
      "GET / HTTP/1.1\r\nHost: h\r\n\r\n",
      "\r\nPOST /a?b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
      "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\n",
      "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
  };
  for (const std::string& bytes : requests) {
    SCOPED_TRACE(bytes);
    const Outcome whole = ParseWhole(bytes);
    const Outcome bytewise = ParseByteByByte(bytes);
    ASSERT_EQ(whole.state, State::kComplete) << whole.message;
    ASSERT_EQ(bytewise.state, State::kComplete) << bytewise.message;
    EXPECT_EQ(whole.consumed, bytes.size());
    EXPECT_EQ(bytewise.consumed, bytes.size());
    ExpectSameRequest(whole.request, bytewise.request);
  }
}

TEST(HttpRequestParserTest, PipelinedRequestsAreTakenOneAtATime) {
  const std::string first = "POST /one HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
  const std::string second = "GET /two HTTP/1.1\r\nHost: h\r\n\r\n";
  const std::string bytes = first + second;
  HttpRequestParser parser;
  EXPECT_FALSE(parser.started());
  const size_t consumed = parser.Feed(bytes);
  ASSERT_EQ(parser.state(), State::kComplete) << parser.error_message();
  EXPECT_EQ(consumed, first.size());
  EXPECT_EQ(parser.TakeRequest().path, "/one");
  EXPECT_EQ(parser.Feed("more"), 0u);  // nothing consumed until Reset
  parser.Reset();
  EXPECT_EQ(parser.state(), State::kNeedMore);
  EXPECT_FALSE(parser.started());
  EXPECT_FALSE(parser.headers_complete());
  EXPECT_EQ(parser.Feed(std::string_view(bytes).substr(consumed)), second.size());
  ASSERT_EQ(parser.state(), State::kComplete) << parser.error_message();
  const HttpRequest request = parser.TakeRequest();
  EXPECT_EQ(request.method, "GET");
  EXPECT_EQ(request.path, "/two");
  EXPECT_EQ(request.body, "");
}

TEST(HttpRequestParserTest, ChunkedWithExtensionsAndTrailers) {
  const std::string bytes =
      "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "5;name=value\r\nhello\r\n"
      "6 ; a ; b=\"c\"\r\n world\r\n"
      "A\r\n0123456789\r\n"
      "0\r\nChecksum: abc\r\nOther: x\r\n\r\n"
      "GET /next HTTP/1.1\r\n";
  const Outcome out = ParseWhole(bytes);
  ASSERT_EQ(out.state, State::kComplete) << out.message;
  EXPECT_EQ(out.consumed, bytes.find("GET /next"));
  EXPECT_EQ(out.request.body, "hello world0123456789");
  EXPECT_EQ(out.request.Header("checksum"), "");  // trailers are dropped
  EXPECT_EQ(out.request.Header("transfer-encoding"), "Chunked");
}

TEST(HttpRequestParserTest, StartedAndHeadersComplete) {
  HttpRequestParser parser;
  EXPECT_FALSE(parser.started());
  parser.Feed("GE");
  EXPECT_TRUE(parser.started());
  EXPECT_FALSE(parser.headers_complete());
  parser.Feed("T / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nab");
  EXPECT_TRUE(parser.headers_complete());
  EXPECT_EQ(parser.state(), State::kNeedMore);
  EXPECT_EQ(parser.Feed("cdEF"), 2u);
  ASSERT_EQ(parser.state(), State::kComplete);
  EXPECT_EQ(parser.TakeRequest().body, "abcd");
}

struct Refusal {
  const char* name;
  std::string bytes;
  int status;
  std::string message;  // exact
};

const std::string kPost = "POST /p HTTP/1.1\r\nHost: h\r\n";

std::vector<Refusal> FramingRefusals() {
  return {
      {"two equal Content-Lengths", kPost + "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400,
       "two Content-Length headers"},
      {"two different Content-Lengths", kPost + "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400,
       "two Content-Length headers"},
      {"Content-Length with a sign", kPost + "Content-Length: +3\r\n\r\nabc", 400,
       "Content-Length \"+3\" is not a number"},
      {"Content-Length list", kPost + "Content-Length: 3, 3\r\n\r\nabc", 400,
       "Content-Length \"3, 3\" is not a number"},
      {"Content-Length with a space inside", kPost + "Content-Length: 1 2\r\n\r\n", 400,
       "Content-Length \"1 2\" is not a number"},
      {"empty Content-Length", kPost + "Content-Length:\r\n\r\n", 400, "Content-Length \"\" is not a number"},
      {"Content-Length overflow", kPost + "Content-Length: 18446744073709551616\r\n\r\n", 400,
       "Content-Length \"18446744073709551616\" overflows"},
      {"Transfer-Encoding and Content-Length", kPost + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400,
       "both Transfer-Encoding and Content-Length"},
      {"chunked, identity", kPost + "Transfer-Encoding: chunked, identity\r\n\r\n", 400,
       "Transfer-Encoding \"chunked, identity\" is not exactly chunked"},
      {"chunked twice", kPost + "Transfer-Encoding: chunked, chunked\r\n\r\n", 400,
       "Transfer-Encoding \"chunked, chunked\" is not exactly chunked"},
      {"identity", kPost + "Transfer-Encoding: identity\r\n\r\n", 501,
       "Transfer-Encoding \"identity\" is not supported (only chunked)"},
      {"gzip", kPost + "Transfer-Encoding: gzip\r\n\r\n", 501,
       "Transfer-Encoding \"gzip\" is not supported (only chunked)"},
      {"gzip, chunked", kPost + "Transfer-Encoding: gzip, chunked\r\n\r\n", 501,
       "Transfer-Encoding \"gzip, chunked\" is not supported (only chunked)"},
      {"empty coding", kPost + "Transfer-Encoding: chunked,\r\n\r\n", 400,
       "Transfer-Encoding \"chunked,\" is not a list of codings"},
      {"Transfer-Encoding in HTTP/1.0", "POST /p HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
       "Transfer-Encoding in an HTTP/1.0 request"},
      {"two Transfer-Encodings", kPost + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
       "two Transfer-Encoding headers"},
  };
}

std::vector<Refusal> SyntaxRefusals() {
  return {
      {"bare LF in a header", "GET / HTTP/1.1\r\nHost: h\n\r\n", 400, "bare LF (lines must end in CRLF)"},
      {"bare LF ending the request line", "GET / HTTP/1.1\nHost: h\r\n\r\n", 400, "bare LF (lines must end in CRLF)"},
      {"bare CR", "GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", 400, "bare CR (lines must end in CRLF)"},
      {"obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", 400,
       "obsolete line folding (a header line starting with whitespace)"},
      {"space before colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400,
       "whitespace before the colon of header \"Host\""},
      {"no colon", "GET / HTTP/1.1\r\nHost h\r\n\r\n", 400, "header line without a colon"},
      {"empty name", "GET / HTTP/1.1\r\n: h\r\n\r\n", 400, "header line with an empty name"},
      {"name not a token", "GET / HTTP/1.1\r\nX(y): h\r\n\r\n", 400, "header name \"X(y)\" is not a token"},
      {"control char in value", std::string("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x01z\r\n\r\n"), 400,
       "control character in the value of header \"X-A\""},
      {"NUL in value", std::string("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0z\r\n\r\n", 36), 400,
       "control character in the value of header \"X-A\""},
      {"DEL in value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x7fz\r\n\r\n", 400,
       "control character in the value of header \"X-A\""},
      {"HTTP/2.0", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505,
       "HTTP version HTTP/2.0 is not supported (only HTTP/1.0 and HTTP/1.1)"},
      {"HTTP/1.2", "GET / HTTP/1.2\r\nHost: h\r\n\r\n", 505,
       "HTTP version HTTP/1.2 is not supported (only HTTP/1.0 and HTTP/1.1)"},
      {"lower-case version", "GET / http/1.1\r\nHost: h\r\n\r\n", 400, "malformed HTTP version \"http/1.1\""},
      {"no version", "GET /\r\nHost: h\r\n\r\n", 400, "request line \"GET /\" is not METHOD target version"},
      {"two spaces", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "empty request target"},
      {"trailing text", "GET / HTTP/1.1 x\r\nHost: h\r\n\r\n", 400, "malformed HTTP version \"HTTP/1.1 x\""},
      {"method not a token", "G@T / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "request method \"G@T\" is not a token"},
      {"tab in target", "GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n", 400,
       "request target \"/a\\x09b\" has a control character"},
      {"missing Host in HTTP/1.1", "GET / HTTP/1.1\r\nAccept: x\r\n\r\n", 400,
       "HTTP/1.1 request without a Host header"},
      {"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400, "two Host headers"},
  };
}

std::vector<Refusal> ChunkRefusals() {
  const std::string chunked = kPost + "Transfer-Encoding: chunked\r\n\r\n";
  return {
      {"chunk size over 15 digits", chunked + "0000000000000001\r\nx\r\n0\r\n\r\n", 400,
       "chunk size over 15 hex digits"},
      {"chunk size overflow", chunked + "FFFFFFFFFFFFFFFFF\r\n", 400, "chunk size over 15 hex digits"},
      {"no chunk size", chunked + ";x\r\n", 400, "chunk-size line \";x\" does not start with a hex size"},
      {"chunk size with a sign", chunked + "+5\r\nhello\r\n", 400,
       "chunk-size line \"+5\" does not start with a hex size"},
      {"junk after chunk size", chunked + "5x\r\nhello\r\n", 400, "malformed chunk-size line \"5x\""},
      {"space after chunk size", chunked + "5 \r\nhello\r\n", 400, "malformed chunk-size line \"5 \""},
      {"data longer than the size", chunked + "3\r\nhello\r\n0\r\n\r\n", 400, "chunk data not followed by CRLF"},
      {"LF alone after data", chunked + "5\r\nhello\n0\r\n\r\n", 400, "chunk data not followed by CRLF"},
      {"bare LF after the size", chunked + "5\nhello\r\n", 400, "bare LF (lines must end in CRLF)"},
      {"long chunk extension", chunked + "5;" + std::string(1100, 'a') + "\r\nhello\r\n", 400,
       "chunk-size line over 1024 bytes"},
      {"control char in extension", chunked + "5;a\x01\r\nhello\r\n", 400, "control character in a chunk extension"},
      {"bad trailer", chunked + "0\r\nno colon\r\n\r\n", 400, "header line without a colon"},
  };
}

void ExpectRefusals(const std::vector<Refusal>& refusals, HttpParserLimits limits = {}) {
  for (const Refusal& r : refusals) {
    SCOPED_TRACE(r.name);
    for (const Outcome& out : {ParseWhole(r.bytes, limits), ParseByteByByte(r.bytes, limits)}) {
      EXPECT_EQ(out.state, State::kError);
      EXPECT_EQ(out.status, r.status);
      EXPECT_EQ(out.message, r.message);
    }
  }
}

TEST(HttpRequestParserTest, FramingRefusals) { ExpectRefusals(FramingRefusals()); }

TEST(HttpRequestParserTest, SyntaxRefusals) { ExpectRefusals(SyntaxRefusals()); }

TEST(HttpRequestParserTest, ChunkRefusals) { ExpectRefusals(ChunkRefusals()); }

HttpParserLimits SmallLimits() {
  HttpParserLimits limits;
  limits.max_header_bytes = 64;
  limits.max_headers = 3;
  limits.max_body_bytes = 10;
  return limits;
}

TEST(HttpRequestParserTest, SizeRefusals) {
  const std::string chunked = kPost + "Transfer-Encoding: chunked\r\n\r\n";
  std::string empty_lines;
  for (int i = 0; i < 40; ++i) empty_lines += "\r\n";
  // None of the 431 inputs has its blank line: they are refused while the head arrives.
  ExpectRefusals(
      {{"long header", "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(100, 'a'), 431,
        "request headers over 64 bytes"},
       {"too many headers", "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n", 431, "more than 3 headers"},
       {"endless empty lines", empty_lines, 431, "request headers over 64 bytes"},
       {"declared body over the limit", kPost + "Content-Length: 11\r\n\r\n", 413,
        "Content-Length 11 over the 10-byte body limit"},
       {"de-chunked body over the limit", chunked + "6\r\nabcdef\r\n5\r\n", 413,
        "chunked body over the 10-byte body limit"},
       {"trailers over the limit", chunked + "0\r\nT: " + std::string(70, 'a'), 431, "trailers over 64 bytes"}},
      SmallLimits());
}

TEST(HttpRequestParserTest, LimitsAreInclusive) {
  // Request line and headers of `bytes` bytes, then the blank line (not counted).
  const auto head = [](size_t bytes) {
    return "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(bytes - 30, 'a') + "\r\n\r\n";
  };
  ASSERT_EQ(head(64).size(), 66u);
  EXPECT_EQ(ParseWhole(head(64), SmallLimits()).state, State::kComplete);
  EXPECT_EQ(ParseByteByByte(head(64), SmallLimits()).state, State::kComplete);
  EXPECT_EQ(ParseWhole(head(65), SmallLimits()).status, 431);
  EXPECT_EQ(ParseByteByByte(head(65), SmallLimits()).status, 431);

  const Outcome declared = ParseWhole(kPost + "Content-Length: 10\r\n\r\n0123456789", SmallLimits());
  ASSERT_EQ(declared.state, State::kComplete) << declared.message;
  EXPECT_EQ(declared.request.body, "0123456789");
  const Outcome chunked =
      ParseWhole(kPost + "Transfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n4\r\nghij\r\n0\r\n\r\n", SmallLimits());
  ASSERT_EQ(chunked.state, State::kComplete) << chunked.message;
  EXPECT_EQ(chunked.request.body, "abcdefghij");
}

TEST(HttpRequestParserTest, KeepAlive) {
  const struct {
    std::string bytes;
    bool keep_alive;
  } cases[] = {
      {"GET / HTTP/1.1\r\nHost: h\r\n\r\n", true},
      {"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", false},
      {"GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, CLOSE\r\n\r\n", false},
      {"GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n", false},
      {"GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n", true},
      {"GET / HTTP/1.0\r\n\r\n", false},
      {"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true},
      {"GET / HTTP/1.0\r\nConnection: foo ,keep-alive\r\n\r\n", true},
      {"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.bytes);
    const Outcome out = ParseWhole(c.bytes);
    ASSERT_EQ(out.state, State::kComplete) << out.message;
    EXPECT_EQ(out.request.keep_alive, c.keep_alive);
  }
}

TEST(HttpRequestParserTest, HeaderLookupAndLeadingEmptyLines) {
  const std::string bytes =
      "\r\n\r\nGET / HTTP/1.0\r\nX-Twice: first\r\nx-twice: second\r\nEmpty:\r\nTab:\tv\t\r\nUtf8: \xc3\xa9\r\n\r\n";
  const Outcome out = ParseWhole(bytes);
  ASSERT_EQ(out.state, State::kComplete) << out.message;
  EXPECT_EQ(out.consumed, bytes.size());
  EXPECT_EQ(out.request.version_minor, 0);
  EXPECT_EQ(out.request.Header("x-twice"), "first");
  EXPECT_EQ(out.request.Header("X-Twice"), "");  // names are looked up lower-case
  EXPECT_EQ(out.request.Header("empty"), "");
  EXPECT_EQ(out.request.Header("tab"), "v");
  EXPECT_EQ(out.request.Header("utf8"), "\xc3\xa9");
  EXPECT_EQ(out.request.Header("missing"), "");
  EXPECT_EQ(out.request.headers.size(), 5u);
}

TEST(HttpRequestParserTest, IncompleteRequestsWaitForMore) {
  for (const std::string& bytes :
       {std::string("GET / HTTP/1.1\r\nHost: h\r\n\r"), kPost + "Content-Length: 4\r\n\r\nabc",
        kPost + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n"}) {
    SCOPED_TRACE(bytes);
    const Outcome out = ParseWhole(bytes);
    EXPECT_EQ(out.state, State::kNeedMore);
    EXPECT_EQ(out.consumed, bytes.size());
  }
}

TEST(HttpRequestParserTest, ResetAfterAnError) {
  HttpRequestParser parser;
  parser.Feed("GET / HTTP/2.0\r\n");
  ASSERT_EQ(parser.state(), State::kError);
  EXPECT_EQ(parser.error_status(), 505);
  EXPECT_EQ(parser.Feed("GET / HTTP/1.1\r\n"), 0u);
  parser.Reset();
  EXPECT_EQ(parser.error_status(), 0);
  EXPECT_EQ(parser.error_message(), "");
  parser.Feed("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(parser.state(), State::kComplete);
}

}  // namespace
}  // namespace crossreg::server
