// The server's log lines, on stderr: `--log_format text` (spdlog's usual lines) or
// `--log_format json` (one JSON object per line, for log pipelines: time, level,
// msg, and for events such as a request's end their fields as keys). Events are
// logged through LogEvent so both formats carry the same fields.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace crossreg::server {

enum class LogFormat { kText, kJson };
absl::StatusOr<LogFormat> ParseLogFormat(const std::string& name);  // "text" | "json"

// Installs the default logger (stderr) in `format` at `level` ("info", ...).
void ConfigureLogging(LogFormat format, const std::string& level);

// One event with named fields: text "<message> k=v k=v", JSON {"event": name,
// "msg": message, fields...}. Field values: strings, numbers, booleans.
void LogEvent(spdlog::level::level_enum level, const std::string& event, const std::string& message,
              const nlohmann::ordered_json& fields);

}  // namespace crossreg::server
