#include "frontend/Checker.h"
#include "frontend/Parser.h"

#include <gtest/gtest.h>

#include "TestSupport.h"

#include <fstream>
#include <sstream>

using namespace dtc;

namespace {

// Parses and checks a program. Not copyable: the diagnostics engine views `source`.
struct Checked {
  std::string source;
  DiagnosticEngine diags;
  ir::Program program;

  explicit Checked(std::string text) : source(std::move(text)), diags("t.dt", source) {
    program = check_program(parse_program(source, diags), diags);
  }
  Checked(const Checked&) = delete;
  Checked& operator=(const Checked&) = delete;

  const ir::FuncDef& def(const std::string& name) const { return program.def(program.find(name)); }
};

// Comma-separated names of labels or symbols (ir::Labels is a vector of symbols too).
std::string names(const std::vector<const ir::Symbol*>& symbols) {
  std::string out;
  for (const ir::Symbol* s : symbols)
    out += (out.empty() ? "" : ",") + s->name;
  return out;
}

using dtc::testing::conformance;

} // namespace

// Operands align by label, not by position: B[y, x] is transposed to meet A[x, y].
TEST(Checker, LabelAlignmentOfOperands) {
  Checked c("Func f, g;\nIn A, B;\nVar x, y;\n"
            "f[x, y] = A[x, y] + B[y, x];\n"
            "g[x, y] = B[y, x] * A[x, y];\n");
  ASSERT_FALSE(c.diags.has_errors()) << c.diags.render();
  EXPECT_EQ(names(c.def("f").value->dims), "x,y");
  // An expression's dims are in first-appearance order; the Func's shape is what is written.
  EXPECT_EQ(names(c.def("g").value->dims), "y,x");
  EXPECT_EQ(names(c.def("g").dims), "x,y");
}

TEST(Checker, ScalarsBroadcast) {
  Checked c("Func f;\nIn A;\nSIn alpha;\nVar x;\nf[x] = alpha * A[x] + len(x) + 1;\n");
  ASSERT_FALSE(c.diags.has_errors()) << c.diags.render();
  EXPECT_EQ(names(c.def("f").value->dims), "x");
}

TEST(Checker, ReductionRemovesItsRVar) {
  Checked c("Func f;\nIn A;\nVar x;\nRVar k;\nf[x] = rsum(A[x, k], k);\n");
  ASSERT_FALSE(c.diags.has_errors()) << c.diags.render();
  const ir::Expr& value = *c.def("f").value;
  const ir::Reduce* r = value.as<ir::Reduce>();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->op, ir::ReduceOp::Sum);
  EXPECT_EQ(r->rvar->name, "k");
  EXPECT_EQ(names(r->a->dims), "x,k");
  EXPECT_EQ(names(value.dims), "x");
}

TEST(Checker, DotRemovesItsRVar) {
  Checked c("Func f;\nIn A, B;\nVar m, n;\nRVar k;\nf[m, n] = rdot(A[m, k], B[k, n], k);\n");
  ASSERT_FALSE(c.diags.has_errors()) << c.diags.render();
  const ir::Dot* d = c.def("f").value->as<ir::Dot>();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(names(d->dims), "m,n");
}

// Thesis listing 3.4: the reduction over k multiplies X[x, y] and broadcasts along y.
TEST(Checker, RmsNormOfListing34) {
  Checked c(conformance("l3_04_rms_norm.dt"));
  ASSERT_FALSE(c.diags.has_errors()) << c.diags.render();
  const ir::FuncDef& f = c.def("rms_norm_out");
  EXPECT_EQ(names(f.dims), "x,y");
  EXPECT_EQ(names(f.value->dims), "x,y");
  EXPECT_TRUE(f.deps.empty());
  ASSERT_EQ(c.program.inputs.size(), 4u);
  EXPECT_EQ(names(c.program.inputs), "X,W,Eps,Offset");
  EXPECT_EQ(c.program.find("Eps")->kind, ir::SymbolKind::SIn);
  EXPECT_EQ(c.program.find("k")->kind, ir::SymbolKind::RVar);
}

// Softmax (listing 3.3): reshape(sum_exp_A[x], x, 1) keeps a literal 1 as a size-1 dimension.
TEST(Checker, ReshapeWithLiteralOne) {
  Checked c(conformance("l3_03_softmax.dt"));
  ASSERT_FALSE(c.diags.has_errors()) << c.diags.render();
  const ir::Binary* div = c.def("softmax_out").value->as<ir::Binary>();
  ASSERT_NE(div, nullptr);
  EXPECT_EQ(div->op, ir::BinOp::Div);
  const ir::Reshape* r = div->b->as<ir::Reshape>();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->shape.size(), 2u);
  EXPECT_EQ(r->shape[0]->name, "x");
  EXPECT_EQ(r->shape[1], nullptr); // the literal 1
  EXPECT_EQ(names(r->dims), "x");
  EXPECT_EQ(names(div->dims), "x,y");
}

// Dependencies are the Funcs a definition reads, in first-use order; Funcs may be used before
// the line that defines them.
TEST(Checker, DependenciesOfSoftmax) {
  Checked c(conformance("l3_03_softmax.dt"));
  ASSERT_FALSE(c.diags.has_errors()) << c.diags.render();
  EXPECT_EQ(names(c.def("softmax_out").deps), "exp_A,sum_exp_A");
  EXPECT_EQ(names(c.def("sum_exp_A").deps), "exp_A");
  EXPECT_EQ(names(c.def("exp_A").deps), "");
}

TEST(Checker, FuncUsedBeforeItsDefinition) {
  Checked c("Func f, g;\nIn A;\nVar x;\nf[x] = g[x] + 1;\ng[x] = A[x];\n");
  ASSERT_FALSE(c.diags.has_errors()) << c.diags.render();
  EXPECT_EQ(names(c.def("f").deps), "g");
}

TEST(Checker, SymbolKindsAndOrder) {
  Checked c("Func f;\nIn A;\nSIn s;\nVar x;\nRVar k;\nf[x] = rsum(A[x, k], k) * s;\n");
  ASSERT_FALSE(c.diags.has_errors()) << c.diags.render();
  const char* order[] = {"f", "A", "s", "x", "k"};
  const ir::SymbolKind kinds[] = {ir::SymbolKind::Func, ir::SymbolKind::In, ir::SymbolKind::SIn,
                                  ir::SymbolKind::Var, ir::SymbolKind::RVar};
  for (int i = 0; i < 5; ++i) {
    const ir::Symbol* s = c.program.find(order[i]);
    ASSERT_NE(s, nullptr) << order[i];
    EXPECT_EQ(s->order, i);
    EXPECT_EQ(s->kind, kinds[i]);
  }
}

// Every error of a program is reported, and an erroneous definition does not cascade into
// errors in the Funcs that read it.
TEST(Checker, ReportsAllErrorsWithoutCascades) {
  Checked c("Func f, g, h;\nIn A;\nVar x;\n"
            "f[x] = B[x];\n"                 // B undeclared
            "g[x] = f[x] + sigmoyd(A[x]);\n" // unknown function; f's error is not repeated
            "h[x] = exp(A[x], 2);\n");       // wrong arity
  EXPECT_EQ(c.diags.error_count(), 3) << c.diags.render();
  std::string text = c.diags.render();
  EXPECT_NE(text.find("t.dt:4:8: error: `B` is not declared"), std::string::npos) << text;
  EXPECT_NE(text.find("did you mean `sigmoid`?"), std::string::npos) << text;
  EXPECT_NE(text.find("`exp` takes 1 argument, not 2"), std::string::npos) << text;
}

TEST(Checker, RedeclarationHasANoteAtTheFirstDeclaration) {
  Checked c("Func f;\nIn A;\nVar x;\nVar A;\nf[x] = A[x];\n");
  ASSERT_EQ(c.diags.error_count(), 1) << c.diags.render();
  const auto& all = c.diags.diagnostics();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].loc.line, 4);
  EXPECT_EQ(all[1].severity, Severity::Note);
  EXPECT_EQ(all[1].loc.line, 2);
  EXPECT_EQ(all[1].loc.col, 4);
}
