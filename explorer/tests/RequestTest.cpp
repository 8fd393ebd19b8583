// The rules of a request (Request.h), which dtx and dtxd share: numbers by their rule, names,
// the shipped template files with their shapes (rms_norm's k takes y's size; 2mm is a name),
// and what a broken request is told. Also the GPU lists of --gpus.
#include "dtx/Request.h"
#include "dtx/WorkerPool.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace {

const std::filesystem::path kTemplates = std::filesystem::path(DTX_SOURCE_DIR) / "templates";

dtx::RequestError refused(const dtx::TemplateFile& file,
                          const std::vector<dtx::ShapeSizes>& shapes) {
  try {
    dtx::check_request(file, shapes);
  } catch (const dtx::RequestError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted";
  return dtx::RequestError(dtx::RequestError::Kind::BadField, "", "");
}

} // namespace

TEST(Request, NumbersFollowTheirRuleAsText) {
  const dtx::NumberRule& budget = dtx::setting_rule("budget");
  EXPECT_EQ(budget.problem("200"), "");
  EXPECT_EQ(budget.problem("0"), "");
  for (const char* bad : {"-5", "1.5", "1e3", "0x10", "nan", "inf", "", " 5", "5 ", "10000001",
                          "18446744073709551611", "many"})
    EXPECT_NE(budget.problem(std::string(bad)), "") << bad;
  EXPECT_EQ(budget.problem("-5"), "`-5` is not a whole number from 0 to 10000000");
  // Beyond 2^53 a double rounds: 2^62 + 1 read as one was 2^62, in range, and taken.
  const dtx::NumberRule& seed = dtx::setting_rule("seed");
  EXPECT_EQ(seed.problem("4611686018427387904"), "");
  EXPECT_EQ(seed.problem("+4611686018427387904"), "");
  EXPECT_NE(seed.problem("4611686018427387905"), "");
  EXPECT_NE(seed.problem("9223372036854775807"), "");

  const dtx::NumberRule& rep = dtx::setting_rule("screen_rep_ms");
  EXPECT_EQ(rep.problem("2"), "");
  EXPECT_EQ(rep.problem("0.5"), "");
  EXPECT_EQ(rep.problem("1e2"), "");
  for (const char* bad : {"nan", "-inf", "inf", "0", "1e6", "2ms"})
    EXPECT_NE(rep.problem(std::string(bad)), "") << bad;
  EXPECT_NE(rep.problem(std::nan("")), "");
  EXPECT_EQ(dtx::setting_rule("rounds").problem(0.0), "must be a whole number from 1 to 100");
  EXPECT_THROW(dtx::setting_rule("colour"), std::out_of_range);
}

TEST(Request, KernelNamesAreSafeWordsThatMayStartWithADigit) {
  for (const std::string& ok :
       std::vector<std::string>{"geglu", "2mm", "_2mm", "k.v-2", std::string(100, 'k')})
    EXPECT_EQ(dtx::kernel_name_problem(ok), "") << ok;
  for (const std::string& bad :
       std::vector<std::string>{"", "../../tmp/evil $(id)", "-o", ".hidden", "a b", "a/b",
                                "k;touch${IFS}x", "k\"", std::string(101, 'k')})
    EXPECT_NE(dtx::kernel_name_problem(bad), "") << bad;
  EXPECT_EQ(dtx::algorithm_name_problem("2mm.dt"), "");
  EXPECT_NE(dtx::algorithm_name_problem("a\"\"\"b.dt"), "");
  EXPECT_EQ(dtx::token_problem("s3cret"), "");
  EXPECT_NE(dtx::token_problem(""), "");
  EXPECT_NE(dtx::token_problem("a b"), "");
  EXPECT_NE(dtx::token_problem("a\nInjected: 1"), "");
}

TEST(Request, EveryShippedTemplateIsAcceptedAtItsShapes) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kTemplates)) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    dtx::TemplateFile tf = dtx::load_template_file(entry.path());
    for (const auto* shapes : {&tf.shapes, &tf.test_shapes}) {
      EXPECT_FALSE(shapes->empty()) << entry.path();
      try {
        dtx::check_request(tf, *shapes);
      } catch (const dtx::RequestError& e) {
        ADD_FAILURE() << entry.path() << ": " << e.field << ": " << e.what() << e.rendered;
      }
    }
  }
  EXPECT_GE(files, 10);
}

TEST(Request, TiedLabelsMayBeLeftOutButMustAgree) {
  dtx::TemplateFile rms = dtx::load_template_file(kTemplates / "rmsnorm.yaml");
  dtx::CheckedRequest r = dtx::check_request(rms, {{{"x", 4}, {"y", 16}}});
  EXPECT_EQ(dtx::complete_shape(*r.algorithm, {{"x", 4}, {"y", 16}}),
            (dtx::ShapeSizes{{"x", 4}, {"y", 16}, {"k", 16}}));
  EXPECT_NO_THROW(dtx::check_request(rms, {{{"x", 4}, {"y", 16}, {"k", 16}}}));

  dtx::RequestError e = refused(rms, {{{"x", 4}, {"y", 16}, {"k", 8}}});
  EXPECT_EQ(e.kind, dtx::RequestError::Kind::BadField);
  EXPECT_EQ(e.field, "shapes");
  EXPECT_NE(std::string(e.what()).find("give them one size"), std::string::npos) << e.what();
  e = refused(rms, {{{"x", 4}, {"k", 16}}});
  EXPECT_NE(std::string(e.what()).find("no size for `y`"), std::string::npos) << e.what();
  e = refused(rms, {{{"x", 4}, {"y", 0}}});
  EXPECT_NE(std::string(e.what()).find("whole number >= 1"), std::string::npos) << e.what();
  e = refused(rms, {{{"x", 4}, {"y", 16}}, {{"y", 16}, {"x", 4}}});
  EXPECT_NE(std::string(e.what()).find("listed twice"), std::string::npos) << e.what();
  // A Space sees k's size too: `size.k` in a constraint.
  dtx::Space space(r.algorithm, dtx::parse_template("rms_norm_out.block(x:1); where size.k == 16;"),
                   {{"x", 4}, {"y", 16}});
  EXPECT_TRUE(space.at(0).ok) << space.at(0).message;
}

TEST(Request, ALabelOnlyAGatherReadsIsAShapeLabel) {
  // emb[t, d] = E[Tok[t], d] with In Tok: int(v): no Func has `v`, but the call needs its size
  // (E's first dimension), so a shape gives it.
  dtx::TemplateFile emb = dtx::parse_template_file(R"(kernel: emb
source: |
  Func emb; In E; In Tok: int(v); Var t, d, v;
  emb[t, d] = E[Tok[t], d];
  emb.compile();
schedule: |
  emb.block(t:{1, 2});
shapes:
  - {t: 9, d: 16, v: 13}
dtype: float32
baselines: [reference]
)",
                                                   "emb.yaml", kTemplates);
  EXPECT_NO_THROW(dtx::check_request(emb, emb.shapes));
  dtx::RequestError e = refused(emb, {{{"t", 9}, {"d", 16}}});
  EXPECT_NE(std::string(e.what()).find("no size for `v`"), std::string::npos) << e.what();
  e = refused(emb, {{{"t", 9}, {"d", 16}, {"v", 13}, {"w", 2}}});
  EXPECT_NE(std::string(e.what()).find("no label `w`"), std::string::npos) << e.what();
}

TEST(Request, BrokenRequestsNameTheirField) {
  dtx::TemplateFile tf = dtx::load_template_file(kTemplates / "geglu.yaml");
  const std::vector<dtx::ShapeSizes> shapes = {{{"x", 4}, {"y", 64}}};
  dtx::TemplateFile bad = tf;
  bad.kernel = "../../tmp/evil $(id)";
  EXPECT_EQ(refused(bad, shapes).field, "kernel");
  bad = tf;
  bad.dtype = "float64";
  EXPECT_EQ(refused(bad, shapes).field, "dtype");
  bad = tf;
  bad.strategy = "annealing";
  EXPECT_EQ(refused(bad, shapes).field, "strategy");
  bad = tf;
  bad.budget = 20000000;
  EXPECT_EQ(refused(bad, shapes).field, "budget");

  bad = tf;
  bad.schedule = "geglu.block(y:{64..128);";
  dtx::RequestError e = refused(bad, shapes);
  EXPECT_EQ(e.kind, dtx::RequestError::Kind::TemplateError);
  EXPECT_EQ(e.field, "schedule");
  ASSERT_FALSE(e.details.empty());
  EXPECT_EQ(e.details[0].line, 1);
  // For a terminal: at the template's line in the file.
  EXPECT_NE(e.rendered.find("geglu.yaml:" + std::to_string(tf.schedule_line + 1) + ":"),
            std::string::npos)
      << e.rendered;

  bad = tf;
  bad.schedule = "nofunc.block(y:64);";
  EXPECT_EQ(refused(bad, shapes).kind, dtx::RequestError::Kind::TemplateError);
  bad = tf;
  bad.algorithm = "Func f;\nf[x] = 1;";
  e = refused(bad, shapes);
  EXPECT_EQ(e.kind, dtx::RequestError::Kind::AlgorithmError);
  EXPECT_EQ(e.field, "algorithm");
  ASSERT_FALSE(e.details.empty());
  EXPECT_EQ(e.details[0].line, 2);

  e = refused(tf, {{{"x", 4}, {"z", 96}}});
  EXPECT_EQ(e.field, "shapes");
  EXPECT_NE(std::string(e.what()).find("no label `z`"), std::string::npos) << e.what();
  try {
    dtx::check_request(tf, {{{"x", 4}}}, "--shape");
    FAIL();
  } catch (const dtx::RequestError& err) {
    EXPECT_EQ(err.field, "--shape");
  }
}

TEST(Request, SizesShapesBaselinesAndLabelsHaveBounds) {
  dtx::TemplateFile tf = dtx::load_template_file(kTemplates / "geglu.yaml");
  auto words = [&](const dtx::TemplateFile& file, const std::vector<dtx::ShapeSizes>& shapes) {
    dtx::RequestError e = refused(file, shapes);
    EXPECT_EQ(e.kind, dtx::RequestError::Kind::BadField);
    return e.field + ": " + e.what();
  };
  EXPECT_NO_THROW(dtx::check_request(tf, {{{"x", 4}, {"y", dtx::kMaxShapeSize}}}));
  EXPECT_EQ(words(tf, {{{"x", 4}, {"y", dtx::kMaxShapeSize + 1}}}),
            "shapes: shape x=4,y=1099511627777: the size of `y` is more than 2^40 "
            "(1099511627776), the largest size a shape may give; give a smaller one");
  EXPECT_NE(words(tf, {{{"x", 4}, {"y", 4611686018427387904LL}}}).find("2^40"), std::string::npos);

  std::vector<dtx::ShapeSizes> many;
  for (int i = 0; i < 65; ++i)
    many.push_back({{"x", 4}, {"y", 64 + i}});
  EXPECT_EQ(words(tf, many),
            "shapes: a request lists at most 64 shapes, not 65: send the others in another "
            "request");
  many.pop_back();
  EXPECT_NO_THROW(dtx::check_request(tf, many));

  EXPECT_EQ(words(tf, {{{"x", 4}, {"y", 64}, {std::string(101, 'z'), 1}}}),
            "shapes: a label of a shape is at most 100 characters, not 101");

  dtx::TemplateFile twice = tf;
  twice.baselines.push_back(twice.baselines.front());
  EXPECT_EQ(words(twice, {{{"x", 4}, {"y", 64}}}),
            "baselines: baseline `" + tf.baselines.front().name +
                "` is listed twice: name each baseline once");
  EXPECT_EQ(dtx::baseline_name_problem(std::string(200, 'b')), "");
  EXPECT_NE(dtx::baseline_name_problem(std::string(201, 'b')).find("at most 200 characters"),
            std::string::npos);
  EXPECT_THROW(dtx::parse_baseline_entry(std::string(5000, 'b') + ".py:f", "k", kTemplates),
               std::invalid_argument);

  for (const char* empty : {"", " \n\t\n", "# a comment only\n"}) {
    dtx::TemplateFile none = tf;
    none.algorithm = empty;
    none.compile.clear();
    EXPECT_EQ(words(none, {{{"x", 4}, {"y", 64}}}).rfind("algorithm: the algorithm is empty", 0),
              0u)
        << empty;
  }
}

TEST(Request, TemplateFilesFollowTheSameRules) {
  auto parse = [](const std::string& extra) {
    return dtx::parse_template_file("kernel: k\nsource: |\n  Func f;\n  In A;\n  Var x;\n"
                                    "  f[x] = A[x];\n  f.compile();\nschedule: f.block(x:64)\n" +
                                        extra,
                                    "t.yaml", ".");
  };
  EXPECT_EQ(parse("budget: 0\n").budget, 0u);
  EXPECT_FALSE(parse("").budget.has_value());
  for (const char* bad : {"budget: -5\n", "budget: 1.5\n", "budget: .nan\n", "strategy: anneal\n",
                          "dtype: float64\n"}) {
    try {
      parse(bad);
      ADD_FAILURE() << bad;
    } catch (const dtx::TemplateFileError& e) {
      EXPECT_NE(std::string(e.what()).find("t.yaml:9:"), std::string::npos) << e.what();
    }
  }
}

TEST(Request, GpuListsAreIndicesOrNone) {
  EXPECT_EQ(dtx::parse_gpus("none"), std::vector<int>{});
  EXPECT_EQ(dtx::parse_gpus("0"), std::vector<int>{0});
  EXPECT_EQ(dtx::parse_gpus("1,0,3"), (std::vector<int>{1, 0, 3}));
  for (const char* bad : {"", "x", "-1", "0,", ",0", "0,0", "0,,1", "1.5", "99999", "0 1"})
    EXPECT_THROW(dtx::parse_gpus(bad), std::invalid_argument) << bad;
}
