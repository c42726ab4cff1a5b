// Chat templates as a model's files bring them: the input is parsed as a template and,
// when it parses, rendered against one fixed conversation (a system prompt, tools, an
// assistant turn with tool calls, a tool result, non-ASCII text). Parsing and rendering
// must end in text or an error within the budgets, never a crash, a hang or a leak, and
// a render must not depend on anything but its input (two renders agree, unless the
// template reads the clock).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "nlohmann/json.hpp"
#include "server/chat/jinja_template.h"

namespace {

const nlohmann::ordered_json& Context() {
  static const auto* context = new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse. Réponds en français."},
      {"role": "user", "content": "Weather in 東京 and Paris? 🙂"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo\"}"}},
        {"id": "b", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
      {"role": "tool", "tool_call_id": "a", "content": "sunny, 21.5"},
      {"role": "assistant", "content": "<think>\nok\n</think>\n\nSunny.", "reasoning_content": "ok"},
      {"role": "user", "content": "  Thanks\n\"quoted\" \\ back  "}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer",
      "minimum": 1, "default": 1.5}}, "required": ["city"]}}}],
    "add_generation_prompt": true,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "enable_thinking": false
  })"));
  return *context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  crossreg::jinja::TemplateOptions options;
  options.max_steps = 200'000;  // small budgets keep each input fast
  options.max_output_bytes = 1 << 20;
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto parsed = crossreg::jinja::Template::Parse(source, options);
  if (!parsed.ok()) {
    if (parsed.status().message().empty()) std::abort();  // every refusal says why
    return 0;
  }
  const auto first = parsed->Render(Context());
  const auto second = parsed->Render(Context());
  const bool reads_clock = source.find("strftime_now") != std::string_view::npos;
  if (!reads_clock && first.ok() != second.ok()) std::abort();
  if (!reads_clock && first.ok() && *first != *second) std::abort();
  if (!first.ok() && first.status().message().empty()) std::abort();
  return 0;
}
