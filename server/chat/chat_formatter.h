// A model's chat template, ready to render OpenAI conversations. The template is Jinja
// (jinja_template.h), rendered with the context Hugging Face gives it (messages, tools,
// add_generation_prompt, bos_token, eos_token), plus what a chat API needs and a
// template may not do itself:
//   - tools described in a system message when the template never reads `tools`
//     (SmolLM2's plain ChatML), in the convention the model's calls are parsed in;
//   - tool-call arguments given as the template reads them: a JSON object where it
//     writes them with `tojson` (Llama 3.1, Qwen3), the client's text otherwise
//     (DeepSeek-V3 concatenates it);
//   - a message without content (an assistant's tool calls) rendered with "".
#pragma once

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/chat/jinja_template.h"
#include "server/chat/tool_call_format.h"

namespace crossreg::chat {

struct ChatTemplateSource {
  std::string text;       // Jinja source
  std::string origin;     // where it came from, for messages ("GGUF tokenizer.chat_template", a path)
  std::string bos_token;  // the BOS and EOS pieces the template writes as text
  std::string eos_token;
};

class ChatFormatter {
 public:
  // INVALID_ARGUMENT "<origin>: line L, column C: ..." for a template the interpreter
  // cannot run (a construct it does not support is named).
  static absl::StatusOr<ChatFormatter> Create(const ChatTemplateSource& source);

  // The prompt for `messages` (OpenAI's form, already checked: role, content as text or
  // null, tool_calls, tool_call_id, name) and `tools` (OpenAI's definitions, or null),
  // the assistant's turn opened when `add_generation_prompt`. Tokenize it with special
  // tokens parsed and no BOS added. INVALID_ARGUMENT when the template refuses the
  // conversation (its raise_exception message) or fails on it.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                     bool add_generation_prompt = true) const;

  ToolCallFormat tool_call_format() const { return tool_call_format_; }
  // The template renders `tools` itself (else they go in a system message).
  bool renders_tools() const { return renders_tools_; }
  // One line for logs and /v1/models: "jinja, tools in the template, calls as <tool_call> JSON".
  std::string Describe() const;

 private:
  explicit ChatFormatter(jinja::Template parsed) : template_(std::move(parsed)) {}

  jinja::Template template_;
  std::string origin_;
  std::string bos_token_, eos_token_;
  ToolCallFormat tool_call_format_ = ToolCallFormat::kHermes;
  bool renders_tools_ = false;
  bool arguments_as_object_ = false;
};

}  // namespace crossreg::chat
