#include "server/chat/tool_call_prompt.h"

#include "absl/strings/str_cat.h"

namespace crossreg::chat {

std::string ToolsSystemPrompt(const nlohmann::ordered_json& tools) {
  if (!tools.is_array() || tools.empty()) return "";
  std::string prompt =
      "# Tools\n\n"
      "You can call functions to help with the user's request. Their definitions follow inside "
      "<tools></tools>, one JSON object per line:\n"
      "<tools>\n";
  for (const nlohmann::ordered_json& tool : tools) {
    // Replacing bad UTF-8 keeps a malformed request from throwing here; it is the caller's to reject.
    absl::StrAppend(&prompt, tool.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace), "\n");
  }
  absl::StrAppend(&prompt,
                  "</tools>\n\n"
                  "To call a function, write a JSON object with its name and its arguments between "
                  "<tool_call></tool_call> tags, one block for each call:\n"
                  "<tool_call>\n"
                  "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
                  "</tool_call>");
  return prompt;
}

}  // namespace crossreg::chat
