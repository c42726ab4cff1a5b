// Which text convention a chat model uses to write its tool calls, guessed from its chat
// template: the template shows the model the convention, so its text names the markers.
#pragma once

#include <string_view>

namespace crossreg::chat {

enum class ToolCallFormat {
  // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> blocks among ordinary text
  // (Hermes, Qwen2.5/Qwen3, SmolLM2, and crossreg's own prompt for templates without tools).
  kHermes,
  // The whole message is {"name": ..., "parameters": {...}}, or several joined by ';',
  // optionally after <|python_tag|> (Llama 3.1 / 3.2).
  kLlama3Json,
};

// "<tool_call>" in the template -> kHermes; else "<|python_tag|>", or both "parameters" and
// "ipython" (Llama 3.2's template names no python tag) -> kLlama3Json; else kHermes, since a
// template that does not render tools gets crossreg's Hermes-style tools prompt.
ToolCallFormat ToolCallFormatFor(std::string_view chat_template);

}  // namespace crossreg::chat
