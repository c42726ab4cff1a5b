// The streaming property: for generated messages cut into random pieces (inside tags,
// escapes and UTF-8 characters too), the joined deltas equal ParseToolCalls on the whole
// text, and ParseToolCalls finds exactly the calls the generator wrote.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/chat/tool_call_parser.h"
#include "tests/testing/tool_call_stream_collector.h"

namespace crossreg::chat {
namespace {

using testing::CollectedStream;

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t length = 1;
    unsigned char min = 0x80;
    unsigned char max = 0xBF;
    if (lead < 0x80) {
      length = 1;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) min = 0xA0;
      if (lead == 0xED) max = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) min = 0x90;
      if (lead == 0xF4) max = 0x8F;
    } else {
      return false;
    }
    if (i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      const auto byte = static_cast<unsigned char>(text[i + k]);
      if (byte < (k == 1 ? min : 0x80) || byte > (k == 1 ? max : 0xBF)) return false;
    }
    i += length;
  }
  return true;
}

struct GeneratedText {
  std::string text;
  std::vector<ParsedToolCall> calls;  // what ParseToolCalls must find
  // A block that is not a call but whose name a stream may read first: the stream may then
  // send that call's first pieces too (see tool_call_hermes_stream.h).
  bool malformed_after_name = false;
};

// Messages as models write them, well-formed or not, in either format.
class MessageGenerator {
 public:
  explicit MessageGenerator(uint32_t seed) : random_(seed) {}

  GeneratedText Hermes() {
    GeneratedText out;
    const int items = Below(6);
    for (int i = 0; i < items; ++i) {
      const int kind = Below(100);
      if (kind < 40) {
        out.text += Content();
      } else if (kind < 75) {
        out.text += Block(ValidCall(out.calls));
      } else if (kind < 90) {
        out.text += Block(MalformedBeforeName());
      } else {
        out.text += Block(MalformedAfterName());
        out.malformed_after_name = true;
      }
      if (Chance(50)) out.text += Space();
    }
    if (Chance(15)) {
      // The message ends inside a block.
      out.text += std::string("<tool_call>") + Space();
      switch (Below(3)) {
        case 0:
          out.text += ValidCall(out.calls) + Space();
          if (Chance(40)) out.text += std::string("</tool_call>").substr(0, 1 + Below(11));
          break;
        case 1: {  // cut before the name is read
          const std::string object = R"({"arguments": {"a": "x"}, "name": "f"})";
          out.text += object.substr(0, 1 + Below(static_cast<int>(object.find("\"f\"")) + 1));
          break;
        }
        default: {  // cut after it
          const std::string object = R"({"name": "f", "arguments": {"a": ["x", 1]}})";
          out.text += object.substr(0, object.find("\"f\"") + 3 + Below(20));
          out.malformed_after_name = true;
          break;
        }
      }
    }
    return out;
  }

  GeneratedText Llama3() {
    GeneratedText out;
    if (Chance(30)) {
      // Not a call: all content.
      static const std::vector<std::string> others = {
          "The weather in Paris is sunny.",
          R"({"answer": 42, "units": "km"})",
          R"({"name": "Bob", "parameters": {}, "age": 3})",
          R"({"name": "f", "parameters": "{}"})",
          R"({"name": "f"})",
          R"({"name": "f", "parameters": {"a": 1}} and some text)",
          R"({"name": "f", "parameters": {}};; {"name": "g", "parameters": {}})",
          R"([{"name": "f", "parameters": {}}])",
          "<|python_tag|>brave_search.call(query=\"caf\xC3\xA9\")",
          R"({"name": "f", "parameters": {"a": [1, 2})",
      };
      out.text = Space() + others[Below(static_cast<int>(others.size()))] + Space();
      return out;
    }
    out.text = Space();
    if (Chance(50)) out.text += "<|python_tag|>" + Space();
    const int calls = 1 + Below(3);
    for (int i = 0; i < calls; ++i) {
      if (i > 0) out.text += Space() + ";" + Space();
      std::string decoded;
      const std::string name = Name(decoded);
      const std::string arguments = JsonObject(0);
      const std::string key = Chance(70) ? R"("parameters")" : R"("arguments")";
      std::vector<std::string> members = {R"("name")" + Space() + ":" + Space() + name,
                                          key + Space() + ":" + Space() + arguments};
      if (Chance(30)) std::swap(members[0], members[1]);
      out.text += "{" + Space() + members[0] + Space() + "," + Space() + members[1] + Space() + "}";
      out.calls.push_back({decoded, arguments});
    }
    if (Chance(20)) out.text += Space() + ";";
    out.text += Space();
    return out;
  }

 private:
  int Below(int n) { return static_cast<int>(random_() % static_cast<uint32_t>(n)); }
  bool Chance(int percent) { return Below(100) < percent; }
  template <typename T>
  const T& Pick(const std::vector<T>& items) {
    return items[Below(static_cast<int>(items.size()))];
  }

  std::string Space() {
    static const std::vector<std::string> spaces = {"", "", "", " ", "\n", "\n\n", "\t", "\r\n", "  "};
    return Pick(spaces);
  }

  std::string Content() {
    static const std::vector<std::string> pieces = {
        "Hello",
        "Sure!",
        " Let me check.",
        "the weather",
        "caf\xC3\xA9",
        "\xE6\x9D\xB1\xE4\xBA\xAC",
        "\xF0\x9F\x99\x82",
        " ",
        "\n",
        "\n\n",
        "<tool",
        "<tool_call",
        "</tool_call>",
        "<",
        "<<",
        "<tools>",
        "{\"name\": \"x\"}",
        "\\",
        ";",
        "tool_call",
        "\"",
        "{",
        "}",
        "\xC3",
        "\xFF",
    };
    std::string content;
    const int count = 1 + Below(4);
    for (int i = 0; i < count; ++i) content += Pick(pieces);
    return content;
  }

  std::string Block(const std::string& object) { return "<tool_call>" + Space() + object + Space() + "</tool_call>"; }

  // A JSON string token: escapes, raw and escaped non-ASCII, and JSON and tag characters.
  std::string JsonString() {
    static const std::vector<std::string> pieces = {
        "Paris",
        "a b",
        "\\\"",
        "\\\\",
        "\\/",
        "\\n",
        "\\t",
        "\\u00e9",
        "\\ud83d\\ude42",
        "caf\xC3\xA9",
        "\xE6\x9D\xB1\xE4\xBA\xAC",
        "\xF0\x9F\x99\x82",
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "<tool_call>",
        "</tool",
        ";",
        "'",
    };
    std::string token = "\"";
    const int count = Below(5);
    for (int i = 0; i < count; ++i) token += Pick(pieces);
    return token + "\"";
  }

  std::string JsonValue(int depth) {
    static const std::vector<std::string> scalars = {"0",  "-1",   "12.5",  "1e5", "-0.25E-2",
                                                     "42", "true", "false", "null"};
    const int kind = Below(depth >= 3 ? 2 : 4);
    if (kind == 0) return JsonString();
    if (kind == 1) return Pick(scalars);
    if (kind == 2) return JsonObject(depth + 1);
    std::string array = "[" + Space();
    const int count = Below(4);
    for (int i = 0; i < count; ++i) {
      if (i > 0) array += Space() + "," + Space();
      array += JsonValue(depth + 1);
    }
    return array + Space() + "]";
  }

  std::string JsonObject(int depth) {
    std::string object = "{" + Space();
    const int count = Below(4);
    for (int i = 0; i < count; ++i) {
      if (i > 0) object += Space() + "," + Space();
      object += JsonString() + Space() + ":" + Space() + JsonValue(depth + 1);
    }
    return object + Space() + "}";
  }

  // A name's token, and what it decodes to.
  std::string Name(std::string& decoded) {
    static const std::vector<std::pair<std::string, std::string>> names = {
        {R"("get_weather")", "get_weather"},
        {R"("search")", "search"},
        {R"("get_\u0074ime")", "get_time"},
        {R"("m\u00e9t\u00e9o")", "m\xC3\xA9t\xC3\xA9o"},
        {"\"m\xC3\xA9t\xC3\xA9o\"", "m\xC3\xA9t\xC3\xA9o"},
        {R"("a\"b")", "a\"b"},
    };
    const auto& [token, text] = Pick(names);
    decoded = text;
    return token;
  }

  std::string Object(std::vector<std::string> members) {
    std::shuffle(members.begin(), members.end(), random_);
    std::string object = "{" + Space();
    for (size_t i = 0; i < members.size(); ++i) {
      if (i > 0) object += Space() + "," + Space();
      object += members[i];
    }
    return object + Space() + "}";
  }

  std::string Member(const std::string& key, const std::string& value) { return key + Space() + ":" + Space() + value; }

  std::string ValidCall(std::vector<ParsedToolCall>& calls) {
    std::string name;
    std::vector<std::string> members = {Member(R"("name")", Name(name))};
    std::string arguments = "{}";
    const std::string key = Chance(75) ? R"("arguments")" : R"("parameters")";
    switch (Below(5)) {
      case 0:  // as a string
        arguments = JsonObject(0);
        members.push_back(Member(key, nlohmann::json(arguments).dump()));
        break;
      case 1:  // none
        break;
      default:
        arguments = JsonObject(0);
        members.push_back(Member(key, arguments));
    }
    if (Chance(20)) members.push_back(Member(R"("id")", JsonValue(1)));
    if (Chance(10)) members.push_back(Member(R"("type")", R"("function")"));
    calls.push_back({name, arguments});
    return Object(members);
  }

  // Fails before a stream can read the name, so no stream sends a call for it.
  std::string MalformedBeforeName() {
    std::string name;
    switch (Below(8)) {
      case 0:
        return Object({Member(R"("arguments")", JsonObject(0))});
      case 1:
        return Object({Member(R"("name")", Pick(std::vector<std::string>{"5", "null", "[\"f\"]", "\"\""})),
                       Member(R"("arguments")", JsonObject(0))});
      case 2:
        return "{" + Member(R"("arguments")", R"({"a": })") + ", " + Member(R"("name")", Name(name)) + "}";
      case 3:
        return "x" + Object({Member(R"("name")", Name(name))});
      case 4:
        return "{'name': 'f', 'arguments': {}}";
      case 5:
        return "get_weather(city=\"Paris\")";
      case 6:
        return "{" + Member(R"("arguments")", Pick(std::vector<std::string>{"5", "[1]", "\"[]\"", "null"})) + ", " +
               Member(R"("name")", Name(name)) + "}";
      default:
        return "";
    }
  }

  // Fails after the name: a stream reading slowly enough sends the call's start.
  std::string MalformedAfterName() {
    std::string name;
    const std::string name_member = Member(R"("name")", Name(name));
    switch (Below(5)) {
      case 0:
        return "{" + name_member + ", " + Member(R"("arguments")", R"({"a": 1)");
      case 1:
        return "{" + name_member + ", " + Member(R"("arguments")", JsonObject(0)) + "} extra";
      case 2:
        return "{" + name_member + ", " + Member(R"("arguments")", R"({"s": "</tool_call>"})") + "}";
      case 3:
        return "{" + name_member + ", " + Member(R"("arguments")", "null") + "}";
      default:
        return "{" + name_member + ", " + Member(R"("arguments")", R"("not json")") + "}";
    }
  }

  std::mt19937 random_;
};

// Each of a call's deltas, joined, against the whole parse.
void ExpectStreamMatches(const GeneratedText& generated, ToolCallFormat format, const ParsedMessage& whole,
                         const std::vector<size_t>& lengths, std::string_view split) {
  const CollectedStream streamed = testing::StreamInPieces(generated.text, format, lengths);
  ASSERT_EQ(streamed.content, whole.content) << split;
  if (generated.malformed_after_name) {
    // The calls ParseToolCalls finds are among those the stream sent, in order.
    size_t found = 0;
    for (const ParsedToolCall& call : streamed.calls) {
      if (found < whole.tool_calls.size() && call == whole.tool_calls[found]) ++found;
    }
    ASSERT_EQ(found, whole.tool_calls.size()) << split;
  } else {
    ASSERT_EQ(streamed.calls, whole.tool_calls) << split;
    ASSERT_EQ(streamed.saw_tool_calls, !whole.tool_calls.empty()) << split;
  }
  for (size_t i = 0; i < streamed.ids.size(); ++i) ASSERT_EQ(streamed.ids[i], "id" + std::to_string(i)) << split;
  if (IsValidUtf8(generated.text)) {
    for (const std::string& piece : streamed.pieces) ASSERT_TRUE(IsValidUtf8(piece)) << split << ": " << piece;
  }
}

// Whole, a byte at a time, and in random pieces of up to 2..32 bytes.
std::vector<std::pair<std::string, std::vector<size_t>>> Splits(size_t text_size, std::mt19937& random) {
  std::vector<std::pair<std::string, std::vector<size_t>>> splits = {{"whole", {}}, {"bytewise", {1}}};
  for (const size_t longest : {2u, 5u, 32u}) {
    std::vector<size_t> lengths;
    for (size_t total = 0; total < text_size;) {
      lengths.push_back(1 + random() % longest);
      total += lengths.back();
    }
    splits.emplace_back("pieces of up to " + std::to_string(longest), std::move(lengths));
  }
  return splits;
}

TEST(ToolCallStreamProperty, HermesStreamJoinsUpToTheWholeParse) {
  MessageGenerator generator(20260301);
  std::mt19937 random(7);
  int with_calls = 0;
  int exact = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const GeneratedText generated = generator.Hermes();
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", text: " << generated.text);
    const ParsedMessage whole = ParseToolCalls(generated.text, ToolCallFormat::kHermes);
    ASSERT_EQ(whole.tool_calls, generated.calls);
    with_calls += whole.tool_calls.empty() ? 0 : 1;
    exact += generated.malformed_after_name ? 0 : 1;
    for (const auto& [split, lengths] : Splits(generated.text.size(), random)) {
      ExpectStreamMatches(generated, ToolCallFormat::kHermes, whole, lengths, split);
    }
  }
  // The generator must cover both sides.
  EXPECT_GT(with_calls, 1500);
  EXPECT_GT(exact, 2000);
}

TEST(ToolCallStreamProperty, Llama3StreamJoinsUpToTheWholeParse) {
  MessageGenerator generator(20260302);
  std::mt19937 random(11);
  int with_calls = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const GeneratedText generated = generator.Llama3();
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", text: " << generated.text);
    const ParsedMessage whole = ParseToolCalls(generated.text, ToolCallFormat::kLlama3Json);
    ASSERT_EQ(whole.tool_calls, generated.calls);
    if (generated.calls.empty()) {
      ASSERT_EQ(whole.content, generated.text);
    } else {
      ASSERT_EQ(whole.content, "");
      ++with_calls;
    }
    for (const auto& [split, lengths] : Splits(generated.text.size(), random)) {
      ExpectStreamMatches(generated, ToolCallFormat::kLlama3Json, whole, lengths, split);
    }
  }
  EXPECT_GT(with_calls, 900);
}

}  // namespace
}  // namespace crossreg::chat
