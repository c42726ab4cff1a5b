// JsonValueScanner against nlohmann::json, byte by byte: what it accepts, and where it says
// a value ends.
#include "server/chat/tool_call_json_scanner.h"

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/chat/tool_call_text.h"

namespace crossreg::chat {
namespace {

using Step = JsonValueScanner::Step;

// Where the scanner completes a value in `text`: the index of the byte that completes it
// (or, for a number, the byte after it); -1 if it fails first, -2 if it never completes.
int CompletionIndex(std::string_view text) {
  JsonValueScanner scanner;
  for (size_t i = 0; i < text.size(); ++i) {
    switch (scanner.Push(text[i])) {
      case Step::kMore:
        break;
      case Step::kComplete:
      case Step::kEndedBefore:
        return static_cast<int>(i);
      case Step::kInvalid:
        return -1;
    }
  }
  return -2;
}

// The whole text is one container and whitespace around it.
// An exponent of 3 or more digits: beyond a double's range, which nlohmann refuses.
bool HasLargeExponent(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != 'e' && text[i] != 'E') continue;
    size_t digits = i + 1;
    if (digits < text.size() && (text[digits] == '+' || text[digits] == '-')) ++digits;
    size_t end = digits;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    if (end - digits >= 3) return true;
  }
  return false;
}

bool ScannerAccepts(std::string_view text) {
  const int end = CompletionIndex(text);
  return end >= 0 && IsAllJsonSpace(text.substr(end + 1));
}

TEST(ToolCallJsonScanner, CompletesAtTheClosingByte) {
  const std::string_view text = R"({"a": [1, {"b": "}]\"{"}, -2.5e+3, true, null, false, []], "c": {}} trailing)";
  EXPECT_EQ(CompletionIndex(text), static_cast<int>(text.find(" trailing") - 1));
  EXPECT_EQ(CompletionIndex(R"("a\"b" x)"), 5);
  EXPECT_EQ(CompletionIndex("true,"), 3);
  EXPECT_EQ(CompletionIndex("  [ ] "), 4);
}

TEST(ToolCallJsonScanner, ANumberEndsAtTheByteAfterIt) {
  JsonValueScanner scanner;
  for (char c : std::string_view("-12.5e3")) EXPECT_EQ(scanner.Push(c), Step::kMore);
  EXPECT_EQ(scanner.Push(','), Step::kEndedBefore);
  EXPECT_EQ(scanner.Push('1'), Step::kInvalid) << "nothing follows a complete value";
}

TEST(ToolCallJsonScanner, AcceptsAndRejectsAsNlohmann) {
  const std::vector<std::string> cases = {
      R"({})", R"([])", R"({"a":1})", R"([1,2,3])", R"({"a":[{"b":null}]})", R"(["\u00e9\ud83d\ude42\/\b\f\n\r\t"])",
      R"([-0, 0.5, 1E5, 1e-5, -1.5E+10])", "[\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x99\x82\xF4\x8F\xBF\xBF\"]",
      // Rejected:
      R"({,})", R"([1,])", R"({"a":1,})", R"({"a" 1})", R"({a:1})", R"(['a'])", R"([01])", R"([1.])", R"([.5])",
      R"([+1])", R"([1e])", R"([-])", R"([tru])", R"([nul])", R"([True])", R"(["\x"])", R"(["\u12g4"])",
      R"(["\ud800"])", R"(["\udc00"])", R"(["\ud800\u0041"])", R"(["\ud800x"])", "[\"a\x01\"]", "[\"a\tb\"]",
      "[\"\xC3\"]", "[\"\xC0\x80\"]", "[\"\xED\xA0\x80\"]", "[\"\xF4\x90\x80\x80\"]", "[\"\xE0\x80\x80\"]",
      "[\"\xF0\x80\x80\x80\"]", "[\"\xFF\"]", "[\"\x80\"]", R"([1 2])", R"({"a":1 "b":2})", R"([}])", R"({])",
      R"([[[]])", R"({"a":{})", R"("unterminated)"};
  for (const std::string& text : cases) {
    EXPECT_EQ(ScannerAccepts(text), nlohmann::json::accept(text)) << text;
  }
}

// Mutations of valid documents: the scanner must agree with nlohmann on every one. Number
// range is the one thing it leaves alone (nlohmann refuses 1e999), so large exponents are
// skipped.
TEST(ToolCallJsonScanner, AgreesWithNlohmannOnMutatedDocuments) {
  const std::vector<std::string> seeds = {
      R"({"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2.5, -3e2], "ok": true}})",
      R"([{"a": "x\"y\\z\u00e9"}, null, false, {"nested": [[], {}, [{"k": "v"}]]}])",
      "{\"s\": \"caf\xC3\xA9 \xF0\x9F\x99\x82\", \"t\": \"\\ud83d\\ude42\", \"n\": 0}",
  };
  const std::string alphabet = "{}[]\",:\\ \n0123456789.-+eEtrufalsn\x01\xC3\xA9\xF0\x9F\x80\xED";
  std::mt19937 random(20260301);
  int compared = 0;
  int accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text = seeds[random() % seeds.size()];
    const int edits = 1 + static_cast<int>(random() % 3);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = random() % text.size();
      const char c = alphabet[random() % alphabet.size()];
      switch (random() % 3) {
        case 0:
          text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        case 1:
          text.erase(at, 1);
          break;
        default:
          text[at] = c;
      }
    }
    const std::string_view start = StripLeadingJsonSpace(text);
    if (start.empty() || (start.front() != '{' && start.front() != '[')) continue;
    if (HasLargeExponent(text)) continue;
    const bool expected = nlohmann::json::accept(text);
    ASSERT_EQ(ScannerAccepts(text), expected) << text;
    ++compared;
    accepted += expected ? 1 : 0;
  }
  // The mutations must exercise both verdicts.
  EXPECT_GT(compared, 15000);
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(compared - accepted, 5000);
}

}  // namespace
}  // namespace crossreg::chat
