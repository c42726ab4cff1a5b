#include "server/http/json_fields.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/field_violation.h"
#include "engine/io/bounded_json.h"

namespace crossreg::server {

using Json = nlohmann::ordered_json;

const char* TypeName(const Json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "an array";
  return "an object";
}

absl::StatusOr<std::string> StringField(const Json& v, const std::string& field) {
  if (!v.is_string()) return FieldViolation(field, absl::StrCat("must be a string, got ", TypeName(v)));
  return v.get<std::string>();
}

absl::StatusOr<bool> BoolField(const Json& v, const std::string& field) {
  if (!v.is_boolean()) return FieldViolation(field, absl::StrCat("must be true or false, got ", TypeName(v)));
  return v.get<bool>();
}

namespace {

// Optimal string alignment distance: Levenshtein plus the swap of two neighbours as
// one edit, the commonest typo ("tempreature" has one, "tua" for "tau" too).
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The known name a typo most likely meant: at most 2 edits away, and fewer edits than
// half the key's length, so that a short key does not "mean" every short name ("x"
// is not a typo of "n"). Ties go to the earlier name in `known`.
std::string Suggestion(const std::string& key, absl::Span<const absl::string_view> known) {
  absl::string_view best;
  size_t best_distance = 3;
  for (absl::string_view name : known) {
    if (name.size() + 2 < key.size() || key.size() + 2 < name.size()) continue;  // more than 2 edits apart
    const size_t distance = EditDistance(key, name);
    if (distance < best_distance && 2 * distance < key.size()) {
      best = name;
      best_distance = distance;
    }
  }
  return best.empty() ? "" : absl::StrCat(" (did you mean \"", best, "\"?)");
}

}  // namespace

absl::Status CheckKnownFields(const Json& object, const std::string& path, absl::Span<const absl::string_view> known) {
  constexpr size_t kMaxNamed = 5;
  std::string first;  // the field the error names
  std::vector<std::string> unknown;
  size_t count = 0;
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    if (++count > kMaxNamed) continue;
    if (first.empty()) {
      first = absl::StrCat(path, JsonPathKey(key));
      unknown.push_back(absl::StrCat("unknown field", Suggestion(key, known)));
    } else {
      unknown.push_back(absl::StrCat(path, JsonPathKey(key), ": unknown field", Suggestion(key, known)));
    }
  }
  if (unknown.empty()) return absl::OkStatus();
  if (count > kMaxNamed) {
    unknown.push_back(absl::StrCat("and ", count - kMaxNamed, " more unknown field", count - kMaxNamed > 1 ? "s" : ""));
  }
  return FieldViolation(first, absl::StrJoin(unknown, "; "));
}

}  // namespace crossreg::server
