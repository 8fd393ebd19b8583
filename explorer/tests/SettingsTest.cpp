// The settings of an exploration, described once (Settings.h): the table itself, the words a bad
// value is refused with, and stores written before (nested do_bench times).
#include "dtx/Settings.h"

#include <gtest/gtest.h>

#include <set>

namespace {

using nlohmann::json;

/// Every described member, by name.
json members(const dtx::ExploreSettings& s) {
  json out;
  for (const dtx::Setting& f : dtx::settings())
    out[f.name] = f.get(s);
  return out;
}

} // namespace

TEST(Settings, EachIsDescribedOnceWithADefaultThatFollowsItsRule) {
  std::set<std::string> names, options;
  for (const dtx::Setting& s : dtx::settings()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_NE(std::string(s.help), "") << s.name;
    EXPECT_NE(s.describe(), "") << s.name;
    EXPECT_EQ(s.problem(s.fallback), "") << s.name;
    EXPECT_EQ(s.get(dtx::ExploreSettings()), s.fallback) << s.name;
    EXPECT_EQ(&dtx::setting(s.name), &s);
    if (s.on(dtx::kOption)) {
      EXPECT_EQ(std::string(s.option).rfind("--", 0), 0u) << s.name;
      EXPECT_TRUE(options.insert(s.option).second) << s.option;
    } else {
      EXPECT_EQ(std::string(s.option), "") << s.name;
    }
    // dtxd's configuration gives a default for each field a request may leave out.
    EXPECT_EQ(s.on(dtx::kRequestField), s.on(dtx::kConfigKey)) << s.name;
  }
  EXPECT_THROW(dtx::setting("colour"), std::out_of_range);
}

TEST(Settings, TheDefaultsAreTheThesisProtocol) {
  dtx::ExploreSettings s;
  EXPECT_EQ(s.strategy, "evolution");
  EXPECT_EQ(s.budget, 200u);
  EXPECT_EQ(s.time_limit_s, 0);
  EXPECT_EQ(s.seed, 0u);
  EXPECT_EQ(s.screen.warmup_ms, 5);
  EXPECT_EQ(s.screen.rep_ms, 20);
  EXPECT_EQ(s.top, 10);
  EXPECT_EQ(s.rounds, 5);
  EXPECT_EQ(s.full.warmup_ms, 25);
  EXPECT_EQ(s.full.rep_ms, 100);
  EXPECT_FALSE(s.gpu_time);
  EXPECT_FALSE(s.host_time);
  EXPECT_EQ(s.input_seed, 0);
  EXPECT_EQ(s.timeout_s, 120);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.max_rejected_in_a_row, 20000u);
  EXPECT_EQ(s.device, "");
  EXPECT_EQ(s.in_flight_share, nullptr);
}

TEST(Settings, ARequestsBadValueIsRefusedNamingTheField) {
  auto problem = [](const char* name, const json& v) { return dtx::setting(name).problem(v); };
  EXPECT_EQ(problem("top", "many"), "`top` must be a number");
  EXPECT_EQ(problem("top", 5000), "`top` must be a whole number from 0 to 1000");
  EXPECT_EQ(problem("top", 2.5), "`top` must be a whole number from 0 to 1000");
  EXPECT_EQ(problem("top", 3.0), "");
  EXPECT_EQ(problem("budget", -1), "`budget` must be a whole number from 0 to 10000000");
  EXPECT_EQ(problem("rounds", 0), "`rounds` must be a whole number from 1 to 100");
  // 2^62 + 1 read as a double is 2^62, within the range.
  EXPECT_EQ(problem("seed", 4611686018427387904ULL), "");
  EXPECT_NE(problem("seed", 4611686018427387905ULL), "");
  EXPECT_NE(problem("seed", 18446744073709551615ULL), "");
  EXPECT_EQ(problem("screen_rep_ms", 0), "`screen_rep_ms` must be a number from 0.01 to 100000");
  EXPECT_EQ(problem("screen_warmup_ms", 0), "");
  EXPECT_EQ(problem("strategy", 5), "`strategy` must be a string");
  EXPECT_EQ(problem("strategy", "annealing"),
            "`strategy` is exhaustive, random, evolution or local");
  EXPECT_EQ(problem("strategy", "annealing"), dtx::strategy_problem("annealing"));
  EXPECT_EQ(problem("times", "gpu"), "`times` is a list");
  EXPECT_EQ(problem("times", json::array({"wall"})), "`times` holds bench, gpu and host");
  EXPECT_EQ(problem("times", json::array({1})), "`times` holds bench, gpu and host");
  EXPECT_EQ(problem("times", json::array()), "");
  EXPECT_EQ(problem("device", 7), "`device` must be a string");
  EXPECT_EQ(problem("device", ""), "");
  EXPECT_EQ(problem("device", std::string(201, 'x')), dtx::device_problem(std::string(201, 'x')));
}

TEST(Settings, TextIsCheckedAsOptionsAndConfigurationKeysGiveIt) {
  auto problem = [](const char* name, const std::string& text) {
    return dtx::setting(name).text_problem(text);
  };
  EXPECT_EQ(problem("budget", "-5"), "`-5` is not a whole number from 0 to 10000000");
  EXPECT_EQ(problem("full_rep_ms", "nan"), "`nan` is not a number from 0.01 to 100000");
  EXPECT_EQ(problem("strategy", "annealing"),
            "`annealing` is not exhaustive, random, evolution or local");
  EXPECT_EQ(problem("times", "bench,wall"), "`wall` is not bench, gpu or host");
  EXPECT_EQ(problem("times", "gpu,host"), "");
  EXPECT_EQ(dtx::setting("times").from_text("gpu,,host"), json({"gpu", "host"}));
  EXPECT_EQ(dtx::setting("times").from_text(""), json::array());
  EXPECT_EQ(dtx::setting("seed").from_text("4611686018427387904"), 4611686018427387904LL);
  EXPECT_EQ(dtx::setting("timeout_s").from_text("1.5"), 1.5);
  EXPECT_NE(problem("device", std::string(201, 'x')), "");
}

TEST(Settings, StoresWrittenBeforeStillLoad) {
  // An exploration's settings as they were stored before the settings were described once.
  json old = json::parse(R"({"algorithm_name": "geglu.dt", "baselines": [], "budget": 64,
      "compile": [], "device": "NVIDIA H100 80GB HBM3",
      "full": {"rep_ms": 150.0, "warmup_ms": 30.0}, "gpu_time": true, "host_time": false,
      "in_flight": 8, "input_seed": 3, "rounds": 4, "screen": {"rep_ms": 10.0, "warmup_ms": 2.0},
      "seed": 11, "strategy": "random", "time_limit_s": 60.0, "timeout_s": 90.0, "top": 6})");
  dtx::ExploreSettings s = dtx::settings_from_json(old);
  EXPECT_EQ(s.strategy, "random");
  EXPECT_EQ(s.budget, 64u);
  EXPECT_EQ(s.time_limit_s, 60);
  EXPECT_EQ(s.seed, 11u);
  EXPECT_EQ(s.screen.warmup_ms, 2);
  EXPECT_EQ(s.screen.rep_ms, 10);
  EXPECT_EQ(s.top, 6);
  EXPECT_EQ(s.rounds, 4);
  EXPECT_EQ(s.full.warmup_ms, 30);
  EXPECT_EQ(s.full.rep_ms, 150);
  EXPECT_TRUE(s.gpu_time);
  EXPECT_FALSE(s.host_time);
  EXPECT_EQ(s.input_seed, 3);
  EXPECT_EQ(s.timeout_s, 90);
  EXPECT_EQ(s.device, "NVIDIA H100 80GB HBM3");
  // Written again, it reads the same.
  EXPECT_EQ(members(dtx::settings_from_json(dtx::to_json(s))), members(s));

  // Missing keys, values of another type or out of today's rules: the defaults.
  EXPECT_EQ(members(dtx::settings_from_json(json::object())), members(dtx::ExploreSettings()));
  EXPECT_EQ(members(dtx::settings_from_json(json::parse("[1]"))), members(dtx::ExploreSettings()));
  dtx::ExploreSettings odd =
      dtx::settings_from_json({{"top", "ten"}, {"rounds", -3}, {"screen", 5}, {"times", "gpu"}});
  EXPECT_EQ(members(odd), members(dtx::ExploreSettings()));
}
