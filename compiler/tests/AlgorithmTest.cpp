// dtc::Algorithm: one front end, many schedules; structured diagnostics with stable codes.
#include "dtc/Algorithm.h"

#include <gtest/gtest.h>

#include "TestSupport.h"

#include <map>
#include <thread>

namespace {

using dtc::testing::conformance;

const dtc::Algorithm& geglu() {
  static const dtc::Algorithm a(conformance("l4_01_geglu.dt"), "geglu.dt");
  return a;
}

std::string reason(const std::string& schedule, bool lower = false) {
  dtc::ScheduleInfo info = geglu().check_schedule(schedule, lower);
  EXPECT_FALSE(info.ok) << schedule;
  return info.reason();
}

} // namespace

TEST(Algorithm, DescribesTheProgram) {
  ASSERT_TRUE(geglu().ok()) << geglu().diagnostics();
  ASSERT_EQ(geglu().funcs().size(), 1u);
  EXPECT_EQ(geglu().funcs()[0].name, "geglu");
  EXPECT_EQ(geglu().funcs()[0].dims, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(geglu().funcs()[0].compiled);
  EXPECT_FALSE(geglu().own_canonical().empty());

  dtc::Algorithm sum(conformance("l3_17_sum.dt"));
  ASSERT_TRUE(sum.ok());
  bool has_rvar = false;
  for (const dtc::FuncInfo& f : sum.funcs())
    has_rvar |= !f.rvars.empty();
  EXPECT_TRUE(has_rvar);
}

TEST(Algorithm, CallSizesTellWhichLabelsACallNeeds) {
  ASSERT_EQ(geglu().call_sizes().size(), 1u);
  EXPECT_EQ(geglu().call_sizes()[0].func, "geglu");
  EXPECT_EQ(geglu().call_sizes()[0].labels, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(geglu().call_sizes()[0].tied.empty());

  // k and y index the same dimension of X: k takes y's size.
  dtc::Algorithm rms(conformance("l3_04_rms_norm.dt"));
  ASSERT_TRUE(rms.ok()) << rms.diagnostics();
  ASSERT_EQ(rms.call_sizes().size(), 1u);
  EXPECT_EQ(rms.call_sizes()[0].labels, (std::vector<std::string>{"x", "y", "k"}));
  EXPECT_EQ(rms.call_sizes()[0].tied, (std::map<std::string, std::string>{{"k", "y"}}));

  // Every label of 2mm indexes a dimension of its own.
  dtc::Algorithm mm(conformance("l4_03_2mm.dt"));
  ASSERT_TRUE(mm.ok()) << mm.diagnostics();
  ASSERT_EQ(mm.call_sizes().size(), 1u);
  EXPECT_EQ(mm.call_sizes()[0].labels, (std::vector<std::string>{"m", "n", "k", "l"}));
  EXPECT_TRUE(mm.call_sizes()[0].tied.empty());

  // Nothing compiled, nothing called.
  dtc::Algorithm none("Func f;\nIn A;\nVar x;\nf[x] = A[x];\n");
  ASSERT_TRUE(none.ok()) << none.diagnostics();
  EXPECT_TRUE(none.call_sizes().empty());
}

TEST(Algorithm, CanonicalTextMatchesTheCompiler) {
  const std::string s = "geglu.block(y:512, x:1); geglu.tensorize(x:0, y:512); geglu.num_warps(4)";
  dtc::ScheduleInfo info = geglu().check_schedule(s);
  ASSERT_TRUE(info.ok) << info.messages.at(0).text;
  dtc::CompileResult full = geglu().compile(s, dtc::Emit::Canonical);
  ASSERT_TRUE(full.ok);
  EXPECT_EQ(info.canonical + "\n", full.output);
  EXPECT_EQ(info.canonical, "geglu.block(x:1,y:512);geglu.tensorize(x:0,y:0)");
  ASSERT_EQ(info.funcs.size(), 1u);
  EXPECT_EQ(info.funcs[0].labels.at(1).label, "y");
  EXPECT_EQ(info.funcs[0].labels.at(1).block, 512);
  EXPECT_EQ(info.funcs[0].labels.at(1).tensor, 0);
  EXPECT_EQ(info.funcs[0].num_warps, 4);
  EXPECT_FALSE(info.lowering_matters);
}

TEST(Algorithm, EachRejectionHasAStableCode) {
  EXPECT_EQ(reason("geglu.block(x:1, y:512); geglu.tensorize(y:1024)"), "tensor-larger-than-block");
  EXPECT_EQ(reason("geglu.block(y:512); geglu.tensorize(y:48)"), "tensor-not-power-of-two");
  EXPECT_EQ(reason("geglu.block(x:4096, y:4096); geglu.tensorize(x:0, y:0)"), "tensor-too-large");
  EXPECT_EQ(reason("geglu.num_warps(3)"), "num-warps-invalid");
  EXPECT_EQ(reason("geglu.num_stages(0)"), "num-stages-invalid");
  EXPECT_EQ(reason("geglu.block(z:4)"), "unknown-label");
  EXPECT_EQ(reason("nope.block(x:4)"), "unknown-func");
  EXPECT_EQ(reason("geglu.blok(x:4)"), "unknown-primitive");
  EXPECT_EQ(reason("geglu.block(x:4); geglu.map(y)"), "map-unblocked-level");
  EXPECT_EQ(reason("geglu.block(x:"), "syntax");
}

TEST(Algorithm, MessagesPointIntoTheScheduleText) {
  dtc::ScheduleInfo info = geglu().check_schedule("geglu.block(y:512);\ngeglu.num_warps(3);");
  ASSERT_FALSE(info.ok);
  const dtc::Message& m = info.messages.at(0);
  EXPECT_EQ(m.severity, "error");
  EXPECT_EQ(m.source, "<schedule>");
  EXPECT_EQ(m.line, 2);
  EXPECT_GT(m.col, 1);
  EXPECT_NE(m.text.find("num_warps"), std::string::npos);
}

TEST(Algorithm, LowerChecksTheWholePipeline) {
  dtc::Algorithm mm2(conformance("l4_03_2mm.dt"), "2mm.dt");
  ASSERT_TRUE(mm2.ok()) << mm2.diagnostics();
  dtc::CompileResult own = mm2.compile(mm2.own_canonical(), dtc::Emit::Check);
  EXPECT_TRUE(own.ok) << own.diagnostics;
  dtc::ScheduleInfo info = mm2.check_schedule(mm2.own_canonical(), true);
  EXPECT_TRUE(info.ok) << (info.messages.empty() ? "" : info.messages[0].text);
  EXPECT_TRUE(info.lowering_matters);
  // tl.dot needs tiles of at least 16: only lowering knows the product runs on tl.dot.
  dtc::Algorithm mm(conformance("../gpu/matmul.dt"), "mm.dt");
  ASSERT_TRUE(mm.ok()) << mm.diagnostics();
  const std::string small = "C.block(m:8, n:8); C.tensorize(m:0, n:0, k:8)";
  EXPECT_TRUE(mm.check_schedule(small).ok);
  dtc::ScheduleInfo lowered = mm.check_schedule(small, true);
  EXPECT_FALSE(lowered.ok);
  EXPECT_EQ(lowered.reason(), "dot-tensor-too-small");
}

TEST(Algorithm, BrokenProgramsReportAndNeverThrow) {
  dtc::Algorithm bad("Func f;\nVar x;\nf[x] = g[x];\nf.compile();", "bad.dt");
  EXPECT_FALSE(bad.ok());
  ASSERT_FALSE(bad.messages().empty());
  EXPECT_EQ(bad.messages()[0].code, "semantic");
  EXPECT_EQ(bad.messages()[0].line, 3);
  EXPECT_NE(bad.diagnostics().find("bad.dt:3:"), std::string::npos);
  dtc::ScheduleInfo info = bad.check_schedule("f.block(x:4)");
  EXPECT_FALSE(info.ok);

  dtc::Algorithm syntax("Func f;\nVar x\n", "s.dt");
  EXPECT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.messages().at(0).code, "syntax");
}

TEST(Algorithm, ThreadsShareOneAlgorithm) {
  std::vector<std::thread> threads;
  std::vector<int> good(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &good] {
      for (int i = 0; i < 200; ++i) {
        long long b = 64LL << (i % 6);
        dtc::ScheduleInfo info =
            geglu().check_schedule("geglu.block(x:1, y:" + std::to_string(b) +
                                   "); geglu.num_warps(" + std::to_string(1 << (t + 1)) + ")");
        good[t] += info.ok && info.canonical.find(std::to_string(b)) != std::string::npos;
      }
    });
  for (std::thread& t : threads)
    t.join();
  for (int g : good)
    EXPECT_EQ(g, 200);
}

TEST(CompilerApi, MessagesCarryCodes) {
  dtc::CompileOptions options;
  options.file_name = "g.dt";
  options.schedule = "geglu.tensorize(y:3)";
  dtc::CompileResult r = dtc::compile(conformance("l4_01_geglu.dt"), options);
  ASSERT_FALSE(r.ok);
  ASSERT_FALSE(r.messages.empty());
  EXPECT_EQ(r.messages[0].code, "tensor-not-power-of-two");
}
