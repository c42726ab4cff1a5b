// --auth_token_file: the bearer tokens the server accepts, one per line, each
// optionally named ("name:token"). The name is who the caller is (its principal) in
// logs, per-client limits and request ownership; a token never appears in a log.
#pragma once

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace crossreg::server {

struct NamedToken {
  std::string name;   // "alice", or "token<N>" (N: 1-based line number) when unnamed
  std::string token;  // what follows "Bearer " in the authorization header
};

// Shortest token accepted: 16 characters, so that a token cannot be guessed by
// trying (a random 16-character token from [A-Za-z0-9] has ~95 bits).
inline constexpr size_t kMinTokenLength = 16;

// Parses the file's text. Blank lines and lines starting with '#' are skipped;
// spaces around names and tokens are trimmed. Errors name the line: a token shorter
// than kMinTokenLength, characters outside printable ASCII or a space inside a
// token, a name outside [A-Za-z0-9._-], a duplicate name or token, no token at all.
absl::StatusOr<std::vector<NamedToken>> ParseTokenFile(absl::string_view text, absl::string_view path);

// Reads and parses `path`; NOT_FOUND / PERMISSION_DENIED name the file.
absl::StatusOr<std::vector<NamedToken>> LoadTokenFile(const std::string& path);

}  // namespace crossreg::server
