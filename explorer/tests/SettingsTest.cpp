// The settings of an exploration, described once (Settings.h): the table itself, the words a bad
// value is refused with, dtx explore's options made from it, the round trips of the command line
// to settings to stored and request JSON and back, stores written before (nested do_bench times),
// and server/openapi.json held to the table.
#include "dtx/Settings.h"
#include "dtx/cli/SettingOptions.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

namespace {

using nlohmann::json;

/// `dtx explore`'s setting options on `args`.
dtx::ExploreSettings parsed(std::vector<std::string> args, std::set<std::string>* given = nullptr) {
  CLI::App app;
  dtx::ExploreSettings s;
  std::set<std::string> names;
  dtx::cli::add_setting_options(app, s, names);
  std::reverse(args.begin(), args.end());
  app.parse(args);
  if (given) *given = names;
  return s;
}

/// What the parse of `args` is refused with ("" when it is not).
std::string refusal(std::vector<std::string> args) {
  try {
    parsed(std::move(args));
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

/// A request's settings applied as dtxd applies them (ExplorationHandlers.cpp).
dtx::ExploreSettings from_request(const json& body) {
  dtx::ExploreSettings s;
  for (const dtx::Setting& f : dtx::settings())
    if (f.on(dtx::kRequestField) && body.contains(f.name)) {
      EXPECT_EQ(f.problem(body[f.name]), "") << f.name;
      f.set(s, body[f.name]);
    }
  return s;
}

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
  EXPECT_EQ(s.strategy, "tpe");
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
            "`strategy` is exhaustive, random, evolution, local or tpe");
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
            "`annealing` is not exhaustive, random, evolution, local or tpe");
  EXPECT_EQ(problem("times", "bench,wall"), "`wall` is not bench, gpu or host");
  EXPECT_EQ(problem("times", "gpu,host"), "");
  EXPECT_EQ(dtx::setting("times").from_text("gpu,,host"), json({"gpu", "host"}));
  EXPECT_EQ(dtx::setting("times").from_text(""), json::array());
  EXPECT_EQ(dtx::setting("seed").from_text("4611686018427387904"), 4611686018427387904LL);
  EXPECT_EQ(dtx::setting("timeout_s").from_text("1.5"), 1.5);
  EXPECT_NE(problem("device", std::string(201, 'x')), "");
}

TEST(Settings, OptionsAreMadeFromTheDescription) {
  std::set<std::string> given;
  dtx::ExploreSettings s = parsed({"--top", "3", "--times", "gpu"}, &given);
  EXPECT_EQ(s.top, 3);
  EXPECT_TRUE(s.gpu_time);
  EXPECT_FALSE(s.host_time);
  EXPECT_EQ(given, (std::set<std::string>{"top", "times"}));
  EXPECT_EQ(s.budget, 200u); // not given: the default
  // The options dtx explore has always had.
  std::set<std::string> options;
  for (const dtx::Setting& f : dtx::settings())
    if (f.on(dtx::kOption)) options.insert(f.option);
  EXPECT_EQ(options, (std::set<std::string>{"--strategy", "--budget", "--time", "--seed", "--top",
                                            "--rounds", "--screen-warmup", "--screen-rep",
                                            "--full-warmup", "--full-rep", "--times", "--timeout",
                                            "--in-flight", "--device"}));
  EXPECT_EQ(dtx::cli::option_help(dtx::setting("top")),
            "schedules re-measured with the full protocol (default 10)");
  EXPECT_NE(dtx::cli::option_help(dtx::setting("budget")).find("the file's, else 200"),
            std::string::npos);
}

TEST(Settings, ABadOptionIsRefusedNamingIt) {
  EXPECT_NE(refusal({"--budget", "-5"}).find("--budget: `-5` is not a whole number"),
            std::string::npos);
  EXPECT_NE(refusal({"--top", "1001"}).find("--top"), std::string::npos);
  EXPECT_NE(refusal({"--time", "nan"}).find("--time"), std::string::npos);
  EXPECT_NE(refusal({"--strategy", "annealing"}).find("--strategy"), std::string::npos);
  EXPECT_NE(refusal({"--times", "wall"}).find("--times: `wall` is not bench, gpu or host"),
            std::string::npos);
  EXPECT_NE(refusal({"--device", ""}).find("--device"), std::string::npos);
  EXPECT_NE(refusal({"--in-flight", "-1"}).find("--in-flight"), std::string::npos);
  EXPECT_EQ(refusal({"--seed", "4611686018427387904"}), "");
}

TEST(Settings, TheCommandLineRoundTripsThroughStoredAndRequestJson) {
  dtx::ExploreSettings s = parsed({"--strategy",      "local",
                                   "--budget",        "77",
                                   "--time",          "12.5",
                                   "--seed",          "4611686018427387903",
                                   "--top",           "3",
                                   "--rounds",        "2",
                                   "--screen-warmup", "1",
                                   "--screen-rep",    "2.5",
                                   "--full-warmup",   "3",
                                   "--full-rep",      "4",
                                   "--times",         "bench,host",
                                   "--timeout",       "30",
                                   "--device",        "NVIDIA H100 80GB HBM3",
                                   "--in-flight",     "6"});
  EXPECT_EQ(s.strategy, "local");
  EXPECT_EQ(s.budget, 77u);
  EXPECT_EQ(s.time_limit_s, 12.5);
  EXPECT_EQ(s.seed, 4611686018427387903ULL);
  EXPECT_EQ(s.top, 3);
  EXPECT_EQ(s.rounds, 2);
  EXPECT_EQ(s.screen.warmup_ms, 1);
  EXPECT_EQ(s.screen.rep_ms, 2.5);
  EXPECT_EQ(s.full.warmup_ms, 3);
  EXPECT_EQ(s.full.rep_ms, 4);
  EXPECT_FALSE(s.gpu_time);
  EXPECT_TRUE(s.host_time);
  EXPECT_EQ(s.timeout_s, 30);
  EXPECT_EQ(s.device, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(s.in_flight, 6u);
  s.input_seed = 9;

  // Stored and read back (as a resumed exploration is): everything but how the run went.
  json stored = json::parse(dtx::to_json(s).dump());
  dtx::ExploreSettings back = dtx::settings_from_json(stored);
  for (const dtx::Setting& f : dtx::settings())
    if (f.on(dtx::kStored)) {
      EXPECT_EQ(f.get(back), f.get(s)) << f.name;
    } else {
      EXPECT_EQ(f.get(back), f.fallback) << f.name;
    }
  EXPECT_FALSE(stored.contains("in_flight"));

  // Sent to dtxd (dtx explore --server) and read there: every field a request carries.
  json body = json::parse(dtx::request_fields(s).dump());
  EXPECT_FALSE(body.contains("input_seed"));
  EXPECT_FALSE(body.contains("in_flight"));
  dtx::ExploreSettings there = from_request(body);
  for (const dtx::Setting& f : dtx::settings())
    if (f.on(dtx::kRequestField)) {
      EXPECT_EQ(f.get(there), f.get(s)) << f.name;
    }
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

TEST(Settings, OpenApiDescribesEachRequestFieldAsTheTableDoes) {
  std::ifstream in(std::string(DTX_SOURCE_DIR) + "/server/openapi.json");
  ASSERT_TRUE(in) << "server/openapi.json";
  json doc = json::parse(in);
  // A request's fields that are not settings: a template file's, and /v1/expand's page.
  const std::set<std::string> file_fields = {
      "kernel", "algorithm", "source",  "algorithm_name", "schedule",   "shapes",
      "shape",  "dtype",     "compile", "baselines",      "test_shapes"};
  const std::map<std::string, std::set<std::string>> schemas = {
      {"ExplorationRequest", {}}, {"ExpandRequest", {"offset", "limit", "max_points"}}};
  for (const auto& [schema, more] : schemas) {
    const json& properties = doc["components"]["schemas"][schema]["properties"];
    for (const dtx::Setting& s : dtx::settings()) {
      if (!s.on(dtx::kRequestField)) {
        EXPECT_FALSE(properties.contains(s.name)) << schema << ": " << s.name;
        continue;
      }
      json want = {{"default", s.fallback}, {"description", s.help}};
      switch (s.kind) {
      case dtx::SettingKind::Count:
        want.update({{"type", "integer"},
                     {"format", "int64"},
                     {"minimum", static_cast<std::int64_t>(s.rule.lo)},
                     {"maximum", static_cast<std::int64_t>(s.rule.hi)}});
        break;
      case dtx::SettingKind::Number:
        want.update({{"type", "number"}, {"minimum", s.rule.lo}, {"maximum", s.rule.hi}});
        break;
      case dtx::SettingKind::Choice:
        want.update({{"type", "string"}, {"enum", s.choices}});
        break;
      case dtx::SettingKind::Choices:
        want.update({{"type", "array"}, {"items", {{"type", "string"}, {"enum", s.choices}}}});
        break;
      case dtx::SettingKind::Text:
        want.update({{"type", "string"}, {"maxLength", s.max_length}});
        break;
      }
      EXPECT_EQ(properties.value(s.name, json()), want)
          << schema << ": `" << s.name << "` should be " << want.dump();
    }
    for (const auto& [name, property] : properties.items())
      if (!file_fields.count(name) && !more.count(name)) {
        EXPECT_TRUE(std::any_of(
            dtx::settings().begin(), dtx::settings().end(),
            [&](const dtx::Setting& s) { return name == s.name && s.on(dtx::kRequestField); }))
            << schema << ": `" << name << "` is no setting of the description";
      }
  }
}
