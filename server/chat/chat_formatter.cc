#include "server/chat/chat_formatter.h"

#include <cctype>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/chat/tool_call_prompt.h"

namespace crossreg::chat {
namespace {

using Json = nlohmann::ordered_json;

// Whether the template reads a variable: a word of its source (no Jinja parse is
// needed for a heuristic that only decides who describes the tools).
bool Mentions(const std::string& source, std::string_view word) {
  for (size_t at = source.find(word); at != std::string::npos; at = source.find(word, at + 1)) {
    const auto is_name = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    const bool starts = at == 0 || !is_name(source[at - 1]);
    const bool ends = at + word.size() >= source.size() || !is_name(source[at + word.size()]);
    if (starts && ends) return true;
  }
  return false;
}

// The conversation as this template reads it.
Json Prepared(const Json& messages, const Json& tools, bool describe_tools, bool arguments_as_object) {
  Json out = Json::array();
  for (const Json& message : messages) {
    Json m = message;
    if (!m.contains("content") || m["content"].is_null()) m["content"] = "";
    if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
      for (Json& call : m["tool_calls"]) {
        if (!call.contains("function") || !call["function"].is_object()) continue;
        Json& arguments = call["function"]["arguments"];
        if (arguments_as_object && arguments.is_string()) {
          Json parsed = Json::parse(arguments.get<std::string>(), nullptr, /*allow_exceptions=*/false);
          if (parsed.is_object()) arguments = std::move(parsed);
        } else if (!arguments_as_object && arguments.is_object()) {
          arguments = arguments.dump();
        }
      }
    }
    out.push_back(std::move(m));
  }
  if (describe_tools && tools.is_array() && !tools.empty()) {
    const std::string described = ToolsSystemPrompt(tools);
    if (!out.empty() && out[0].value("role", "") == "system") {
      const std::string base = out[0]["content"].is_string() ? out[0]["content"].get<std::string>() : "";
      out[0]["content"] = base.empty() ? described : absl::StrCat(base, "\n\n", described);
    } else {
      out.insert(out.begin(), Json{{"role", "system"}, {"content", described}});
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<ChatFormatter> ChatFormatter::Create(const ChatTemplateSource& source) {
  auto parsed = jinja::Template::Parse(source.text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source.origin, ": ", parsed.status().message()));
  }
  ChatFormatter f(*std::move(parsed));
  f.origin_ = source.origin;
  f.bos_token_ = source.bos_token;
  f.eos_token_ = source.eos_token;
  f.tool_call_format_ = ToolCallFormatFor(source.text);
  f.renders_tools_ = Mentions(source.text, "tools");
  f.arguments_as_object_ = absl::StrContains(source.text, "arguments | tojson") ||
                           absl::StrContains(source.text, "arguments|tojson");
  return f;
}

absl::StatusOr<std::string> ChatFormatter::Render(const Json& messages, const Json& tools,
                                                  bool add_generation_prompt) const {
  const bool with_tools = tools.is_array() && !tools.empty();
  Json context{{"messages", Prepared(messages, tools, with_tools && !renders_tools_, arguments_as_object_)},
               {"tools", with_tools && renders_tools_ ? tools : Json(nullptr)},
               {"documents", nullptr},
               {"add_generation_prompt", add_generation_prompt},
               {"bos_token", bos_token_},
               {"eos_token", eos_token_}};
  auto rendered = template_.Render(context);
  if (!rendered.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the chat template refused the conversation (", rendered.status().message(), ")"));
  }
  return rendered;
}

std::string ChatFormatter::Describe() const {
  return absl::StrCat("jinja, tools ", renders_tools_ ? "in the template" : "in a system message", ", calls as ",
                      tool_call_format_ == ToolCallFormat::kHermes ? "<tool_call> JSON" : "Llama 3.1 JSON");
}

}  // namespace crossreg::chat
