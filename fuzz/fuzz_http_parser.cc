// HTTP/1.1 request bytes as the HTTP server's event loop reads them: the input is what
// one connection sends (any number of pipelined requests), fed to HttpRequestParser
// three ways: all at once, cut at 1-4 points drawn from a hash of the input, and one
// byte at a time. Requests are taken in a loop (TakeRequest, Reset, feed the rest) until
// an error or the end of the input. Checks: Feed never consumes more than it was given
// and, while it needs more, consumes everything; a complete request has a body within
// the limit and the shape the header promises; an error has a documented status and a
// message; and the three feedings give the same requests (with the same byte counts)
// and the same error: a parser whose answer depends on how TCP cut the stream would let
// two readers of one connection disagree.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/http_request_parser.h"

namespace crossreg::fuzz {
namespace {

using server::HttpParserLimits;
using server::HttpRequest;
using server::HttpRequestParser;

void Require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz check failed: %s\n", what);
  std::abort();
}

// Small limits, so that short inputs reach the 413 and 431 paths.
HttpParserLimits Limits() {
  HttpParserLimits limits;
  limits.max_header_bytes = 512;
  limits.max_headers = 16;
  limits.max_body_bytes = 1024;
  return limits;
}

// Byte-at-a-time feeding costs a call per byte; past this size the other two suffice.
constexpr size_t kMaxBytewiseInput = 8192;

void CheckRequest(const HttpRequest& r) {
  Require(!r.method.empty(), "complete request without a method");
  Require(!r.target.empty(), "complete request without a target");
  Require(r.target.compare(0, r.path.size(), r.path) == 0, "path is not a prefix of the target");
  Require(r.path.find('?') == std::string::npos, "path holds a '?'");
  Require(r.version_minor == 0 || r.version_minor == 1, "version other than HTTP/1.0 or 1.1");
  Require(r.headers.size() <= Limits().max_headers, "more headers than the limit");
  Require(r.body.size() <= Limits().max_body_bytes, "body over the limit");
  for (const auto& [name, value] : r.headers) {
    Require(!name.empty(), "empty header name");
    Require(std::none_of(name.begin(), name.end(), [](char c) { return c >= 'A' && c <= 'Z'; }),
            "header name not lower-case");
    Require(value.empty() || (value.front() != ' ' && value.back() != ' '), "header value not trimmed");
  }
}

// One line per request (its fields and the bytes it took), then one for how it ended.
std::string Describe(const HttpRequest& r, size_t bytes) {
  std::string out = r.method + ' ' + r.target + ' ' + std::to_string(r.version_minor) + ' ' +
                    (r.keep_alive ? "keep-alive" : "close") + ' ' + std::to_string(bytes) + '\n';
  for (const auto& [name, value] : r.headers) out += name + ':' + value + '\n';
  return out + "body " + std::to_string(r.body.size()) + ':' + r.body + '\n';
}

void CheckError(const HttpRequestParser& parser) {
  const int s = parser.error_status();
  Require(s == 400 || s == 413 || s == 431 || s == 501 || s == 505, "undocumented error status");
  Require(!parser.error_message().empty(), "error without a message");
}

// Feeds `input` cut at `cuts` (ascending, the last one input.size()).
std::vector<std::string> Parse(std::string_view input, const std::vector<size_t>& cuts) {
  HttpRequestParser parser(Limits());
  std::vector<std::string> events;
  size_t request_bytes = 0;
  size_t begin = 0;
  for (size_t end : cuts) {
    std::string_view piece = input.substr(begin, end - begin);
    begin = end;
    while (true) {
      const size_t used = parser.Feed(piece);
      Require(used <= piece.size(), "Feed consumed more than it was given");
      request_bytes += used;
      piece.remove_prefix(used);
      if (parser.state() == HttpRequestParser::State::kError) {
        CheckError(parser);
        events.push_back("error " + std::to_string(parser.error_status()) + ' ' + parser.error_message());
        return events;
      }
      if (parser.state() == HttpRequestParser::State::kNeedMore) {
        Require(piece.empty(), "Feed needs more but left bytes unconsumed");
        break;
      }
      Require(parser.headers_complete(), "complete before the headers were");
      const HttpRequest request = parser.TakeRequest();
      CheckRequest(request);
      events.push_back(Describe(request, request_bytes));
      request_bytes = 0;
      parser.Reset();
      if (piece.empty()) break;
    }
  }
  events.push_back(std::string("end started=") + (parser.started() ? "1" : "0") +
                   " headers_complete=" + (parser.headers_complete() ? "1" : "0"));
  return events;
}

// 1 to 4 cuts (some may coincide) drawn from a hash of the bytes: the same input always
// gets the same cuts, a mutation moves them.
std::vector<size_t> HashedCuts(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : bytes) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  std::vector<size_t> cuts;
  for (uint64_t n = h % 4 + 1; n > 0; --n) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    cuts.push_back(static_cast<size_t>((h >> 33) % (bytes.size() + 1)));
  }
  cuts.push_back(bytes.size());
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

}  // namespace
}  // namespace crossreg::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossreg::fuzz;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> whole = Parse(input, {size});
  Require(Parse(input, HashedCuts(input)) == whole, "cut input parsed differently from the whole");
  if (size <= kMaxBytewiseInput) {
    std::vector<size_t> every_byte(size);
    for (size_t i = 0; i < size; ++i) every_byte[i] = i + 1;
    Require(Parse(input, every_byte) == whole, "input fed byte by byte parsed differently from the whole");
  }
  return 0;
}
