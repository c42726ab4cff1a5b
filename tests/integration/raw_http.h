// HTTP/1.1 by hand over loopback sockets, for tests that must send what a client
// library would not (hostile bodies, ambiguous framing, pipelining) and read the
// replies as sent: one response framed by Content-Length, the error body's fields.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

namespace crossreg::testing {

struct RawResponse {
  int status = 0;  // 0: no response came
  std::string head;
  std::string body;
};

// Reads HTTP responses from a byte source (a plain socket or a TLS session).
class ResponseReader {
 public:
  explicit ResponseReader(std::function<ssize_t(char*, size_t)> read) : read_(std::move(read)) {}
  // One response framed by Content-Length (the server frames every whole reply so).
  bool Next(RawResponse* out);
  // True when the peer closes the connection (nothing more arrives) within the read timeout.
  bool Closed();

 private:
  bool Fill();
  std::function<ssize_t(char*, size_t)> read_;
  std::string buffer_;
};

ResponseReader PlainReader(int fd);

// A POST with a JSON body, with a bearer token and extra header lines when given.
std::string PostText(const std::string& path, const std::string& body, const std::string& token = "",
                     const std::string& extra_headers = "");
// One request on a fresh connection; the response (status 0 when none came).
RawResponse Exchange(int port, const std::string& request, double timeout_s = 30);

// An error reply's `error.param` and `error.type` ("" when absent).
std::string ErrorParam(const RawResponse& r);
std::string ErrorType(const RawResponse& r);

}  // namespace crossreg::testing
