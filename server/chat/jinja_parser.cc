#include "server/chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status_macros.h"
#include "server/chat/jinja_expression_parser.h"
#include "server/chat/jinja_token_stream.h"

namespace crossreg::jinja {
namespace {

bool IsConstantName(std::string_view name) {
  return name == "true" || name == "false" || name == "True" || name == "False" || name == "none" || name == "None";
}

// The statements: text, {{ }} and the tags, each tag's body up to its end tag.
class StatementParser {
 public:
  StatementParser(const std::vector<Token>& tokens, int max_depth) : tokens_(tokens, max_depth), expressions_(&tokens_) {}

  absl::StatusOr<ast::Body> Parse() {
    ASSIGN_OR_RETURN(ast::Body body, Subparse({}, "", 0));
    if (Current().kind != TokenKind::kEnd) return Error(Current(), absl::StrCat("unexpected ", DescribeToken(Current())));
    return body;
  }

 private:
  const Token& Current() const { return tokens_.Current(); }
  void Next() { tokens_.Next(); }
  bool IsOp(std::string_view op) const { return tokens_.IsOp(op); }
  bool IsName(std::string_view name) const { return tokens_.IsName(name); }
  bool SkipName(std::string_view name) { return tokens_.SkipName(name); }
  absl::Status Error(const Token& at, std::string_view what) const { return tokens_.Error(at, what); }
  absl::Status ExpectOp(std::string_view op) { return tokens_.ExpectOp(op); }
  absl::Status ExpectKind(TokenKind kind, std::string_view what) { return tokens_.ExpectKind(kind, what); }
  absl::StatusOr<std::string> ExpectName() { return tokens_.ExpectName(); }

  absl::StatusOr<ast::Body> Subparse(std::initializer_list<std::string_view> ends, std::string_view opener,
                                     int opener_line) {
    TokenStream::Nesting nesting(&tokens_);
    RETURN_IF_ERROR(nesting.Check());
    ast::Body body;
    while (true) {
      const Token& token = Current();
      switch (token.kind) {
        case TokenKind::kData:
          body.push_back(std::make_unique<ast::Text>(token.line, token.text));
          Next();
          break;
        case TokenKind::kVariableBegin: {
          Next();
          const int line = Current().line;
          ASSIGN_OR_RETURN(ast::ExprPtr expr, expressions_.ParseTuple(true, {}, false));
          RETURN_IF_ERROR(ExpectKind(TokenKind::kVariableEnd, "'}}'"));
          body.push_back(std::make_unique<ast::Print>(line, std::move(expr)));
          break;
        }
        case TokenKind::kBlockBegin: {
          Next();
          if (Current().kind == TokenKind::kName &&
              std::find(ends.begin(), ends.end(), Current().text) != ends.end()) {
            return body;
          }
          RETURN_IF_ERROR(ParseStatement(&body));
          RETURN_IF_ERROR(ExpectKind(TokenKind::kBlockEnd, "'%}'"));
          break;
        }
        case TokenKind::kEnd:
          if (ends.size() != 0) {
            std::vector<std::string> names;
            for (std::string_view end : ends) names.push_back(absl::StrCat("'", std::string(end), "'"));
            return Error(token, absl::StrCat("unexpected end of template: expected ", absl::StrJoin(names, " or "),
                                             " to close the '", std::string(opener), "' tag of line ", opener_line));
          }
          return body;
        default:
          return Error(token, absl::StrCat("unexpected ", DescribeToken(token)));
      }
    }
  }

  // After a tag's arguments: its "%}", then its body up to one of `ends` (left current,
  // or consumed with its name when `drop_end`).
  absl::StatusOr<ast::Body> ParseStatements(std::initializer_list<std::string_view> ends, std::string_view opener,
                                            int opener_line, bool drop_end) {
    if (IsOp(":")) Next();
    RETURN_IF_ERROR(ExpectKind(TokenKind::kBlockEnd, "'%}'"));
    ASSIGN_OR_RETURN(ast::Body body, Subparse(ends, opener, opener_line));
    if (drop_end) Next();
    return body;
  }

  absl::Status ParseStatement(ast::Body* out) {
    const Token& token = Current();
    if (token.kind != TokenKind::kName) return Error(token, "tag name expected");
    const std::string tag = token.text;
    const int line = token.line;
    if (tag == "if") return ParseIf(out);
    if (tag == "for") return ParseFor(out);
    if (tag == "set") return ParseSet(out);
    if (tag == "macro") return ParseMacro(out);
    if (tag == "filter") {
      Next();
      auto node = std::make_unique<ast::FilterBlock>(line);
      ASSIGN_OR_RETURN(node->filter, expressions_.ParseFilter(nullptr, true));
      ASSIGN_OR_RETURN(node->body, ParseStatements({"endfilter"}, "filter", line, true));
      out->push_back(std::move(node));
      return absl::OkStatus();
    }
    if (tag == "with") return ParseWith(out);
    if (tag == "print") {
      Next();
      bool first = true;
      while (Current().kind != TokenKind::kBlockEnd) {
        if (!first) RETURN_IF_ERROR(ExpectOp(","));
        first = false;
        ASSIGN_OR_RETURN(ast::ExprPtr expr, expressions_.ParseExpression(true));
        out->push_back(std::make_unique<ast::Print>(line, std::move(expr)));
      }
      return absl::OkStatus();
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return Error(token, absl::StrCat("'", tag, "' outside a for loop"));
      Next();
      out->push_back(std::make_unique<ast::LoopControl>(
          tag == "break" ? ast::StmtKind::kBreak : ast::StmtKind::kContinue, line));
      return absl::OkStatus();
    }
    if (tag == "generation") {
      // Hugging Face's AssistantTracker: the body renders as a call block's does.
      Next();
      auto node = std::make_unique<ast::Scope>(line);
      const int loops = std::exchange(loop_depth_, 0);
      auto body = ParseStatements({"endgeneration"}, "generation", line, true);
      loop_depth_ = loops;
      if (!body.ok()) return body.status();
      node->body = *std::move(body);
      out->push_back(std::move(node));
      return absl::OkStatus();
    }
    for (std::string_view unsupported : {"block", "extends", "include", "import", "from", "call", "autoescape"}) {
      if (tag == unsupported) return Error(token, absl::StrCat("the '", tag, "' tag is not supported"));
    }
    return Error(token, absl::StrCat("Encountered unknown tag '", tag, "'."));
  }

  absl::Status ParseIf(ast::Body* out) {
    const int line = Current().line;
    Next();
    auto node = std::make_unique<ast::If>(line);
    while (true) {
      ASSIGN_OR_RETURN(ast::ExprPtr test, expressions_.ParseTuple(false, {}, false));
      ASSIGN_OR_RETURN(ast::Body body, ParseStatements({"elif", "else", "endif"}, "if", line, false));
      node->branches.emplace_back(std::move(test), std::move(body));
      const std::string end = Current().text;
      Next();
      if (end == "elif") continue;
      if (end == "else") {
        ASSIGN_OR_RETURN(node->otherwise, ParseStatements({"endif"}, "if", line, true));
      }
      break;
    }
    out->push_back(std::move(node));
    return absl::OkStatus();
  }

  absl::Status ParseFor(ast::Body* out) {
    const int line = Current().line;
    Next();
    auto node = std::make_unique<ast::For>(line);
    ASSIGN_OR_RETURN(node->target, expressions_.ParseAssignTarget({"in"}, false));
    if (!SkipName("in")) return Error(Current(), absl::StrCat("expected 'in', got ", DescribeToken(Current())));
    ASSIGN_OR_RETURN(node->iterable, expressions_.ParseTuple(false, {"recursive"}, false));
    if (SkipName("if")) {
      ASSIGN_OR_RETURN(node->filter, expressions_.ParseExpression(true));
    }
    if (IsName("recursive")) return Error(Current(), "recursive for loops are not supported");
    ++loop_depth_;
    auto body = ParseStatements({"endfor", "else"}, "for", line, false);
    --loop_depth_;
    if (!body.ok()) return body.status();
    node->body = *std::move(body);
    const std::string end = Current().text;
    Next();
    if (end == "else") {
      ASSIGN_OR_RETURN(node->otherwise, ParseStatements({"endfor"}, "for", line, true));
    }
    out->push_back(std::move(node));
    return absl::OkStatus();
  }

  absl::Status ParseSet(ast::Body* out) {
    const int line = Current().line;
    Next();
    ASSIGN_OR_RETURN(ast::Target target, expressions_.ParseAssignTarget({}, true));
    if (IsOp("=")) {
      Next();
      ASSIGN_OR_RETURN(ast::ExprPtr value, expressions_.ParseTuple(true, {}, false));
      out->push_back(std::make_unique<ast::Set>(line, std::move(target), std::move(value)));
      return absl::OkStatus();
    }
    auto node = std::make_unique<ast::SetBlock>(line);
    node->target = std::move(target);
    if (IsOp("|")) {
      ASSIGN_OR_RETURN(node->filter, expressions_.ParseFilter(nullptr, false));
    }
    ASSIGN_OR_RETURN(node->body, ParseStatements({"endset"}, "set", line, true));
    out->push_back(std::move(node));
    return absl::OkStatus();
  }

  absl::Status ParseMacro(ast::Body* out) {
    const int line = Current().line;
    Next();
    auto node = std::make_unique<ast::Macro>(line);
    ASSIGN_OR_RETURN(node->name, ExpectName());
    if (IsConstantName(node->name)) return Error(Current(), absl::StrCat("can't assign to '", node->name, "'"));
    RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!node->params.empty()) RETURN_IF_ERROR(ExpectOp(","));
      ASSIGN_OR_RETURN(std::string param, ExpectName());
      if (IsConstantName(param)) return Error(Current(), absl::StrCat("can't assign to '", param, "'"));
      if (IsOp("=")) {
        Next();
        ASSIGN_OR_RETURN(ast::ExprPtr value, expressions_.ParseExpression(true));
        node->defaults.push_back(std::move(value));
      } else if (!node->defaults.empty()) {
        return Error(Current(), "non-default argument follows default argument");
      }
      node->params.push_back(std::move(param));
    }
    Next();
    const bool saw_varargs = std::exchange(expressions_.saw_varargs, false);
    const bool saw_kwargs = std::exchange(expressions_.saw_kwargs, false);
    const int loops = std::exchange(loop_depth_, 0);
    auto body = ParseStatements({"endmacro"}, "macro", line, true);
    loop_depth_ = loops;
    if (!body.ok()) return body.status();
    node->body = *std::move(body);
    node->uses_varargs = expressions_.saw_varargs;
    node->uses_kwargs = expressions_.saw_kwargs;
    expressions_.saw_varargs = saw_varargs || expressions_.saw_varargs;
    expressions_.saw_kwargs = saw_kwargs || expressions_.saw_kwargs;
    out->push_back(std::move(node));
    return absl::OkStatus();
  }

  absl::Status ParseWith(ast::Body* out) {
    const int line = Current().line;
    Next();
    auto node = std::make_unique<ast::Scope>(line);
    while (Current().kind != TokenKind::kBlockEnd) {
      if (!node->assignments.empty()) RETURN_IF_ERROR(ExpectOp(","));
      ASSIGN_OR_RETURN(ast::Target target, expressions_.ParseAssignTarget({}, false));
      RETURN_IF_ERROR(ExpectOp("="));
      ASSIGN_OR_RETURN(ast::ExprPtr value, expressions_.ParseExpression(true));
      node->assignments.emplace_back(std::move(target), std::move(value));
    }
    ASSIGN_OR_RETURN(node->body, ParseStatements({"endwith"}, "with", line, true));
    out->push_back(std::move(node));
    return absl::OkStatus();
  }

  TokenStream tokens_;
  ExpressionParser expressions_;
  int loop_depth_ = 0;  // for loops around the current tag, within the current macro
};

}  // namespace

absl::StatusOr<ast::Body> ParseTokens(const std::vector<Token>& tokens, int max_depth) {
  return StatementParser(tokens, max_depth).Parse();
}

}  // namespace crossreg::jinja
