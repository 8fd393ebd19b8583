// Schedule templates: the parser (syntax, ties, ranges, optional statements, constraints,
// errors at line:col) and the lazy space (sizes, pruning reasons, deduplication), checked
// against the compiler itself as the oracle of canonical forms.
#include "dtx/Space.h"
#include "dtx/TemplateFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::shared_ptr<const dtc::Algorithm> geglu() {
  static auto a = std::make_shared<const dtc::Algorithm>(
      read(std::string(DTX_SOURCE_DIR) + "/tests/conformance/l4_01_geglu.dt"), "geglu.dt");
  return a;
}

dtx::Space space(const std::string& text, dtx::ShapeSizes shape = {{"x", 16384}, {"y", 16384}}) {
  return dtx::Space(geglu(), dtx::parse_template(text), shape);
}

struct Expansion {
  dtx::ExpansionStats stats;
  std::vector<std::string> canonical;
};

Expansion expand(const dtx::Space& s) {
  Expansion e;
  dtx::Enumerator en(s);
  while (auto c = en.next())
    e.canonical.push_back(c->canonical);
  e.stats = en.stats();
  return e;
}

/// The oracle: every point rendered and compiled by dtc::compile, distinct canonical texts.
std::set<std::string> brute_force(const dtx::Space& s) {
  std::set<std::string> out;
  for (std::uint64_t i = 0; i < s.size(); ++i) {
    dtx::Candidate c = s.at(i);
    if (!c.ok) continue;
    dtc::CompileResult r = geglu()->compile(c.schedule, dtc::Emit::Canonical);
    EXPECT_TRUE(r.ok) << c.schedule;
    out.insert(r.output.substr(0, r.output.size() - 1));
  }
  return out;
}

const char* kSpecExample = R"(
$BY = {128..4096};
geglu.block(x:{1, 2, 4}, y:$BY);
geglu.tensorize(x:0, y:{0, 64, 128, 256});
geglu.map({(x, y), (y, x)});
geglu.num_warps({4..32});
where geglu.tensorize.y == 0 or geglu.tensorize.y < $BY;
)";

} // namespace

TEST(Template, ParsesTheSpecExample) {
  dtx::Template t = dtx::parse_template(kSpecExample);
  ASSERT_EQ(t.variables.size(), 5u);
  EXPECT_EQ(t.variables[0].name, "$BY");
  EXPECT_EQ(t.variables[0].alternatives.size(), 6u); // 128 .. 4096
  EXPECT_EQ(t.statements.size(), 4u);
  EXPECT_EQ(t.constraints.size(), 1u);
}

TEST(Template, SpecExampleCountsAndOracle) {
  dtx::Space s = space(kSpecExample);
  EXPECT_EQ(s.size(), 6u * 3 * 4 * 2 * 4);
  Expansion e = expand(s);
  // tensorize.y in {64,128,256} with a block not larger: 72 points fail the constraint.
  EXPECT_EQ(e.stats.rejected.at("where"), 72u);
  EXPECT_EQ(e.stats.distinct, e.canonical.size());
  std::set<std::string> mine(e.canonical.begin(), e.canonical.end());
  EXPECT_EQ(mine.size(), e.canonical.size()) << "the enumerator yielded a duplicate";
  EXPECT_EQ(mine, brute_force(s));
  // The thesis' fastest schedule and the faster one on the H100 are in the space.
  EXPECT_TRUE(mine.count("geglu.block(x:1,y:512);geglu.tensorize(x:0,y:0);geglu.num_warps(32)"));
  EXPECT_TRUE(mine.count("geglu.block(x:1,y:1024);geglu.tensorize(x:0,y:0);geglu.num_warps(8)"));
}

TEST(Template, CanonicalFormsRoundTrip) {
  Expansion e = expand(space(kSpecExample));
  for (const std::string& c : e.canonical) {
    dtc::ScheduleInfo again = geglu()->check_schedule(c);
    ASSERT_TRUE(again.ok) << c;
    EXPECT_EQ(again.canonical, c);
  }
}

TEST(Template, ParallelExpansionMatchesSerial) {
  dtx::Space s = space(std::string(kSpecExample) + "?geglu.num_stages({1..4:+1});");
  std::vector<std::uint64_t> serial, parallel;
  dtx::Enumerator one(s);
  while (auto c = one.next(true))
    serial.push_back(c->index);
  dtx::Enumerator three(s, 0, UINT64_MAX, 3);
  while (auto c = three.next(true))
    parallel.push_back(c->index);
  EXPECT_EQ(serial, parallel);
  EXPECT_EQ(one.stats().distinct, three.stats().distinct);
  EXPECT_EQ(one.stats().rejected, three.stats().rejected);
  EXPECT_EQ(one.stats().unused, three.stats().unused);
  // Stopping early joins the threads.
  dtx::Enumerator early(s, 0, UINT64_MAX, 4);
  EXPECT_TRUE(early.next());
}

TEST(Template, RangesAndSteps) {
  dtx::Template t = dtx::parse_template("geglu.num_stages({1..5:+1}); geglu.block(y:{64..4096})");
  EXPECT_EQ(t.variables[0].alternatives.size(), 5u);
  EXPECT_EQ(t.variables[1].alternatives.size(), 7u);
  EXPECT_THROW(dtx::parse_template("geglu.block(y:{3..9})"), dtx::TemplateParseError);
  EXPECT_THROW(dtx::parse_template("geglu.block(y:{9..3:+1})"), dtx::TemplateParseError);
}

TEST(Template, NormalizationDuplicatesAreFoundByCanonicalText) {
  // tensor == block is the whole block (0): (B, 0) and (B, B) are one kernel.
  dtx::Space s = space("$B = {64..256}; geglu.block(y:$B); geglu.tensorize(y:{0, $B, $B/2})");
  EXPECT_EQ(s.size(), 9u);
  Expansion e = expand(s);
  EXPECT_EQ(e.stats.duplicates, 3u);
  EXPECT_EQ(e.stats.distinct, 6u);
  EXPECT_EQ(std::set<std::string>(e.canonical.begin(), e.canonical.end()), brute_force(s));
}

TEST(Template, OptionalStatementsAndUnusedChoices) {
  dtx::Space s = space("geglu.block(y:1024); ?geglu.num_warps({8, 16}); "
                       "?geglu.num_stages({2, 4})");
  EXPECT_EQ(s.size(), 16u);
  Expansion e = expand(s);
  // Absent statements leave their value unused: only its first alternative is visited.
  EXPECT_EQ(e.stats.unused, 16u - 9u);
  EXPECT_EQ(e.stats.distinct, 9u);
  EXPECT_EQ(std::set<std::string>(e.canonical.begin(), e.canonical.end()), brute_force(s));
  std::vector<int> c = s.decode(0);
  EXPECT_TRUE(s.normalized(c));
  // present(F.prim) in a constraint.
  dtx::Space both = space("geglu.block(y:1024); ?geglu.num_warps({8, 16}); "
                          "?geglu.num_stages({2, 4}); where present(geglu.num_warps) or "
                          "present(geglu.num_stages)");
  EXPECT_EQ(expand(both).stats.distinct, 8u);
}

TEST(Template, ChoicesOfArgumentListsAndNestedChoices) {
  dtx::Space s =
      space("geglu.block(x:4, y:256); geglu.map({(x, y), (y, x), (y:yi/{2, 4}, x, yi)})");
  Expansion e = expand(s);
  EXPECT_EQ(s.size(), 6u);         // 3 lists x 2 factors (unused unless the third)
  EXPECT_EQ(e.stats.unused, 2u);   // (x, y) and (y, x) with the second factor
  EXPECT_EQ(e.stats.distinct, 4u); // (x, y) is the default map: printed as nothing
  EXPECT_EQ(std::set<std::string>(e.canonical.begin(), e.canonical.end()), brute_force(s));
}

TEST(Template, ShapeRules) {
  // At y=1000, blocks above 1024 only add masked lanes; at x=16 with blocks of 4 there are 4
  // row blocks, which a split by 8 does not divide.
  dtx::Space s = space("geglu.block(x:4, y:{512..4096}); geglu.map({(x, y), (x:xi/{2, 8}, y, xi)})",
                       {{"x", 16}, {"y", 1000}});
  Expansion e = expand(s);
  // 12 normalized points; x is checked before y, so a split by 8 is the reason first.
  EXPECT_EQ(e.stats.rejected.at(dtx::kReasonSplit), 4u);
  EXPECT_EQ(e.stats.rejected.at(dtx::kReasonOversizedBlock), 4u);
  EXPECT_EQ(e.stats.distinct, 4u);
}

TEST(Template, CompilerRejectionsAreCountedByCode) {
  dtx::Space s =
      space("geglu.block(x:{1, 2048}, y:{512, 1024}); geglu.tensorize(x:0, y:{0, 2048})");
  Expansion e = expand(s);
  EXPECT_EQ(e.stats.rejected.at("tensor-larger-than-block"), 4u);
  EXPECT_EQ(e.stats.rejected.at("tensor-too-large"), 1u); // 2048 x 1024 elements; x 512 is 2^20
  EXPECT_EQ(e.stats.distinct, 3u);
}

TEST(Template, ErrorsCarryLineAndColumn) {
  auto error_of = [](const std::string& text) -> dtx::TemplateError {
    try {
      dtx::parse_template(text);
    } catch (const dtx::TemplateParseError& e) {
      return e.errors.at(0);
    }
    ADD_FAILURE() << "no error for " << text;
    return {};
  };
  dtx::TemplateError e = error_of("geglu.block(y:64);\ngeglu.block(x:$B);");
  EXPECT_EQ(e.loc.line, 2);
  EXPECT_EQ(e.loc.col, 15);
  EXPECT_NE(e.message.find("$B"), std::string::npos);
  e = error_of("geglu.block(y:{64, 128);");
  EXPECT_EQ(e.loc.line, 1);
  e = error_of("\n\n  geglu.num_warps({4..24});");
  EXPECT_EQ(e.loc.line, 3);
  EXPECT_NE(e.message.find("powers of two"), std::string::npos);
  e = error_of("$B = {1, 2};\n$B = {3};\ngeglu.block(y:$B)");
  EXPECT_EQ(e.loc.line, 2);
  // Every error is reported, not only the first.
  try {
    dtx::parse_template("geglu.block(y:{1..3});\ngeglu.num_warps(@);\ngeglu.map(x");
    FAIL();
  } catch (const dtx::TemplateParseError& err) {
    EXPECT_GE(err.errors.size(), 2u);
  }
  EXPECT_THROW(space("nope.block(y:64)"), dtx::TemplateParseError);
  EXPECT_THROW(space("geglu.block(y:64); where nope.block.y > 1"), dtx::TemplateParseError);
}

TEST(Template, LazySpaceOfTenMillion) {
  // 10^7 points: its size, random access at the far end and sampling cost nothing like it.
  dtx::Space s = space("geglu.block(x:{1..512}, y:{16..4096:+16});"
                       "geglu.tensorize(x:{0, 1, 2, 4, 8, 16, 32, 64, 128, 256}, y:{0..9:+1});"
                       "geglu.num_stages({1..10:+1}); geglu.num_warps({1, 2, 4, 8, 16});"
                       "geglu.map({(x, y), (y, x)})");
  EXPECT_EQ(s.size(), 10u * 256 * 10 * 10 * 10 * 5 * 2);
  dtx::Candidate last = s.at(s.size() - 1);
  EXPECT_EQ(last.index, s.size() - 1);
  EXPECT_EQ(s.encode(s.decode(1234567)), 1234567u);
  std::mt19937_64 rng(7);
  std::uint64_t ok = 0;
  for (int i = 0; i < 2000; ++i)
    ok += s.evaluate(s.sample(rng)).ok;
  EXPECT_GT(ok, 0u);
  // Walking a window anywhere in the space needs nothing before it.
  dtx::Enumerator en(s, s.size() / 2, s.size() / 2 + 20000);
  while (en.next()) {
  }
  EXPECT_EQ(en.stats().visited + en.stats().unused, 20000u);
}

TEST(TemplateFile, LoadsAndLocatesErrorsInTheFile) {
  std::string dir = std::string(DTX_SOURCE_DIR) + "/tests/conformance";
  dtx::TemplateFile t = dtx::parse_template_file(R"(kernel: geglu
algorithm: l4_01_geglu.dt
schedule: |
  geglu.block(y:{64..128});
  geglu.num_warps({4, 8});
shapes:
  - {x: 64, y: 1000}
dtype: float32
baselines: [reference]
)",
                                                 "t.yaml", dir);
  EXPECT_EQ(t.kernel, "geglu");
  EXPECT_EQ(t.shapes.at(0).at("y"), 1000);
  EXPECT_TRUE(t.baselines.at(0).spec.reference);
  EXPECT_EQ(t.parse_schedule().variables.size(), 2u);

  dtx::TemplateFile bad = dtx::parse_template_file(
      "kernel: geglu\nalgorithm: l4_01_geglu.dt\nschedule: |\n  geglu.block(y:64);\n"
      "  geglu.num_warps({4..24});\n",
      "bad.yaml", dir);
  try {
    bad.parse_schedule();
    FAIL();
  } catch (const dtx::TemplateFileError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.yaml:5:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      dtx::parse_template_file("kernel: k\nsource: x\nschedule: a\nshapes: 3\n", "s.yaml", dir),
      dtx::TemplateFileError);
  EXPECT_THROW(dtx::parse_template_file("kernel: k\nsourse: x\n", "s.yaml", dir),
               dtx::TemplateFileError);
  EXPECT_THROW(dtx::parse_template_file("kernel: [\n", "s.yaml", dir), dtx::TemplateFileError);
}

TEST(TemplateFile, NamedBaselinesResolveBesideTheFile) {
  std::filesystem::path dir = std::filesystem::path(DTX_SOURCE_DIR) / "templates";
  dtx::NamedBaseline torch = dtx::parse_baseline_entry("torch", "layernorm", dir);
  EXPECT_EQ(std::filesystem::path(torch.spec.file).filename(), "baselines.py");
  EXPECT_EQ(torch.spec.function, "layernorm");
  EXPECT_FALSE(torch.spec.torch_compile);
  EXPECT_TRUE(dtx::parse_baseline_entry("torch.compile", "layernorm", dir).spec.torch_compile);
  // `liger`: Liger-Kernel's op, the function named like the kernel in liger_baselines.py.
  dtx::NamedBaseline liger = dtx::parse_baseline_entry("liger", "layernorm", dir);
  EXPECT_EQ(liger.name, "liger");
  EXPECT_EQ(std::filesystem::path(liger.spec.file).filename(), "liger_baselines.py");
  EXPECT_EQ(liger.spec.function, "layernorm");
  EXPECT_FALSE(liger.spec.torch_compile);
  EXPECT_FALSE(liger.spec.reference);
  // `helion`: a Helion kernel, the function named like the kernel in helion_baselines.py.
  dtx::NamedBaseline helion = dtx::parse_baseline_entry("helion", "softmax", dir);
  EXPECT_EQ(helion.name, "helion");
  EXPECT_EQ(std::filesystem::path(helion.spec.file).filename(), "helion_baselines.py");
  EXPECT_EQ(helion.spec.function, "softmax");
  EXPECT_FALSE(helion.spec.torch_compile);
  // Without the file beside the template, the entry is refused and says which file it needs.
  try {
    dtx::parse_baseline_entry("liger", "layernorm", std::filesystem::path(DTX_SOURCE_DIR));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("liger_baselines.py"), std::string::npos) << e.what();
  }
  try {
    dtx::parse_baseline_entry("ligr", "layernorm", dir);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("use torch, torch.compile, liger, helion, reference"),
              std::string::npos)
        << e.what();
  }
}

TEST(Template, DtypeBytesBoundsByTheDtypeExplored) {
  const char* text = "geglu.block(y:{512..4096}); where geglu.block.y * dtype.bytes <= 4096;";
  auto with = [&](const std::string& dtype) {
    return dtx::Space(geglu(), dtx::parse_template(text), {{"x", 16384}, {"y", 16384}},
                      {.dtype = dtype});
  };
  EXPECT_EQ(expand(with("float32")).stats.distinct, 2u); // y blocks of 512 and 1024
  EXPECT_EQ(expand(with("float16")).stats.distinct, 3u); // and 2048
  EXPECT_EQ(expand(with("bfloat16")).stats.distinct, 3u);
  // Without the dtype the constraint cannot be evaluated: every point is cut, and says why.
  dtx::Space none = with("");
  Expansion e = expand(none);
  EXPECT_EQ(e.stats.distinct, 0u);
  EXPECT_EQ(e.stats.rejected.at(dtx::kReasonWhere), 4u);
  EXPECT_NE(none.at(0).message.find("dtype.bytes"), std::string::npos) << none.at(0).message;
}

TEST(Template, ValuesOfEachVariableAtAPoint) {
  // What a schedule sets each variable to, as its text reads: ties, choices (a nested one in a
  // whole argument list too), integer arithmetic on a tie, and `?` statements; nothing for a
  // variable the point does not use.
  dtx::Space s = space("$BY = {128, 256}; geglu.block(x:{1, 2}, y:$BY); "
                       "geglu.tensorize(x:0, y:{0, $BY/2}); "
                       "geglu.map({(x, y), (y:yi/{2, 4}, x, yi)}); ?geglu.num_warps({8, 16})");
  const auto& vars = s.tmpl().variables;
  auto at = [&](const std::vector<int>& c) {
    std::map<std::string, std::string> out;
    auto v = s.values(c);
    for (size_t i = 0; i < v.size(); ++i)
      out[vars[i].name] = v[i] ? *v[i] : "(unused)";
    return out;
  };
  std::vector<int> c(vars.size(), 0);
  auto first = at(c);
  EXPECT_EQ(first["$BY"], "128");
  EXPECT_EQ(first["?geglu.num_warps"], "absent");
  int unused = 0;
  for (const auto& [name, value] : first)
    unused += value == "(unused)";
  EXPECT_EQ(unused, 2); // the map's factor and the warps inside the absent statement
  std::vector<int> all(vars.size(), 1);
  auto second = at(all);
  EXPECT_EQ(second["$BY"], "256");
  EXPECT_EQ(second["?geglu.num_warps"], "present");
  std::set<std::string> values;
  for (const auto& [name, value] : second)
    values.insert(value);
  // x:2, y:$BY/2 = 128, the second map with its factor 4, 16 warps.
  for (const char* v : {"2", "128", "4", "16"})
    EXPECT_TRUE(values.count(v)) << v;
  EXPECT_TRUE(std::any_of(values.begin(), values.end(), [](const std::string& v) {
    return v.find("y:yi/4") != std::string::npos;
  }));
}
