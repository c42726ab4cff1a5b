#include "server/library_logs.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "grpc/support/log.h"
#include "spdlog/spdlog.h"

namespace crossreg::server {
namespace {

thread_local std::vector<std::string>* captured_protobuf_lines = nullptr;

// One bucket for both libraries: what matters is the total rate.
class LogBucket {
 public:
  // False: drop the line. True: log it, with `suffix` saying what was dropped before.
  bool Take(std::string& suffix) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    tokens_ = std::min(kBurst, tokens_ + std::chrono::duration<double>(now - last_).count() / kSecondsPerLine);
    last_ = now;
    if (tokens_ < 1) {
      ++dropped_;
      return false;
    }
    tokens_ -= 1;
    suffix = dropped_ > 0 ? absl::StrCat(" (", dropped_, " more library log lines dropped)") : "";
    dropped_ = 0;
    return true;
  }

 private:
  static constexpr double kBurst = 5;
  static constexpr double kSecondsPerLine = 12;
  std::mutex mu_;
  double tokens_ = kBurst;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  int64_t dropped_ = 0;
};

LogBucket& Bucket() {
  static LogBucket* bucket = new LogBucket();  // never destroyed: libraries log during exit
  return *bucket;
}

void ProtobufLine(google::protobuf::LogLevel level, const char* /*file*/, int /*line*/, const std::string& message) {
  if (captured_protobuf_lines != nullptr) {
    captured_protobuf_lines->push_back(message);
    return;
  }
  std::string suffix;
  if (!Bucket().Take(suffix)) return;
  if (level >= google::protobuf::LOGLEVEL_ERROR) {
    spdlog::warn("protobuf: {}{}", message, suffix);
  } else {
    spdlog::debug("protobuf: {}{}", message, suffix);
  }
}

void GrpcLine(gpr_log_func_args* args) {
  // gRPC's INFO/DEBUG lines appear only when GRPC_VERBOSITY asks for them.
  std::string suffix;
  if (args->severity == GPR_LOG_SEVERITY_ERROR) {
    if (Bucket().Take(suffix)) spdlog::warn("grpc: {} ({}:{}){}", args->message, args->file, args->line, suffix);
  } else if (Bucket().Take(suffix)) {
    spdlog::debug("grpc: {}{}", args->message, suffix);
  }
}

void RouteProtobufLogs() {
  static std::once_flag once;
  std::call_once(once, [] { google::protobuf::SetLogHandler(&ProtobufLine); });
}

}  // namespace

void RouteLibraryLogs() {
  RouteProtobufLogs();
  static std::once_flag once;
  std::call_once(once, [] { gpr_set_log_function(&GrpcLine); });
}

CapturedProtobufLog::CapturedProtobufLog() : previous_(captured_protobuf_lines) {
  RouteProtobufLogs();  // capturing needs our handler in place
  captured_protobuf_lines = &lines_;
}
CapturedProtobufLog::~CapturedProtobufLog() { captured_protobuf_lines = previous_; }

}  // namespace crossreg::server
