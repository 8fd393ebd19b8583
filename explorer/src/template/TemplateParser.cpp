// The schedule-template parser: text -> Template (see Template.h and docs/templates.md).
//
// Grammar (statements end at `;` or at the end of their line):
//   template   := { tie | where | statement }
//   tie        := '$' NAME '=' choice
//   where      := 'where' expr
//   statement  := ['?'] NAME '.' NAME '(' pieces ')'
//   pieces     := { text | choice | '$' NAME | intexpr }     up to the closing ')' / ',' / '}'
//   choice     := '{' INT '..' INT [':' '+' INT] '}'            powers of two, or a step
//              |  '{' pieces { ',' pieces } '}'                 listed alternatives
//   intexpr    := an arithmetic expression starting at '$' NAME (or INT followed by an operator)
//   expr       := or-expr over: INT, '$' NAME, 'size' '.' NAME, 'present' '(' NAME '.' NAME ')',
//                 NAME '.' NAME ['.' NAME], '(' expr ')', unary '-' / 'not', * / % + -,
//                 < <= > >= == !=, 'and', 'or'
#include "dtx/Template.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>

namespace dtx {
namespace {

enum class T { Ident, Int, Tie, Punct, Newline, End };

struct Token {
  T kind;
  std::string text; // identifier, digits, tie name (without `$`), or punctuation
  TemplateLoc loc;
  long long value = 0;
};

class Lexer {
public:
  Lexer(const std::string& text, std::vector<TemplateError>& errors) : s_(text), errors_(errors) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    while (true) {
      // Spaces and `#` comments.
      while (i_ < s_.size()) {
        if (s_[i_] == '#') {
          while (i_ < s_.size() && s_[i_] != '\n')
            step();
        } else if (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r') {
          step();
        } else {
          break;
        }
      }
      TemplateLoc loc{line_, col_};
      if (i_ >= s_.size()) {
        out.push_back({T::End, "", loc});
        return out;
      }
      char c = s_[i_];
      if (c == '\n') {
        step();
        out.push_back({T::Newline, "\n", loc});
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        out.push_back({T::Ident, word(), loc});
      } else if (c == '$') {
        step();
        std::string name =
            i_ < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')
                ? word()
                : "";
        if (name.empty()) errors_.push_back({loc, "`$` must be followed by a name, as in `$B`"});
        out.push_back({T::Tie, name, loc});
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        std::string digits;
        while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
          digits += s_[i_];
          step();
        }
        Token t{T::Int, digits, loc};
        if (digits.size() > 18) {
          errors_.push_back({loc, "number `" + digits + "` is too large"});
        } else {
          t.value = std::stoll(digits);
        }
        out.push_back(t);
      } else {
        static const char* two[] = {"..", "<=", ">=", "==", "!="};
        std::string p(1, c);
        for (const char* t : two)
          if (s_.compare(i_, 2, t) == 0) p = t;
        if (p.size() == 1 && std::string("{}(),:;.?=+-*/%<>").find(c) == std::string::npos) {
          errors_.push_back({loc, std::string("unexpected character `") + c + "`"});
          step();
          continue;
        }
        for (size_t k = 0; k < p.size(); ++k)
          step();
        out.push_back({T::Punct, p, loc});
      }
    }
  }

private:
  void step() {
    if (s_[i_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++i_;
  }
  std::string word() {
    std::string w;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) {
      w += s_[i_];
      step();
    }
    return w;
  }
  const std::string& s_;
  std::vector<TemplateError>& errors_;
  size_t i_ = 0;
  int line_ = 1, col_ = 1;
};

struct Bail {}; // abandons the current item after an error; parsing resumes at the next one

/// How deep choices and expressions may nest, as in DT programs: the parser and the evaluator
/// recurse once per level, and a request must not exhaust the stack.
constexpr int kMaxNesting = 200;
/// How many values one range may list.
constexpr long long kMaxRange = 100000;

class Parser {
public:
  Parser(std::vector<Token> tokens, Template& out, std::vector<TemplateError>& errors)
      : toks_(std::move(tokens)), t_(out), errors_(errors) {}

  void run() {
    while (true) {
      skip_separators();
      if (peek().kind == T::End) break;
      try {
        item();
      } catch (const Bail&) {
        recover();
      }
    }
  }

private:
  // ---- token helpers
  const Token& peek(int k = 0) const {
    size_t i = std::min(pos_ + k, toks_.size() - 1);
    return toks_[i];
  }
  Token next() { return toks_[std::min(pos_++, toks_.size() - 1)]; }
  bool is(const char* p, int k = 0) const { return peek(k).kind == T::Punct && peek(k).text == p; }
  bool accept(const char* p) {
    if (!is(p)) return false;
    ++pos_;
    return true;
  }
  [[noreturn]] void fail(const Token& at, const std::string& message) {
    errors_.push_back({at.loc, message});
    throw Bail{};
  }
  Token expect(const char* p, const std::string& what) {
    if (!is(p))
      fail(peek(), std::string("expected `") + p + "` " + what + ", found " + show(peek()));
    return next();
  }
  static std::string show(const Token& t) {
    switch (t.kind) {
    case T::End:
      return "the end of the template";
    case T::Newline:
      return "the end of the line";
    case T::Tie:
      return "`$" + t.text + "`";
    default:
      return "`" + t.text + "`";
    }
  }
  void skip_newlines() {
    while (peek().kind == T::Newline)
      ++pos_;
  }
  void skip_separators() {
    while (peek().kind == T::Newline || is(";"))
      ++pos_;
  }
  /// After an error: skip to the next `;` or line end outside brackets.
  void recover() {
    int depth = 0;
    while (peek().kind != T::End) {
      if (depth <= 0 && (is(";") || peek().kind == T::Newline)) return;
      if (is("(") || is("{")) ++depth;
      if (is(")") || is("}")) --depth;
      ++pos_;
    }
  }
  void end_of_item(const char* what) {
    if (is(";") || peek().kind == T::Newline || peek().kind == T::End) return;
    fail(peek(),
         std::string("expected `;` or a new line after ") + what + ", found " + show(peek()));
  }

  // ---- items
  void item() {
    const Token& t = peek();
    if (t.kind == T::Tie && is("=", 1)) return tie();
    if (t.kind == T::Ident && t.text == "where") return where();
    return statement();
  }

  void tie() {
    Token name = next();
    next(); // =
    skip_newlines();
    if (ties_.count(name.text))
      fail(name, "`$" + name.text + "` is defined twice; give each tie one definition");
    if (!is("{")) {
      // `$B = 64;`: a tie with one value.
      Pieces alt = pieces({";"}, /*in_choice=*/false);
      int v = new_variable(Variable::Kind::Tie, "$" + name.text, name.loc);
      t_.variables[v].alternatives.push_back(alt);
      settle(v, name);
      ties_[name.text] = v;
    } else {
      int v = choice(Variable::Kind::Tie, "$" + name.text);
      ties_[name.text] = v;
    }
    end_of_item("a tie");
  }

  void where() {
    next(); // where
    TExprPtr e = expr();
    t_.constraints.push_back(e);
    end_of_item("a `where` constraint");
  }

  void statement() {
    TemplateStatement st;
    st.loc = peek().loc;
    if (accept("?")) st.optional_var = new_variable(Variable::Kind::Optional, "", st.loc);
    Token func = next();
    if (func.kind != T::Ident)
      fail(func, "expected a statement such as `f.block(x:{64..1024})`, a tie `$B = {...}` or "
                 "`where ...`, found " +
                     show(func));
    expect(".", "after the Func name");
    Token prim = next();
    if (prim.kind != T::Ident)
      fail(prim, "expected a scheduling primitive after `" + func.text + ".`");
    st.func = func.text;
    st.primitive = prim.text;
    if (st.optional_var >= 0)
      t_.variables[st.optional_var].name = "?" + func.text + "." + prim.text;
    current_ = func.text + "." + prim.text;
    st.pieces.push_back({Piece::Kind::Text, func.text + "." + prim.text + "(", -1, nullptr});
    expect("(", "after `" + func.text + "." + prim.text + "`");
    Pieces args = pieces({")"}, false);
    expect(")", "to close the argument list");
    st.pieces.insert(st.pieces.end(), args.begin(), args.end());
    st.pieces.push_back({Piece::Kind::Text, ")", -1, nullptr});
    end_of_item("a statement");
    t_.statements.push_back(std::move(st));
  }

  int new_variable(Variable::Kind kind, std::string name, TemplateLoc loc) {
    Variable v;
    v.kind = kind;
    v.name = std::move(name);
    v.loc = loc;
    if (kind == Variable::Kind::Optional) v.alternatives = {{}, {}}; // absent, present
    t_.variables.push_back(std::move(v));
    var_depth_.push_back(1);
    return static_cast<int>(t_.variables.size()) - 1;
  }

  /// Records how deep variable `v` renders: a choice or tie whose alternatives use ties renders
  /// them recursively (`$C = {$B}` with `$B = {$A}`), so chains of ties are bounded too.
  void settle(int v, const Token& at) {
    std::function<int(const TExpr&)> in_expr = [&](const TExpr& e) {
      int d = e.kind == TExpr::Kind::Tie ? var_depth_[static_cast<size_t>(e.var)] : 0;
      if (e.a) d = std::max(d, in_expr(*e.a));
      if (e.b) d = std::max(d, in_expr(*e.b));
      return d;
    };
    int depth = 0;
    for (const Pieces& alt : t_.variables[static_cast<size_t>(v)].alternatives)
      for (const Piece& p : alt) {
        if (p.kind == Piece::Kind::Choice)
          depth = std::max(depth, var_depth_[static_cast<size_t>(p.var)]);
        if (p.kind == Piece::Kind::Int && p.expr) depth = std::max(depth, in_expr(*p.expr));
      }
    var_depth_.resize(t_.variables.size(), 1);
    var_depth_[static_cast<size_t>(v)] = depth + 1;
    if (depth + 1 > kMaxNesting)
      fail(at, "ties and choices refer to one another more than " + std::to_string(kMaxNesting) +
                   " levels deep");
  }

  /// `{...}` at the current token: a new variable of `kind`; returns its index.
  int choice(Variable::Kind kind, const std::string& name) {
    Nest nest(*this, peek());
    Token open = expect("{", "to start a choice");
    int v = new_variable(kind,
                         name.empty() ? current_ + "@" + std::to_string(open.loc.line) + ":" +
                                            std::to_string(open.loc.col)
                                      : name,
                         open.loc);
    skip_newlines();
    // A range: {lo..hi} or {lo..hi:+step}.
    if (peek().kind == T::Int && is("..", 1)) {
      Token lo = next();
      next();
      Token hi = next();
      if (hi.kind != T::Int) fail(hi, "expected the range's upper bound after `..`");
      long long step = 0;
      if (accept(":")) {
        expect("+", "in a stepped range, as in `{1..5:+1}`");
        Token s = next();
        if (s.kind != T::Int || s.value <= 0) fail(s, "a range's step must be a positive integer");
        step = s.value;
      }
      skip_newlines();
      expect("}", "to close the range");
      if (hi.value < lo.value)
        fail(lo, "empty range {" + lo.text + ".." + hi.text + "}: the lower bound is larger");
      std::vector<long long> values;
      // Counted before it is listed: {1..1000000000000:+1} is refused at once, not after
      // listing it, and no bound near 2^63 can overflow.
      if (step > 0) {
        if ((hi.value - lo.value) / step >= kMaxRange)
          fail(lo, "a range of more than " + std::to_string(kMaxRange) + " values");
        for (long long x = lo.value; x <= hi.value; x += step) {
          values.push_back(x);
          if (hi.value - x < step) break;
        }
      } else {
        if (lo.value <= 0 || (lo.value & (lo.value - 1)) || (hi.value & (hi.value - 1)))
          fail(lo, "{" + lo.text + ".." + hi.text +
                       "} lists powers of two, so both bounds must be powers of two; for every "
                       "value use a step, as in {" +
                       lo.text + ".." + hi.text + ":+1}");
        for (long long x = lo.value; x <= hi.value; x *= 2) {
          values.push_back(x);
          if (x > hi.value / 2) break;
        }
      }
      for (long long x : values)
        t_.variables[v].alternatives.push_back(
            {{Piece::Kind::Text, std::to_string(x), -1, nullptr}});
      return v;
    }
    while (true) {
      skip_newlines();
      Pieces alt = pieces({",", "}"}, true);
      if (alt.empty()) fail(peek(), "empty alternative in a choice");
      strip_parentheses(alt);
      t_.variables[v].alternatives.push_back(std::move(alt));
      skip_newlines();
      if (accept(",")) continue;
      expect("}", "to close the choice");
      break;
    }
    settle(v, open);
    return v;
  }

  /// Text, choices and integer expressions up to one of `stops` at bracket depth 0.
  Pieces pieces(std::vector<std::string> stops, bool in_choice) {
    Pieces out;
    int depth = 0;
    auto text = [&](const std::string& s) {
      if (!out.empty() && out.back().kind == Piece::Kind::Text)
        out.back().text += s;
      else
        out.push_back({Piece::Kind::Text, s, -1, nullptr});
    };
    while (true) {
      const Token& t = peek();
      if (t.kind == T::End) fail(t, "unexpected end of the template (an unclosed bracket?)");
      if (t.kind == T::Newline) {
        ++pos_;
        continue;
      }
      if (depth == 0 && t.kind == T::Punct)
        for (const std::string& s : stops)
          if (t.text == s) return out;
      if (t.kind == T::Punct && t.text == ";")
        fail(t, "unexpected `;` inside a statement (an unclosed bracket?)");
      if (t.kind == T::Punct && t.text == "{") {
        int v = choice(Variable::Kind::Choice, "");
        out.push_back({Piece::Kind::Choice, "", v, nullptr});
        continue;
      }
      if (t.kind == T::Tie || (t.kind == T::Int && is_operator(peek(1)))) {
        TExprPtr e = additive();
        if (e->kind == TExpr::Kind::Tie)
          out.push_back({Piece::Kind::Choice, "", e->var, nullptr});
        else
          out.push_back({Piece::Kind::Int, "", -1, e});
        continue;
      }
      if (t.kind == T::Punct && t.text == "(") ++depth;
      if (t.kind == T::Punct && t.text == ")") {
        if (depth == 0) fail(t, "unbalanced `)`");
        --depth;
      }
      if (t.kind == T::Punct && t.text == "}" && depth == 0 && !in_choice)
        fail(t, "unbalanced `}`");
      text(t.text);
      ++pos_;
    }
  }

  /// `(x, y)` as an alternative is a whole argument list: its parentheses are not part of the
  /// text, as in `map({(x, y), (y, x)})`.
  static void strip_parentheses(Pieces& alt) {
    if (alt.front().kind != Piece::Kind::Text || alt.back().kind != Piece::Kind::Text) return;
    if (alt.front().text.empty() || alt.front().text[0] != '(') return;
    if (alt.back().text.empty() || alt.back().text.back() != ')') return;
    int depth = 0;
    size_t remaining = 0;
    for (const Piece& p : alt)
      if (p.kind == Piece::Kind::Text) remaining += p.text.size();
    for (const Piece& p : alt) {
      if (p.kind != Piece::Kind::Text) continue;
      for (char c : p.text) {
        --remaining;
        if (c == '(') ++depth;
        if (c == ')' && --depth == 0 && remaining > 0) return; // closes before the end
      }
    }
    alt.front().text.erase(0, 1);
    alt.back().text.pop_back();
    if (alt.size() > 1 && alt.front().text.empty()) alt.erase(alt.begin());
    if (alt.size() > 1 && alt.back().text.empty()) alt.pop_back();
  }

  static bool is_operator(const Token& t) {
    return t.kind == T::Punct &&
           (t.text == "*" || t.text == "/" || t.text == "%" || t.text == "+" || t.text == "-");
  }

  // ---- expressions
  TExprPtr make(TExpr e) {
    e.depth = 1 + std::max(e.a ? e.a->depth : 0, e.b ? e.b->depth : 0);
    return std::make_shared<const TExpr>(std::move(e));
  }
  TExprPtr binary(const Token& op, TExprPtr a, TExprPtr b) {
    // A long chain (`1 + 1 + ...`) is as deep as it is long: evaluating it recurses.
    if (std::max(a->depth, b->depth) >= kMaxNesting)
      fail(op, "an expression nested more than " + std::to_string(kMaxNesting) +
                   " levels deep (a chain of operators counts one level each); split it");
    TExpr e;
    e.kind = TExpr::Kind::Binary;
    e.op = op.text;
    e.a = std::move(a);
    e.b = std::move(b);
    e.loc = op.loc;
    return make(std::move(e));
  }
  TExprPtr expr() {
    TExprPtr a = conj();
    while (peek().kind == T::Ident && peek().text == "or") {
      Token op = next();
      a = binary(op, a, conj());
    }
    return a;
  }
  TExprPtr conj() {
    TExprPtr a = negation();
    while (peek().kind == T::Ident && peek().text == "and") {
      Token op = next();
      a = binary(op, a, negation());
    }
    return a;
  }
  TExprPtr negation() {
    Nest nest(*this, peek());
    if (peek().kind == T::Ident && peek().text == "not") {
      Token op = next();
      TExpr e;
      e.kind = TExpr::Kind::Unary;
      e.op = "not";
      e.a = negation();
      e.loc = op.loc;
      return make(std::move(e));
    }
    return comparison();
  }
  TExprPtr comparison() {
    TExprPtr a = additive();
    for (const char* op : {"<", "<=", ">", ">=", "==", "!="})
      if (is(op)) {
        Token t = next();
        return binary(t, a, additive());
      }
    return a;
  }
  TExprPtr additive() {
    TExprPtr a = multiplicative();
    while (is("+") || is("-")) {
      Token op = next();
      a = binary(op, a, multiplicative());
    }
    return a;
  }
  TExprPtr multiplicative() {
    TExprPtr a = unary();
    while (is("*") || is("/") || is("%")) {
      Token op = next();
      a = binary(op, a, unary());
    }
    return a;
  }
  TExprPtr unary() {
    Nest nest(*this, peek());
    if (is("-")) {
      Token op = next();
      TExpr e;
      e.kind = TExpr::Kind::Unary;
      e.op = "-";
      e.a = unary();
      e.loc = op.loc;
      return make(std::move(e));
    }
    return primary();
  }
  TExprPtr primary() {
    Token t = next();
    TExpr e;
    e.loc = t.loc;
    if (t.kind == T::Int) {
      e.kind = TExpr::Kind::Int;
      e.value = t.value;
      return make(std::move(e));
    }
    if (t.kind == T::Tie) {
      e.kind = TExpr::Kind::Tie;
      auto it = ties_.find(t.text);
      if (it == ties_.end()) {
        fail(t, "`$" + t.text + "` is used before it is defined; define it first, as in `$" +
                    t.text + " = {64..1024};`");
      }
      e.var = it->second;
      e.label = t.text;
      return make(std::move(e));
    }
    if (t.kind == T::Punct && t.text == "(") {
      Nest nest(*this, t);
      TExprPtr inner = expr();
      expect(")", "to close the parenthesis");
      return inner;
    }
    if (t.kind == T::Ident && t.text == "present" && is("(")) {
      next();
      Token f = next();
      expect(".", "in `present(F.primitive)`");
      Token p = next();
      if (f.kind != T::Ident || p.kind != T::Ident)
        fail(f, "`present` takes a statement, as in `present(tmp.fuse_at)`");
      expect(")", "to close `present(`");
      e.kind = TExpr::Kind::Present;
      e.func = f.text;
      e.prim = p.text;
      return make(std::move(e));
    }
    if (t.kind == T::Ident && t.text == "dtype" && is(".") && peek(1).kind == T::Ident &&
        peek(1).text == "bytes") {
      next();
      next();
      e.kind = TExpr::Kind::Bytes;
      return make(std::move(e));
    }
    if (t.kind == T::Ident && t.text == "size" && is(".")) {
      next();
      Token l = next();
      if (l.kind != T::Ident) fail(l, "expected a label after `size.`");
      e.kind = TExpr::Kind::Size;
      e.label = l.text;
      return make(std::move(e));
    }
    if (t.kind == T::Ident && is(".")) {
      next();
      Token p = next();
      if (p.kind != T::Ident) fail(p, "expected a primitive after `" + t.text + ".`");
      e.kind = TExpr::Kind::Field;
      e.func = t.text;
      e.prim = p.text;
      if (is(".") && peek(1).kind == T::Ident) {
        next();
        e.label = next().text;
      }
      return make(std::move(e));
    }
    fail(t, "expected a value (a number, `$TIE`, `F.primitive.label`, `size.label`, "
            "`dtype.bytes` or `present(F.primitive)`), found " +
                show(t));
  }

  /// One level of recursion of the parser, refused past kMaxNesting.
  struct Nest {
    Parser& p;
    Nest(Parser& parser, const Token& at) : p(parser) {
      if (p.nesting_ >= kMaxNesting)
        p.fail(at, "the template nests choices, parentheses or operators more than " +
                       std::to_string(kMaxNesting) + " levels deep");
      ++p.nesting_;
    }
    ~Nest() { --p.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
  };

  int nesting_ = 0;
  std::vector<int> var_depth_; // by variable: how deep it renders (settle)
  std::vector<Token> toks_;
  size_t pos_ = 0;
  Template& t_;
  std::vector<TemplateError>& errors_;
  std::map<std::string, int> ties_;
  std::string current_ = "template";
};

} // namespace

Template parse_template(const std::string& text) {
  std::vector<TemplateError> errors;
  Template t;
  t.text = text;
  std::vector<Token> tokens = Lexer(text, errors).run();
  Parser(std::move(tokens), t, errors).run();
  if (t.statements.empty() && errors.empty())
    errors.push_back({{1, 1}, "the template has no schedule statements"});
  if (!errors.empty()) throw TemplateParseError(errors, render_template_errors(errors, "template"));
  return t;
}

std::string render_template_errors(const std::vector<TemplateError>& errors,
                                   const std::string& name, int line_offset) {
  std::string out;
  for (const TemplateError& e : errors)
    out += name + ":" + std::to_string(e.loc.line + line_offset) + ":" + std::to_string(e.loc.col) +
           ": error: " + e.message + "\n";
  return out;
}

} // namespace dtx
