#include "server/http/openai_chat_request.h"

#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"
#include "engine/io/bounded_json.h"
#include "engine/status_macros.h"
#include "server/http/json_fields.h"
#include "server/request_limits.h"

namespace crossreg::server {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Invalid(const std::string& field, const std::string& what) { return FieldViolation(field, what); }

// `refusal` and `audio` come back in OpenAI's assistant messages that clients send
// back verbatim; they carry nothing a prompt needs.
constexpr absl::string_view kMessageFields[] = {"role",         "content",           "name",    "tool_calls",
                                                "tool_call_id", "reasoning_content", "refusal", "audio"};
constexpr absl::string_view kContentPartFields[] = {"type", "text"};
constexpr absl::string_view kToolCallFields[] = {"id", "type", "function"};
constexpr absl::string_view kCallFunctionFields[] = {"name", "arguments"};
constexpr absl::string_view kToolFields[] = {"type", "function"};
constexpr absl::string_view kFunctionFields[] = {"name", "description", "parameters", "strict"};

// A function name as OpenAI allows it: what a model can write back unambiguously.
bool ValidFunctionName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

// A message's content: a string, null, or an array of {"type": "text", "text": ...}
// parts (joined).
absl::StatusOr<Json> Content(const Json& content, const std::string& field, bool strict) {
  if (content.is_string() || content.is_null()) return content;
  if (!content.is_array()) return Invalid(field, "must be a string or an array of text parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string part_field = absl::StrCat(field, "[", i, "]");
    if (!part.is_object() || !part.contains("type") || part.at("type") != "text") {
      return Invalid(part_field, "only {\"type\": \"text\", \"text\": ...} parts are supported");
    }
    if (strict) RETURN_IF_ERROR(CheckKnownFields(part, part_field + ".", kContentPartFields));
    if (!part.contains("text")) return Invalid(part_field + ".text", "required");
    ASSIGN_OR_RETURN(const std::string s, StringField(part.at("text"), part_field + ".text"));
    text += s;
  }
  return Json(std::move(text));
}

// An assistant message's tool_calls: [{id, type: "function", function: {name,
// arguments: a JSON object's text}}].
absl::StatusOr<Json> ToolCalls(const Json& calls, const std::string& field, bool strict) {
  if (!calls.is_array()) return Invalid(field, absl::StrCat("must be an array of tool calls, got ", TypeName(calls)));
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = absl::StrCat(field, "[", i, "]");
    const Json& call = calls[i];
    if (!call.is_object()) return Invalid(at, "must be an object {id, type, function}");
    if (strict) RETURN_IF_ERROR(CheckKnownFields(call, at + ".", kToolCallFields));
    Json kept = Json::object();
    if (call.contains("id")) {
      ASSIGN_OR_RETURN(std::string id, StringField(call.at("id"), at + ".id"));
      kept["id"] = std::move(id);
    }
    if (call.contains("type") && call.at("type") != "function") {
      return Invalid(at + ".type", "must be \"function\"");
    }
    kept["type"] = "function";
    if (!call.contains("function") || !call.at("function").is_object()) {
      return Invalid(at + ".function", "required: {name, arguments}");
    }
    const Json& function = call.at("function");
    if (strict) RETURN_IF_ERROR(CheckKnownFields(function, at + ".function.", kCallFunctionFields));
    if (!function.contains("name")) return Invalid(at + ".function.name", "required");
    ASSIGN_OR_RETURN(const std::string name, StringField(function.at("name"), at + ".function.name"));
    std::string arguments = "{}";
    if (function.contains("arguments") && !function.at("arguments").is_null()) {
      ASSIGN_OR_RETURN(arguments, StringField(function.at("arguments"), at + ".function.arguments"));
      // The arguments are a JSON object's text (templates may write them as an object).
      auto parsed = ParseBoundedJson(arguments, kRequestJsonLimits, at + ".function.arguments");
      if (!parsed.ok()) return parsed.status();
      if (!parsed->is_object()) return Invalid(at + ".function.arguments", "must be the text of a JSON object");
    }
    kept["function"] = Json{{"name", name}, {"arguments", arguments}};
    out.push_back(std::move(kept));
  }
  return out;
}

absl::Status ReadMessages(const Json& body, bool strict, ChatRequest& out) {
  if (!body.contains("messages")) return Invalid("messages", "required (an array of {role, content})");
  const Json& messages = body.at("messages");
  if (!messages.is_array() || messages.empty()) return Invalid("messages", "must be a non-empty array");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string field = absl::StrCat("messages[", i, "]");
    const Json& m = messages[i];
    if (!m.is_object()) return Invalid(field, "must be an object {role, content}");
    if (strict) RETURN_IF_ERROR(CheckKnownFields(m, field + ".", kMessageFields));
    if (!m.contains("role")) return Invalid(field + ".role", "required");
    ASSIGN_OR_RETURN(std::string role, StringField(m.at("role"), field + ".role"));
    if (role == "developer") role = "system";  // OpenAI's newer name for system instructions
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return Invalid(field + ".role",
                     absl::StrCat("\"", role.substr(0, 64), "\" is not supported (system, developer, user, assistant or tool)"));
    }
    Json kept{{"role", role}};
    ASSIGN_OR_RETURN(Json content, Content(m.contains("content") ? m.at("content") : Json(), field + ".content", strict));
    const bool has_calls = m.contains("tool_calls") && !m.at("tool_calls").is_null();
    if (has_calls && role != "assistant") return Invalid(field + ".tool_calls", "only assistant messages call tools");
    if (content.is_null() && !has_calls) {
      return Invalid(field + ".content", role == "assistant" ? "required (or tool_calls)" : "required");
    }
    kept["content"] = std::move(content);
    if (m.contains("name") && !m.at("name").is_null()) {
      ASSIGN_OR_RETURN(std::string name, StringField(m.at("name"), field + ".name"));
      kept["name"] = std::move(name);
    }
    if (has_calls) {
      ASSIGN_OR_RETURN(Json calls, ToolCalls(m.at("tool_calls"), field + ".tool_calls", strict));
      kept["tool_calls"] = std::move(calls);
    }
    if (role == "tool") {
      if (!m.contains("tool_call_id")) return Invalid(field + ".tool_call_id", "required in a tool message");
      ASSIGN_OR_RETURN(std::string id, StringField(m.at("tool_call_id"), field + ".tool_call_id"));
      kept["tool_call_id"] = std::move(id);
    } else if (m.contains("tool_call_id") && !m.at("tool_call_id").is_null()) {
      return Invalid(field + ".tool_call_id", "only in a tool message");
    }
    if (m.contains("reasoning_content") && !m.at("reasoning_content").is_null()) {
      ASSIGN_OR_RETURN(std::string reasoning, StringField(m.at("reasoning_content"), field + ".reasoning_content"));
      kept["reasoning_content"] = std::move(reasoning);
    }
    out.messages.push_back(std::move(kept));
  }
  return absl::OkStatus();
}

// Most tools a request may define, as OpenAI allows.
constexpr size_t kMaxTools = 128;

absl::Status ReadTools(const Json& body, bool strict, ChatRequest& out) {
  if (!body.contains("tools") || body.at("tools").is_null()) return absl::OkStatus();
  const Json& tools = body.at("tools");
  if (!tools.is_array()) return Invalid("tools", absl::StrCat("must be an array of tool definitions, got ", TypeName(tools)));
  if (tools.size() > kMaxTools) return Invalid("tools", absl::StrCat("at most ", kMaxTools, " tools, got ", tools.size()));
  if (tools.empty()) return absl::OkStatus();
  std::unordered_set<std::string> names;
  Json kept = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = absl::StrCat("tools[", i, "]");
    const Json& tool = tools[i];
    if (!tool.is_object()) return Invalid(at, "must be an object {type: \"function\", function: {...}}");
    if (strict) RETURN_IF_ERROR(CheckKnownFields(tool, at + ".", kToolFields));
    if (!tool.contains("type") || tool.at("type") != "function") return Invalid(at + ".type", "must be \"function\"");
    if (!tool.contains("function") || !tool.at("function").is_object()) {
      return Invalid(at + ".function", "required: {name, description, parameters}");
    }
    const Json& function = tool.at("function");
    if (strict) RETURN_IF_ERROR(CheckKnownFields(function, at + ".function.", kFunctionFields));
    if (!function.contains("name")) return Invalid(at + ".function.name", "required");
    ASSIGN_OR_RETURN(const std::string name, StringField(function.at("name"), at + ".function.name"));
    if (!ValidFunctionName(name)) {
      return Invalid(at + ".function.name", "must be 1 to 64 letters, digits, '_' or '-'");
    }
    if (!names.insert(name).second) return Invalid(at + ".function.name", absl::StrCat("\"", name, "\" is defined twice"));
    Json definition{{"name", name}};
    if (function.contains("description") && !function.at("description").is_null()) {
      ASSIGN_OR_RETURN(std::string description, StringField(function.at("description"), at + ".function.description"));
      definition["description"] = std::move(description);
    }
    if (function.contains("parameters") && !function.at("parameters").is_null()) {
      const Json& parameters = function.at("parameters");
      if (!parameters.is_object()) {
        return Invalid(at + ".function.parameters", absl::StrCat("must be a JSON Schema object, got ", TypeName(parameters)));
      }
      definition["parameters"] = parameters;
    } else {
      definition["parameters"] = Json{{"type", "object"}, {"properties", Json::object()}};
    }
    if (function.contains("strict") && !function.at("strict").is_null()) {
      RETURN_IF_ERROR(BoolField(function.at("strict"), at + ".function.strict").status());
    }
    kept.push_back(Json{{"type", "function"}, {"function", std::move(definition)}});
  }
  out.tools = std::move(kept);
  return absl::OkStatus();
}

absl::Status ReadToolChoice(const Json& body, bool strict, ChatRequest& out) {
  const bool has_tools = out.tools.is_array();
  out.tool_choice.kind = has_tools ? ToolChoice::Kind::kAuto : ToolChoice::Kind::kNone;
  if (body.contains("parallel_tool_calls") && !body.at("parallel_tool_calls").is_null()) {
    ASSIGN_OR_RETURN(out.parallel_tool_calls, BoolField(body.at("parallel_tool_calls"), "parallel_tool_calls"));
  }
  if (!body.contains("tool_choice") || body.at("tool_choice").is_null()) return absl::OkStatus();
  const Json& choice = body.at("tool_choice");
  if (choice.is_string()) {
    const std::string kind = choice.get<std::string>();
    if (kind == "none") {
      out.tool_choice.kind = ToolChoice::Kind::kNone;
    } else if (kind == "auto") {
      out.tool_choice.kind = has_tools ? ToolChoice::Kind::kAuto : ToolChoice::Kind::kNone;
    } else if (kind == "required") {
      if (!has_tools) return Invalid("tool_choice", "\"required\" needs tools");
      out.tool_choice.kind = ToolChoice::Kind::kRequired;
    } else {
      return Invalid("tool_choice", absl::StrCat("must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                                                 "\"function\": {\"name\": ...}}, got \"",
                                                 kind.substr(0, 64), "\""));
    }
    return absl::OkStatus();
  }
  if (!choice.is_object()) {
    return Invalid("tool_choice", absl::StrCat("must be a string or an object, got ", TypeName(choice)));
  }
  if (strict) RETURN_IF_ERROR(CheckKnownFields(choice, "tool_choice.", kToolFields));
  if (!choice.contains("type") || choice.at("type") != "function") return Invalid("tool_choice.type", "must be \"function\"");
  if (!choice.contains("function") || !choice.at("function").is_object() || !choice.at("function").contains("name")) {
    return Invalid("tool_choice.function.name", "required");
  }
  ASSIGN_OR_RETURN(const std::string name, StringField(choice.at("function").at("name"), "tool_choice.function.name"));
  if (!has_tools) return Invalid("tool_choice", "names a function but the request has no tools");
  bool known = false;
  for (const Json& tool : out.tools) known = known || tool["function"]["name"] == name;
  if (!known) return Invalid("tool_choice.function.name", absl::StrCat("\"", name.substr(0, 64), "\" is not one of the tools"));
  out.tool_choice.kind = ToolChoice::Kind::kFunction;
  out.tool_choice.function = name;
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadChatRequest(const Json& body, bool strict, ChatRequest& out) {
  RETURN_IF_ERROR(ReadMessages(body, strict, out));
  RETURN_IF_ERROR(ReadTools(body, strict, out));
  return ReadToolChoice(body, strict, out);
}

}  // namespace crossreg::server
