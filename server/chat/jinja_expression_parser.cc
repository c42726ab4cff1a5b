#include "server/chat/jinja_expression_parser.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"

namespace crossreg::jinja {
namespace {

int DepthOf(const ast::ExprPtr& e) { return e ? e->depth : 0; }

bool IsConstantName(std::string_view name) {
  return name == "true" || name == "false" || name == "True" || name == "False" || name == "none" || name == "None";
}

}  // namespace

// Sets `node`'s height from its children's and refuses one past max_depth.
absl::StatusOr<ast::ExprPtr> ExpressionParser::Finish(ast::ExprPtr node, std::initializer_list<int> child_depths) {
  int deepest = 0;
  for (int d : child_depths) deepest = std::max(deepest, d);
  node->depth = deepest + 1;
  if (node->depth > tokens_->max_depth()) return tokens_->TooDeep();
  return node;
}

// A name, ns.attr (with_namespace), or a tuple of targets, as jinja2's
// parse_assign_target parses them.
absl::StatusOr<ast::Target> ExpressionParser::ParseAssignTarget(std::initializer_list<std::string_view> extra_ends,
                                              bool with_namespace) {
  TokenStream::Nesting nesting(tokens_);
  RETURN_IF_ERROR(nesting.Check());
  ast::Target tuple;
  tuple.kind = ast::Target::Kind::kTuple;
  bool is_tuple = false;
  while (true) {
    if (!tuple.items.empty()) RETURN_IF_ERROR(ExpectOp(","));
    if (IsTupleEnd(extra_ends)) break;
    ASSIGN_OR_RETURN(ast::Target item, ParseTargetPrimary(with_namespace));
    tuple.items.push_back(std::move(item));
    if (!IsOp(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (tuple.items.empty()) return Error(Current(), absl::StrCat("expected an assignment target, got ", DescribeToken(Current())));
    return std::move(tuple.items.front());
  }
  return tuple;
}

absl::StatusOr<ast::Target> ExpressionParser::ParseTargetPrimary(bool with_namespace) {
  ast::Target target;
  if (Current().kind == TokenKind::kName) {
    if (IsConstantName(Current().text)) return Error(Current(), "can't assign to 'const'");
    target.name = Current().text;
    Next();
    if (with_namespace && IsOp(".")) {
      Next();
      target.kind = ast::Target::Kind::kNamespaceAttr;
      ASSIGN_OR_RETURN(target.attribute, ExpectName());
    }
    return target;
  }
  if (IsOp("(")) {
    Next();
    ASSIGN_OR_RETURN(target, ParseAssignTarget({}, with_namespace));
    RETURN_IF_ERROR(ExpectOp(")"));
    return target;
  }
  return Error(Current(), absl::StrCat("can't assign to ", DescribeToken(Current())));
}

bool ExpressionParser::IsTupleEnd(std::initializer_list<std::string_view> extra_ends) const {
  if (Current().kind == TokenKind::kVariableEnd || Current().kind == TokenKind::kBlockEnd || IsOp(")")) return true;
  return Current().kind == TokenKind::kName &&
         std::find(extra_ends.begin(), extra_ends.end(), Current().text) != extra_ends.end();
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseTuple(bool with_condexpr,
                                                        std::initializer_list<std::string_view> extra_ends,
                                                        bool explicit_parentheses) {
  const int line = Current().line;
  std::vector<ast::ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) RETURN_IF_ERROR(ExpectOp(","));
    if (IsTupleEnd(extra_ends)) break;
    ASSIGN_OR_RETURN(ast::ExprPtr item, ParseExpression(with_condexpr));
    items.push_back(std::move(item));
    if (!IsOp(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items.front());
    if (!explicit_parentheses) return Error(Current(), absl::StrCat("Expected an expression, got ", DescribeToken(Current())));
  }
  auto tuple = std::make_unique<ast::Sequence>(ast::ExprKind::kTuple, line);
  int deepest = 0;
  for (const auto& item : items) deepest = std::max(deepest, item->depth);
  tuple->items = std::move(items);
  return Finish(std::move(tuple), {deepest});
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseExpression(bool with_condexpr) {
  TokenStream::Nesting nesting(tokens_);
  RETURN_IF_ERROR(nesting.Check());
  return with_condexpr ? ParseCondition() : ParseOr();
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseCondition() {
  const int line = Current().line;
  ASSIGN_OR_RETURN(ast::ExprPtr expr, ParseOr());
  while (SkipName("if")) {
    auto node = std::make_unique<ast::Condition>(line);
    ASSIGN_OR_RETURN(node->test, ParseOr());
    if (SkipName("else")) {
      TokenStream::Nesting nesting(tokens_);
      RETURN_IF_ERROR(nesting.Check());
      ASSIGN_OR_RETURN(node->otherwise, ParseCondition());
    }
    node->then = std::move(expr);
    const int depths[] = {DepthOf(node->test), DepthOf(node->then), DepthOf(node->otherwise)};
    ASSIGN_OR_RETURN(expr, Finish(std::move(node), {depths[0], depths[1], depths[2]}));
  }
  return expr;
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseLogical(bool is_or) {
  const int line = Current().line;
  ASSIGN_OR_RETURN(ast::ExprPtr left, is_or ? ParseLogical(false) : ParseNot());
  while (SkipName(is_or ? "or" : "and")) {
    ASSIGN_OR_RETURN(ast::ExprPtr right, is_or ? ParseLogical(false) : ParseNot());
    const int depths[] = {left->depth, right->depth};
    ASSIGN_OR_RETURN(left, Finish(std::make_unique<ast::Binary>(is_or ? ast::ExprKind::kOr : ast::ExprKind::kAnd, line,
                                                                BinaryOperator::kAdd, std::move(left), std::move(right)),
                                  {depths[0], depths[1]}));
  }
  return left;
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseOr() { return ParseLogical(true); }

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseNot() {
  if (IsName("not")) {
    const int line = Current().line;
    Next();
    TokenStream::Nesting nesting(tokens_);
    RETURN_IF_ERROR(nesting.Check());
    ASSIGN_OR_RETURN(ast::ExprPtr operand, ParseNot());
    const int depth = operand->depth;
    return Finish(std::make_unique<ast::Unary>(ast::ExprKind::kNot, line, std::move(operand)), {depth});
  }
  return ParseCompare();
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseCompare() {
  const int line = Current().line;
  ASSIGN_OR_RETURN(ast::ExprPtr first, ParseMath1());
  std::unique_ptr<ast::Compare> node;
  int deepest = first->depth;
  while (true) {
    CompareOperator op;
    if (IsOp("==")) {
      op = CompareOperator::kEq;
    } else if (IsOp("!=")) {
      op = CompareOperator::kNe;
    } else if (IsOp("<")) {
      op = CompareOperator::kLt;
    } else if (IsOp("<=")) {
      op = CompareOperator::kLe;
    } else if (IsOp(">")) {
      op = CompareOperator::kGt;
    } else if (IsOp(">=")) {
      op = CompareOperator::kGe;
    } else if (IsName("in")) {
      op = CompareOperator::kIn;
    } else if (IsName("not") && Look().kind == TokenKind::kName && Look().text == "in") {
      op = CompareOperator::kNotIn;
      Next();
    } else {
      break;
    }
    Next();
    ASSIGN_OR_RETURN(ast::ExprPtr operand, ParseMath1());
    deepest = std::max(deepest, operand->depth);
    if (!node) node = std::make_unique<ast::Compare>(line, std::move(first));
    node->rest.emplace_back(op, std::move(operand));
  }
  if (!node) return first;
  return Finish(std::move(node), {deepest});
}

// Left-associative binary levels: + -, then ~ (flat), then * / // %, then **.
absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseMath1() { return ParseBinaryLevel(0); }

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseBinaryLevel(int level) {
  if (level == 1) return ParseConcat();
  const int line = Current().line;
  const auto operand = [&]() { return level == 0 ? ParseBinaryLevel(1) : level == 2 ? ParseBinaryLevel(3) : ParseUnary(true); };
  ASSIGN_OR_RETURN(ast::ExprPtr left, operand());
  while (true) {
    BinaryOperator op;
    if (level == 0 && IsOp("+")) {
      op = BinaryOperator::kAdd;
    } else if (level == 0 && IsOp("-")) {
      op = BinaryOperator::kSub;
    } else if (level == 2 && IsOp("*")) {
      op = BinaryOperator::kMul;
    } else if (level == 2 && IsOp("/")) {
      op = BinaryOperator::kDiv;
    } else if (level == 2 && IsOp("//")) {
      op = BinaryOperator::kFloorDiv;
    } else if (level == 2 && IsOp("%")) {
      op = BinaryOperator::kMod;
    } else if (level == 3 && IsOp("**")) {
      op = BinaryOperator::kPow;
    } else {
      break;
    }
    Next();
    ASSIGN_OR_RETURN(ast::ExprPtr right, operand());
    const int depths[] = {left->depth, right->depth};
    ASSIGN_OR_RETURN(left, Finish(std::make_unique<ast::Binary>(ast::ExprKind::kBinary, line, op, std::move(left),
                                                                std::move(right)),
                                  {depths[0], depths[1]}));
  }
  return left;
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseConcat() {
  const int line = Current().line;
  ASSIGN_OR_RETURN(ast::ExprPtr first, ParseBinaryLevel(2));
  if (!IsOp("~")) return first;
  auto node = std::make_unique<ast::Concat>(line);
  int deepest = first->depth;
  node->parts.push_back(std::move(first));
  while (IsOp("~")) {
    Next();
    ASSIGN_OR_RETURN(ast::ExprPtr part, ParseBinaryLevel(2));
    deepest = std::max(deepest, part->depth);
    node->parts.push_back(std::move(part));
  }
  return Finish(std::move(node), {deepest});
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseUnary(bool with_filter) {
  const int line = Current().line;
  ast::ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    const ast::ExprKind kind = IsOp("-") ? ast::ExprKind::kNegate : ast::ExprKind::kPositive;
    Next();
    TokenStream::Nesting nesting(tokens_);
    RETURN_IF_ERROR(nesting.Check());
    ASSIGN_OR_RETURN(ast::ExprPtr operand, ParseUnary(false));
    const int depth = operand->depth;
    ASSIGN_OR_RETURN(node, Finish(std::make_unique<ast::Unary>(kind, line, std::move(operand)), {depth}));
  } else {
    ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParsePrimary() {
  const Token& token = Current();
  const int line = token.line;
  switch (token.kind) {
    case TokenKind::kName: {
      ast::ExprPtr node;
      if (token.text == "true" || token.text == "True") {
        node = std::make_unique<ast::Literal>(line, Value::Bool(true));
      } else if (token.text == "false" || token.text == "False") {
        node = std::make_unique<ast::Literal>(line, Value::Bool(false));
      } else if (token.text == "none" || token.text == "None") {
        node = std::make_unique<ast::Literal>(line, Value::None());
      } else {
        if (token.text == "varargs") saw_varargs = true;
        if (token.text == "kwargs") saw_kwargs = true;
        node = std::make_unique<ast::Name>(line, token.text);
      }
      Next();
      return node;
    }
    case TokenKind::kString: {
      std::string text;
      while (Current().kind == TokenKind::kString) {
        text += Current().text;
        Next();
      }
      return ast::ExprPtr(std::make_unique<ast::Literal>(line, Value::String(std::move(text))));
    }
    case TokenKind::kInteger: {
      Next();
      return ast::ExprPtr(std::make_unique<ast::Literal>(line, Value::Int(token.integer)));
    }
    case TokenKind::kFloat: {
      Next();
      return ast::ExprPtr(std::make_unique<ast::Literal>(line, Value::Float(token.number)));
    }
    default:
      break;
  }
  if (IsOp("(")) {
    Next();
    ASSIGN_OR_RETURN(ast::ExprPtr node, ParseTuple(true, {}, true));
    RETURN_IF_ERROR(ExpectOp(")"));
    return node;
  }
  if (IsOp("[") || IsOp("{")) {
    const bool is_list = IsOp("[");
    Next();
    const std::string_view close = is_list ? "]" : "}";
    auto list = std::make_unique<ast::Sequence>(ast::ExprKind::kList, line);
    auto dict = std::make_unique<ast::DictLiteral>(line);
    int deepest = 0;
    bool first = true;
    while (!IsOp(close)) {
      if (!first) {
        RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(close)) break;
      }
      first = false;
      ASSIGN_OR_RETURN(ast::ExprPtr item, ParseExpression(true));
      deepest = std::max(deepest, item->depth);
      if (is_list) {
        list->items.push_back(std::move(item));
        continue;
      }
      RETURN_IF_ERROR(ExpectOp(":"));
      ASSIGN_OR_RETURN(ast::ExprPtr value, ParseExpression(true));
      deepest = std::max(deepest, value->depth);
      dict->entries.emplace_back(std::move(item), std::move(value));
    }
    Next();
    if (is_list) return Finish(std::move(list), {deepest});
    return Finish(std::move(dict), {deepest});
  }
  return Error(token, absl::StrCat("unexpected ", DescribeToken(token)));
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParsePostfix(ast::ExprPtr node) {
  while (true) {
    if (IsOp(".") || IsOp("[")) {
      ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseFilterExpr(ast::ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      ASSIGN_OR_RETURN(node, ParseFilter(std::move(node), false));
    } else if (IsName("is")) {
      ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOp("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseSubscript(ast::ExprPtr node) {
  const Token& token = Current();
  const int line = token.line;
  const int object_depth = node->depth;
  Next();
  if (token.text == ".") {
    const Token& attribute = Current();
    if (attribute.kind == TokenKind::kName) {
      Next();
      return Finish(std::make_unique<ast::GetAttr>(line, std::move(node), attribute.text), {object_depth});
    }
    if (attribute.kind != TokenKind::kInteger) return Error(attribute, "expected name or number");
    Next();
    return Finish(std::make_unique<ast::GetItem>(line, std::move(node),
                                                 std::make_unique<ast::Literal>(line, Value::Int(attribute.integer))),
                  {object_depth, 1});
  }
  std::vector<ast::ExprPtr> args;
  while (!IsOp("]")) {
    if (!args.empty()) RETURN_IF_ERROR(ExpectOp(","));
    ASSIGN_OR_RETURN(ast::ExprPtr arg, ParseSubscribed());
    args.push_back(std::move(arg));
  }
  Next();
  if (args.empty()) return Error(Current(), "expected a subscript");
  if (args.size() == 1 && args[0]->kind == ast::ExprKind::kSlice) {
    auto* slice = static_cast<ast::Slice*>(args[0].get());
    slice->object = std::move(node);
    const int depths[] = {DepthOf(slice->object), DepthOf(slice->start), DepthOf(slice->stop), DepthOf(slice->step)};
    return Finish(std::move(args[0]), {depths[0], depths[1], depths[2], depths[3]});
  }
  int deepest = 0;
  for (const auto& arg : args) {
    if (arg->kind == ast::ExprKind::kSlice) return Error(token, "multi-dimensional slicing is not supported");
    deepest = std::max(deepest, arg->depth);
  }
  ast::ExprPtr key;
  if (args.size() == 1) {
    key = std::move(args[0]);
  } else {
    auto tuple = std::make_unique<ast::Sequence>(ast::ExprKind::kTuple, line);
    tuple->items = std::move(args);
    ASSIGN_OR_RETURN(key, Finish(std::move(tuple), {deepest}));
  }
  const int key_depth = key->depth;
  return Finish(std::make_unique<ast::GetItem>(line, std::move(node), std::move(key)), {object_depth, key_depth});
}

// One subscript: an expression, or a slice start:stop:step with parts optional.
absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseSubscribed() {
  const int line = Current().line;
  auto slice = std::make_unique<ast::Slice>(line);
  if (IsOp(":")) {
    Next();
  } else {
    ASSIGN_OR_RETURN(ast::ExprPtr start, ParseExpression(true));
    if (!IsOp(":")) return start;
    Next();
    slice->start = std::move(start);
  }
  if (!IsOp(":") && !IsOp("]") && !IsOp(",")) {
    ASSIGN_OR_RETURN(slice->stop, ParseExpression(true));
  }
  if (IsOp(":")) {
    Next();
    if (!IsOp("]") && !IsOp(",")) {
      ASSIGN_OR_RETURN(slice->step, ParseExpression(true));
    }
  }
  return ast::ExprPtr(std::move(slice));
}

absl::Status ExpressionParser::ParseCallArgs(ast::CallArguments* args, int* deepest) {
  const Token& open = Current();
  RETURN_IF_ERROR(ExpectOp("("));
  const auto invalid = [&] { return Error(open, "invalid syntax for function call expression"); };
  bool require_comma = false;
  while (!IsOp(")")) {
    if (require_comma) {
      RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
    }
    ast::ExprPtr value;
    if (IsOp("*")) {
      if (args->star_args || args->star_kwargs) return invalid();
      Next();
      ASSIGN_OR_RETURN(args->star_args, ParseExpression(true));
      *deepest = std::max(*deepest, args->star_args->depth);
    } else if (IsOp("**")) {
      if (args->star_kwargs) return invalid();
      Next();
      ASSIGN_OR_RETURN(args->star_kwargs, ParseExpression(true));
      *deepest = std::max(*deepest, args->star_kwargs->depth);
    } else if (Current().kind == TokenKind::kName && Look().kind == TokenKind::kOperator && Look().text == "=") {
      if (args->star_kwargs) return invalid();
      std::string key = Current().text;
      Next();
      Next();
      ASSIGN_OR_RETURN(value, ParseExpression(true));
      *deepest = std::max(*deepest, value->depth);
      args->keywords.emplace_back(std::move(key), std::move(value));
    } else {
      if (args->star_args || args->star_kwargs || !args->keywords.empty()) return invalid();
      ASSIGN_OR_RETURN(value, ParseExpression(true));
      *deepest = std::max(*deepest, value->depth);
      args->positional.push_back(std::move(value));
    }
    require_comma = true;
  }
  Next();
  return absl::OkStatus();
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseCall(ast::ExprPtr callee) {
  const int line = Current().line;
  const int callee_depth = callee->depth;
  auto node = std::make_unique<ast::Call>(line, std::move(callee));
  int deepest = callee_depth;
  RETURN_IF_ERROR(ParseCallArgs(&node->args, &deepest));
  return Finish(std::move(node), {deepest});
}

absl::StatusOr<std::string> ExpressionParser::DottedName() {
  ASSIGN_OR_RETURN(std::string name, ExpectName());
  while (IsOp(".")) {
    Next();
    ASSIGN_OR_RETURN(std::string part, ExpectName());
    absl::StrAppend(&name, ".", part);
  }
  return name;
}

// input | f(a) | g ..., or with `inline_first` the filters of {% filter f | g %}.
absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseFilter(ast::ExprPtr input, bool inline_first) {
  ast::ExprPtr node = std::move(input);
  while (IsOp("|") || inline_first) {
    if (!inline_first) Next();
    inline_first = false;
    const Token& token = Current();
    ASSIGN_OR_RETURN(std::string name, DottedName());
    FilterFunction function = FindFilter(name);
    if (function == nullptr) {
      if (IsUnsupportedJinjaFilter(name)) {
        return Error(token, absl::StrCat("the filter '", name, "' is not supported"));
      }
      return Error(token, absl::StrCat("No filter named '", name, "'."));
    }
    int deepest = DepthOf(node);
    auto filter = std::make_unique<ast::Filter>(token.line, std::move(node), name, function);
    if (IsOp("(")) RETURN_IF_ERROR(ParseCallArgs(&filter->args, &deepest));
    ASSIGN_OR_RETURN(node, Finish(std::move(filter), {deepest}));
  }
  return node;
}

absl::StatusOr<ast::ExprPtr> ExpressionParser::ParseTest(ast::ExprPtr input) {
  const int line = Current().line;
  Next();
  const bool negated = SkipName("not");
  const Token& token = Current();
  ASSIGN_OR_RETURN(std::string name, DottedName());
  TestFunction function = FindTest(name);
  if (function == nullptr) return Error(token, absl::StrCat("No test named '", name, "'."));
  int deepest = input->depth;
  auto test = std::make_unique<ast::Test>(line, std::move(input), name, function);
  const TokenKind kind = Current().kind;
  if (IsOp("(")) {
    RETURN_IF_ERROR(ParseCallArgs(&test->args, &deepest));
  } else if ((kind == TokenKind::kName || kind == TokenKind::kString || kind == TokenKind::kInteger ||
              kind == TokenKind::kFloat || IsOp("[") || IsOp("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    // x is divisibleby 3: one argument without parentheses.
    if (IsName("is")) return Error(Current(), "You cannot chain multiple tests with is");
    ASSIGN_OR_RETURN(ast::ExprPtr arg, ParsePrimary());
    ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    deepest = std::max(deepest, arg->depth);
    test->args.positional.push_back(std::move(arg));
  }
  ASSIGN_OR_RETURN(ast::ExprPtr node, Finish(std::move(test), {deepest}));
  if (!negated) return node;
  const int depth = node->depth;
  return Finish(std::make_unique<ast::Unary>(ast::ExprKind::kNot, line, std::move(node)), {depth});
}

}  // namespace crossreg::jinja
