// The parsed template: expression and statement trees, immutable once parsed (shared by all renders).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace tessera::chat {

enum class ExprType : uint8_t {
  Literal,    // value
  Name,       // name
  GetAttr,    // a[0].name
  GetItem,    // a[0][a[1]]
  Slice,      // a[0][a[1]:a[2]:a[3]] (absent parts are null)
  Call,       // a[0](a[1..], kwargs)
  Filter,     // a[0] | name(a[1..], kwargs); a[0] is null inside {% filter %} / {% set %} blocks
  Test,       // a[0] is [not] name(a[1..], kwargs)
  Neg, Pos, Not,
  Binary,     // a[0] op a[1]: + - * / // % ** ~
  Compare,    // a[0] ops[0] a[1] ops[1] a[2] ... (chained)
  And, Or,
  Cond,       // a[1] if a[0] else a[2] (a[2] may be null)
  List, Tuple,
  Dict,       // a[0]: a[1], a[2]: a[3], ...
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprType type;
  int line = 0, column = 0;
  Value value;
  std::string name;  // name, attribute, filter/test name or operator
  std::vector<ExprPtr> a;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

enum class StmtType : uint8_t {
  Text, Print, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, With, Break, Continue, Scope
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Param {
  std::string name;
  ExprPtr default_value;  // null when required
};

struct Stmt {
  StmtType type;
  int line = 0, column = 0;
  std::string text;                 // Text; Macro name; Set namespace attribute
  ExprPtr expr;                     // Print/For iterable/Set value/CallBlock call/filters of blocks
  ExprPtr cond;                     // For: the inline `if` filter
  std::vector<std::string> targets; // For/Set/SetBlock names (several = tuple unpacking)
  std::vector<std::pair<ExprPtr, Body>> branches;  // If: (condition, body) for if/elif
  Body body, else_body;
  std::vector<Param> params;        // Macro/CallBlock
  std::vector<std::pair<std::vector<std::string>, ExprPtr>> assigns;  // With
  // Names that start out undefined when the body (else_locals: a for loop's else) is entered:
  // see scope.h.
  std::vector<std::string> locals, else_locals;
  bool takes_varargs = false, takes_kwargs = false;  // Macro/CallBlock: its body reads varargs/kwargs
};

struct Program {
  Body body;
  std::string source;
  std::vector<std::string> locals;  // top-level names that start out undefined (scope.h)
};

}  // namespace tessera::chat
