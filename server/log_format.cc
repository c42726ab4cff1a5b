#include "server/log_format.h"

#include <chrono>
#include <ctime>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace crossreg::server {
namespace {

LogFormat g_format = LogFormat::kText;
// Fields of the event being logged on this thread (LogEvent), for the JSON formatter.
thread_local const nlohmann::ordered_json* event_fields = nullptr;

// {"time":"2026-11-22T17:47:22.962Z","level":"info","msg":"...", <event fields>}
class JsonLineFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    nlohmann::ordered_json line;
    const auto since_epoch = msg.time.time_since_epoch();
    const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count() % 1000;
    const std::time_t seconds = std::chrono::system_clock::to_time_t(msg.time);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char stamp[32];
    std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &utc);
    line["time"] = absl::StrFormat("%s.%03dZ", stamp, static_cast<int>(millis));
    line["level"] = std::string(spdlog::level::to_string_view(msg.level).data(),
                                spdlog::level::to_string_view(msg.level).size());
    line["msg"] = std::string(msg.payload.data(), msg.payload.size());
    if (event_fields != nullptr) {
      for (const auto& [key, value] : event_fields->items()) line[key] = value;
    }
    // Invalid UTF-8 in a message (a client's id, say) becomes U+FFFD, not an exception.
    const std::string text = line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonLineFormatter>(); }
};

std::string TextValue(const nlohmann::ordered_json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) return absl::StrFormat("%.4g", value.get<double>());
  return value.dump();
}

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(const std::string& name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat("--log_format must be text or json, got '", name, "'"));
}

void ConfigureLogging(LogFormat format, const std::string& level) {
  g_format = format;
  auto logger = format == LogFormat::kJson ? spdlog::stderr_logger_mt("crossreg") : spdlog::stderr_color_mt("crossreg");
  if (format == LogFormat::kJson) logger->set_formatter(std::make_unique<JsonLineFormatter>());
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

void LogEvent(spdlog::level::level_enum level, const std::string& event, const std::string& message,
              const nlohmann::ordered_json& fields) {
  if (!spdlog::should_log(level)) return;
  if (g_format == LogFormat::kJson) {
    nlohmann::ordered_json all;
    all["event"] = event;
    for (const auto& [key, value] : fields.items()) all[key] = value;
    event_fields = &all;
    spdlog::log(level, "{}", message);
    event_fields = nullptr;
    return;
  }
  std::string line = message;
  for (const auto& [key, value] : fields.items()) absl::StrAppend(&line, " ", key, "=", TextValue(value));
  spdlog::log(level, "{}", line);
}

}  // namespace crossreg::server
