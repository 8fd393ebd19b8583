// The library interface dtc::compile: never throws, reports every problem as a diagnostic, and
// emits the requested text.
#include "codegen/TritonMath.h"
#include "dtc/Compiler.h"
#include "ir/Builtins.h"
#include "kir/Intrinsics.h"

#include <gtest/gtest.h>

#include "TestSupport.h"

#include <fstream>
#include <random>
#include <sstream>

namespace {

using dtc::testing::conformance;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

dtc::CompileResult compile_as(const std::string& source, dtc::Emit emit) {
  dtc::CompileOptions options;
  options.file_name = "t.dt";
  options.emit = emit;
  return dtc::compile(source, options);
}

} // namespace

TEST(CompilerApi, GarbageNeverThrows) {
  const std::string inputs[] = {
      "Func",
      "f[",
      "f.block(",
      "Func f; f[x] = ",
      ")))(((;;;",
      std::string("\0\xff\xfe\x80", 4),
      "Func f;\nIn A;\nVar x;\nf[x] = A[x];\nf.block(x:xi/0);\nf.map(x:xi/0, xi);\nf.compile();",
      "Func f;\nVar x;\nf[x] = f[x];\nf.compile();",
      "Func f;\nIn A;\nVar x;\nf[x] = A[x];\nf.fuse_at(g, y);\nf.atomic(x);\nf.compile();",
      "Func f;\nf[f] = 1;",
      std::string(100000, '('),
      std::string(100000, '-') + "1",
  };
  for (const std::string& source : inputs) {
    for (dtc::Emit emit : {dtc::Emit::Python, dtc::Emit::Ast, dtc::Emit::Ir, dtc::Emit::Canonical,
                           dtc::Emit::Check}) {
      dtc::CompileResult r;
      ASSERT_NO_THROW(r = compile_as(source, emit)) << source.substr(0, 80);
      EXPECT_FALSE(contains(r.diagnostics, "internal error")) << r.diagnostics;
      EXPECT_EQ(r.ok, r.error_count == 0);
      if (!r.ok) {
        EXPECT_TRUE(r.output.empty());
      }
      // Ast and Ir stop before the checker or the schedule, so only a full run sees every error.
      if (emit == dtc::Emit::Python || emit == dtc::Emit::Check) {
        EXPECT_FALSE(r.ok) << source.substr(0, 80);
        EXPECT_TRUE(contains(r.diagnostics, "error:")) << source.substr(0, 80);
      }
    }
  }
}

// Random bytes, and random slices of a real program: the compiler may reject them but must not
// throw or report an internal error.
TEST(CompilerApi, RandomInputNeverThrows) {
  std::mt19937 rng(20240601);
  std::string program = conformance("l4_04_attention.dt");
  const std::string alphabet = "FuncInVarRVSx y k[](),;.:=+-*/%<>!0123456789e \n#";
  for (int i = 0; i < 300; ++i) {
    std::string source;
    if (i % 2 == 0) {
      size_t a = rng() % program.size(), b = rng() % program.size();
      source = program.substr(std::min(a, b), std::max(a, b) - std::min(a, b));
    } else {
      for (int n = rng() % 80; n > 0; --n)
        source += alphabet[rng() % alphabet.size()];
    }
    dtc::CompileResult r;
    ASSERT_NO_THROW(r = compile_as(source, dtc::Emit::Python)) << source;
    EXPECT_FALSE(contains(r.diagnostics, "internal error")) << source << "\n" << r.diagnostics;
    EXPECT_EQ(r.ok, r.error_count == 0);
  }
}

TEST(CompilerApi, BadScheduleOptionIsReportedUnderItsOwnName) {
  dtc::CompileOptions options;
  options.file_name = "relu.dt";
  options.schedule = "relu_out.block(z:4)\nrelu_out.num_warps(3)";
  dtc::CompileResult r = dtc::compile(conformance("l3_05_relu.dt"), options);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.diagnostics, "<schedule>:1:16: error: in `relu_out.block(...)`: `z` is "
                                      "not a dimension"))
      << r.diagnostics;
  EXPECT_TRUE(contains(r.diagnostics, "<schedule>:2:20: error:")) << r.diagnostics;
  EXPECT_EQ(r.error_count, 2) << r.diagnostics;
}

TEST(CompilerApi, EmitAstAndIr) {
  std::string source = conformance("l3_05_relu.dt");
  dtc::CompileResult ast = compile_as(source, dtc::Emit::Ast);
  ASSERT_TRUE(ast.ok) << ast.diagnostics;
  EXPECT_TRUE(contains(ast.output, "Decl Func relu_out @3:1")) << ast.output;
  EXPECT_TRUE(contains(ast.output, "Call maximum")) << ast.output;
  EXPECT_TRUE(contains(ast.output, "Schedule relu_out.compile()")) << ast.output;

  dtc::CompileResult ir = compile_as(source, dtc::Emit::Ir);
  ASSERT_TRUE(ir.ok) << ir.diagnostics;
  EXPECT_TRUE(contains(ir.output, "relu_out[x, y] = maximum(0, A[x, y])   # varies along [x, y]"))
      << ir.output;
}

TEST(CompilerApi, CheckEmitsNothing) {
  dtc::CompileResult r = compile_as(conformance("l3_05_relu.dt"), dtc::Emit::Check);
  EXPECT_TRUE(r.ok) << r.diagnostics;
  EXPECT_TRUE(r.output.empty());
  EXPECT_TRUE(r.diagnostics.empty()) << r.diagnostics;
}

TEST(CompilerApi, NoCompileStatementWarns) {
  dtc::CompileResult r = compile_as("Func f;\nIn A;\nVar x;\nf[x] = A[x];\n", dtc::Emit::Python);
  EXPECT_TRUE(r.ok) << r.diagnostics;
  EXPECT_EQ(r.error_count, 0);
  EXPECT_TRUE(contains(r.diagnostics, "t.dt: warning: no Func is compiled")) << r.diagnostics;
  EXPECT_FALSE(r.output.empty());
}

TEST(CompilerApi, GeneratedModuleOfRelu) {
  dtc::CompileResult r = compile_as(conformance("l3_05_relu.dt"), dtc::Emit::Python);
  ASSERT_TRUE(r.ok) << r.diagnostics;
  const std::string& m = r.output;
  EXPECT_TRUE(contains(m, "@triton.jit"));
  EXPECT_TRUE(contains(m, "def relu_out("));
  EXPECT_TRUE(contains(m, "def reference(") || contains(m, "reference = "));
  EXPECT_TRUE(contains(m, "def make_inputs"));
  EXPECT_TRUE(contains(m, "SCHEDULE = "));
  EXPECT_TRUE(contains(m, "import triton.language as tl"));
}

// DT names that are Python keywords or builtins, modules the module imports, or names derived
// from other symbols (`x_size` is Var x's size parameter) get a trailing underscore.
// tests/test_python_names.py runs the same program under the Triton interpreter.
TEST(CompilerApi, PythonNameClashesAreRenamed) {
  const char* source = "Func range, lambda;\n"
                       "In tl, torch;\n"
                       "SIn x_size;\n"
                       "Var x, y;\n"
                       "lambda[x, y] = tl[x, y] * x_size;\n"
                       "range[x, y] = lambda[x, y] + torch[x, y];\n"
                       "range.compile();\n";
  dtc::CompileResult r = compile_as(source, dtc::Emit::Python);
  ASSERT_TRUE(r.ok) << r.diagnostics;
  const std::string& m = r.output;
  EXPECT_TRUE(contains(m, "def range_(tl_, torch_, x_size_, *, x=None, y=None, out=None):")) << m;
  EXPECT_TRUE(contains(m, "def range__kernel(")) << m;
  EXPECT_TRUE(contains(m, "def lambda__kernel(")) << m;
  EXPECT_TRUE(contains(m, "lambda_ = ")) << m;
  EXPECT_FALSE(contains(m, "def range(")) << m;
  EXPECT_FALSE(contains(m, "lambda =")) << m;
  EXPECT_FALSE(contains(m, "tl = ")) << m;
  EXPECT_FALSE(contains(m, "torch = ")) << m;
  // The scalar input and Var x's size parameter are both kernel parameters: distinct names.
  EXPECT_TRUE(contains(m, "tl__ptr, tl__stride0, tl__stride1, x_size_,")) << m;
  EXPECT_TRUE(contains(m, "x_size, y_size,")) << m;
  // COMPILED lists DT names; PYTHON_NAMES and the module's __getattr__ reach the wrapper.
  EXPECT_TRUE(contains(m, "COMPILED = (\"range\",)")) << m;
  EXPECT_TRUE(contains(m, "PYTHON_NAMES = {\"range\": \"range_\"}")) << m;
  EXPECT_TRUE(contains(m, "\"reference_range\": \"reference_range_\"")) << m;

  // The algorithm IR knows DT names only: the Python ones are the code generator's.
  dtc::CompileResult ir = compile_as(source, dtc::Emit::Ir);
  EXPECT_TRUE(contains(ir.output, "Func range\n")) << ir.output;
  EXPECT_FALSE(contains(ir.output, "range_")) << ir.output;
}

// "Did you mean" names the closest primitive. (The golden
// tests/diagnostics/sched_unknown_primitive_num_stage.expected records today's output.)
TEST(CompilerApi, UnknownPrimitiveSuggestsTheClosestOne) {
  const char* base = "Func f;\nIn A;\nVar x;\nf[x] = A[x];\nf.compile();\n";
  const std::pair<const char*, const char*> cases[] = {
      {"f.tensorise(x:0)", "tensorize"}, {"f.num_warp(8)", "num_warps"},
      {"f.num_stage(4)", "num_stages"},  {"f.num_stags(4)", "num_stages"},
      {"f.fuse(f, x)", "fuse_at"},       {"f.precison(ieee)", "precision"}};
  for (const auto& [schedule, hint] : cases) {
    dtc::CompileOptions options;
    options.schedule = schedule;
    dtc::CompileResult r = dtc::compile(base, options);
    EXPECT_TRUE(contains(r.diagnostics, std::string("did you mean `") + hint + "`?"))
        << schedule << "\n"
        << r.diagnostics;
  }
}

// One mistake, one error: `1e` lacks exponent digits, which is not also a number running into
// a name. (The golden tests/diagnostics/lex_exponent_without_digits.expected records today's
// output.)
TEST(CompilerApi, ExponentWithoutDigitsIsOneError) {
  dtc::CompileResult r =
      compile_as("Func f;\nIn A;\nVar x;\nf[x] = A[x] * 1e;\n", dtc::Emit::Check);
  EXPECT_EQ(r.error_count, 1) << r.diagnostics;
  EXPECT_TRUE(contains(r.diagnostics, "exponent of a number needs digits")) << r.diagnostics;
}

TEST(CompilerApi, EveryBuiltinLowersToKernelIR) {
  for (const dtc::Builtin& b : dtc::builtins()) {
    std::string args;
    for (int i = 0; i < b.arity; ++i)
      args += std::string(i ? ", " : "") + (i ? "B[x]" : "A[x]");
    std::string source = "Func f;\nIn A, B;\nVar x;\nf[x] = " + std::string(b.name) + "(" + args +
                         ");\nf.tensorize(x:4);\nf.compile();";
    dtc::CompileResult r = compile_as(source, dtc::Emit::Python);
    EXPECT_TRUE(r.ok) << b.name << ": " << r.diagnostics;
    EXPECT_TRUE(contains(r.output, "def f_kernel(")) << b.name;
    // The module defines every helper it calls, and the helpers those call.
    std::optional<dtc::kir::Intrinsic> fn = dtc::kir::intrinsic_named(b.name);
    if (fn && dtc::is_helper(*fn)) {
      std::vector<std::string> work{dtc::triton_function(*fn)};
      while (!work.empty()) {
        std::string h = work.back();
        work.pop_back();
        EXPECT_TRUE(contains(r.output, "@triton.jit\ndef " + h + "(")) << b.name << ": " << h;
        for (const std::string& used : dtc::helper_uses(h))
          work.push_back(used);
      }
    }
  }
  // softplus calls _dt_log1p, which calls _dt_log1p_reduced: defined once each.
  dtc::CompileResult r =
      compile_as("Func f;\nIn A;\nVar x;\nf[x] = softplus(A[x]) + log1p(A[x]);\nf.compile();",
                 dtc::Emit::Python);
  ASSERT_TRUE(r.ok) << r.diagnostics;
  for (const char* h : {"_dt_softplus", "_dt_log1p", "_dt_log1p_reduced", "_dt_exp_parts"}) {
    std::string def = std::string("def ") + h + "(";
    size_t first = r.output.find(def);
    EXPECT_NE(first, std::string::npos) << h;
    EXPECT_EQ(r.output.find(def, first + 1), std::string::npos) << h;
  }
}
