// ToolCallStream piece by piece: what it sends after each piece, what it holds back and
// for how long, call ids, and the Finish of a message cut short.
#include "server/chat/tool_call_stream.h"

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "server/chat/tool_call_id.h"
#include "tests/testing/tool_call_stream_collector.h"

namespace crossreg::chat {
namespace {

using testing::CountingIds;

bool IsOpenAiCallId(std::string_view id) {
  if (id.size() != 29 || id.substr(0, 5) != "call_") return false;
  for (char c : id.substr(5)) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

ToolCallDelta FirstDelta(int index, std::string id, std::string name, std::string arguments = "") {
  return {.index = index, .id = std::move(id), .name = std::move(name), .arguments = std::move(arguments)};
}

ToolCallDelta ArgumentsDelta(int index, std::string arguments) {
  return {.index = index, .id = "", .name = "", .arguments = std::move(arguments)};
}

void ExpectDelta(const StreamDelta& delta, std::string_view content, const std::vector<ToolCallDelta>& calls) {
  EXPECT_EQ(delta.content, content);
  ASSERT_EQ(delta.tool_calls.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(delta.tool_calls[i].index, calls[i].index) << i;
    EXPECT_EQ(delta.tool_calls[i].id, calls[i].id) << i;
    EXPECT_EQ(delta.tool_calls[i].name, calls[i].name) << i;
    EXPECT_EQ(delta.tool_calls[i].arguments, calls[i].arguments) << i;
  }
}

TEST(ToolCallStream, SendsContentAndCallsAsTheyBecomeCertain) {
  ToolCallStream stream(ToolCallFormat::kHermes, CountingIds());
  ExpectDelta(stream.Push("Let me"), "Let me", {});
  ExpectDelta(stream.Push(" check.\n<tool"), " check.", {});  // "\n<tool" may be a call
  ExpectDelta(stream.Push("_call>\n{\"name\": \"get_wea"), "", {});
  EXPECT_FALSE(stream.saw_tool_calls());
  ExpectDelta(stream.Push("ther\", \"argu"), "", {FirstDelta(0, "id0", "get_weather")});
  EXPECT_TRUE(stream.saw_tool_calls());
  ExpectDelta(stream.Push("ments\": {\"ci"), "", {ArgumentsDelta(0, "{\"ci")});
  ExpectDelta(stream.Push("ty\": \"Paris\"}}\n</tool_"), "", {ArgumentsDelta(0, "ty\": \"Paris\"}")});
  ExpectDelta(stream.Push("call>\n<tool_call>{\"arguments\": {\"x\": 1}, "), "", {});
  // The whitespace before the run of calls goes out once content follows it.
  ExpectDelta(stream.Push("\"name\": \"f\"}</tool_call>\n\nDone"), "\nDone", {FirstDelta(1, "id1", "f", "{\"x\": 1}")});
  ExpectDelta(stream.Push("."), ".", {});
  ExpectDelta(stream.Finish(), "", {});
}

TEST(ToolCallStream, ContentAfterCallsGetsTheSeparatorOnlyWhenItComes) {
  ToolCallStream stream(ToolCallFormat::kHermes, CountingIds());
  ExpectDelta(stream.Push("A\n<tool_call>{\"name\": \"f\"}</tool_call>\n"), "A", {FirstDelta(0, "id0", "f", "{}")});
  ExpectDelta(stream.Push("B"), "\nB", {});
  ExpectDelta(stream.Push("\n\n<tool_call>{\"name\": \"g\"}</tool_call>\n"), "", {FirstDelta(1, "id1", "g", "{}")});
  ExpectDelta(stream.Finish(), "", {});
}

TEST(ToolCallStream, HoldsAPossibleTagUntilItIsNotOne) {
  ToolCallStream stream(ToolCallFormat::kHermes, CountingIds());
  ExpectDelta(stream.Push("x <"), "x", {});
  ExpectDelta(stream.Push("tool"), "", {});
  ExpectDelta(stream.Push("s>"), " <tools>", {});
  ExpectDelta(stream.Push("<tool_call"), "", {});
  ExpectDelta(stream.Finish(), "<tool_call", {});
  EXPECT_FALSE(stream.saw_tool_calls());
}

TEST(ToolCallStream, TrailingWhitespaceWaitsForWhatFollows) {
  ToolCallStream stream(ToolCallFormat::kHermes, CountingIds());
  ExpectDelta(stream.Push("Hello \n"), "Hello", {});
  ExpectDelta(stream.Push(" world"), " \n world", {});
  ExpectDelta(stream.Push("\n"), "", {});
  ExpectDelta(stream.Finish(), "\n", {});
}

TEST(ToolCallStream, StringArgumentsWaitUntilTheyEnd) {
  ToolCallStream stream(ToolCallFormat::kHermes, CountingIds());
  ExpectDelta(stream.Push(R"(<tool_call>{"name": "f", "arguments": "{\"a\": )"), "", {FirstDelta(0, "id0", "f")});
  ExpectDelta(stream.Push(R"(1}")"), "", {ArgumentsDelta(0, R"({"a": 1})")});
  ExpectDelta(stream.Push("}</tool_call>"), "", {});
  ExpectDelta(stream.Finish(), "", {});
}

TEST(ToolCallStream, NoPieceEndsInsideACharacter) {
  ToolCallStream stream(ToolCallFormat::kHermes, CountingIds());
  ExpectDelta(stream.Push("caf\xC3"), "caf", {});
  ExpectDelta(stream.Push("\xA9 <tool_call>{\"name\": \"f\", \"arguments\": {\"c\": \"\xF0\x9F"), "\xC3\xA9",
              {FirstDelta(0, "id0", "f", "{\"c\": \"")});
  ExpectDelta(stream.Push("\x99"), "", {});
  ExpectDelta(stream.Push("\x82\"}}</tool_call>"), "", {ArgumentsDelta(0, "\xF0\x9F\x99\x82\"}")});
  ExpectDelta(stream.Push("\xE2\x82"), "", {});
  // At the end, bytes go out as they are.
  ExpectDelta(stream.Finish(), " \xE2\x82", {});
}

TEST(ToolCallStream, MalformedBlockBeforeItsNameIsContentWhenItCloses) {
  ToolCallStream stream(ToolCallFormat::kHermes, CountingIds());
  ExpectDelta(stream.Push("Hi\n<tool_call>{\"arguments\": {\"a\": }"), "Hi", {});
  ExpectDelta(stream.Push(", \"name\": \"f\"}"), "", {});
  ExpectDelta(stream.Push("</tool_call>\n"), "\n<tool_call>{\"arguments\": {\"a\": }, \"name\": \"f\"}</tool_call>",
              {});
  ExpectDelta(stream.Finish(), "\n", {});
  EXPECT_FALSE(stream.saw_tool_calls());
}

TEST(ToolCallStream, MalformedAfterTheNameSendsTheTextAsWell) {
  // The call's first pieces cannot be taken back; the block's text follows as content.
  ToolCallStream stream(ToolCallFormat::kHermes, CountingIds());
  ExpectDelta(stream.Push("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1"), "",
              {FirstDelta(0, "id0", "f", "{\"a\": 1")});
  ExpectDelta(stream.Push("]}</tool_call>"), "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1]}</tool_call>", {});
  EXPECT_TRUE(stream.saw_tool_calls());
  ExpectDelta(stream.Finish(), "", {});
}

TEST(ToolCallStream, NoCallStartsWhenItsPieceAlreadyShowsTheBlockIsMalformed) {
  ToolCallStream stream(ToolCallFormat::kHermes, CountingIds());
  ExpectDelta(stream.Push("<tool_call>{\"name\": \"f\", \"arguments\": {}} x"), "", {});
  ExpectDelta(stream.Push("</tool_call>"), "<tool_call>{\"name\": \"f\", \"arguments\": {}} x</tool_call>", {});
  ExpectDelta(stream.Push("<tool_call>{\"name\": \"g\", \"arguments\": [1]"), "", {});
  ExpectDelta(stream.Finish(), "<tool_call>{\"name\": \"g\", \"arguments\": [1]", {});
  EXPECT_FALSE(stream.saw_tool_calls());
}

TEST(ToolCallStream, FinishSettlesABlockLeftOpen) {
  {
    ToolCallStream stream(ToolCallFormat::kHermes, CountingIds());
    ExpectDelta(stream.Push("<tool_call>\n{\"arguments\": {\"a\": [1]}, \"name\": \"f\"}\n</tool_"), "",
                {FirstDelta(0, "id0", "f", "{\"a\": [1]}")});
    ExpectDelta(stream.Finish(), "", {});
  }
  {
    ToolCallStream stream(ToolCallFormat::kHermes, CountingIds());
    ExpectDelta(stream.Push("Wait \n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1"), "Wait",
                {FirstDelta(0, "id0", "f", "{\"a\": [1")});
    ExpectDelta(stream.Finish(), " \n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1", {});
  }
  {
    ToolCallStream stream(ToolCallFormat::kHermes, CountingIds());
    ExpectDelta(stream.Push("<tool_call>\n{\"name\": \"f"), "", {});
    ExpectDelta(stream.Finish(), "<tool_call>\n{\"name\": \"f", {});
    EXPECT_FALSE(stream.saw_tool_calls());
  }
}

TEST(ToolCallStream, Llama3HoldsAnObjectToTheEndAndStreamsAnythingElse) {
  {
    ToolCallStream stream(ToolCallFormat::kLlama3Json, CountingIds());
    ExpectDelta(stream.Push(" <|python"), "", {});
    ExpectDelta(stream.Push("_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}"), "", {});
    ExpectDelta(stream.Push("; {\"name\": \"g\", \"parameters\": {}}"), "", {});
    EXPECT_FALSE(stream.saw_tool_calls());
    ExpectDelta(stream.Finish(), "", {FirstDelta(0, "id0", "f", "{\"a\": 1}"), FirstDelta(1, "id1", "g", "{}")});
    EXPECT_TRUE(stream.saw_tool_calls());
  }
  {
    ToolCallStream stream(ToolCallFormat::kLlama3Json, CountingIds());
    ExpectDelta(stream.Push("\n"), "", {});
    ExpectDelta(stream.Push("The answer"), "\nThe answer", {});
    ExpectDelta(stream.Push(" is {\"name\": \"f\", \"parameters\": {}} \xE2\x82"),
                " is {\"name\": \"f\", \"parameters\": {}} ", {});
    ExpectDelta(stream.Finish(), "\xE2\x82", {});
  }
  {
    ToolCallStream stream(ToolCallFormat::kLlama3Json, CountingIds());
    ExpectDelta(stream.Push("{\"answer\": 42}"), "", {});
    ExpectDelta(stream.Finish(), "{\"answer\": 42}", {});
    EXPECT_FALSE(stream.saw_tool_calls());
  }
}

TEST(ToolCallId, ShapeCheckRejectsNearMisses) {
  EXPECT_TRUE(IsOpenAiCallId("call_abcdefghijklmnopqrstuvwX"));
  EXPECT_FALSE(IsOpenAiCallId("call_abcdefghijklmnopqrstuvw"));
  EXPECT_FALSE(IsOpenAiCallId("call_abcdefghijklmnopqrstuvwXY"));
  EXPECT_FALSE(IsOpenAiCallId("call-abcdefghijklmnopqrstuvwX"));
  EXPECT_FALSE(IsOpenAiCallId("call_abcdefghijklmnopqrstuv_X"));
}

TEST(ToolCallId, IsCallAnd24Alphanumerics) {
  std::set<std::string> ids;
  std::set<char> characters;
  for (int i = 0; i < 2000; ++i) {
    const std::string id = RandomToolCallId();
    ASSERT_TRUE(IsOpenAiCallId(id)) << id;
    ids.insert(id);
    characters.insert(id.begin() + 5, id.end());
  }
  EXPECT_EQ(ids.size(), 2000u);
  EXPECT_EQ(characters.size(), 62u) << "every letter and digit turns up in 48000 draws";
}

TEST(ToolCallId, StreamsUseRandomIdsByDefault) {
  ToolCallStream first(ToolCallFormat::kHermes);
  ToolCallStream second(ToolCallFormat::kHermes);
  const std::string text = "<tool_call>{\"name\": \"f\"}</tool_call>";
  const StreamDelta a = first.Push(text);
  const StreamDelta b = second.Push(text);
  ASSERT_EQ(a.tool_calls.size(), 1u);
  ASSERT_EQ(b.tool_calls.size(), 1u);
  EXPECT_TRUE(IsOpenAiCallId(a.tool_calls[0].id)) << a.tool_calls[0].id;
  EXPECT_NE(a.tool_calls[0].id, b.tool_calls[0].id);
}

}  // namespace
}  // namespace crossreg::chat
