#include "frontend/Parser.h"

#include <gtest/gtest.h>

using namespace dtc;

namespace {

// The tree of an expression as an S-expression: `(+ a (* b c))`, so a test states the intended
// grouping in one line.
std::string sexpr(const ast::Expr& e) {
  switch (e.kind) {
  case ast::ExprKind::Number:
  case ast::ExprKind::Name:
    return e.text;
  case ast::ExprKind::Index:
  case ast::ExprKind::Call: {
    std::string out = e.text + (e.kind == ast::ExprKind::Index ? "[" : "(");
    for (size_t i = 0; i < e.args.size(); ++i)
      out += (i ? " " : "") + sexpr(*e.args[i]);
    return out + (e.kind == ast::ExprKind::Index ? "]" : ")");
  }
  case ast::ExprKind::Unary:
  case ast::ExprKind::Binary: {
    std::string out = "(" + e.text;
    for (const ast::ExprPtr& a : e.args)
      out += " " + sexpr(*a);
    return out + ")";
  }
  }
  return "?";
}

// Parses `f[x] = <text>;` and returns its right-hand side as an S-expression.
std::string parse_expr(const std::string& text) {
  std::string source = "f[x] = " + text + ";";
  DiagnosticEngine diags("t.dt", source);
  ast::Program prog = parse_program(source, diags);
  EXPECT_FALSE(diags.has_errors()) << diags.render();
  if (prog.definitions.size() != 1) return "<no definition>";
  return sexpr(*prog.definitions[0].value);
}

} // namespace

// Thesis table 3.2: unary binds tightest, then * / %, then + -, then the comparisons.
TEST(Parser, PrecedenceOfTable32) {
  EXPECT_EQ(parse_expr("a + b * c"), "(+ a (* b c))");
  EXPECT_EQ(parse_expr("a * b + c"), "(+ (* a b) c)");
  EXPECT_EQ(parse_expr("a - b % c"), "(- a (% b c))");
  EXPECT_EQ(parse_expr("-a * b"), "(* (- a) b)");
  EXPECT_EQ(parse_expr("a * -b"), "(* a (- b))");
  EXPECT_EQ(parse_expr("- -a"), "(- (- a))");
  EXPECT_EQ(parse_expr("a + b < c * d"), "(< (+ a b) (* c d))");
  EXPECT_EQ(parse_expr("a <= b - c"), "(<= a (- b c))");
  EXPECT_EQ(parse_expr("a == b + c"), "(== a (+ b c))");
  EXPECT_EQ(parse_expr("(a + b) * c"), "(* (+ a b) c)");
}

TEST(Parser, BinaryOperatorsAreLeftAssociative) {
  EXPECT_EQ(parse_expr("a - b - c"), "(- (- a b) c)");
  EXPECT_EQ(parse_expr("a / b / c"), "(/ (/ a b) c)");
  EXPECT_EQ(parse_expr("a / b * c % d"), "(% (* (/ a b) c) d)");
  EXPECT_EQ(parse_expr("a - b + c"), "(+ (- a b) c)");
  EXPECT_EQ(parse_expr("a < b == c != d"), "(!= (== (< a b) c) d)");
}

TEST(Parser, PrimariesIndexCallsAndNumbers) {
  EXPECT_EQ(parse_expr("A[x, y] * exp(B[y]) + 2.5"), "(+ (* A[x y] exp(B[y])) 2.5)");
  EXPECT_EQ(parse_expr("rsum(A[x, k], k) / len(k)"), "(/ rsum(A[x k] k) len(k))");
  EXPECT_EQ(parse_expr("reshape(s[x], x, 1)"), "reshape(s[x] x 1)");
  EXPECT_EQ(parse_expr("program_id(0)"), "program_id(0)");

  std::string source = "f[x] = 2 + 2.0 + 1e-3;";
  DiagnosticEngine diags("t.dt", source);
  ast::Program prog = parse_program(source, diags);
  ASSERT_FALSE(diags.has_errors()) << diags.render();
  const ast::Expr& sum = *prog.definitions[0].value;
  EXPECT_TRUE(sum.args[0]->args[0]->is_integer);  // 2
  EXPECT_FALSE(sum.args[0]->args[1]->is_integer); // 2.0
  EXPECT_FALSE(sum.args[1]->is_integer);          // 1e-3
}

TEST(Parser, MultiNameDeclarations) {
  std::string source = "Func f, g, h;\nIn A, B;\nSIn alpha;\nVar x, y;\nRVar k;";
  DiagnosticEngine diags("t.dt", source);
  ast::Program prog = parse_program(source, diags);
  ASSERT_FALSE(diags.has_errors()) << diags.render();
  ASSERT_EQ(prog.decls.size(), 5u);
  const ast::DeclKind kinds[] = {ast::DeclKind::Func, ast::DeclKind::In, ast::DeclKind::SIn,
                                 ast::DeclKind::Var, ast::DeclKind::RVar};
  const size_t counts[] = {3, 2, 1, 2, 1};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(prog.decls[i].kind, kinds[i]);
    EXPECT_EQ(prog.decls[i].names.size(), counts[i]);
    EXPECT_EQ(prog.decls[i].loc.line, static_cast<int>(i + 1));
  }
  EXPECT_EQ(prog.decls[0].names[2].text, "h");
  EXPECT_EQ(prog.decls[0].names[2].loc.col, 12);
}

TEST(Parser, DefinitionShapeAndLocation) {
  std::string source = "\n  out[x, y] = A[x, y];";
  DiagnosticEngine diags("t.dt", source);
  ast::Program prog = parse_program(source, diags);
  ASSERT_FALSE(diags.has_errors()) << diags.render();
  ASSERT_EQ(prog.definitions.size(), 1u);
  const ast::Definition& def = prog.definitions[0];
  EXPECT_EQ(def.func.text, "out");
  ASSERT_EQ(def.labels.size(), 2u);
  EXPECT_EQ(def.labels[1].text, "y");
  EXPECT_EQ(def.loc.line, 2);
  EXPECT_EQ(def.loc.col, 3);
}

TEST(Parser, ScheduleArguments) {
  std::string source = "f.block(x:64, y:yi/4, z, 8);";
  DiagnosticEngine diags("t.dt", source);
  ast::Program prog = parse_program(source, diags);
  ASSERT_FALSE(diags.has_errors()) << diags.render();
  ASSERT_EQ(prog.schedule.size(), 1u);
  const ast::ScheduleStmt& stmt = prog.schedule[0];
  EXPECT_EQ(stmt.func.text, "f");
  EXPECT_EQ(stmt.primitive.text, "block");
  ASSERT_EQ(stmt.args.size(), 4u);

  // `x:64`: a label with a size.
  EXPECT_EQ(stmt.args[0].name, "x");
  EXPECT_TRUE(stmt.args[0].has_value);
  EXPECT_EQ(stmt.args[0].value, 64);
  EXPECT_EQ(stmt.args[0].split_name, "");
  // `y:yi/4`: a split into an inner level named yi of 4 blocks.
  EXPECT_EQ(stmt.args[1].name, "y");
  EXPECT_TRUE(stmt.args[1].has_value);
  EXPECT_EQ(stmt.args[1].split_name, "yi");
  EXPECT_EQ(stmt.args[1].value, 4);
  // `z`: a bare label.
  EXPECT_EQ(stmt.args[2].name, "z");
  EXPECT_FALSE(stmt.args[2].has_value);
  // `8`: a bare integer has no name.
  EXPECT_EQ(stmt.args[3].name, "");
  EXPECT_FALSE(stmt.args[3].has_value);
  EXPECT_EQ(stmt.args[3].value, 8);
  EXPECT_EQ(stmt.args[3].loc.col, 26);
}

TEST(Parser, ScheduleWithoutArguments) {
  std::string source = "f.compile();";
  DiagnosticEngine diags("t.dt", source);
  ast::Program prog = parse_program(source, diags);
  ASSERT_FALSE(diags.has_errors()) << diags.render();
  ASSERT_EQ(prog.schedule.size(), 1u);
  EXPECT_TRUE(prog.schedule[0].args.empty());
}

// After a syntax error the parser skips to the next `;`, so a later malformed statement is
// reported too and well-formed statements after it still parse.
TEST(Parser, RecoveryReportsErrorsInTwoStatements) {
  std::string source = "Func f, g;\nf[x] = A[x] * ;\ng[x] = (A[x] + 1;\nIn B;\nf.compile();";
  DiagnosticEngine diags("t.dt", source);
  ast::Program prog = parse_program(source, diags);
  EXPECT_EQ(diags.error_count(), 2);
  ASSERT_EQ(diags.diagnostics().size(), 2u);
  EXPECT_EQ(diags.diagnostics()[0].loc.line, 2);
  EXPECT_EQ(diags.diagnostics()[1].loc.line, 3);
  EXPECT_NE(diags.render().find("t.dt:2:15: error: expected an expression, found `;`"),
            std::string::npos)
      << diags.render();
  ASSERT_EQ(prog.decls.size(), 2u);
  EXPECT_EQ(prog.decls[1].names[0].text, "B");
  EXPECT_EQ(prog.schedule.size(), 1u);
}

TEST(Parser, MissingSemicolonInAFileIsAnError) {
  std::string source = "f.block(x:4)\nf.compile();";
  DiagnosticEngine diags("t.dt", source);
  parse_program(source, diags);
  EXPECT_EQ(diags.error_count(), 1);
  EXPECT_NE(diags.render().find("expected `;` at the end of the schedule statement"),
            std::string::npos)
      << diags.render();
}

// Schedule text (the --schedule option, the UI) separates statements by `;` or newlines.
TEST(Parser, ScheduleOnlyTextWithNewlines) {
  std::string source = "f.block(x:4)\nf.num_warps(8)\n\ng.tensorize(y:0); g.map(y)\ng.compile()";
  DiagnosticEngine diags("<schedule>", source);
  std::vector<ast::ScheduleStmt> stmts = parse_schedule(source, diags);
  ASSERT_FALSE(diags.has_errors()) << diags.render();
  ASSERT_EQ(stmts.size(), 5u);
  EXPECT_EQ(stmts[0].primitive.text, "block");
  EXPECT_EQ(stmts[1].primitive.text, "num_warps");
  EXPECT_EQ(stmts[1].args[0].value, 8);
  EXPECT_EQ(stmts[2].func.text, "g");
  EXPECT_EQ(stmts[3].primitive.text, "map");
  EXPECT_EQ(stmts[4].primitive.text, "compile");
  EXPECT_EQ(stmts[4].loc.line, 5);
}

TEST(Parser, ScheduleOnlyTextRejectsTwoStatementsOnOneLine) {
  std::string source = "f.block(x:4) f.num_warps(8)";
  DiagnosticEngine diags("<schedule>", source);
  parse_schedule(source, diags);
  EXPECT_EQ(diags.error_count(), 1) << diags.render();
}

TEST(Parser, ScheduleOnlyTextRejectsDeclarationsAndDefinitions) {
  std::string source = "Func f;\nf[x] = 1.0;\nf.block(x:4)";
  DiagnosticEngine diags("<schedule>", source);
  std::vector<ast::ScheduleStmt> stmts = parse_schedule(source, diags);
  EXPECT_EQ(diags.error_count(), 2);
  std::string text = diags.render();
  EXPECT_NE(text.find("a schedule may not declare symbols"), std::string::npos) << text;
  EXPECT_NE(text.find("a schedule may not define algorithms"), std::string::npos) << text;
  // Recovery in schedule text is per line: the statement on the third line still parses.
  ASSERT_EQ(stmts.size(), 1u);
  EXPECT_EQ(stmts[0].primitive.text, "block");
}

TEST(Parser, DeepNestingIsAnErrorNotACrash) {
  std::string source = "f[x] = " + std::string(5000, '(') + "1" + std::string(5000, ')') + ";";
  DiagnosticEngine diags("t.dt", source);
  parse_program(source, diags);
  EXPECT_EQ(diags.error_count(), 1);
  EXPECT_NE(diags.render().find("nests too deeply"), std::string::npos);
}
