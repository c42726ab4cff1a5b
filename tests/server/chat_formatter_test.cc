// Chat templates as the front door renders them (server/chat/chat_formatter.h): the
// Hugging Face context; tools described in a system message when the template never
// reads them and left to the template when it does; tool-call arguments as the
// template reads them (an object where it writes them with tojson, the client's text
// otherwise); a message without content as ""; a template's refusal and a construct
// the interpreter does not run reported with the template's line. Byte-for-byte parity
// with python3-jinja2 on real templates is tests/chat/test_jinja_parity.py.
#include "server/chat/chat_formatter.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace crossreg::chat {
namespace {

using Json = nlohmann::ordered_json;

ChatFormatter Make(const std::string& text) {
  auto formatter = ChatFormatter::Create({text, "test template", "<s>", "</s>"});
  EXPECT_TRUE(formatter.ok()) << formatter.status();
  return *std::move(formatter);
}

constexpr char kChatMl[] =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

const Json kTools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");

TEST(ChatFormatterTest, RendersTheConversationWithHuggingFacesContext) {
  const ChatFormatter f = Make(std::string("{{ bos_token }}") + kChatMl);
  auto text = f.Render(Json::parse(R"([{"role": "user", "content": "Hi"}])"), nullptr);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  auto closed = f.Render(Json::parse(R"([{"role": "user", "content": "Hi"}])"), nullptr, false);
  EXPECT_EQ(*closed, "<s><|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatFormatterTest, ToolsGoInASystemMessageWhenTheTemplateNeverReadsThem) {
  const ChatFormatter plain = Make(kChatMl);
  EXPECT_FALSE(plain.renders_tools());
  EXPECT_EQ(plain.tool_call_format(), ToolCallFormat::kHermes);
  auto text = plain.Render(Json::parse(R"([{"role": "user", "content": "Weather?"}])"), kTools);
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(absl::StartsWith(*text, "<|im_start|>system\n")) << *text;
  EXPECT_TRUE(absl::StrContains(*text, "<tools>")) << *text;
  EXPECT_TRUE(absl::StrContains(*text, "\"get_weather\"")) << *text;
  // An existing system message keeps its text, the tools after it.
  auto with_system =
      plain.Render(Json::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "x"}])"), kTools);
  EXPECT_TRUE(absl::StartsWith(*with_system, "<|im_start|>system\nBe brief.\n\n")) << *with_system;
  // No tools: nothing added.
  EXPECT_FALSE(absl::StrContains(*plain.Render(Json::parse(R"([{"role": "user", "content": "x"}])"), nullptr), "<tools>"));

  const ChatFormatter own = Make(std::string("{% if tools %}TOOLS{{ tools | length }} {% endif %}") + kChatMl);
  EXPECT_TRUE(own.renders_tools());
  auto rendered = own.Render(Json::parse(R"([{"role": "user", "content": "x"}])"), kTools);
  EXPECT_TRUE(absl::StartsWith(*rendered, "TOOLS1 <|im_start|>user")) << *rendered;
}

TEST(ChatFormatterTest, ToolCallArgumentsAreWhatTheTemplateReads) {
  const Json conversation = Json::parse(R"([{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])");
  const std::string loop = "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% for c in m.tool_calls or [] %}";
  // tojson: the arguments as an object (Python's separators).
  const ChatFormatter object = Make(loop + "{{ c.function.arguments | tojson }}{% endfor %}{% endfor %}");
  EXPECT_EQ(*object.Render(conversation, nullptr), "[user:Weather?][assistant:]{\"city\": \"Paris\"}[tool:sunny]");
  // Concatenated as text: the client's string as sent.
  const ChatFormatter text = Make(loop + "{{ '<' + c.function.arguments + '>' }}{% endfor %}{% endfor %}");
  EXPECT_EQ(*text.Render(conversation, nullptr), "[user:Weather?][assistant:]<{\"city\": \"Paris\"}>[tool:sunny]");
}

TEST(ChatFormatterTest, RefusalsAndUnsupportedConstructsNameTheTemplatesLine) {
  const ChatFormatter strict = Make(
      "{% for m in messages %}\n{% if m.role == 'assistant' and loop.first %}"
      "{{ raise_exception('Conversation roles must alternate') }}{% endif %}{{ m.content }}{% endfor %}");
  auto refused = strict.Render(Json::parse(R"([{"role": "assistant", "content": "x"}])"), nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "Conversation roles must alternate")) << refused.status();
  auto unsupported = ChatFormatter::Create({"line one\n{% extends 'base.html' %}", "the model's chat template", "", ""});
  ASSERT_FALSE(unsupported.ok());
  EXPECT_TRUE(absl::StartsWith(unsupported.status().message(), "the model's chat template: line 2")) << unsupported.status();
}

TEST(ChatFormatterTest, TheCallFormatComesFromTheTemplate) {
  EXPECT_EQ(Make(std::string("{# <tool_call> #}") + kChatMl).tool_call_format(), ToolCallFormat::kHermes);
  EXPECT_EQ(Make(std::string("{# <|python_tag|> #}") + kChatMl).tool_call_format(), ToolCallFormat::kLlama3Json);
  EXPECT_TRUE(absl::StrContains(Make(kChatMl).Describe(), "tools in a system message"));
}

}  // namespace
}  // namespace crossreg::chat
