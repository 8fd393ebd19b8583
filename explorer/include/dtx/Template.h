#pragma once
// Schedule templates: the shorthand of the schedule-template spec (docs/templates.md). A
// template is concrete schedule statements in which values are replaced by choices:
//
//   $BY = {128..4096};                         a named choice (a tie), used as $BY
//   geglu.block(x:{1, 2, 4}, y:$BY);           a choice among listed values
//   geglu.tensorize(x:0, y:{0, 64, $BY/2});    values may be integer expressions of ties
//   geglu.map({(x, y), (y, x)});               a choice of whole argument lists
//   ?geglu.num_stages({2..4:+1});              an optional statement
//   where geglu.tensorize.y < $BY;             a constraint
//
// parse_template turns the text into a Template: statements as pieces of text with holes, and
// the choice variables the holes refer to. Expansion (Space.h) picks one alternative per
// variable.
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace dtx {

/// A position in a template's text (line and column from 1), for diagnostics.
struct TemplateLoc {
  int line = 0, col = 0;
};

/// A template error: `template:LINE:COL: error: MESSAGE` (the file name and a line offset are
/// applied by whoever knows where the text came from, e.g. a YAML file).
struct TemplateError {
  TemplateLoc loc;
  std::string message;
};

class TemplateParseError : public std::runtime_error {
public:
  TemplateParseError(std::vector<TemplateError> list, const std::string& rendered)
      : std::runtime_error(rendered), errors(std::move(list)) {}
  std::vector<TemplateError> errors;
};

// ---- integer and boolean expressions (tie arithmetic and `where` constraints)

struct TExpr;
using TExprPtr = std::shared_ptr<const TExpr>;

struct TExpr {
  enum class Kind {
    Int,     // value
    Tie,     // $name: variable `var`
    Field,   // F.prim.v / F.prim (func, prim, label)
    Size,    // size.v (label)
    Bytes,   // dtype.bytes: bytes per element of the dtype explored
    Present, // present(F.prim)
    Unary,   // op: "-", "not"
    Binary,  // op: + - * / % < <= > >= == != and or
  };
  Kind kind = Kind::Int;
  long long value = 0;
  int var = -1;
  std::string func, prim, label, op;
  TExprPtr a, b;
  TemplateLoc loc;
  int depth = 1; // levels of the tree below and including this node (at most 200)
};

// ---- statements and choices

struct Piece;
using Pieces = std::vector<Piece>;

/// Part of a statement's text: literal text, the alternative chosen for a variable, or the
/// decimal value of an integer expression.
struct Piece {
  enum class Kind { Text, Choice, Int };
  Kind kind = Kind::Text;
  std::string text;
  int var = -1;
  TExprPtr expr;
};

/// A choice: one alternative per value. For numeric alternatives `values` holds each value
/// (alternatives that are integer expressions of ties are evaluated when chosen).
struct Variable {
  enum class Kind { Choice, Tie, Optional };
  Kind kind = Kind::Choice;
  std::string name; // `$BY` for ties, `geglu.block#1`-like labels for anonymous ones
  std::vector<Pieces> alternatives;
  TemplateLoc loc;
};

struct TemplateStatement {
  std::string func, primitive; // as written (for `present(F.prim)`)
  Pieces pieces;               // the whole statement, `f.block(x:...)`, without `;`
  int optional_var = -1;       // the Optional variable deciding presence, or -1
  TemplateLoc loc;
};

struct Template {
  std::string text;
  std::vector<Variable> variables; // in the order of the choice vector
  std::vector<TemplateStatement> statements;
  std::vector<TExprPtr> constraints; // `where` clauses, all must hold
};

/// Parses template text. Throws TemplateParseError listing every error found.
Template parse_template(const std::string& text);

/// Renders errors as `NAME:LINE:COL: error: MESSAGE` lines, LINE offset by `line_offset`.
std::string render_template_errors(const std::vector<TemplateError>& errors,
                                   const std::string& name, int line_offset = 0);

} // namespace dtx
