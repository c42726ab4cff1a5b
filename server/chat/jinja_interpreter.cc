#include "server/chat/jinja_interpreter.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "server/chat/jinja_access.h"
#include "server/chat/jinja_call.h"
#include "server/chat/jinja_globals.h"
#include "server/chat/jinja_loop.h"
#include "server/chat/jinja_operators.h"

namespace crossreg::jinja {
namespace {

// Marks an error that already names its line, so that the calls it passes through on
// the way out do not name theirs too.
constexpr char kLocatedPayload[] = "crossreg.jinja/located";

absl::Status At(int line, const absl::Status& status) {
  if (status.ok() || status.GetPayload(kLocatedPayload).has_value()) return status;
  absl::Status located(status.code(), absl::StrCat("line ", line, ": ", status.message()));
  located.SetPayload(kLocatedPayload, absl::Cord("1"));
  return located;
}

template <typename T>
absl::StatusOr<T> At(int line, absl::StatusOr<T> result) {
  if (result.ok()) return result;
  return At(line, result.status());
}

enum class Flow { kNormal, kBreak, kContinue };

struct Scope {
  explicit Scope(std::shared_ptr<Scope> parent) : parent(std::move(parent)) {}
  void Set(const std::string& name, Value value) {
    for (auto& [key, existing] : vars) {
      if (key == name) {
        existing = std::move(value);
        return;
      }
    }
    vars.emplace_back(name, std::move(value));
  }

  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter;

class MacroValue : public Callable {
 public:
  MacroValue(Interpreter* interpreter, const ast::Macro* macro, ScopePtr closure)
      : interpreter_(interpreter), macro_(macro), closure_(std::move(closure)) {}
  std::string TypeName() const override { return "Macro"; }
  absl::StatusOr<std::string> Repr() const override { return absl::StrCat("<Macro '", macro_->name, "'>"); }
  absl::StatusOr<Value> Call(CallArgs args) const override;

 private:
  Interpreter* interpreter_;
  const ast::Macro* macro_;
  ScopePtr closure_;
};

class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits)
      : limits_(limits), budget_(limits.max_steps, limits.max_output_bytes), globals_(MakeGlobals(&budget_, &arena_)) {}

  ~Interpreter() {
    // Macros hold the scope they were defined in, which holds them: break the cycles.
    for (const ScopePtr& scope : captured_scopes_) scope->vars.clear();
  }

  absl::StatusOr<std::string> Render(const ast::Body& body, const Value& context) {
    auto root = std::make_shared<Scope>(nullptr);
    if (context.kind() == Value::Kind::kDict) {
      for (const auto& [key, value] : context.AsDict().entries) {
        if (key.is_string()) root->Set(key.AsString(), value);
      }
    }
    std::string out;
    RETURN_IF_ERROR(ExecBody(body, root, &out).status());
    return out;
  }

  absl::StatusOr<Value> CallMacro(const ast::Macro& macro, const ScopePtr& closure, CallArgs args) {
    Nested nested(this);
    RETURN_IF_ERROR(nested.Check(macro.line));
    auto scope = std::make_shared<Scope>(closure);
    const size_t count = macro.params.size();
    std::vector<std::optional<Value>> bound(count);
    std::vector<Value> extra;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < count) {
        bound[i] = std::move(args.positional[i]);
      } else {
        extra.push_back(std::move(args.positional[i]));
      }
    }
    if (!extra.empty() && !macro.uses_varargs) {
      return absl::InvalidArgumentError(
          absl::StrCat("macro '", macro.name, "' takes not more than ", count, " argument(s)"));
    }
    std::vector<std::pair<Value, Value>> keywords;
    for (auto& [name, value] : args.keywords) {
      size_t j = 0;
      while (j < count && macro.params[j] != name) ++j;
      if (j < count) {
        if (bound[j].has_value()) {
          return absl::InvalidArgumentError(
              absl::StrCat("macro '", macro.name, "' got multiple values for argument '", name, "'"));
        }
        bound[j] = std::move(value);
      } else if (macro.uses_kwargs) {
        keywords.emplace_back(Value::String(name), std::move(value));
      } else {
        return absl::InvalidArgumentError(absl::StrCat("macro '", macro.name, "' takes no keyword argument '", name, "'"));
      }
    }
    const size_t first_default = count - macro.defaults.size();
    for (size_t j = 0; j < count; ++j) {
      if (bound[j].has_value()) {
        scope->Set(macro.params[j], *std::move(bound[j]));
      } else if (j >= first_default) {
        ASSIGN_OR_RETURN(Value value, Eval(*macro.defaults[j - first_default], scope));
        scope->Set(macro.params[j], std::move(value));
      } else {
        UndefinedData missing;
        missing.name = macro.params[j];
        missing.hint = absl::StrCat("parameter '", macro.params[j], "' was not provided");
        scope->Set(macro.params[j], Value::Undefined(std::move(missing)));
      }
    }
    if (macro.uses_varargs) scope->Set("varargs", Value::Tuple(std::move(extra)));
    if (macro.uses_kwargs) {
      ASSIGN_OR_RETURN(Value kwargs, Value::Dict(std::move(keywords)));
      scope->Set("kwargs", std::move(kwargs));
    }
    std::string out;
    RETURN_IF_ERROR(ExecBody(macro.body, scope, &out).status());
    return Value::String(std::move(out));
  }

 private:
  // Counts nested evaluation against the depth budget: a macro calling itself must end
  // in an error, not a stack overflow.
  class Nested {
   public:
    explicit Nested(Interpreter* in) : in_(in) { ++in_->depth_; }
    ~Nested() { --in_->depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;
    absl::Status Check(int line) const {
      if (in_->depth_ > in_->limits_.max_depth * 2) {
        return At(line, absl::InvalidArgumentError(
                            absl::StrCat("the render nests deeper than its budget (", in_->limits_.max_depth,
                                         " levels): a macro that calls itself without end?")));
      }
      return absl::OkStatus();
    }

   private:
    Interpreter* in_;
  };

  absl::Status Append(std::string* out, std::string_view text, int line) {
    if (out->size() + text.size() > limits_.max_output_bytes) {
      return At(line, absl::InvalidArgumentError(
                          absl::StrCat("the output grew past its budget of ", limits_.max_output_bytes, " bytes")));
    }
    RETURN_IF_ERROR(At(line, budget_.ChargeBytes(text.size())));
    out->append(text);
    return absl::OkStatus();
  }

  Value Lookup(const std::string& name, const ScopePtr& scope) const {
    for (const Scope* s = scope.get(); s != nullptr; s = s->parent.get()) {
      for (const auto& [key, value] : s->vars) {
        if (key == name) return value;
      }
    }
    for (const auto& [key, value] : globals_) {
      if (key == name) return value;
    }
    UndefinedData data;
    data.name = name;
    return Value::Undefined(std::move(data));
  }

  absl::Status Assign(const ast::Target& target, Value value, const ScopePtr& scope, int line) {
    switch (target.kind) {
      case ast::Target::Kind::kName:
        scope->Set(target.name, std::move(value));
        return absl::OkStatus();
      case ast::Target::Kind::kNamespaceAttr: {
        const Value holder = Lookup(target.name, scope);
        auto ns = holder.kind() == Value::Kind::kObject ? std::dynamic_pointer_cast<Namespace>(holder.ObjectPtr())
                                                        : nullptr;
        if (ns == nullptr) {
          return At(line, absl::InvalidArgumentError("cannot assign attribute on non-namespace object"));
        }
        ns->Set(target.attribute, std::move(value));
        return absl::OkStatus();
      }
      case ast::Target::Kind::kTuple: {
        auto items = Iterate(value);
        if (!items.ok()) {
          return At(line, absl::InvalidArgumentError(
                              absl::StrCat("cannot unpack non-iterable ", value.TypeName(), " object")));
        }
        if (items->size() != target.items.size()) {
          return At(line, absl::InvalidArgumentError(
                              items->size() < target.items.size()
                                  ? absl::StrCat("not enough values to unpack (expected ", target.items.size(),
                                                 ", got ", items->size(), ")")
                                  : absl::StrCat("too many values to unpack (expected ", target.items.size(), ")")));
        }
        for (size_t i = 0; i < items->size(); ++i) {
          RETURN_IF_ERROR(Assign(target.items[i], std::move((*items)[i]), scope, line));
        }
        return absl::OkStatus();
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Flow> ExecBody(const ast::Body& body, const ScopePtr& scope, std::string* out) {
    for (const ast::StmtPtr& stmt : body) {
      ASSIGN_OR_RETURN(const Flow flow, Exec(*stmt, scope, out));
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  // The text of `body` rendered in a scope of its own, then passed through `filter`; a
  // break or continue inside ends it early, with no text.
  absl::StatusOr<std::pair<Flow, Value>> Capture(const ast::Body& body, const ast::Expr* filter, const ScopePtr& scope) {
    std::string text;
    ASSIGN_OR_RETURN(const Flow flow, ExecBody(body, std::make_shared<Scope>(scope), &text));
    if (flow != Flow::kNormal) return std::make_pair(flow, Value());
    Value value = Value::String(std::move(text));
    if (filter == nullptr) return std::make_pair(flow, std::move(value));
    const Value* outer = std::exchange(filter_input_, &value);
    auto filtered = Eval(*filter, scope);
    filter_input_ = outer;
    if (!filtered.ok()) return filtered.status();
    return std::make_pair(flow, *std::move(filtered));
  }

  absl::StatusOr<Flow> Exec(const ast::Stmt& stmt, const ScopePtr& scope, std::string* out) {
    Nested nested(this);
    RETURN_IF_ERROR(nested.Check(stmt.line));
    RETURN_IF_ERROR(At(stmt.line, budget_.Charge(1)));
    switch (stmt.kind) {
      case ast::StmtKind::kText:
        RETURN_IF_ERROR(Append(out, static_cast<const ast::Text&>(stmt).text, stmt.line));
        return Flow::kNormal;
      case ast::StmtKind::kPrint: {
        ASSIGN_OR_RETURN(Value value, Eval(*static_cast<const ast::Print&>(stmt).expr, scope));
        ASSIGN_OR_RETURN(std::string text, At(stmt.line, ToPythonStr(value)));
        RETURN_IF_ERROR(Append(out, text, stmt.line));
        return Flow::kNormal;
      }
      case ast::StmtKind::kIf: {
        const auto& node = static_cast<const ast::If&>(stmt);
        for (const auto& [test, body] : node.branches) {
          ASSIGN_OR_RETURN(Value value, Eval(*test, scope));
          if (value.Truthy()) return ExecBody(body, scope, out);
        }
        return ExecBody(node.otherwise, scope, out);
      }
      case ast::StmtKind::kFor:
        return ExecFor(static_cast<const ast::For&>(stmt), scope, out);
      case ast::StmtKind::kSet: {
        const auto& node = static_cast<const ast::Set&>(stmt);
        ASSIGN_OR_RETURN(Value value, Eval(*node.value, scope));
        RETURN_IF_ERROR(Assign(node.target, std::move(value), scope, stmt.line));
        return Flow::kNormal;
      }
      case ast::StmtKind::kSetBlock: {
        const auto& node = static_cast<const ast::SetBlock&>(stmt);
        ASSIGN_OR_RETURN(auto captured, Capture(node.body, node.filter.get(), scope));
        // A break inside skips the assignment, as in jinja2's inlined set block.
        if (captured.first != Flow::kNormal) return captured.first;
        RETURN_IF_ERROR(Assign(node.target, std::move(captured.second), scope, stmt.line));
        return Flow::kNormal;
      }
      case ast::StmtKind::kMacro: {
        const auto& node = static_cast<const ast::Macro&>(stmt);
        if (captured_scopes_.empty() || captured_scopes_.back() != scope) captured_scopes_.push_back(scope);
        scope->Set(node.name, Value::FromCallable(std::make_shared<MacroValue>(this, &node, scope)));
        return Flow::kNormal;
      }
      case ast::StmtKind::kFilterBlock: {
        const auto& node = static_cast<const ast::FilterBlock&>(stmt);
        ASSIGN_OR_RETURN(auto captured, Capture(node.body, node.filter.get(), scope));
        if (captured.first != Flow::kNormal) return captured.first;
        ASSIGN_OR_RETURN(std::string text, At(stmt.line, ToPythonStr(captured.second)));
        RETURN_IF_ERROR(Append(out, text, stmt.line));
        return Flow::kNormal;
      }
      case ast::StmtKind::kScope: {
        const auto& node = static_cast<const ast::Scope&>(stmt);
        std::vector<Value> values;
        for (const auto& assignment : node.assignments) {
          ASSIGN_OR_RETURN(Value value, Eval(*assignment.second, scope));
          values.push_back(std::move(value));
        }
        auto inner = std::make_shared<Scope>(scope);
        for (size_t i = 0; i < values.size(); ++i) {
          RETURN_IF_ERROR(Assign(node.assignments[i].first, std::move(values[i]), inner, stmt.line));
        }
        return ExecBody(node.body, inner, out);
      }
      case ast::StmtKind::kBreak:
        return Flow::kBreak;
      case ast::StmtKind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  absl::StatusOr<Flow> ExecFor(const ast::For& node, const ScopePtr& scope, std::string* out) {
    ASSIGN_OR_RETURN(Value iterable, Eval(*node.iterable, scope));
    ASSIGN_OR_RETURN(std::vector<Value> items, At(node.line, Iterate(iterable)));
    if (node.filter != nullptr) {
      std::vector<Value> kept;
      for (Value& item : items) {
        auto probe = std::make_shared<Scope>(scope);
        RETURN_IF_ERROR(Assign(node.target, item, probe, node.line));
        ASSIGN_OR_RETURN(Value keep, Eval(*node.filter, probe));
        if (keep.Truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) return ExecBody(node.otherwise, std::make_shared<Scope>(scope), out);
    auto loop = std::make_shared<LoopContext>(std::move(items));
    arena_.Keep(loop);
    const Value loop_value = Value::FromObject(loop);
    for (size_t i = 0; i < loop->size(); ++i) {
      RETURN_IF_ERROR(At(node.line, budget_.Charge(1)));
      loop->set_index0(i);
      auto iteration = std::make_shared<Scope>(scope);
      iteration->Set("loop", loop_value);
      RETURN_IF_ERROR(Assign(node.target, loop->item(i), iteration, node.line));
      ASSIGN_OR_RETURN(const Flow flow, ExecBody(node.body, iteration, out));
      if (flow == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  absl::StatusOr<CallArgs> EvalArgs(const ast::CallArguments& node, const ScopePtr& scope, int line) {
    CallArgs args;
    for (const auto& expr : node.positional) {
      ASSIGN_OR_RETURN(Value value, Eval(*expr, scope));
      args.positional.push_back(std::move(value));
    }
    for (const auto& [name, expr] : node.keywords) {
      ASSIGN_OR_RETURN(Value value, Eval(*expr, scope));
      args.keywords.emplace_back(name, std::move(value));
    }
    if (node.star_args != nullptr) {
      ASSIGN_OR_RETURN(Value rest, Eval(*node.star_args, scope));
      ASSIGN_OR_RETURN(std::vector<Value> items, At(line, Iterate(rest)));
      for (Value& item : items) args.positional.push_back(std::move(item));
    }
    if (node.star_kwargs != nullptr) {
      ASSIGN_OR_RETURN(Value more, Eval(*node.star_kwargs, scope));
      if (more.kind() != Value::Kind::kDict) {
        return At(line, absl::InvalidArgumentError(
                            absl::StrCat("argument after ** must be a mapping, not ", more.TypeName())));
      }
      for (const auto& [key, value] : more.AsDict().entries) {
        if (!key.is_string()) return At(line, absl::InvalidArgumentError("keywords must be strings"));
        args.keywords.emplace_back(key.AsString(), value);
      }
    }
    return args;
  }

  absl::StatusOr<Value> EvalCall(const ast::Call& node, const ScopePtr& scope) {
    ASSIGN_OR_RETURN(Value callee, Eval(*node.callee, scope));
    ASSIGN_OR_RETURN(CallArgs args, EvalArgs(node.args, scope, node.line));
    switch (callee.kind()) {
      case Value::Kind::kCallable:
        return At(node.line, callee.AsCallable().Call(std::move(args)));
      case Value::Kind::kUndefined:
        return At(node.line, absl::InvalidArgumentError(UndefinedMessage(callee)));
      default:
        if (callee.kind() == Value::Kind::kObject && callee.AsObject().TypeName() == "LoopContext") {
          return At(node.line, absl::InvalidArgumentError("recursive for loops are not supported"));
        }
        return At(node.line,
                  absl::InvalidArgumentError(absl::StrCat("'", callee.TypeName(), "' object is not callable")));
    }
  }

  absl::StatusOr<Value> EvalSequence(const ast::Sequence& node, const ScopePtr& scope) {
    std::vector<Value> items;
    for (const auto& item : node.items) {
      ASSIGN_OR_RETURN(Value value, Eval(*item, scope));
      items.push_back(std::move(value));
    }
    return Value::List(std::move(items),
                       node.kind == ast::ExprKind::kList ? SequenceKind::kList : SequenceKind::kTuple);
  }

  absl::StatusOr<Value> EvalDict(const ast::DictLiteral& node, const ScopePtr& scope) {
    std::vector<std::pair<Value, Value>> entries;
    for (const auto& [key, value] : node.entries) {
      ASSIGN_OR_RETURN(Value k, Eval(*key, scope));
      ASSIGN_OR_RETURN(Value v, Eval(*value, scope));
      entries.emplace_back(std::move(k), std::move(v));
    }
    return At(node.line, Value::Dict(std::move(entries)));
  }

  absl::StatusOr<Value> EvalGetItem(const ast::GetItem& node, const ScopePtr& scope) {
    ASSIGN_OR_RETURN(Value object, Eval(*node.object, scope));
    ASSIGN_OR_RETURN(Value key, Eval(*node.key, scope));
    return At(node.line, GetItem(object, key, &budget_));
  }

  absl::StatusOr<Value> EvalSlice(const ast::Slice& node, const ScopePtr& scope) {
    ASSIGN_OR_RETURN(Value object, Eval(*node.object, scope));
    Value bounds[3] = {Value::None(), Value::None(), Value::None()};
    const ast::ExprPtr* parts[3] = {&node.start, &node.stop, &node.step};
    for (int i = 0; i < 3; ++i) {
      if (*parts[i] != nullptr) {
        ASSIGN_OR_RETURN(bounds[i], Eval(**parts[i], scope));
      }
    }
    return At(node.line, GetSlice(object, bounds[0], bounds[1], bounds[2]));
  }

  absl::StatusOr<Value> EvalFilter(const ast::Filter& node, const ScopePtr& scope) {
    Value input;
    if (node.input != nullptr) {
      ASSIGN_OR_RETURN(input, Eval(*node.input, scope));
    } else {
      // The filter of a {% filter %} section or a filtered {% set %} block has no input
      // expression: it applies to the rendered body that Capture hands over.
      input = *filter_input_;
    }
    ASSIGN_OR_RETURN(CallArgs args, EvalArgs(node.args, scope, node.line));
    return At(node.line, node.function(input, args, budget_));
  }

  absl::StatusOr<Value> EvalTest(const ast::Test& node, const ScopePtr& scope) {
    ASSIGN_OR_RETURN(Value input, Eval(*node.input, scope));
    ASSIGN_OR_RETURN(CallArgs args, EvalArgs(node.args, scope, node.line));
    ASSIGN_OR_RETURN(const bool passed, At(node.line, node.function(input, args)));
    return Value::Bool(passed);
  }

  // Python's and/or: the deciding operand itself, not a bool, and the right one is
  // evaluated only when the left does not decide.
  absl::StatusOr<Value> EvalAndOr(const ast::Binary& node, const ScopePtr& scope) {
    ASSIGN_OR_RETURN(Value left, Eval(*node.left, scope));
    if (left.Truthy() == (node.kind == ast::ExprKind::kOr)) return left;
    return Eval(*node.right, scope);
  }

  absl::StatusOr<Value> EvalConcat(const ast::Concat& node, const ScopePtr& scope) {
    std::string text;
    for (const auto& part : node.parts) {
      ASSIGN_OR_RETURN(Value value, Eval(*part, scope));
      ASSIGN_OR_RETURN(std::string piece, At(node.line, ToPythonStr(value)));
      text += piece;
      RETURN_IF_ERROR(At(node.line, budget_.CheckSize(text.size())));
    }
    RETURN_IF_ERROR(At(node.line, budget_.ChargeBytes(text.size())));
    return Value::String(std::move(text));
  }

  // A chain such as a < b <= c holds when each link does; it stops at the first that
  // fails, so later operands are not evaluated.
  absl::StatusOr<Value> EvalCompare(const ast::Compare& node, const ScopePtr& scope) {
    ASSIGN_OR_RETURN(Value left, Eval(*node.first, scope));
    for (const auto& [op, operand] : node.rest) {
      ASSIGN_OR_RETURN(Value right, Eval(*operand, scope));
      ASSIGN_OR_RETURN(const bool holds, At(node.line, ApplyCompare(op, left, right)));
      if (!holds) return Value::Bool(false);
      left = std::move(right);
    }
    return Value::Bool(true);
  }

  absl::StatusOr<Value> EvalCondition(const ast::Condition& node, const ScopePtr& scope) {
    ASSIGN_OR_RETURN(Value test, Eval(*node.test, scope));
    if (test.Truthy()) return Eval(*node.then, scope);
    if (node.otherwise != nullptr) return Eval(*node.otherwise, scope);
    UndefinedData data;
    data.hint = absl::StrCat("the inline if-expression on line ", node.line,
                             " evaluated to false and no else section was defined.");
    return Value::Undefined(std::move(data));
  }

  absl::StatusOr<Value> Eval(const ast::Expr& expr, const ScopePtr& scope) {
    Nested nested(this);
    RETURN_IF_ERROR(nested.Check(expr.line));
    RETURN_IF_ERROR(At(expr.line, budget_.Charge(1)));
    switch (expr.kind) {
      case ast::ExprKind::kLiteral:
        return static_cast<const ast::Literal&>(expr).value;
      case ast::ExprKind::kName:
        return Lookup(static_cast<const ast::Name&>(expr).name, scope);
      case ast::ExprKind::kList:
      case ast::ExprKind::kTuple:
        return EvalSequence(static_cast<const ast::Sequence&>(expr), scope);
      case ast::ExprKind::kDict:
        return EvalDict(static_cast<const ast::DictLiteral&>(expr), scope);
      case ast::ExprKind::kGetAttr: {
        const auto& node = static_cast<const ast::GetAttr&>(expr);
        ASSIGN_OR_RETURN(Value object, Eval(*node.object, scope));
        return At(expr.line, GetAttribute(object, node.name, &budget_));
      }
      case ast::ExprKind::kGetItem:
        return EvalGetItem(static_cast<const ast::GetItem&>(expr), scope);
      case ast::ExprKind::kSlice:
        return EvalSlice(static_cast<const ast::Slice&>(expr), scope);
      case ast::ExprKind::kCall:
        return EvalCall(static_cast<const ast::Call&>(expr), scope);
      case ast::ExprKind::kFilter:
        return EvalFilter(static_cast<const ast::Filter&>(expr), scope);
      case ast::ExprKind::kTest:
        return EvalTest(static_cast<const ast::Test&>(expr), scope);
      case ast::ExprKind::kNot: {
        ASSIGN_OR_RETURN(Value operand, Eval(*static_cast<const ast::Unary&>(expr).operand, scope));
        return Value::Bool(!operand.Truthy());
      }
      case ast::ExprKind::kNegate:
      case ast::ExprKind::kPositive: {
        ASSIGN_OR_RETURN(Value operand, Eval(*static_cast<const ast::Unary&>(expr).operand, scope));
        return At(expr.line, ApplyUnary(expr.kind == ast::ExprKind::kNegate, operand));
      }
      case ast::ExprKind::kBinary: {
        const auto& node = static_cast<const ast::Binary&>(expr);
        ASSIGN_OR_RETURN(Value left, Eval(*node.left, scope));
        ASSIGN_OR_RETURN(Value right, Eval(*node.right, scope));
        return At(expr.line, ApplyBinary(node.op, left, right, budget_));
      }
      case ast::ExprKind::kAnd:
      case ast::ExprKind::kOr:
        return EvalAndOr(static_cast<const ast::Binary&>(expr), scope);
      case ast::ExprKind::kConcat:
        return EvalConcat(static_cast<const ast::Concat&>(expr), scope);
      case ast::ExprKind::kCompare:
        return EvalCompare(static_cast<const ast::Compare&>(expr), scope);
      case ast::ExprKind::kCondition:
        return EvalCondition(static_cast<const ast::Condition&>(expr), scope);
    }
    return Value();
  }

  const RenderLimits limits_;
  RenderBudget budget_;
  RenderArena arena_;
  const std::vector<std::pair<std::string, Value>> globals_;
  std::vector<ScopePtr> captured_scopes_;
  const Value* filter_input_ = nullptr;
  int depth_ = 0;
};

absl::StatusOr<Value> MacroValue::Call(CallArgs args) const {
  return interpreter_->CallMacro(*macro_, closure_, std::move(args));
}

}  // namespace

absl::StatusOr<std::string> RenderBody(const ast::Body& body, const Value& context, const RenderLimits& limits) {
  Interpreter interpreter(limits);
  return interpreter.Render(body, context);
}

}  // namespace crossreg::jinja
