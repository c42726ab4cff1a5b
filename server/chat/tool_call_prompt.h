// The tools section of a system message for chat templates that do not render tools
// themselves (SmolLM2's plain ChatML, say): it lists the functions and teaches the Hermes
// convention that ParseToolCalls(kHermes) reads back.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace crossreg::chat {

// `tools` is the request's "tools" array of OpenAI definitions ({"type": "function",
// "function": {...}}), each written on its own line inside <tools></tools>. Empty when there
// are no tools (not an array, or an empty one). Ends without a newline.
std::string ToolsSystemPrompt(const nlohmann::ordered_json& tools);

}  // namespace crossreg::chat
