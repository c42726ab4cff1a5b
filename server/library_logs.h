// Where protobuf's and gRPC core's own log lines go: to spdlog, through a token
// bucket (a burst of 5, then one line per 12 s, with a count of what was dropped),
// so that a client sending malformed messages or failing TLS handshakes in a loop
// cannot flood the log. While a thread parses a request (CapturedProtobufLog),
// protobuf's lines are kept for the error reply instead.
#pragma once

#include <string>
#include <vector>

namespace crossreg::server {

// Idempotent; call before the server starts.
void RouteLibraryLogs();

// Scope in which this thread's protobuf log lines are captured, not logged.
class CapturedProtobufLog {
 public:
  CapturedProtobufLog();
  ~CapturedProtobufLog();
  CapturedProtobufLog(const CapturedProtobufLog&) = delete;
  CapturedProtobufLog& operator=(const CapturedProtobufLog&) = delete;
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  std::vector<std::string> lines_;
  std::vector<std::string>* previous_;
};

}  // namespace crossreg::server
