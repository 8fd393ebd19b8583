// The canonical text of a schedule (shared/spec/schedule-templates.md, section 1): one
// statement per (Func, primitive) with merged arguments in definition order, sorted by Func and
// then primitive, defaults and `compile` dropped, no spaces; parsing it and printing it again
// gives the same text.
#include "dtc/Compiler.h"

#include <gtest/gtest.h>

#include "TestSupport.h"

#include <fstream>
#include <sstream>

namespace {

const char* kTwoDims = "Func f;\nIn A;\nVar x, y;\nf[x, y] = A[x, y] * 2.0;\nf.compile();\n";

const char* kTwoFuncs = "Func out, tmp;\nIn A;\nVar x, y;\n"
                        "tmp[x, y] = exp(A[x, y]);\n"
                        "out[x, y] = tmp[x, y] + 1;\n"
                        "out.compile();\n";

using dtc::testing::conformance;

// The canonical text of `source` with its schedule replaced by `schedule` (or its own schedule),
// without the trailing newline; "<error>" and a test failure when the compiler rejects it.
std::string canonical(const std::string& source, std::optional<std::string> schedule = {}) {
  dtc::CompileOptions options;
  options.emit = dtc::Emit::Canonical;
  options.schedule = std::move(schedule);
  dtc::CompileResult r = dtc::compile(source, options);
  EXPECT_TRUE(r.ok) << r.diagnostics;
  if (!r.ok) return "<error>";
  EXPECT_EQ(r.output, r.canonical_schedule + "\n");
  return r.canonical_schedule;
}

} // namespace

TEST(Schedule, MergesStatementsOfOnePrimitive) {
  // A block of one element is always a whole tile, so its tensorize(x:0) is spelled out.
  EXPECT_EQ(canonical(kTwoDims, "f.block(x:1); f.block(y:512)"),
            "f.block(x:1,y:512);f.tensorize(x:0)");
  EXPECT_EQ(canonical(kTwoDims, "f.block(x:4)\nf.tensorize(x:0)\nf.block(y:64)"),
            "f.block(x:4,y:64);f.tensorize(x:0)");
  // Restating a block with the same size is not a conflict.
  EXPECT_EQ(canonical(kTwoDims, "f.block(x:4, y:8); f.block(x:4)"), "f.block(x:4,y:8)");
}

TEST(Schedule, DimensionsInDefinitionOrder) {
  EXPECT_EQ(canonical(kTwoDims, "f.block(y:512, x:2)"), "f.block(x:2,y:512)");
  EXPECT_EQ(canonical(kTwoDims, "f.tensorize(y:0); f.tensorize(x:0)"), "f.tensorize(x:0,y:0)");
}

TEST(Schedule, SortedByFuncThenPrimitiveOrder) {
  EXPECT_EQ(canonical(kTwoFuncs, "tmp.num_warps(8)\nout.num_stages(2)\nout.block(x:4)"),
            "out.block(x:4);out.num_stages(2);tmp.num_warps(8)");
  EXPECT_EQ(canonical(kTwoDims, "f.num_stages(2); f.num_warps(8); f.map(x, y); "
                                "f.tensorize(x:0); f.block(x:4, y:64)"),
            "f.block(x:4,y:64);f.tensorize(x:0);f.map(x,y);f.num_warps(8);f.num_stages(2)");
  EXPECT_EQ(canonical(kTwoFuncs, "tmp.fuse_at(out, y); out.block(y:32)"),
            "out.block(y:32);tmp.fuse_at(out,y)");
}

TEST(Schedule, TensorSizeEqualToBlockSizeIsZero) {
  EXPECT_EQ(canonical(kTwoDims, "f.block(y:64); f.tensorize(y:64)"),
            "f.block(y:64);f.tensorize(y:0)");
  EXPECT_EQ(canonical(kTwoDims, "f.block(y:64); f.tensorize(y:0)"),
            "f.block(y:64);f.tensorize(y:0)");
  // A partial tensor stays as written.
  EXPECT_EQ(canonical(kTwoDims, "f.block(y:64); f.tensorize(y:16)"),
            "f.block(y:64);f.tensorize(y:16)");
}

TEST(Schedule, DefaultsAreDropped) {
  EXPECT_EQ(canonical(kTwoDims, "f.num_warps(4)"), "");
  EXPECT_EQ(canonical(kTwoDims, "f.num_stages(3)"), "");
  EXPECT_EQ(canonical(kTwoDims, "f.tensorize(x:1)"), "");
  EXPECT_EQ(canonical(kTwoDims, "f.precision(tf32)"), "");
  EXPECT_EQ(canonical(kTwoDims, "f.relayout(auto)"), "");
  EXPECT_EQ(canonical(kTwoDims, "f.num_warps(4); f.num_stages(3); f.tensorize(x:1, y:0)"),
            "f.tensorize(y:0)");
  // Without `map`, the last dimension is outermost: map(y, x) is the default.
  EXPECT_EQ(canonical(kTwoDims, "f.block(x:4, y:64); f.map(y, x)"), "f.block(x:4,y:64)");
  EXPECT_EQ(canonical(kTwoDims, "f.block(x:4); f.map(x)"), "f.block(x:4)");
}

// relayout prints after precision and before num_warps; the last statement wins.
TEST(Schedule, RelayoutInCanonicalOrder) {
  EXPECT_EQ(canonical(kTwoDims, "f.num_warps(8); f.relayout(none); f.precision(ieee)"),
            "f.precision(ieee);f.relayout(none);f.num_warps(8)");
  EXPECT_EQ(canonical(kTwoDims, "f.relayout(none); f.relayout(copy)"), "f.relayout(copy)");
  EXPECT_EQ(canonical(kTwoDims, "f.relayout(copy); f.relayout(auto)"), "");
}

// index prints after relayout and before num_warps; auto, the default, drops out.
TEST(Schedule, IndexInCanonicalOrder) {
  EXPECT_EQ(canonical(kTwoDims, "f.num_warps(8); f.index(int64); f.relayout(none)"),
            "f.relayout(none);f.index(int64);f.num_warps(8)");
  EXPECT_EQ(canonical(kTwoDims, "f.index(int64); f.index(auto)"), "");
}

TEST(Schedule, CompileIsDropped) {
  EXPECT_EQ(canonical(kTwoDims, "f.compile(); f.num_warps(8)"), "f.num_warps(8)");
  EXPECT_EQ(canonical(kTwoDims, "f.compile_to_kernel()"), "");
  EXPECT_EQ(canonical(kTwoDims), "");
}

TEST(Schedule, NoSpaces) {
  std::string text = canonical(kTwoDims, "f.block( x : 4 , y : 64 ) ;  f.map( x:xi/2 , y , xi )");
  EXPECT_EQ(text, "f.block(x:4,y:64);f.map(x:xi/2,y,xi)");
}

// Thesis listing 4.1: the fastest GeGLU schedule, written as six statements.
TEST(Schedule, CanonicalTextOfGeglu) {
  EXPECT_EQ(canonical(conformance("l4_01_geglu.dt")),
            "geglu.block(x:1,y:512);geglu.tensorize(x:0,y:0);geglu.map(x,y);geglu.num_warps(32)");
  // The spec's example, spaced and all in one line, means the same.
  EXPECT_EQ(canonical(conformance("l4_01_geglu.dt"),
                      "geglu.block(x:1, y:512); geglu.tensorize(x:0, y:0); geglu.map(x, y); "
                      "geglu.num_warps(32);"),
            "geglu.block(x:1,y:512);geglu.tensorize(x:0,y:0);geglu.map(x,y);geglu.num_warps(32)");
}

// A fused Func's labels join its consumer's: attention's tensorize names k, a label of mm.
TEST(Schedule, CanonicalTextOfAttentionWithFusion) {
  EXPECT_EQ(canonical(conformance("l4_04_attention.dt")),
            "attention.block(m:16);attention.tensorize(m:0,n:64,l:0,k:16);attention.num_warps(8);"
            "attention.num_stages(8);dvsr.fuse_at(sm,m);e.fuse_at(attention,m);mm.fuse_at(e,l);"
            "sm.fuse_at(attention,m)");
}

TEST(Schedule, ParsingCanonicalTextGivesItBack) {
  struct Case {
    std::string source, schedule;
  };
  const Case cases[] = {
      {conformance("l4_01_geglu.dt"), ""},
      {conformance("l4_04_attention.dt"), ""},
      {conformance("l3_20_sum_block_reduction.dt"), ""},
      {conformance("l3_15_swish_fuse_x_tensorized.dt"), ""},
      {kTwoDims, "f.block(y:64, x:4); f.tensorize(y:64, x:2); f.map(y:yi/4, x, yi)"},
      {kTwoDims, "f.num_stages(5)\nf.num_warps(16)\nf.block(x:2)"},
      {kTwoFuncs, "tmp.fuse_at(out, x); out.block(x:2, y:16); out.tensorize(y:0)"},
  };
  for (const Case& c : cases) {
    std::string first = c.schedule.empty() ? canonical(c.source) : canonical(c.source, c.schedule);
    EXPECT_EQ(canonical(c.source, first), first) << c.schedule;
  }
}

TEST(Schedule, ModuleRecordsCanonicalSchedule) {
  dtc::CompileResult r = dtc::compile(conformance("l4_01_geglu.dt"));
  ASSERT_TRUE(r.ok) << r.diagnostics;
  EXPECT_EQ(r.canonical_schedule,
            "geglu.block(x:1,y:512);geglu.tensorize(x:0,y:0);geglu.map(x,y);geglu.num_warps(32)");
  EXPECT_NE(r.output.find("SCHEDULE = \"" + r.canonical_schedule + "\""), std::string::npos);
}

// Spec: "Two schedules that generate the same kernel must have the same canonical form". With a
// block of 1, the default tensor size 1 already covers the whole block, so tensorize(x:1) (and
// tensorize(x:0)) change nothing in the generated module, but the canonical text differs.
TEST(Schedule, BlockOfOneIsFullyTensorizedEitherWay) {
  dtc::CompileOptions a, b;
  a.schedule = "f.block(x:1)";
  b.schedule = "f.block(x:1); f.tensorize(x:0)";
  std::string module_a = dtc::compile(kTwoDims, a).output;
  std::string module_b = dtc::compile(kTwoDims, b).output;
  // The modules differ only in the lines that quote the canonical schedule.
  auto without_schedule_lines = [](const std::string& text) {
    std::string out, line;
    std::istringstream in(text);
    while (std::getline(in, line))
      if (line.rfind("SCHEDULE = ", 0) != 0 && line.rfind("Schedule: ", 0) != 0) out += line + "\n";
    return out;
  };
  ASSERT_FALSE(module_a.empty());
  ASSERT_TRUE(without_schedule_lines(module_a) == without_schedule_lines(module_b))
      << "the two schedules no longer generate the same kernel; pick another example";
  EXPECT_EQ(canonical(kTwoDims, *a.schedule), canonical(kTwoDims, *b.schedule));
}
