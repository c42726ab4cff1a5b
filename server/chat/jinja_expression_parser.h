// Expressions and assignment targets of jinja2 3.1's grammar, with its precedence from
// the loosest: "x if c else y", or, and, not, comparisons and `in`, + and -, ~, * / // %,
// **, unary - and +, then .name [key] [a:b] (args), filters (|) and tests (is), which
// bind tighter than any operator (a + b | trim is a + (b | trim)). Filters and tests are
// resolved here, so an unknown or unsupported one fails at parse time. Every node records
// its height, and no tree grows past the stream's max_depth.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/chat/jinja_ast.h"
#include "server/chat/jinja_token_stream.h"

namespace crossreg::jinja {

class ExpressionParser {
 public:
  explicit ExpressionParser(TokenStream* tokens) : tokens_(tokens) {}

  // A name, ns.attr (with_namespace), or a tuple of targets, as jinja2's
  // parse_assign_target parses them.
  absl::StatusOr<ast::Target> ParseAssignTarget(std::initializer_list<std::string_view> extra_ends,
                                                bool with_namespace);
  // a, b, c as jinja2's parse_tuple reads it: a tuple when there is a comma, else the one
  // expression; an empty tuple only inside parentheses. Ends before `extra_ends` names.
  absl::StatusOr<ast::ExprPtr> ParseTuple(bool with_condexpr, std::initializer_list<std::string_view> extra_ends,
                                          bool explicit_parentheses);
  // One expression; `with_condexpr` allows "a if c else b" at its top.
  absl::StatusOr<ast::ExprPtr> ParseExpression(bool with_condexpr);
  // input | f(a) | g ..., or with `inline_first` the filters of {% filter f | g %}.
  absl::StatusOr<ast::ExprPtr> ParseFilter(ast::ExprPtr input, bool inline_first);

  // Whether the names `varargs` and `kwargs` were read since the caller last cleared
  // these: a macro whose body names them takes extra arguments.
  bool saw_varargs = false;
  bool saw_kwargs = false;

 private:
  // The cursor's calls, as the grammar code reads them.
  const Token& Current() const { return tokens_->Current(); }
  const Token& Look() const { return tokens_->Look(); }
  void Next() { tokens_->Next(); }
  bool IsOp(std::string_view op) const { return tokens_->IsOp(op); }
  bool IsName(std::string_view name) const { return tokens_->IsName(name); }
  bool SkipName(std::string_view name) { return tokens_->SkipName(name); }
  absl::Status Error(const Token& at, std::string_view what) const { return tokens_->Error(at, what); }
  absl::Status ExpectOp(std::string_view op) { return tokens_->ExpectOp(op); }
  absl::StatusOr<std::string> ExpectName() { return tokens_->ExpectName(); }

  // Sets `node`'s height from its children's and refuses one past max_depth.
  absl::StatusOr<ast::ExprPtr> Finish(ast::ExprPtr node, std::initializer_list<int> child_depths);
  absl::StatusOr<ast::Target> ParseTargetPrimary(bool with_namespace);
  bool IsTupleEnd(std::initializer_list<std::string_view> extra_ends) const;
  absl::StatusOr<ast::ExprPtr> ParseCondition();
  absl::StatusOr<ast::ExprPtr> ParseLogical(bool is_or);
  absl::StatusOr<ast::ExprPtr> ParseOr();
  absl::StatusOr<ast::ExprPtr> ParseNot();
  absl::StatusOr<ast::ExprPtr> ParseCompare();
  // Left-associative binary levels: + -, then ~ (flat), then * / // %, then **.
  absl::StatusOr<ast::ExprPtr> ParseMath1();
  absl::StatusOr<ast::ExprPtr> ParseBinaryLevel(int level);
  absl::StatusOr<ast::ExprPtr> ParseConcat();
  absl::StatusOr<ast::ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ast::ExprPtr> ParsePrimary();
  absl::StatusOr<ast::ExprPtr> ParsePostfix(ast::ExprPtr node);
  absl::StatusOr<ast::ExprPtr> ParseFilterExpr(ast::ExprPtr node);
  absl::StatusOr<ast::ExprPtr> ParseSubscript(ast::ExprPtr node);
  // One subscript: an expression, or a slice start:stop:step with parts optional.
  absl::StatusOr<ast::ExprPtr> ParseSubscribed();
  absl::Status ParseCallArgs(ast::CallArguments* args, int* deepest);
  absl::StatusOr<ast::ExprPtr> ParseCall(ast::ExprPtr callee);
  absl::StatusOr<std::string> DottedName();
  absl::StatusOr<ast::ExprPtr> ParseTest(ast::ExprPtr input);

  TokenStream* tokens_;
};

}  // namespace crossreg::jinja
