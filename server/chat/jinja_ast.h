// The syntax tree of a parsed template: expressions and statements, each with its source
// line for error messages. Immutable once parsed; the interpreter walks it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/chat/jinja_filters.h"
#include "server/chat/jinja_operators.h"
#include "server/chat/jinja_tests.h"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja::ast {

enum class ExprKind {
  kLiteral,    // 'text', 42, 1.5, true, none
  kName,       // messages
  kList,       // [a, b]
  kTuple,      // (a, b) and a, b
  kDict,       // {'k': v}
  kGetAttr,    // x.name
  kGetItem,    // x[key]
  kSlice,      // x[a:b:c]
  kCall,       // f(a, k=v)
  kFilter,     // x | f(a)
  kTest,       // x is t(a)
  kNot,        // not x
  kNegate,     // -x
  kPositive,   // +x
  kBinary,     // + - * / // % **
  kAnd,        // a and b
  kOr,         // a or b
  kConcat,     // a ~ b ~ c
  kCompare,    // a < b == c, a in b
  kCondition,  // a if c else b
};

struct Expr {
  Expr(ExprKind kind, int line) : kind(kind), line(line) {}
  virtual ~Expr() = default;
  const ExprKind kind;
  const int line;
  int depth = 1;  // the height of the subtree, bounded by the parser
};
using ExprPtr = std::unique_ptr<Expr>;

struct Literal : Expr {
  Literal(int line, Value value) : Expr(ExprKind::kLiteral, line), value(std::move(value)) {}
  Value value;
};

struct Name : Expr {
  Name(int line, std::string name) : Expr(ExprKind::kName, line), name(std::move(name)) {}
  std::string name;
};

// kList and kTuple.
struct Sequence : Expr {
  Sequence(ExprKind kind, int line) : Expr(kind, line) {}
  std::vector<ExprPtr> items;
};

struct DictLiteral : Expr {
  explicit DictLiteral(int line) : Expr(ExprKind::kDict, line) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};

struct GetAttr : Expr {
  GetAttr(int line, ExprPtr object, std::string name)
      : Expr(ExprKind::kGetAttr, line), object(std::move(object)), name(std::move(name)) {}
  ExprPtr object;
  std::string name;
};

struct GetItem : Expr {
  GetItem(int line, ExprPtr object, ExprPtr key)
      : Expr(ExprKind::kGetItem, line), object(std::move(object)), key(std::move(key)) {}
  ExprPtr object;
  ExprPtr key;
};

struct Slice : Expr {
  explicit Slice(int line) : Expr(ExprKind::kSlice, line) {}
  ExprPtr object;
  ExprPtr start;  // each bound may be absent (null)
  ExprPtr stop;
  ExprPtr step;
};

// The arguments written in a call: f(a, b, k=v, *rest, **more).
struct CallArguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  ExprPtr star_args;    // may be null
  ExprPtr star_kwargs;  // may be null
};

struct Call : Expr {
  Call(int line, ExprPtr callee) : Expr(ExprKind::kCall, line), callee(std::move(callee)) {}
  ExprPtr callee;
  CallArguments args;
};

struct Filter : Expr {
  Filter(int line, ExprPtr input, std::string name, FilterFunction function)
      : Expr(ExprKind::kFilter, line), input(std::move(input)), name(std::move(name)), function(function) {}
  ExprPtr input;  // null for the first filter of {% filter %} and {% set x | f %}: the body's text
  std::string name;
  FilterFunction function;
  CallArguments args;
};

struct Test : Expr {
  Test(int line, ExprPtr input, std::string name, TestFunction function)
      : Expr(ExprKind::kTest, line), input(std::move(input)), name(std::move(name)), function(function) {}
  ExprPtr input;
  std::string name;
  TestFunction function;
  CallArguments args;
};

// kNot, kNegate, kPositive.
struct Unary : Expr {
  Unary(ExprKind kind, int line, ExprPtr operand) : Expr(kind, line), operand(std::move(operand)) {}
  ExprPtr operand;
};

// kBinary (with op), kAnd, kOr.
struct Binary : Expr {
  Binary(ExprKind kind, int line, BinaryOperator op, ExprPtr left, ExprPtr right)
      : Expr(kind, line), op(op), left(std::move(left)), right(std::move(right)) {}
  BinaryOperator op;
  ExprPtr left;
  ExprPtr right;
};

struct Concat : Expr {
  explicit Concat(int line) : Expr(ExprKind::kConcat, line) {}
  std::vector<ExprPtr> parts;
};

// first op1 e1 op2 e2 ...: Python's chained comparison.
struct Compare : Expr {
  Compare(int line, ExprPtr first) : Expr(ExprKind::kCompare, line), first(std::move(first)) {}
  ExprPtr first;
  std::vector<std::pair<CompareOperator, ExprPtr>> rest;
};

struct Condition : Expr {
  explicit Condition(int line) : Expr(ExprKind::kCondition, line) {}
  ExprPtr test;
  ExprPtr then;
  ExprPtr otherwise;  // null: undefined when the test fails
};

enum class StmtKind { kText, kPrint, kIf, kFor, kSet, kSetBlock, kMacro, kFilterBlock, kScope, kBreak, kContinue };

struct Stmt {
  Stmt(StmtKind kind, int line) : kind(kind), line(line) {}
  virtual ~Stmt() = default;
  const StmtKind kind;
  const int line;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Where an assignment or a loop stores: a name, a tuple of targets to unpack into, or
// the attribute of a namespace (set ns.count = 1).
struct Target {
  enum class Kind { kName, kTuple, kNamespaceAttr };
  Kind kind = Kind::kName;
  std::string name;       // kName, kNamespaceAttr: the variable
  std::string attribute;  // kNamespaceAttr
  std::vector<Target> items;  // kTuple
};

struct Text : Stmt {
  Text(int line, std::string text) : Stmt(StmtKind::kText, line), text(std::move(text)) {}
  std::string text;
};

struct Print : Stmt {
  Print(int line, ExprPtr expr) : Stmt(StmtKind::kPrint, line), expr(std::move(expr)) {}
  ExprPtr expr;
};

struct If : Stmt {
  explicit If(int line) : Stmt(StmtKind::kIf, line) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, then each elif
  Body otherwise;
};

struct For : Stmt {
  explicit For(int line) : Stmt(StmtKind::kFor, line) {}
  Target target;
  ExprPtr iterable;
  ExprPtr filter;  // for x in xs if filter; may be null
  Body body;
  Body otherwise;  // {% else %}: runs when no item passed
};

struct Set : Stmt {
  Set(int line, Target target, ExprPtr value) : Stmt(StmtKind::kSet, line), target(std::move(target)), value(std::move(value)) {}
  Target target;
  ExprPtr value;
};

struct SetBlock : Stmt {
  explicit SetBlock(int line) : Stmt(StmtKind::kSetBlock, line) {}
  Target target;
  ExprPtr filter;  // may be null; its innermost Filter has no input (the body's text)
  Body body;
};

struct Macro : Stmt {
  explicit Macro(int line) : Stmt(StmtKind::kMacro, line) {}
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  bool uses_varargs = false;      // the body names `varargs`: extra positional arguments allowed
  bool uses_kwargs = false;       // the body names `kwargs`: unknown keywords allowed
  Body body;
};

struct FilterBlock : Stmt {
  explicit FilterBlock(int line) : Stmt(StmtKind::kFilterBlock, line) {}
  ExprPtr filter;  // its innermost Filter has no input (the body's text)
  Body body;
};

// A body run in a scope of its own, after optional assignments: {% with a = 1 %} and
// Hugging Face's {% generation %} (which renders its body as a call block would).
struct Scope : Stmt {
  explicit Scope(int line) : Stmt(StmtKind::kScope, line) {}
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};

struct LoopControl : Stmt {
  LoopControl(StmtKind kind, int line) : Stmt(kind, line) {}
};

}  // namespace crossreg::jinja::ast
