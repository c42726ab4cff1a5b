#include "tests/integration/raw_http.h"

#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/testing/loopback_socket.h"

namespace crossreg::testing {

bool ResponseReader::Next(RawResponse* out) {
  size_t end;
  while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!Fill()) return false;
  }
  out->head = buffer_.substr(0, end + 2);
  buffer_.erase(0, end + 4);
  if (out->head.size() < 12 || !absl::SimpleAtoi(out->head.substr(9, 3), &out->status)) return false;
  size_t length = 0;
  const std::string lower = absl::AsciiStrToLower(out->head);
  if (const size_t at = lower.find("content-length: "); at != std::string::npos) {
    length = std::stoul(lower.substr(at + 16));
  }
  while (buffer_.size() < length) {
    if (!Fill()) return false;
  }
  out->body = buffer_.substr(0, length);
  buffer_.erase(0, length);
  return true;
}

bool ResponseReader::Closed() {
  while (buffer_.empty()) {
    char c[256];
    const ssize_t n = read_(c, sizeof(c));
    if (n == 0) return true;
    if (n < 0) return false;
    buffer_.append(c, static_cast<size_t>(n));
  }
  return false;
}

bool ResponseReader::Fill() {
  char chunk[16384];
  const ssize_t n = read_(chunk, sizeof(chunk));
  if (n <= 0) return false;
  buffer_.append(chunk, static_cast<size_t>(n));
  return true;
}

ResponseReader PlainReader(int fd) {
  return ResponseReader([fd](char* data, size_t size) { return recv(fd, data, size, 0); });
}

std::string PostText(const std::string& path, const std::string& body, const std::string& token,
                     const std::string& extra_headers) {
  return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n",
                      token.empty() ? "" : absl::StrCat("Authorization: Bearer ", token, "\r\n"), extra_headers,
                      "Content-Length: ", body.size(), "\r\n\r\n", body);
}

RawResponse Exchange(int port, const std::string& request, double timeout_s) {
  RawResponse response;
  const int fd = ConnectLoopback(port, timeout_s);
  if (fd < 0) return response;
  if (SendAll(fd, request)) {
    ResponseReader reader = PlainReader(fd);
    reader.Next(&response);
  }
  close(fd);
  return response;
}

std::string ErrorParam(const RawResponse& r) {
  const nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
  if (body.is_discarded() || !body.contains("error") || body["error"]["param"].is_null()) return "";
  return body["error"]["param"].get<std::string>();
}

std::string ErrorType(const RawResponse& r) {
  const nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
  if (body.is_discarded() || !body.contains("error")) return "";
  return body["error"]["type"].get<std::string>();
}

}  // namespace crossreg::testing
