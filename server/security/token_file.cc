#include "server/security/token_file.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace crossreg::server {
namespace {

bool IsNameChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'; }

// What an HTTP/2 header value may carry without escaping, minus the space that would
// split "Bearer <token>".
bool IsTokenChar(char c) { return c > 0x20 && c < 0x7f; }

}  // namespace

absl::StatusOr<std::vector<NamedToken>> ParseTokenFile(absl::string_view text, absl::string_view path) {
  std::vector<NamedToken> tokens;
  std::set<std::string> names, secrets;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    auto fail = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(path, " line ", line_number, ": ", what));
    };
    NamedToken t;
    // A token may itself contain ':' (base64 does not, but URL-safe schemes might):
    // only a name-shaped prefix before the first ':' is a name.
    const size_t colon = line.find(':');
    absl::string_view name_part, token_part = line;
    if (colon != absl::string_view::npos) {
      name_part = absl::StripAsciiWhitespace(line.substr(0, colon));
      token_part = absl::StripAsciiWhitespace(line.substr(colon + 1));
      if (name_part.empty()) return fail("empty name before ':' (write name:token, or the token alone)");
      for (char c : name_part) {
        if (!IsNameChar(c)) return fail("a name may contain only letters, digits, '.', '_' and '-'");
      }
    }
    for (char c : token_part) {
      if (!IsTokenChar(c)) return fail("a token may contain only printable ASCII characters and no spaces");
    }
    if (token_part.size() < kMinTokenLength) {
      return fail(absl::StrCat("token shorter than ", kMinTokenLength,
                               " characters (generate one with: openssl rand -hex 24)"));
    }
    t.name = name_part.empty() ? absl::StrCat("token", line_number) : std::string(name_part);
    t.token = std::string(token_part);
    if (!names.insert(t.name).second) return fail(absl::StrCat("duplicate name \"", t.name, "\""));
    if (!secrets.insert(t.token).second) return fail("duplicate token (each client needs its own)");
    tokens.push_back(std::move(t));
  }
  if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no tokens (one per line, name:token)"));
  return tokens;
}

absl::StatusOr<std::vector<NamedToken>> LoadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--auth_token_file ", path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseTokenFile(text.str(), path);
}

}  // namespace crossreg::server
