#include "engine/io/bounded_json.h"

#include <algorithm>
#include <cctype>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"

namespace crossreg {
namespace {

using Json = nlohmann::ordered_json;

// Builds the document from nlohmann's SAX events (its SAX parser keeps its own stack
// on the heap, so nesting costs no recursion) and keeps the path to the value being
// read, for errors.
class BoundedBuilder final : public nlohmann::json_sax<Json> {
 public:
  BoundedBuilder(const JsonLimits& limits, std::string_view root) : limits_(limits), root_(root) {}

  bool null() override { return Value(Json(nullptr)); }
  bool boolean(bool v) override { return Value(Json(v)); }
  bool number_integer(number_integer_t v) override { return Value(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Value(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Value(Json(v)); }
  bool string(string_t& v) override { return Value(Json(std::move(v))); }
  bool binary(binary_t&) override { return Fail(Path(true), "binary values are not JSON"); }

  bool start_object(std::size_t) override { return Open(Json::object()); }
  bool start_array(std::size_t) override { return Open(Json::array()); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }

  bool key(string_t& key) override {
    Frame& f = frames_.back();
    if (!f.names.insert(key).second) {
      f.key = key;
      return Fail(Path(true), "duplicate member name (each may appear once)");
    }
    if (f.names.size() > limits_.max_object_members) {
      return Fail(Path(false), absl::StrCat("more than ", limits_.max_object_members, " members"));
    }
    f.key = std::move(key);
    return true;
  }

  bool parse_error(std::size_t, const std::string& last_token, const nlohmann::detail::exception& e) override {
    constexpr size_t kMaxShown = 160;
    if (e.id == 406) {  // a number beyond double's range, which JSON allows and nlohmann refuses
      return Fail(Path(true), absl::StrCat("number out of range (", last_token.substr(0, 40), ")"));
    }
    // "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error while parsing value - ..."
    std::string what = e.what();
    if (const size_t end = what.find("] "); end != std::string::npos) what = what.substr(end + 2);
    if (what.size() > kMaxShown) what = what.substr(0, kMaxShown) + "...";
    const bool at_value = absl::StrContains(what, "while parsing value");
    return Fail(Path(at_value), absl::StrCat("not valid JSON (", what, ")"));
  }

  const absl::Status& status() const { return status_; }
  Json TakeDocument() { return std::move(document_); }

 private:
  struct Frame {
    Json* container;
    bool array;
    std::string key;                         // objects: the member being read
    size_t index = 0;                        // arrays: the element being read
    std::unordered_set<std::string> names;   // objects: members so far
  };

  bool Fail(std::string path, absl::string_view what) {
    status_ = FieldViolation(path, what);
    return false;
  }

  // Places `v` where the parser is: the document, the open array's next element or the
  // open object's current member. Members are appended to the ordered object's vector
  // directly: the duplicate check above already did what its insert would search for.
  Json* Place(Json v) {
    if (++values_ > limits_.max_values) return nullptr;
    if (frames_.empty()) {
      document_ = std::move(v);
      return &document_;
    }
    Frame& f = frames_.back();
    if (f.array) {
      auto& elements = f.container->get_ref<Json::array_t&>();
      elements.push_back(std::move(v));
      ++f.index;
      return &elements.back();
    }
    auto& members = static_cast<std::vector<std::pair<const std::string, Json>>&>(
        f.container->get_ref<Json::object_t&>());
    members.emplace_back(f.key, std::move(v));
    return &members.back().second;
  }

  bool Value(Json v) {
    if (!frames_.empty() && frames_.back().array && frames_.back().index >= limits_.max_array_elements) {
      return Fail(Path(false), absl::StrCat("more than ", limits_.max_array_elements, " elements"));
    }
    if (Place(std::move(v)) == nullptr) {
      return Fail(Path(true), absl::StrCat("the document has more than ", limits_.max_values, " values"));
    }
    return true;
  }

  bool Open(Json empty) {
    const bool array = empty.is_array();
    if (static_cast<int>(frames_.size()) >= limits_.max_depth) {
      return Fail(Path(true), absl::StrCat("nested deeper than ", limits_.max_depth, " levels"));
    }
    if (!frames_.empty() && frames_.back().array && frames_.back().index >= limits_.max_array_elements) {
      return Fail(Path(false), absl::StrCat("more than ", limits_.max_array_elements, " elements"));
    }
    Json* placed = Place(std::move(empty));
    if (placed == nullptr) {
      return Fail(Path(true), absl::StrCat("the document has more than ", limits_.max_values, " values"));
    }
    frames_.push_back(Frame{placed, array, "", 0, {}});
    return true;
  }

  bool Close() {
    frames_.pop_back();
    return true;
  }

  // The path to the value being read; without `at_value`, to its container. Cut short
  // in a deeply nested body, which would otherwise make a message as long as the body.
  std::string Path(bool at_value) const {
    constexpr size_t kMaxPath = 128;
    std::string path(root_);
    size_t depth = at_value ? frames_.size() : (frames_.empty() ? 0 : frames_.size() - 1);
    for (size_t i = 0; i < depth; ++i) {
      if (path.size() > kMaxPath) {
        path += "...";
        break;
      }
      const Frame& f = frames_[i];
      if (f.array) {
        // An element is named by the index being read: the next one once an element is placed.
        const size_t index = i + 1 < frames_.size() || !at_value ? f.index - (f.index > 0 ? 1 : 0) : f.index;
        absl::StrAppend(&path, path.empty() ? "body" : "", "[", index, "]");
      } else {
        absl::StrAppend(&path, path.empty() ? "" : ".", JsonPathKey(f.key));
      }
    }
    return path.empty() ? "body" : path;
  }

  const JsonLimits& limits_;
  const std::string root_;
  Json document_;
  std::vector<Frame> frames_;
  size_t values_ = 0;
  absl::Status status_ = FieldViolation("body", "not valid JSON");
};

}  // namespace

std::string JsonPathKey(std::string_view key) {
  constexpr size_t kMaxShown = 64;
  const bool plain = !key.empty() && key.size() <= kMaxShown && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  if (plain) return std::string(key);
  return absl::StrCat(Json(std::string(key.substr(0, kMaxShown))).dump(-1, ' ', false, Json::error_handler_t::replace),
                      key.size() > kMaxShown ? "..." : "");
}

absl::StatusOr<nlohmann::ordered_json> ParseBoundedJson(std::string_view text, const JsonLimits& limits,
                                                        std::string_view root) {
  BoundedBuilder builder(limits, root);
  if (!Json::sax_parse(text.begin(), text.end(), &builder)) return builder.status();
  return builder.TakeDocument();
}

}  // namespace crossreg
