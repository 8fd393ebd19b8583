#include "dtx/Protocol.h"
#include "dtx/Measure.h"
#include "dtx/Sha256.h"

#include <gtest/gtest.h>

using namespace dtx;

TEST(RequestJson, Measure) {
  Request r;
  r.module_source = "abc";
  r.func = "geglu";
  r.sizes = {{"x", 64}, {"y", 1000}};
  r.dtype = "float32";
  r.seed = 3;
  r.times.bench = BenchSettings{5, 20};
  r.times.host = HostSettings{100};
  auto j = request_json(r, "17");
  EXPECT_EQ(j["type"], "measure");
  EXPECT_EQ(j["id"], "17");
  EXPECT_EQ(j["module"]["sha256"], sha256_hex("abc"));
  EXPECT_EQ(j["module"]["source"], "abc");
  EXPECT_EQ(j["func"], "geglu");
  EXPECT_EQ(j["sizes"]["y"], 1000);
  EXPECT_EQ(j["dtype"], "float32");
  EXPECT_EQ(j["seed"], 3);
  EXPECT_EQ(j["check"], true);
  EXPECT_EQ(j["times"]["bench"]["warmup_ms"], 5.0);
  EXPECT_EQ(j["times"]["bench"]["rep_ms"], 20.0);
  EXPECT_EQ(j["times"]["host"]["calls"], 100);
  EXPECT_FALSE(j["times"].contains("gpu"));
  EXPECT_FALSE(j.contains("baseline"));
}

TEST(RequestJson, CompileHasNoTimes) {
  Request r;
  r.kind = RequestKind::Compile;
  r.times.bench = BenchSettings{};
  auto j = request_json(r, "1");
  EXPECT_EQ(j["type"], "compile");
  EXPECT_FALSE(j.contains("times"));
}

TEST(RequestJson, Baselines) {
  Request r;
  r.kind = RequestKind::Baseline;
  r.baseline = BaselineSpec{};
  r.baseline->file = "/b.py";
  r.baseline->function = "torch_geglu";
  r.baseline->torch_compile = true;
  auto j = request_json(r, "2");
  EXPECT_EQ(j["type"], "baseline");
  EXPECT_EQ(j["baseline"]["file"], "/b.py");
  EXPECT_EQ(j["baseline"]["function"], "torch_geglu");
  EXPECT_EQ(j["baseline"]["torch_compile"], true);
  r.baseline->reference = true;
  EXPECT_EQ(request_json(r, "3")["baseline"], nlohmann::json({{"reference", true}}));
}

TEST(ParseResult, Full) {
  auto j = nlohmann::json::parse(R"({"type": "result", "id": "17", "status": "ok", "message": "",
    "check": {"max_abs": 1.2e-06, "max_rel": 3.1e-06, "rel_l2": 2.0e-07, "mismatched": 0,
              "unwritten": 0, "rtol": 0.0001, "atol": 1e-05, "outside": 3},
    "times": {"bench": {"median_ms": 0.0213, "q20_ms": 0.0209, "q80_ms": 0.0221,
                        "min_ms": 0.0205, "max_ms": 0.0290, "samples": 412},
              "host":  {"per_call_us": 38.2, "calls": 1000}},
    "compile_s": 0.0, "import_s": 0.004, "wall_s": 0.41})");
  Result r = parse_result(j);
  EXPECT_EQ(r.id, "17");
  EXPECT_EQ(r.status, Status::Ok);
  ASSERT_TRUE(r.check);
  EXPECT_DOUBLE_EQ(r.check->max_rel, 3.1e-06);
  EXPECT_DOUBLE_EQ(r.check->rtol, 1e-4);
  EXPECT_EQ(r.check->outside, 3);
  EXPECT_EQ(to_json(*r.check)["outside"], 3);
  ASSERT_TRUE(r.bench);
  EXPECT_DOUBLE_EQ(r.bench->median_ms, 0.0213);
  EXPECT_EQ(r.bench->samples, 412);
  EXPECT_FALSE(r.gpu);
  ASSERT_TRUE(r.host);
  EXPECT_DOUBLE_EQ(r.host->per_call_us, 38.2);
  EXPECT_DOUBLE_EQ(r.wall_s, 0.41);
  EXPECT_FALSE(r.prefetch_s);
  EXPECT_EQ(to_json(r)["times"]["bench"]["samples"], 412);
  EXPECT_FALSE(to_json(r).contains("prefetch_s"));
  j["prefetched"] = {{"import_s", 0.01}, {"prefetch_s", 0.03}, {"compile_s", 0.0}};
  r = parse_result(j);
  ASSERT_TRUE(r.prefetch_s);
  EXPECT_DOUBLE_EQ(*r.prefetch_s, 0.03);
  EXPECT_DOUBLE_EQ(to_json(r)["prefetch_s"], 0.03);
}

TEST(ParseResult, StatusesAndMalformed) {
  for (auto name : {"ok", "compile_error", "out_of_resources", "runtime_error", "wrong_result",
                    "timeout", "crashed"}) {
    auto s = parse_status(name);
    ASSERT_TRUE(s) << name;
    EXPECT_EQ(status_name(*s), name);
  }
  Result r = parse_result({{"type", "result"}, {"id", "1"}, {"status", "fine"}});
  EXPECT_EQ(r.status, Status::Crashed);
  EXPECT_NE(r.message.find("unknown status"), std::string::npos);
  EXPECT_EQ(parse_result(nlohmann::json::array()).status, Status::Crashed);
}

TEST(ParseHello, CpuInterpreter) {
  auto hello = parse_hello(nlohmann::json::parse(
      R"({"type": "hello", "protocol": 1, "role": "timing", "pid": 42, "python": "3.11.2",
          "torch": "2.13.0", "triton": "3.6.0",
          "device": {"kind": "cpu-interpreter", "name": "cpu-interpreter"}, "comparable": false})"));
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->pid, 42);
  EXPECT_EQ(hello->device_kind, "cpu-interpreter");
  EXPECT_FALSE(hello->comparable);
  EXPECT_FALSE(parse_hello({{"type", "result"}}));
}

TEST(CudaError, Recognized) {
  EXPECT_TRUE(is_cuda_error("RuntimeError: CUDA error: an illegal memory access was encountered"));
  EXPECT_FALSE(is_cuda_error("ValueError: shapes do not match"));
}

// The compiled Funcs of a module: its first `COMPILED = (...)` line, by a linear scan.
TEST(CompiledFuncs, ReadsTheFirstCompiledLine) {
  EXPECT_EQ(dtx::compiled_funcs("\"\"\"doc\"\"\"\nSCHEDULE = \"\"\nCOMPILED = (\"out\", \"sum\")\n"
                                "COMPILED = (\"late\",)\n"),
            (std::vector<std::string>{"out", "sum"}));
  EXPECT_EQ(dtx::compiled_funcs("COMPILED = (\"f\",)\n"), (std::vector<std::string>{"f"}));
  EXPECT_TRUE(dtx::compiled_funcs("x = 1\nCOMPILED = ()\n").empty());
  EXPECT_TRUE(dtx::compiled_funcs("NOT_COMPILED = (\"f\",)\n").empty());
  EXPECT_TRUE(dtx::compiled_funcs("COMPILED = (\"f\",\n").empty()); // not closed on its line
  // A million characters of one line cost a scan, not a recursion per character.
  std::string long_line = "COMPILED = (\"" + std::string(1000000, 'a') + "\",)\n";
  EXPECT_EQ(dtx::compiled_funcs(long_line).at(0).size(), 1000000u);
}
