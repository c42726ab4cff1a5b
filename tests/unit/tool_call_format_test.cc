// Which format a chat template asks for, and the Hermes tools prompt for templates that
// render no tools themselves.
#include "server/chat/tool_call_format.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/chat/tool_call_prompt.h"

namespace crossreg::chat {
namespace {

TEST(ToolCallFormatFor, ReadsTheTemplatesMarkers) {
  // Excerpts of the templates' tool sections.
  EXPECT_EQ(ToolCallFormatFor("{%- if tools %}...within <tools></tools> XML tags:\\n<tools>{{ tool | tojson }}"
                              "...<tool_call>\\n{\"name\": <function-name>, \"arguments\": <args-json-object>}"),
            ToolCallFormat::kHermes);
  EXPECT_EQ(ToolCallFormatFor("{%- if builtin_tools is defined or tools is not none %}...{{- \"<|python_tag|>\" + "
                              "tool_call.name + \".call(\" }}...\"parameters\": ...ipython"),
            ToolCallFormat::kLlama3Json);
  EXPECT_EQ(ToolCallFormatFor("Respond in the format {\"name\": function name, \"parameters\": dictionary of "
                              "argument name and its value}...{%- if message.role == \"ipython\" %}"),
            ToolCallFormat::kLlama3Json);
  // Hermes wins where a template names both.
  EXPECT_EQ(ToolCallFormatFor("<|python_tag|> ... <tool_call>"), ToolCallFormat::kHermes);
  // No tools in the template: crossreg's own prompt, in the Hermes convention.
  EXPECT_EQ(
      ToolCallFormatFor("{% for message in messages %}<|im_start|>{{ message['role'] }}\\n{{ message['content'] }}"
                        "<|im_end|>\\n{% endfor %}"),
      ToolCallFormat::kHermes);
  EXPECT_EQ(ToolCallFormatFor("parameters only"), ToolCallFormat::kHermes);
  EXPECT_EQ(ToolCallFormatFor(""), ToolCallFormat::kHermes);
}

TEST(ToolsSystemPrompt, ListsEachToolOnItsLineAndTheCallFormat) {
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
  ])");
  const std::string prompt = ToolsSystemPrompt(tools);
  const std::string listing = "<tools>\n" + tools[0].dump() + "\n" + tools[1].dump() + "\n</tools>";
  EXPECT_NE(prompt.find(listing), std::string::npos) << prompt;
  const std::string format =
      "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
  ASSERT_GE(prompt.size(), format.size());
  EXPECT_EQ(prompt.substr(prompt.size() - format.size()), format) << prompt;
  // Each definition line is the tool as given, key order kept.
  EXPECT_NE(prompt.find(R"({"type":"function","function":{"name":"get_weather","description")"), std::string::npos);
  EXPECT_EQ(prompt.find("\n\n\n"), std::string::npos);
}

TEST(ToolsSystemPrompt, NothingWithoutTools) {
  EXPECT_EQ(ToolsSystemPrompt(nlohmann::ordered_json::array()), "");
  EXPECT_EQ(ToolsSystemPrompt(nlohmann::ordered_json()), "");
  EXPECT_EQ(ToolsSystemPrompt(nlohmann::ordered_json::object()), "");
}

TEST(ToolsSystemPrompt, BadUtf8DoesNotThrow) {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  tools.push_back({{"type", "function"}, {"function", {{"name", std::string("bad\xFF")}}}});
  const std::string prompt = ToolsSystemPrompt(tools);
  EXPECT_NE(prompt.find("bad\xEF\xBF\xBD"), std::string::npos);
}

}  // namespace
}  // namespace crossreg::chat
