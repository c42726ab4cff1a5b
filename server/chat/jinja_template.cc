#include "server/chat/jinja_template.h"

#include <utility>

#include "server/chat/jinja_ast.h"
#include "server/chat/jinja_interpreter.h"
#include "server/chat/jinja_json.h"
#include "server/chat/jinja_lexer.h"
#include "server/chat/jinja_parser.h"

namespace crossreg::jinja {

struct Template::Program {
  ast::Body body;
};

Template::Template(std::shared_ptr<const Program> program, const TemplateOptions& options)
    : program_(std::move(program)), options_(options) {}

absl::StatusOr<Template> Template::Parse(std::string_view source, const TemplateOptions& options) {
  LexerOptions lexer_options;
  lexer_options.trim_blocks = options.trim_blocks;
  lexer_options.lstrip_blocks = options.lstrip_blocks;
  auto tokens = Tokenize(source, lexer_options);
  if (!tokens.ok()) return tokens.status();
  auto body = ParseTokens(*tokens, options.max_depth);
  if (!body.ok()) return body.status();
  auto program = std::make_shared<Program>();
  program->body = *std::move(body);
  return Template(std::move(program), options);
}

absl::StatusOr<std::string> Template::Render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) return absl::InvalidArgumentError("the context of a chat template must be a JSON object");
  auto value = ValueFromJson(context);
  if (!value.ok()) return value.status();
  RenderLimits limits;
  limits.max_output_bytes = options_.max_output_bytes;
  limits.max_steps = options_.max_steps;
  limits.max_depth = options_.max_depth;
  return RenderBody(program_->body, *value, limits);
}

}  // namespace crossreg::jinja
