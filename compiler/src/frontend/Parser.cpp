#include "frontend/Parser.h"

#include "ir/IR.h"

#include <charconv>
#include <set>

namespace dtc {
namespace {

constexpr int kMaxExprDepth = 200;
using ir::kMaxExprHeight; // shared with fusion, which checks it again after inlining

class Parser {
public:
  Parser(std::vector<Token> tokens, DiagnosticEngine& diags, bool schedule_only)
      : toks_(std::move(tokens)), diags_(diags), schedule_only_(schedule_only) {}

  // program := { declaration | definition | schedule_stmt }
  ast::Program program() {
    ast::Program prog;
    while (!at(Tok::End)) {
      size_t start = pos_;
      statement(prog);
      if (pos_ == start) advance(); // always make progress
    }
    return prog;
  }

private:
  const Token& peek(size_t ahead = 0) const {
    size_t i = std::min(pos_ + ahead, toks_.size() - 1);
    return toks_[i];
  }
  bool at(Tok kind) const { return peek().kind == kind; }
  const Token& advance() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool accept(Tok kind) {
    if (!at(kind)) return false;
    advance();
    return true;
  }

  struct SyntaxError {};

  [[noreturn]] void fail(const std::string& message) {
    report(peek().loc, message);
    throw SyntaxError{};
  }
  // A line with a lexical error already has its diagnostic; what the parser then trips over
  // there is a consequence, not news.
  void report(Loc loc, const std::string& message) {
    if (!lexical_error_lines_.count(loc.line)) diags_.error(loc, message);
  }

public:
  std::set<int> lexical_error_lines_;

private:
  const Token& expect(Tok kind, const char* context) {
    if (!at(kind)) {
      std::string message =
          std::string("expected ") + spelling(kind) + " " + context + ", found " + describe(peek());
      // A missing `;` belongs right after what precedes it, not at the next statement.
      if (kind == Tok::Semicolon && pos_ > 0) {
        const Token& prev = toks_[pos_ - 1];
        Loc after = prev.loc;
        after.col += static_cast<int>(prev.text.size());
        report(after, message);
        throw SyntaxError{};
      }
      fail(message);
    }
    return advance();
  }

  // Skip to just past the next `;` (or, for schedule text, to the next line).
  void recover(int line) {
    while (!at(Tok::End)) {
      if (at(Tok::Semicolon)) {
        advance();
        return;
      }
      if (schedule_only_ && peek().loc.line != line) return;
      advance();
    }
  }

  static bool decl_kind(const std::string& word, ast::DeclKind& kind) {
    static const std::pair<const char*, ast::DeclKind> table[] = {{"Func", ast::DeclKind::Func},
                                                                  {"In", ast::DeclKind::In},
                                                                  {"SIn", ast::DeclKind::SIn},
                                                                  {"Var", ast::DeclKind::Var},
                                                                  {"RVar", ast::DeclKind::RVar}};
    for (const auto& [w, k] : table)
      if (word == w) {
        kind = k;
        return true;
      }
    return false;
  }

  // statement := declaration | definition | schedule_stmt
  void statement(ast::Program& prog) {
    int line = peek().loc.line;
    try {
      if (!at(Tok::Ident))
        fail("expected a declaration, a definition or a schedule statement, "
             "found " +
             describe(peek()));
      ast::DeclKind kind;
      if (decl_kind(peek().text, kind) && peek(1).kind == Tok::Ident) {
        if (schedule_only_) fail("a schedule may not declare symbols");
        prog.decls.push_back(declaration(kind));
      } else if (peek(1).kind == Tok::LBracket) {
        if (schedule_only_) fail("a schedule may not define algorithms");
        prog.definitions.push_back(definition());
      } else if (peek(1).kind == Tok::Dot) {
        prog.schedule.push_back(schedule_stmt());
      } else {
        fail("expected `[` (a definition) or `.` (a schedule statement) after `" + peek().text +
             "`, found " + describe(peek(1)));
      }
    } catch (SyntaxError&) {
      recover(line);
    }
  }

  // declaration := ('Func'|'In'|'SIn'|'Var'|'RVar') decl_name { ',' decl_name } ';'
  // decl_name   := ident [ ':' ( 'float' | 'int' [ '(' ident ')' ] ) ] [ '=' [ '-' ] number ]
  ast::Decl declaration(ast::DeclKind kind) {
    ast::Decl decl{kind, {}, {}, advance().loc};
    do {
      const Token& name = expect(Tok::Ident, "(a symbol name) in the declaration");
      decl.names.push_back({name.text, name.loc});
      decl.types.push_back(elem_type());
      example_value(decl.types.back());
    } while (accept(Tok::Comma));
    expect(Tok::Semicolon, "at the end of the declaration");
    return decl;
  }

  // `= [-] number` after a scalar input's name (and type): the value make_inputs passes.
  void example_value(ast::ElemType& t) {
    if (!accept(Tok::Assign)) return;
    t.example.loc = peek().loc;
    bool negative = accept(Tok::Minus);
    if (!at(Tok::Int) && !at(Tok::Float))
      fail("expected a number (the value inputs are made with) after `=`, found " +
           describe(peek()));
    const Token& n = advance();
    t.example.text = (negative ? "-" : "") + n.text;
    t.example_is_int = n.kind == Tok::Int;
  }

  ast::ElemType elem_type() {
    ast::ElemType t;
    if (!accept(Tok::Colon)) return t;
    t.written = true;
    t.loc = peek().loc;
    const Token& word = expect(Tok::Ident, "(the element type: `float` or `int`) after `:`");
    if (word.text != "float" && word.text != "int") {
      report(word.loc,
             "unknown element type `" + word.text + "`; write `float`, `int` or `int(LABEL)`");
      throw SyntaxError{};
    }
    t.is_int = word.text == "int";
    if (t.is_int && accept(Tok::LParen)) {
      const Token& label =
          expect(Tok::Ident, "(the label whose positions the values are) in `int(...)`");
      t.range = {label.text, label.loc};
      expect(Tok::RParen, "to close `int(...)`");
    }
    return t;
  }

  // definition := ident '[' ident { ',' ident } ']' '=' expr ';'
  ast::Definition definition() {
    ast::Definition def;
    const Token& name = advance();
    def.func = {name.text, name.loc};
    def.loc = name.loc;
    expect(Tok::LBracket, "after the Func name");
    if (!at(Tok::RBracket)) {
      do {
        const Token& label = expect(Tok::Ident, "(a dimension label) in the definition's shape");
        def.labels.push_back({label.text, label.loc});
      } while (accept(Tok::Comma));
    }
    expect(Tok::RBracket, "to close the definition's shape");
    expect(Tok::Assign, "after the definition's shape");
    def.value = expr(0);
    expect(Tok::Semicolon, "at the end of the definition");
    return def;
  }

  // schedule_stmt := ident '.' ident '(' [ sched_arg { ',' sched_arg } ] ')' ( ';' | newline )
  ast::ScheduleStmt schedule_stmt() {
    ast::ScheduleStmt stmt;
    const Token& func = advance();
    stmt.func = {func.text, func.loc};
    stmt.loc = func.loc;
    expect(Tok::Dot, "after the Func name");
    const Token& prim = expect(Tok::Ident, "(a scheduling primitive) after `.`");
    stmt.primitive = {prim.text, prim.loc};
    expect(Tok::LParen, "after the scheduling primitive");
    if (!at(Tok::RParen)) {
      do
        stmt.args.push_back(schedule_arg());
      while (accept(Tok::Comma));
    }
    int line = peek().loc.line;
    expect(Tok::RParen, "to close the schedule statement's arguments");
    if (!accept(Tok::Semicolon)) {
      bool newline_ends = schedule_only_ && (at(Tok::End) || peek().loc.line != line);
      if (!newline_ends) expect(Tok::Semicolon, "at the end of the schedule statement");
    }
    return stmt;
  }

  long long integer(const char* context) {
    if (at(Tok::Minus)) fail(std::string("expected a non-negative integer ") + context);
    const Token& t = expect(Tok::Int, context);
    long long value = 0;
    auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), value);
    if (ec != std::errc() || value > (1LL << 40)) {
      diags_.error(t.loc, "integer `" + t.text + "` is too large");
      return 1;
    }
    (void)p;
    return value;
  }

  // sched_arg := integer | ident [ ':' ( integer | ident '/' integer ) ]
  ast::ScheduleArg schedule_arg() {
    ast::ScheduleArg arg;
    arg.loc = peek().loc;
    if (at(Tok::Int)) {
      arg.value = integer("as a schedule argument");
      return arg;
    }
    arg.name = expect(Tok::Ident, "(a dimension label or an integer) as a schedule argument").text;
    if (!accept(Tok::Colon)) return arg;
    arg.has_value = true;
    if (at(Tok::Ident)) {
      arg.split_name = advance().text;
      expect(Tok::Slash, "in a split `VAR:ID/FACTOR`");
      arg.value = integer("(the split factor) after `/`");
    } else {
      arg.value = integer("(a size) after `:`");
    }
    return arg;
  }

  // Binary operators by precedence level, lowest first (thesis table 3.2):
  //   comparison := additive { ('<'|'<='|'>'|'>='|'=='|'!=') additive }
  //   additive   := multiplicative { ('+'|'-') multiplicative }
  //   multiplicative := unary { ('*'|'/'|'//'|'%') unary }
  static int precedence(Tok kind) {
    switch (kind) {
    case Tok::Less:
    case Tok::LessEq:
    case Tok::Greater:
    case Tok::GreaterEq:
    case Tok::EqEq:
    case Tok::NotEq:
      return 1;
    case Tok::Plus:
    case Tok::Minus:
      return 2;
    case Tok::Star:
    case Tok::Slash:
    case Tok::SlashSlash:
    case Tok::Percent:
      return 3;
    default:
      return 0;
    }
  }

  // expr := unary { binop unary }   (precedence climbing, all operators left-associative)
  ast::ExprPtr expr(int min_prec, int depth = 0) {
    if (depth > kMaxExprDepth) fail("expression nests too deeply; split it into several Funcs");
    ast::ExprPtr lhs = unary(depth + 1);
    while (true) {
      int prec = precedence(peek().kind);
      if (prec == 0 || prec <= min_prec) break;
      const Token& op = advance();
      ast::ExprPtr rhs = expr(prec, depth + 1);
      auto node = std::make_unique<ast::Expr>(ast::ExprKind::Binary, op.loc, op.text);
      node->height = 1 + std::max(lhs->height, rhs->height);
      node->args.push_back(std::move(lhs));
      node->args.push_back(std::move(rhs));
      lhs = std::move(node);
      if (lhs->height > kMaxExprHeight) {
        report(op.loc, "expression has more than " + std::to_string(kMaxExprHeight) +
                           " nested operations; split it into several Funcs (a sum of many "
                           "terms into partial sums, say)");
        throw SyntaxError{};
      }
    }
    return lhs;
  }

  // unary := ('+'|'-') unary | primary
  ast::ExprPtr unary(int depth) {
    if (depth > kMaxExprDepth) fail("expression nests too deeply; split it into several Funcs");
    if (at(Tok::Plus) || at(Tok::Minus)) {
      const Token& op = advance();
      auto node = std::make_unique<ast::Expr>(ast::ExprKind::Unary, op.loc, op.text);
      node->args.push_back(unary(depth + 1));
      node->height = 1 + node->args.back()->height;
      return node;
    }
    return primary(depth + 1);
  }

  // primary := number | ident '[' expr { ',' expr } ']' | ident '(' [ expr { ',' expr } ] ')'
  //          | ident | '(' expr ')'
  ast::ExprPtr primary(int depth) {
    const Token& t = peek();
    if (t.kind == Tok::Int || t.kind == Tok::Float) {
      advance();
      auto node = std::make_unique<ast::Expr>(ast::ExprKind::Number, t.loc, t.text);
      node->is_integer = t.kind == Tok::Int;
      return node;
    }
    if (t.kind == Tok::LParen) {
      advance();
      ast::ExprPtr inner = expr(0, depth + 1);
      expect(Tok::RParen, "to close the parenthesis");
      return inner;
    }
    if (t.kind != Tok::Ident) fail("expected an expression, found " + describe(t));
    advance();
    if (accept(Tok::LBracket)) {
      auto node = std::make_unique<ast::Expr>(ast::ExprKind::Index, t.loc, t.text);
      // Each position is a label, or an expression the checker limits (a label plus or minus
      // a whole number, an index input's value).
      if (!at(Tok::RBracket)) {
        do {
          node->args.push_back(expr(0, depth + 1));
          node->height = std::max(node->height, 1 + node->args.back()->height);
        } while (accept(Tok::Comma));
      }
      expect(Tok::RBracket, "to close the index");
      return node;
    }
    if (accept(Tok::LParen)) {
      auto node = std::make_unique<ast::Expr>(ast::ExprKind::Call, t.loc, t.text);
      if (!at(Tok::RParen)) {
        do {
          node->args.push_back(expr(0, depth + 1));
          node->height = std::max(node->height, 1 + node->args.back()->height);
        } while (accept(Tok::Comma));
      }
      expect(Tok::RParen, "to close the call to `" + t.text + "`");
      return node;
    }
    return std::make_unique<ast::Expr>(ast::ExprKind::Name, t.loc, t.text);
  }

  const Token& expect(Tok kind, const std::string& context) {
    return expect(kind, context.c_str());
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  DiagnosticEngine& diags_;
  bool schedule_only_;
};

} // namespace

static Parser make_parser(std::string_view source, DiagnosticEngine& diags, bool schedule_only,
                          int source_id) {
  size_t before = diags.diagnostics().size();
  std::vector<Token> tokens = lex(source, diags, source_id);
  Parser parser(std::move(tokens), diags, schedule_only);
  for (size_t i = before; i < diags.diagnostics().size(); ++i)
    parser.lexical_error_lines_.insert(diags.diagnostics()[i].loc.line);
  return parser;
}

ast::Program parse_program(std::string_view source, DiagnosticEngine& diags) {
  return make_parser(source, diags, false, 0).program();
}

std::vector<ast::ScheduleStmt> parse_schedule(std::string_view source, DiagnosticEngine& diags,
                                              int source_id) {
  return make_parser(source, diags, true, source_id).program().schedule;
}

} // namespace dtc
