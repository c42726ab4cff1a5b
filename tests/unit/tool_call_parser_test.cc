// ParseToolCalls on whole messages, in both formats; each case is also streamed whole and a
// byte at a time, which must give the same content and calls.
#include "server/chat/tool_call_parser.h"

#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "server/chat/tool_call_format.h"
#include "tests/testing/tool_call_stream_collector.h"

namespace crossreg::chat {
namespace {

using testing::CollectedStream;

void ExpectParse(std::string_view text, ToolCallFormat format, std::string_view content,
                 const std::vector<ParsedToolCall>& calls) {
  SCOPED_TRACE(::testing::Message() << "text: " << text);
  const ParsedMessage parsed = ParseToolCalls(text, format);
  EXPECT_EQ(parsed.content, content);
  EXPECT_EQ(parsed.tool_calls, calls);
  for (const CollectedStream& streamed : {testing::StreamWhole(text, format), testing::StreamBytewise(text, format)}) {
    EXPECT_EQ(streamed.content, content);
    EXPECT_EQ(streamed.calls, calls);
    EXPECT_EQ(streamed.saw_tool_calls, !calls.empty());
  }
}

void ExpectHermes(std::string_view text, std::string_view content, const std::vector<ParsedToolCall>& calls) {
  ExpectParse(text, ToolCallFormat::kHermes, content, calls);
}

// Not a call: the text is all content, unchanged.
void ExpectHermesContent(std::string_view text) { ExpectHermes(text, text, {}); }

// A closed block that is not a call, but whose name a byte-at-a-time stream reads before
// the block fails: that stream has sent `sent_call` (its name and the arguments read by
// then) and then the block as content. Streamed in one piece, the failure is seen first.
void ExpectLateMalformedHermes(std::string_view text, const ParsedToolCall& sent_call) {
  SCOPED_TRACE(::testing::Message() << "text: " << text);
  const ParsedMessage parsed = ParseToolCalls(text, ToolCallFormat::kHermes);
  EXPECT_EQ(parsed.content, text);
  EXPECT_TRUE(parsed.tool_calls.empty());
  const CollectedStream whole = testing::StreamWhole(text, ToolCallFormat::kHermes);
  EXPECT_EQ(whole.content, text);
  EXPECT_TRUE(whole.calls.empty());
  const CollectedStream bytewise = testing::StreamBytewise(text, ToolCallFormat::kHermes);
  EXPECT_EQ(bytewise.content, text);
  EXPECT_EQ(bytewise.calls, std::vector<ParsedToolCall>{sent_call});
  EXPECT_TRUE(bytewise.saw_tool_calls);
}

void ExpectLlama3(std::string_view text, const std::vector<ParsedToolCall>& calls) {
  ExpectParse(text, ToolCallFormat::kLlama3Json, "", calls);
}

void ExpectLlama3Content(std::string_view text) { ExpectParse(text, ToolCallFormat::kLlama3Json, text, {}); }

TEST(ToolCallParserHermes, SingleCall) {
  ExpectHermes("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
               {{"get_weather", R"({"city": "Paris"})"}});
}

TEST(ToolCallParserHermes, ArgumentsKeepTheModelsBytes) {
  // Spacing, key order, number spelling and escapes as written: no re-serialising.
  ExpectHermes(R"(<tool_call>{"name":"f","arguments":{ "b" :1.50E+2,"a":[ true,null ] ,"s":"\u00e9\/"}}</tool_call>)",
               "", {{"f", R"({ "b" :1.50E+2,"a":[ true,null ] ,"s":"\u00e9\/"})"}});
}

TEST(ToolCallParserHermes, SeveralCallsWithContentBefore) {
  ExpectHermes(
      "I'll look both up.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>",
      "I'll look both up.", {{"get_weather", R"({"city": "Paris"})"}, {"get_time", R"({"zone": "CET"})"}});
}

TEST(ToolCallParserHermes, ContentBetweenAndAfterCallsKeepsOneSeparator) {
  ExpectHermes(
      "Checking.\n<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\nNow the second:  "
      "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>\n\n<tool_call>{\"name\": \"c\", \"arguments\": {}}"
      "</tool_call> Done.\n",
      "Checking.\nNow the second:  Done.\n", {{"a", "{}"}, {"b", "{}"}, {"c", "{}"}});
}

TEST(ToolCallParserHermes, WhitespaceAroundCallsAtTheEndsGoes) {
  ExpectHermes("\n\n  <tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>  \n", "", {{"a", "{}"}});
  ExpectHermes("Text.\r\n<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\r\n", "Text.", {{"a", "{}"}});
  ExpectHermes("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n\nAfter.", "After.", {{"a", "{}"}});
  ExpectHermes(" \n<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call> After.", "After.", {{"a", "{}"}});
}

TEST(ToolCallParserHermes, WhitespaceInsideTheBlock) {
  const std::vector<ParsedToolCall> call = {{"f", R"({"x": [1, 2]})"}};
  ExpectHermes("<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": [1, 2]}}</tool_call>", "", call);
  ExpectHermes("<tool_call>\r\n\t {\"name\" :\"f\" ,\n \"arguments\":\n{\"x\": [1, 2]}\n}\t\r\n </tool_call>", "",
               call);
  ExpectHermes("<tool_call>\n\n{\n  \"name\": \"f\",\n  \"arguments\": {\"x\": [1, 2]}\n}\n\n</tool_call>", "", call);
}

TEST(ToolCallParserHermes, ArgumentsAsAStringAreItsContent) {
  ExpectHermes(R"(<tool_call>{"name": "f", "arguments": "{\"city\": \"Paris\", \"n\": 2}"}</tool_call>)", "",
               {{"f", R"({"city": "Paris", "n": 2})"}});
  // Escapes one level down stay escaped: the content is JSON text.
  ExpectHermes(R"(<tool_call>{"name": "f", "arguments": " {\"q\": \"caf\\u00e9 \\\"x\\\"\"} "}</tool_call>)", "",
               {{"f", R"( {"q": "caf\u00e9 \"x\""} )"}});
}

TEST(ToolCallParserHermes, ArgumentsStringThatIsNotAnObjectIsMalformed) {
  // String arguments are held until they end, so the stream has sent only the name.
  ExpectLateMalformedHermes(R"(<tool_call>{"name": "f", "arguments": "[1, 2]"}</tool_call>)", {"f", ""});
  ExpectLateMalformedHermes(R"(<tool_call>{"name": "f", "arguments": "city=Paris"}</tool_call>)", {"f", ""});
  ExpectLateMalformedHermes(R"(<tool_call>{"name": "f", "arguments": "{\"a\": }"}</tool_call>)", {"f", ""});
  ExpectHermesContent(R"(<tool_call>{"arguments": "", "name": "f"}</tool_call>)");
}

TEST(ToolCallParserHermes, ParametersIsTakenForArguments) {
  ExpectHermes(R"(<tool_call>{"name": "f", "parameters": {"a": 1}}</tool_call>)", "", {{"f", R"({"a": 1})"}});
  ExpectHermes(R"(<tool_call>{"parameters": "{\"a\": 1}", "name": "f"}</tool_call>)", "", {{"f", R"({"a": 1})"}});
}

TEST(ToolCallParserHermes, ArgumentsBeforeNameAndOtherKeys) {
  ExpectHermes(R"(<tool_call>{"arguments": {"name": "not this"}, "id": [1, {"k": -0.5e3}], "name": "f"}</tool_call>)",
               "", {{"f", R"({"name": "not this"})"}});
  ExpectHermes(R"(<tool_call>{"type": "function", "name": "f", "n": 12, "arguments": {}}</tool_call>)", "",
               {{"f", "{}"}});
}

TEST(ToolCallParserHermes, MissingArgumentsAreAnEmptyObject) {
  ExpectHermes(R"(<tool_call>{"name": "get_time"}</tool_call>)", "", {{"get_time", "{}"}});
}

TEST(ToolCallParserHermes, NameEscapesAreDecoded) {
  ExpectHermes(R"(<tool_call>{"n\u0061me": "get_\u0077eather", "arguments": {}}</tool_call>)", "",
               {{"get_weather", "{}"}});
  ExpectHermes("<tool_call>{\"name\": \"m\xC3\xA9t\xC3\xA9o\", \"arguments\": {}}</tool_call>", "",
               {{"m\xC3\xA9t\xC3\xA9o", "{}"}});
}

TEST(ToolCallParserHermes, UnicodeInArguments) {
  const std::string arguments =
      "{\"city\": \"Z\xC3\xBCrich\", \"note\": \"\xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x99\x82\", "
      "\"esc\": \"\\u00fc\\ud83d\\ude42\"}";
  ExpectHermes(
      "Sure \xE2\x80\x94 one moment.\n<tool_call>\n{\"name\": \"f\", \"arguments\": " + arguments + "}\n</tool_call>",
      "Sure \xE2\x80\x94 one moment.", {{"f", arguments}});
}

TEST(ToolCallParserHermes, EscapedQuotesAndBracesInArgumentStrings) {
  const std::string arguments =
      R"({"code": "if (x) { return \"}\"; } // {[", "re": "\\d+\\\"}", "path": "C:\\dir\\", "arr": [{"a": "]"}, "{"]})";
  ExpectHermes("<tool_call>{\"name\": \"run\", \"arguments\": " + arguments + "}</tool_call>", "",
               {{"run", arguments}});
}

TEST(ToolCallParserHermes, MalformedJsonStaysContent) {
  ExpectLateMalformedHermes("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1,}}\n</tool_call>",
                            {"f", R"({"a": 1,)"});
  ExpectHermesContent("<tool_call>\n{'name': 'f', 'arguments': {}}\n</tool_call>");
  ExpectHermesContent("<tool_call>\nget_weather(city=\"Paris\")\n</tool_call>");
  ExpectHermesContent("<tool_call></tool_call>");
  // Raw control characters in strings are not JSON (Python's json.loads refuses them too).
  ExpectLateMalformedHermes("<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"line\nbreak\"}}</tool_call>",
                            {"f", R"({"s": "line)"});
  ExpectLateMalformedHermes("<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"\xC3\x28\"}}</tool_call>",
                            {"f", R"({"s": ")"});
}

TEST(ToolCallParserHermes, MalformedBlockBesideAGoodOne) {
  const std::string bad = "<tool_call>{\"arguments\": {\"a\": tru}, \"name\": \"f\"}</tool_call>";
  ExpectHermes("Two tries:\n" + bad + "\n<tool_call>{\"name\": \"g\", \"arguments\": {\"a\": true}}</tool_call>",
               "Two tries:\n" + bad, {{"g", R"({"a": true})"}});
  ExpectHermes("<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>\n" + bad + "\nEnd", bad + "\nEnd",
               {{"g", "{}"}});
  ExpectHermes("A\n<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>\n" + bad, "A\n" + bad, {{"g", "{}"}});
}

TEST(ToolCallParserHermes, MissingOrBadNameStaysContent) {
  ExpectHermesContent(R"(<tool_call>{"arguments": {"city": "Paris"}}</tool_call>)");
  ExpectHermesContent(R"(<tool_call>{"name": 7, "arguments": {}}</tool_call>)");
  ExpectHermesContent(R"(<tool_call>{"name": "", "arguments": {}}</tool_call>)");
  ExpectHermesContent(R"(<tool_call>{"name": null, "arguments": {}}</tool_call>)");
  ExpectHermesContent(R"(<tool_call>{"function": {"name": "f", "arguments": {}}}</tool_call>)");
}

TEST(ToolCallParserHermes, BadArgumentsStayContent) {
  ExpectHermesContent(R"(<tool_call>{"arguments": 5, "name": "f"}</tool_call>)");
  ExpectHermesContent(R"(<tool_call>{"arguments": [1], "name": "f"}</tool_call>)");
  ExpectLateMalformedHermes(R"(<tool_call>{"name": "f", "arguments": {}} {"name": "g"}</tool_call>)", {"f", "{}"});
  ExpectLateMalformedHermes(R"(<tool_call>{"name": "f", "arguments": {}, "parameters": {}}</tool_call>)", {"f", "{}"});
  ExpectLateMalformedHermes(R"(<tool_call>{"name": "f", "name": "g", "arguments": {}}</tool_call>)", {"f", ""});
  ExpectLateMalformedHermes(R"(<tool_call>{"name": "f", "arguments": null}</tool_call>)", {"f", ""});
}

TEST(ToolCallParserHermes, UnterminatedBlockAtTheEnd) {
  // The object is whole: the model stopped before the close tag (a stop string, say).
  ExpectHermes("Calling.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n", "Calling.",
               {{"f", R"({"a": 1})"}});
  ExpectHermes("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_ca", "", {{"f", R"({"a": 1})"}});
  // Cut off inside the object (the length limit): all content.
  const std::string_view cut = "Calling.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1";
  const ParsedMessage parsed = ParseToolCalls(cut, ToolCallFormat::kHermes);
  EXPECT_EQ(parsed.content, cut);
  EXPECT_TRUE(parsed.tool_calls.empty());
  ExpectHermesContent("Calling.\n<tool_call>\n");
  ExpectHermesContent("<tool_call>");
}

TEST(ToolCallParserHermes, CloseTagInsideAnArgumentEndsTheBlock) {
  // The block runs to the first close tag, wherever it is, so the JSON is cut short.
  ExpectLateMalformedHermes(R"(<tool_call>{"name": "f", "arguments": {"s": "</tool_call>"}}</tool_call>)",
                            {"f", R"({"s": ")"});
  // An open tag inside is only text.
  ExpectHermes(R"(<tool_call>{"name": "f", "arguments": {"s": "<tool_call>"}}</tool_call>)", "",
               {{"f", R"({"s": "<tool_call>"})"}});
}

TEST(ToolCallParserHermes, PlainContentIsUnchanged) {
  ExpectHermesContent("");
  ExpectHermesContent("Hello, world!");
  ExpectHermesContent("  leading and trailing whitespace \n\n");
  ExpectHermesContent("Tags I mention: <tool, <tool_call, </tool_call>, <tools></tools> and <<tool_cal");
  ExpectHermesContent("{\"name\": \"f\", \"arguments\": {}}");
  ExpectHermesContent("ends with a partial tag <tool_c");
  ExpectHermesContent("caf\xC3\xA9 \xF0\x9F\x99\x82 and a broken \xC3 byte");
}

TEST(ToolCallParserLlama3, SingleCall) {
  ExpectLlama3(R"({"name": "get_weather", "parameters": {"city": "Paris"}})",
               {{"get_weather", R"({"city": "Paris"})"}});
  ExpectLlama3("<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
               {{"get_weather", R"({"city": "Paris"})"}});
  ExpectLlama3("\n <|python_tag|>\n{\"parameters\": {}, \"name\": \"now\"}\n\n", {{"now", "{}"}});
  ExpectLlama3(R"({"name": "f", "arguments": {"a": [1, "}"]}})", {{"f", R"({"a": [1, "}"]})"}});
}

TEST(ToolCallParserLlama3, CallsSeparatedBySemicolons) {
  ExpectLlama3(R"({"name": "a", "parameters": {"x": ";"}}; {"name": "b", "parameters": {}})",
               {{"a", R"({"x": ";"})"}, {"b", "{}"}});
  ExpectLlama3("{\"name\": \"a\", \"parameters\": {}};{\"name\": \"b\", \"parameters\": {}}\n;\n",
               {{"a", "{}"}, {"b", "{}"}});
}

TEST(ToolCallParserLlama3, OtherTextIsContent) {
  ExpectLlama3Content("The weather in Paris is sunny.");
  ExpectLlama3Content("  Here it is: {\"name\": \"f\", \"parameters\": {}}");
  ExpectLlama3Content(R"({"answer": 42})");
  ExpectLlama3Content(R"({"name": "Bob", "parameters": {}, "age": 3})");
  ExpectLlama3Content(R"({"name": "f", "parameters": "{}"})");
  ExpectLlama3Content(R"({"name": "f"})");
  ExpectLlama3Content(R"({"name": "f", "parameters": {}} and then some text)");
  ExpectLlama3Content(R"({"name": "f", "parameters": {}};; {"name": "g", "parameters": {}})");
  ExpectLlama3Content(R"({"name": "f", "parameters": {}}; not a call)");
  ExpectLlama3Content(R"({"name": "f", "parameters": {})");
  ExpectLlama3Content("[{\"name\": \"f\", \"parameters\": {}}]");
  ExpectLlama3Content("<|python_tag|>brave_search.call(query=\"weather\")");
  ExpectLlama3Content("<|python_tag|>");
  ExpectLlama3Content("<|python_ta");
  ExpectLlama3Content("  \n");
  ExpectLlama3Content("");
}

}  // namespace
}  // namespace crossreg::chat
