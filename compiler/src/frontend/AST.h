#pragma once
// The syntax tree of a DT file, exactly as written: no names resolved, no shapes. Every node
// carries the location of its first token.
#include "schedule/ScheduleSyntax.h"
#include "support/Diagnostics.h"

#include <memory>
#include <string>
#include <vector>

namespace dtc::ast {

enum class DeclKind { Func, In, SIn, Var, RVar };
const char* decl_keyword(DeclKind kind);

/// The element type written after an input's name: none (`In A;`, numbers), `: float`, `: int`
/// (whole numbers) or `: int(y)` (whole numbers that are positions along label `y`).
struct ElemType {
  bool written = false;
  bool is_int = false;
  Name range; // `y` of `int(y)`; empty text when none
  Loc loc;
  /// `SIn eps = 1e-6;`: the literal (a leading `-` included) that make_inputs passes; empty text
  /// when none is written.
  Name example;
  bool example_is_int = false;
};

/// `Func a, b;` — one declaration statement naming one or more symbols.
struct Decl {
  DeclKind kind;
  std::vector<Name> names;
  std::vector<ElemType> types; // one per name
  Loc loc;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  Number, // 3, 0.5, 1e-3
  Name,   // alpha, x (a scalar input or a dimension label)
  Index,  // A[x, y]
  Call,   // exp(e), rsum(e, k), reshape(e, x, 1)
  Unary,  // -e, +e
  Binary, // e * e, e < e
};

struct Expr {
  ExprKind kind;
  Loc loc;
  std::string text;          // Number: literal text; Name/Index/Call: the name; Unary/Binary: op
  bool is_integer = false;   // Number: written without '.' or exponent
  std::vector<ExprPtr> args; // Index: labels (Name exprs); Call: arguments; Unary/Binary: operands
  int height = 1;            // nodes on the longest path down from here, this one included
  Expr(ExprKind k, Loc l, std::string t = {}) : kind(k), loc(l), text(std::move(t)) {}
};

/// `f[x, y] = expr;`
struct Definition {
  Name func;
  std::vector<Name> labels;
  ExprPtr value;
  Loc loc;
};

struct Program {
  std::vector<Decl> decls;
  std::vector<Definition> definitions;
  std::vector<ScheduleStmt> schedule;
};

/// Prints the tree in an indented, stable form (for `dtc --emit=ast`).
std::string print(const Program& program);

} // namespace dtc::ast
