#include "server/http/http_request_parser.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

namespace crossreg::server {
namespace {

// Chunk extensions are ignored, so a chunk-size line needs little room; a longer one
// is a client burning our time, not a request.
constexpr size_t kMaxChunkSizeLine = 1024;
// 15 hex digits stay below 2^60: adding a chunk to the body size can never overflow.
constexpr size_t kMaxChunkSizeDigits = 15;

// RFC 9110 tchar.
bool IsTchar(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return IsTchar(static_cast<unsigned char>(c)); });
}

bool IsOws(char c) { return c == ' ' || c == '\t'; }

// Control characters a field value may not carry (HTAB is whitespace, bytes from
// 0x80 are obs-text and allowed).
bool IsForbiddenInValue(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\t') || u == 0x7f;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && IsOws(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsOws(s.back())) s.remove_suffix(1);
  return s;
}

char LowerAscii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return LowerAscii(x) == LowerAscii(y); });
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Client bytes quoted into an error message, which ends up in logs and responses:
// bytes that could forge a log line or a response header are escaped, long text cut.
std::string Quoted(std::string_view s) {
  constexpr size_t kMaxQuoted = 64;
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMaxQuoted; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      char escaped[5];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMaxQuoted) out += "...";
  out += '"';
  return out;
}

// Calls `f` on each element of a comma-separated list, surrounding whitespace removed
// (empty elements included, so a caller can refuse them).
template <typename F>
void ForEachListElement(std::string_view list, F f) {
  while (true) {
    const size_t comma = list.find(',');
    f(TrimOws(list.substr(0, comma)));
    if (comma == std::string_view::npos) return;
    list.remove_prefix(comma + 1);
  }
}

// "HTTP/" DIGIT "." DIGIT: a version we could name but do not speak (505), as opposed
// to bytes that are no version at all (400).
bool IsHttpVersionSyntax(std::string_view v) {
  return v.size() == 8 && v.substr(0, 5) == "HTTP/" && v[5] >= '0' && v[5] <= '9' && v[6] == '.' && v[7] >= '0' &&
         v[7] <= '9';
}

bool KeepAlive(const HttpRequest& request) {
  bool close = false;
  bool keep_alive = false;
  for (const auto& [name, value] : request.headers) {
    if (name != "connection") continue;
    ForEachListElement(value, [&](std::string_view option) {
      close = close || EqualsIgnoreCase(option, "close");
      keep_alive = keep_alive || EqualsIgnoreCase(option, "keep-alive");
    });
  }
  return !close && (request.version_minor == 1 || keep_alive);
}

// The blank line that ends a head or the trailers is not counted against their
// limit, so it must not trip the limit while it arrives either.
bool IsBlankLinePrefix(const std::string& line) { return line == "\r" || line == "\r\n"; }

}  // namespace

std::string_view HttpRequest::Header(std::string_view lower_case_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_case_name) return value;
  }
  return {};
}

HttpRequestParser::HttpRequestParser(HttpParserLimits limits) : limits_(limits) {}

size_t HttpRequestParser::Feed(std::string_view data) {
  size_t used = 0;
  // Every phase consumes at least one byte of non-empty data, so this ends.
  while (state_ == State::kNeedMore && used < data.size()) {
    started_ = true;
    const std::string_view rest = data.substr(used);
    switch (phase_) {
      case Phase::kHeaders:
        used += FeedHead(rest);
        break;
      case Phase::kBody:
        used += FeedBody(rest);
        break;
      case Phase::kChunkSize:
        used += FeedChunkSize(rest);
        break;
      case Phase::kChunkData:
        used += FeedChunkData(rest);
        break;
      case Phase::kChunkDataEnd:
        used += FeedChunkDataEnd(rest);
        break;
      case Phase::kTrailers:
        used += FeedTrailers(rest);
        break;
      case Phase::kDone:
        return used;  // goes with kComplete; not reached
    }
  }
  return used;
}

HttpRequest HttpRequestParser::TakeRequest() {
  if (state_ != State::kComplete) return {};
  HttpRequest out = std::move(request_);
  request_ = HttpRequest();
  return out;
}

void HttpRequestParser::Reset() {
  state_ = State::kNeedMore;
  phase_ = Phase::kHeaders;
  started_ = false;
  headers_complete_ = false;
  error_status_ = 0;
  error_message_.clear();
  head_bytes_ = 0;
  request_ = HttpRequest();
  chunked_ = false;
  remaining_ = 0;
  line_.clear();
  trailer_bytes_ = 0;
}

bool HttpRequestParser::Fail(int status, std::string message) {
  state_ = State::kError;
  error_status_ = status;
  error_message_ = std::move(message);
  return false;
}

void HttpRequestParser::Complete() {
  phase_ = Phase::kDone;
  state_ = State::kComplete;
}

// Lines are only ever searched in the bytes just arrived (one memchr), never rescanned.
size_t HttpRequestParser::TakeLineBytes(std::string_view data) {
  const void* lf = std::memchr(data.data(), '\n', data.size());
  const size_t n = lf != nullptr ? static_cast<size_t>(static_cast<const char*>(lf) - data.data()) + 1 : data.size();
  line_.append(data.data(), n);
  return n;
}

HttpRequestParser::Line HttpRequestParser::WholeLine(std::string_view* line) {
  if (line_.empty() || line_.back() != '\n') return Line::kPartial;
  if (line_.size() < 2 || line_[line_.size() - 2] != '\r') {
    Fail(400, "bare LF (lines must end in CRLF)");
    return Line::kFailed;
  }
  *line = std::string_view(line_).substr(0, line_.size() - 2);
  if (line->find('\r') != std::string_view::npos) {
    Fail(400, "bare CR (lines must end in CRLF)");
    return Line::kFailed;
  }
  return Line::kWhole;
}

size_t HttpRequestParser::FeedHead(std::string_view data) {
  const size_t n = TakeLineBytes(data);
  // Checked on every partial line too, so a head that never ends is refused as soon as
  // it is too long rather than buffered until a blank line.
  if (!IsBlankLinePrefix(line_) && head_bytes_ + line_.size() > limits_.max_header_bytes) {
    Fail(431, "request headers over " + std::to_string(limits_.max_header_bytes) + " bytes");
    return n;
  }
  std::string_view line;
  if (WholeLine(&line) != Line::kWhole) return n;
  const bool request_line_seen = !request_.method.empty();
  if (line.empty() && !request_line_seen) {
    // RFC 9112 §2.2: empty lines before the request line are ignored; they still count,
    // so a stream of them cannot hold the connection forever.
    head_bytes_ += line_.size();
    line_.clear();
    if (head_bytes_ > limits_.max_header_bytes) {
      Fail(431, "request headers over " + std::to_string(limits_.max_header_bytes) + " bytes");
    }
    return n;
  }
  head_bytes_ += line_.size();
  if (line.empty()) {
    FinishHeaders();
  } else if (!request_line_seen) {
    ParseRequestLine(line);
  } else {
    AddHeader(line);
  }
  line_.clear();
  return n;
}

bool HttpRequestParser::ParseRequestLine(std::string_view line) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return Fail(400, "request line " + Quoted(line) + " is not METHOD target version");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return Fail(400, "request method " + Quoted(method) + " is not a token");
  if (target.empty()) return Fail(400, "empty request target");
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return Fail(400, "request target " + Quoted(target) + " has a control character");
  }
  if (version == "HTTP/1.1") {
    request_.version_minor = 1;
  } else if (version == "HTTP/1.0") {
    request_.version_minor = 0;
  } else if (IsHttpVersionSyntax(version)) {
    return Fail(505, "HTTP version " + std::string(version) + " is not supported (only HTTP/1.0 and HTTP/1.1)");
  } else {
    return Fail(400, "malformed HTTP version " + Quoted(version));
  }
  request_.method = method;
  request_.target = target;
  request_.path = target.substr(0, target.find('?'));
  return true;
}

bool HttpRequestParser::ParseFieldLine(std::string_view line, std::string* name, std::string* value) {
  if (IsOws(line.front())) return Fail(400, "obsolete line folding (a header line starting with whitespace)");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return Fail(400, "header line without a colon");
  const std::string_view raw_name = line.substr(0, colon);
  if (raw_name.empty()) return Fail(400, "header line with an empty name");
  if (IsOws(raw_name.back())) return Fail(400, "whitespace before the colon of header " + Quoted(TrimOws(raw_name)));
  if (!IsToken(raw_name)) return Fail(400, "header name " + Quoted(raw_name) + " is not a token");
  const std::string_view raw_value = TrimOws(line.substr(colon + 1));
  if (std::any_of(raw_value.begin(), raw_value.end(), IsForbiddenInValue)) {
    return Fail(400, "control character in the value of header " + Quoted(raw_name));
  }
  name->resize(raw_name.size());
  std::transform(raw_name.begin(), raw_name.end(), name->begin(), LowerAscii);
  value->assign(raw_value);
  return true;
}

bool HttpRequestParser::AddHeader(std::string_view line) {
  std::string name;
  std::string value;
  if (!ParseFieldLine(line, &name, &value)) return false;
  request_.headers.emplace_back(std::move(name), std::move(value));
  if (request_.headers.size() > limits_.max_headers) {
    return Fail(431, "more than " + std::to_string(limits_.max_headers) + " headers");
  }
  return true;
}

bool HttpRequestParser::FinishHeaders() {
  headers_complete_ = true;
  if (!CheckFraming()) return false;
  if (request_.version_minor == 1 && !CheckHost()) return false;
  request_.keep_alive = KeepAlive(request_);
  if (chunked_) {
    phase_ = Phase::kChunkSize;
    return true;
  }
  if (remaining_ > limits_.max_body_bytes) {
    return Fail(413, "Content-Length " + std::to_string(remaining_) + " over the " +
                         std::to_string(limits_.max_body_bytes) + "-byte body limit");
  }
  if (remaining_ == 0) {
    Complete();
  } else {
    phase_ = Phase::kBody;
  }
  return true;
}

// Exactly one way to frame the body: a proxy in front that picked the other one would
// see a different request boundary (request smuggling).
bool HttpRequestParser::CheckFraming() {
  const std::string* content_length = nullptr;
  const std::string* transfer_encoding = nullptr;
  for (const auto& [name, value] : request_.headers) {
    if (name == "content-length") {
      if (content_length != nullptr) return Fail(400, "two Content-Length headers");
      content_length = &value;
    } else if (name == "transfer-encoding") {
      if (transfer_encoding != nullptr) return Fail(400, "two Transfer-Encoding headers");
      transfer_encoding = &value;
    }
  }
  if (transfer_encoding != nullptr) {
    if (request_.version_minor == 0) return Fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    if (content_length != nullptr) return Fail(400, "both Transfer-Encoding and Content-Length");
    return CheckTransferEncoding(*transfer_encoding);
  }
  if (content_length != nullptr) return ParseContentLength(*content_length);
  return true;  // no body
}

bool HttpRequestParser::CheckTransferEncoding(std::string_view value) {
  size_t codings = 0;
  size_t chunked_count = 0;
  size_t chunked_at = 0;
  bool malformed = false;
  ForEachListElement(value, [&](std::string_view coding) {
    malformed = malformed || !IsToken(coding);
    if (EqualsIgnoreCase(coding, "chunked")) {
      ++chunked_count;
      chunked_at = codings;
    }
    ++codings;
  });
  if (malformed) return Fail(400, "Transfer-Encoding " + Quoted(value) + " is not a list of codings");
  if (codings == 1 && chunked_count == 1) {
    chunked_ = true;
    return true;
  }
  if (chunked_count > 1 || (chunked_count == 1 && chunked_at + 1 != codings)) {
    return Fail(400, "Transfer-Encoding " + Quoted(value) + " is not exactly chunked");
  }
  return Fail(501, "Transfer-Encoding " + Quoted(value) + " is not supported (only chunked)");
}

bool HttpRequestParser::ParseContentLength(std::string_view value) {
  if (value.empty() || !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Fail(400, "Content-Length " + Quoted(value) + " is not a number");
  }
  uint64_t length = 0;
  for (char c : value) {
    const auto digit = static_cast<uint64_t>(c - '0');
    if (length > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      return Fail(400, "Content-Length " + Quoted(value) + " overflows");
    }
    length = length * 10 + digit;
  }
  remaining_ = length;
  return true;
}

// RFC 9112 §3.2: an HTTP/1.1 request carries exactly one Host header.
bool HttpRequestParser::CheckHost() {
  const auto hosts = std::count_if(request_.headers.begin(), request_.headers.end(),
                                   [](const auto& header) { return header.first == "host"; });
  if (hosts == 0) return Fail(400, "HTTP/1.1 request without a Host header");
  if (hosts > 1) return Fail(400, "two Host headers");
  return true;
}

size_t HttpRequestParser::FeedBody(std::string_view data) {
  const auto n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size()));
  request_.body.append(data.data(), n);
  remaining_ -= n;
  if (remaining_ == 0) Complete();
  return n;
}

size_t HttpRequestParser::FeedChunkSize(std::string_view data) {
  const size_t n = TakeLineBytes(data);
  if (line_.size() > kMaxChunkSizeLine) {
    Fail(400, "chunk-size line over " + std::to_string(kMaxChunkSizeLine) + " bytes");
    return n;
  }
  std::string_view line;
  if (WholeLine(&line) != Line::kWhole) return n;
  ParseChunkSize(line);
  line_.clear();
  return n;
}

bool HttpRequestParser::ParseChunkSize(std::string_view line) {
  uint64_t size = 0;
  size_t digits = 0;
  for (; digits < line.size() && HexValue(line[digits]) >= 0; ++digits) {
    if (digits == kMaxChunkSizeDigits) {
      return Fail(400, "chunk size over " + std::to_string(kMaxChunkSizeDigits) + " hex digits");
    }
    size = size * 16 + static_cast<uint64_t>(HexValue(line[digits]));
  }
  if (digits == 0) return Fail(400, "chunk-size line " + Quoted(line) + " does not start with a hex size");
  // chunk-ext = *( BWS ";" ... ): ignored, so only checked for a ';' and clean bytes.
  const std::string_view extensions = line.substr(digits);
  const size_t semicolon = extensions.find_first_not_of(" \t");
  if (semicolon == std::string_view::npos ? !extensions.empty() : extensions[semicolon] != ';') {
    return Fail(400, "malformed chunk-size line " + Quoted(line));
  }
  if (std::any_of(extensions.begin(), extensions.end(), IsForbiddenInValue)) {
    return Fail(400, "control character in a chunk extension");
  }
  if (size == 0) {
    phase_ = Phase::kTrailers;
    return true;
  }
  // Refused on the size line, before the data arrives; body.size() never exceeds the limit.
  if (size > limits_.max_body_bytes - request_.body.size()) {
    return Fail(413, "chunked body over the " + std::to_string(limits_.max_body_bytes) + "-byte body limit");
  }
  remaining_ = size;
  phase_ = Phase::kChunkData;
  return true;
}

size_t HttpRequestParser::FeedChunkData(std::string_view data) {
  const auto n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size()));
  request_.body.append(data.data(), n);
  remaining_ -= n;
  if (remaining_ == 0) phase_ = Phase::kChunkDataEnd;
  return n;
}

size_t HttpRequestParser::FeedChunkDataEnd(std::string_view data) {
  const char expected = line_.empty() ? '\r' : '\n';
  if (data.front() != expected) {
    Fail(400, "chunk data not followed by CRLF");
    return 1;
  }
  if (line_.empty()) {
    line_.push_back('\r');
  } else {
    line_.clear();
    phase_ = Phase::kChunkSize;
  }
  return 1;
}

size_t HttpRequestParser::FeedTrailers(std::string_view data) {
  const size_t n = TakeLineBytes(data);
  if (!IsBlankLinePrefix(line_) && trailer_bytes_ + line_.size() > limits_.max_header_bytes) {
    Fail(431, "trailers over " + std::to_string(limits_.max_header_bytes) + " bytes");
    return n;
  }
  std::string_view line;
  if (WholeLine(&line) != Line::kWhole) return n;
  if (line.empty()) {
    Complete();
  } else {
    trailer_bytes_ += line_.size();
    // Checked like a header, then dropped: a trailer never frames or routes a request.
    std::string name;
    std::string value;
    ParseFieldLine(line, &name, &value);
  }
  line_.clear();
  return n;
}

}  // namespace crossreg::server
