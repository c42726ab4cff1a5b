#include "tests/integration/prometheus_text.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <limits>
#include <chrono>
#include <cstdint>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace crossreg::testing {

absl::StatusOr<std::string> HttpGet(int port, const std::string& path, const std::string& host) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket");
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", host));
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host, "\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("write");
  }
  std::string response;
  char buffer[8192];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) {
    return absl::DataLossError("not an HTTP response: " + response.substr(0, 100));
  }
  if (response.find(" 200 ") == std::string::npos || response.find(" 200 ") > response.find("\r\n")) {
    return absl::UnavailableError("HTTP status: " + response.substr(0, response.find("\r\n")));
  }
  return response.substr(body + 4);
}

absl::StatusOr<std::map<std::string, double>> ParsePrometheusText(const std::string& body) {
  std::map<std::string, double> out;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    ++line_number;
    if (line.empty() || line[0] == '#') continue;
    auto bad = [&](const char* why) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_number, " (", why, "): ", line));
    };
    size_t i = 0;
    if (!(std::isalpha(static_cast<unsigned char>(line[0])) || line[0] == '_' || line[0] == ':')) return bad("name");
    while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_' || line[i] == ':')) ++i;
    if (i < line.size() && line[i] == '{') {
      // labels: name="value" pairs, values with \" \\ \n escapes.
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t name_start = i;
        while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_')) ++i;
        if (i == name_start || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') return bad("label");
        i += 2;
        while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
        if (i >= line.size()) return bad("label value");
        ++i;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return bad("labels not closed");
      ++i;
    }
    const std::string key(line.substr(0, i));
    if (i >= line.size() || line[i] != ' ') return bad("no value");
    std::string value(line.substr(i + 1));
    // An optional timestamp may follow the value.
    if (const size_t space = value.find(' '); space != std::string::npos) value.resize(space);
    char* end = nullptr;
    double v = std::strtod(value.c_str(), &end);
    if (value == "Nan" || value == "NaN") {
      v = std::numeric_limits<double>::quiet_NaN();
    } else if (value.empty() || end != value.c_str() + value.size()) {
      return bad("value");
    }
    out[key] = v;
  }
  return out;
}

absl::StatusOr<std::map<std::string, double>> ScrapeMetrics(int port, const std::string& host) {
  auto body = HttpGet(port, "/metrics", host);
  if (!body.ok()) return body.status();
  return ParsePrometheusText(*body);
}

bool KvReturnsToZero(int metrics_port, double timeout_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3));
  while (std::chrono::steady_clock::now() < until) {
    auto m = ScrapeMetrics(metrics_port);
    if (m.ok() && m->count("crossreg_kv_cache_usage_perc") && m->at("crossreg_kv_cache_usage_perc") == 0.0 &&
        m->count("crossreg_num_requests_running") && m->at("crossreg_num_requests_running") == 0.0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

bool MetricReaches(int metrics_port, const std::string& series, double value, double timeout_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3));
  while (std::chrono::steady_clock::now() < until) {
    auto m = ScrapeMetrics(metrics_port);
    if (m.ok() && m->count(series) && m->at(series) == value) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace crossreg::testing
