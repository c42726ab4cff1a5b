#include "server/http/tool_call_grammar.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"
#include "engine/grammar/json_schema_grammar.h"

namespace crossreg::server {
namespace {

using Json = nlohmann::ordered_json;

struct Allowed {
  size_t index;  // in request.tools
  const Json* function;
};

// Objects of the arguments closed to their listed properties where the schema leaves
// that open (as OpenAI's strict mode reads a tool's parameters): a forced call then has
// the members its function takes, and a small model cannot wander off into made-up keys
// until its tokens run out. Nested objects too, through properties, items and the
// combinators; a schema that says what further members may be keeps its say.
void CloseObjects(Json& schema) {
  if (!schema.is_object()) return;
  const bool object = schema.contains("properties") || (schema.contains("type") && schema["type"] == "object");
  if (object && !schema.contains("additionalProperties") && schema.contains("properties")) {
    schema["additionalProperties"] = false;
  }
  for (const char* key : {"properties", "$defs", "definitions"}) {
    if (schema.contains(key) && schema[key].is_object()) {
      for (auto& [name, sub] : schema[key].items()) CloseObjects(sub);
    }
  }
  for (const char* key : {"items", "additionalProperties"}) {
    if (schema.contains(key)) CloseObjects(schema[key]);
  }
  for (const char* key : {"anyOf", "oneOf", "allOf", "prefixItems"}) {
    if (schema.contains(key) && schema[key].is_array()) {
      for (Json& sub : schema[key]) CloseObjects(sub);
    }
  }
}

// One function's call as a JSON Schema: its name as a constant, its arguments under
// its parameters (their $defs moved to the top, where "#/$defs/..." resolves).
absl::StatusOr<Json> CallSchema(const Allowed& tool, const char* arguments_key, Json& defs) {
  Json parameters = (*tool.function)["parameters"];
  CloseObjects(parameters);
  for (const char* container : {"$defs", "definitions"}) {
    if (!parameters.is_object() || !parameters.contains(container)) continue;
    for (auto& [name, schema] : parameters[container].items()) {
      Json& merged = defs[container];
      if (merged.contains(name) && merged[name] != schema) {
        return FieldViolation(absl::StrCat("tools[", tool.index, "].function.parameters.", container, ".", name),
                              "defined differently by another tool (rename one of them)");
      }
      merged[name] = schema;
    }
    parameters.erase(container);
  }
  return Json{{"type", "object"},
              {"properties", {{"name", {{"const", (*tool.function)["name"]}}}, {arguments_key, std::move(parameters)}}},
              {"required", {"name", arguments_key}},
              {"additionalProperties", false}};
}

}  // namespace

absl::StatusOr<std::string> ToolCallGrammar(const ChatRequest& request, chat::ToolCallFormat format) {
  std::vector<Allowed> allowed;
  for (size_t i = 0; i < request.tools.size(); ++i) {
    const Json& function = request.tools[i]["function"];
    if (request.tool_choice.kind == ToolChoice::Kind::kFunction && function["name"] != request.tool_choice.function) {
      continue;
    }
    allowed.push_back({i, &function});
  }
  const bool hermes = format == chat::ToolCallFormat::kHermes;
  const char* arguments_key = hermes ? "arguments" : "parameters";
  Json defs = Json::object();
  Json schema;
  std::vector<std::string> paths;  // where each allowed tool's parameters sit in `schema`
  if (allowed.size() == 1) {
    auto one = CallSchema(allowed[0], arguments_key, defs);
    if (!one.ok()) return one.status();
    schema = *std::move(one);
    paths.push_back(absl::StrCat("json_schema.properties.", arguments_key));
  } else {
    schema = Json{{"anyOf", Json::array()}};
    for (size_t k = 0; k < allowed.size(); ++k) {
      auto one = CallSchema(allowed[k], arguments_key, defs);
      if (!one.ok()) return one.status();
      schema["anyOf"].push_back(*std::move(one));
      paths.push_back(absl::StrCat("json_schema.anyOf[", k, "].properties.", arguments_key));
    }
  }
  for (auto& [container, entries] : defs.items()) schema[container] = entries;
  auto call = grammar::JsonSchemaToGbnf(schema.dump(), "tool-call");
  if (!call.ok()) {
    // "json_schema.anyOf[1].properties.arguments.x: what" -> "tools[i].function.parameters.x: what"
    const std::string message(call.status().message());
    for (size_t k = 0; k < paths.size(); ++k) {
      if (absl::StartsWith(message, paths[k])) {
        std::string rest = message.substr(paths[k].size());
        const size_t colon = rest.find(": ");
        const std::string where = colon == std::string::npos ? "" : rest.substr(0, colon);
        const std::string what = colon == std::string::npos ? rest : rest.substr(colon + 2);
        return FieldViolation(absl::StrCat("tools[", allowed[k].index, "].function.parameters", where), what);
      }
    }
    return FieldViolation("tools", message);
  }
  std::string root;
  if (hermes) {
    const std::string block = R"("<tool_call>\n" tool-call "\n</tool_call>")";
    root = request.parallel_tool_calls ? absl::StrCat("root ::= ", block, " (\"\\n\" ", block, ")*\n")
                                       : absl::StrCat("root ::= ", block, "\n");
  } else {
    root = request.parallel_tool_calls ? "root ::= tool-call (\"; \" tool-call)*\n" : "root ::= tool-call\n";
  }
  return root + *call;
}

}  // namespace crossreg::server
