// The settings of an exploration, described once (Settings.h).
#include "dtx/Settings.h"

#include "dtx/Strategy.h"
#include "dtx/Text.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace dtx {
namespace {

using nlohmann::json;

struct Binding {
  std::function<json(const ExploreSettings&)> get;
  std::function<void(ExploreSettings&, const json&)> set;
};

template <class T> Binding member(T ExploreSettings::*m) {
  return {[m](const ExploreSettings& s) { return json(s.*m); },
          [m](ExploreSettings& s, const json& v) { s.*m = v.get<T>(); }};
}

Binding bench(BenchSettings ExploreSettings::*b, double BenchSettings::*m) {
  return {[b, m](const ExploreSettings& s) { return json((s.*b).*m); },
          [b, m](ExploreSettings& s, const json& v) { (s.*b).*m = v.get<double>(); }};
}

/// `times`: bench always, gpu and host when their member is set.
Binding times() {
  return {[](const ExploreSettings& s) {
            json t = {"bench"};
            if (s.gpu_time) t.push_back("gpu");
            if (s.host_time) t.push_back("host");
            return t;
          },
          [](ExploreSettings& s, const json& v) {
            s.gpu_time = std::find(v.begin(), v.end(), json("gpu")) != v.end();
            s.host_time = std::find(v.begin(), v.end(), json("host")) != v.end();
          }};
}

Setting described(Setting s, Binding b) {
  s.get = std::move(b.get);
  s.set = std::move(b.set);
  return s;
}

std::vector<std::string> comma_separated(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool chosen(const Setting& s, const std::string& v) {
  return std::find(s.choices.begin(), s.choices.end(), v) != s.choices.end();
}

std::string quoted(const char* name) {
  return std::string("`") + name + "`";
}

} // namespace

const std::vector<Setting>& settings() {
  using K = SettingKind;
  constexpr unsigned kEverywhere = kOption | kRequestField | kConfigKey | kStored;
  static const std::vector<Setting> table = {
      described({.name = "strategy",
                 .option = "--strategy",
                 .kind = K::Choice,
                 .choices = strategy_names(),
                 .fallback = "tpe",
                 .help = "the search strategy",
                 .surfaces = kEverywhere | kTemplateField},
                member(&ExploreSettings::strategy)),
      described({.name = "budget",
                 .option = "--budget",
                 .kind = K::Count,
                 .rule = {0, 1e7, true},
                 .fallback = 200,
                 .help = "distinct schedules measured; 0: no limit; exhaustive given none: the "
                         "whole space",
                 .surfaces = kEverywhere | kTemplateField},
                member(&ExploreSettings::budget)),
      described({.name = "time_limit_s",
                 .option = "--time",
                 .kind = K::Number,
                 .rule = {0, 1e7, false},
                 .fallback = 0.0,
                 .help = "stop searching after this many seconds; 0: no limit",
                 .surfaces = kEverywhere},
                member(&ExploreSettings::time_limit_s)),
      described({.name = "seed",
                 .option = "--seed",
                 .kind = K::Count,
                 .rule = {0, 4611686018427387904.0, true}, // 2^62: exact in JSON's doubles
                 .fallback = 0,
                 .help = "the strategy's seed (the same seed replays the same search)",
                 .surfaces = kEverywhere},
                member(&ExploreSettings::seed)),
      described({.name = "top",
                 .option = "--top",
                 .kind = K::Count,
                 .rule = {0, 1000, true},
                 .fallback = 10,
                 .help = "schedules re-measured with the full protocol",
                 .surfaces = kEverywhere},
                member(&ExploreSettings::top)),
      described({.name = "rounds",
                 .option = "--rounds",
                 .kind = K::Count,
                 .rule = {1, 100, true},
                 .fallback = 5,
                 .help = "rounds of the full protocol",
                 .surfaces = kEverywhere},
                member(&ExploreSettings::rounds)),
      described({.name = "screen_warmup_ms",
                 .option = "--screen-warmup",
                 .kind = K::Number,
                 .rule = {0, 1e5, false},
                 .fallback = 5.0,
                 .help = "do_bench warm-up of the screening, ms",
                 .surfaces = kEverywhere},
                bench(&ExploreSettings::screen, &BenchSettings::warmup_ms)),
      described({.name = "screen_rep_ms",
                 .option = "--screen-rep",
                 .kind = K::Number,
                 .rule = {0.01, 1e5, false},
                 .fallback = 20.0,
                 .help = "do_bench repetitions of the screening, ms",
                 .surfaces = kEverywhere},
                bench(&ExploreSettings::screen, &BenchSettings::rep_ms)),
      described({.name = "full_warmup_ms",
                 .option = "--full-warmup",
                 .kind = K::Number,
                 .rule = {0, 1e5, false},
                 .fallback = 25.0,
                 .help = "do_bench warm-up of the full protocol, ms",
                 .surfaces = kEverywhere},
                bench(&ExploreSettings::full, &BenchSettings::warmup_ms)),
      described({.name = "full_rep_ms",
                 .option = "--full-rep",
                 .kind = K::Number,
                 .rule = {0.01, 1e5, false},
                 .fallback = 100.0,
                 .help = "do_bench repetitions of the full protocol, ms",
                 .surfaces = kEverywhere},
                bench(&ExploreSettings::full, &BenchSettings::rep_ms)),
      described({.name = "timeout_s",
                 .option = "--timeout",
                 .kind = K::Number,
                 .rule = {1, 86400, false},
                 .fallback = 120.0,
                 .help = "seconds a measurement may take, per request and stage",
                 .surfaces = kEverywhere},
                member(&ExploreSettings::timeout_s)),
      described({.name = "device",
                 .option = "--device",
                 .kind = K::Text,
                 .max_length = kMaxDeviceLength,
                 .text_rule = device_problem,
                 .fallback = "",
                 .help = "the GPU model to measure on, as the workers name it (`NVIDIA H100 80GB "
                         "HBM3`); empty: the first timing worker's. On a Ray cluster of several "
                         "models, only GPUs of this model measure the exploration",
                 .surfaces = kEverywhere},
                member(&ExploreSettings::device)),
      described({.name = "times",
                 .option = "--times",
                 .kind = K::Choices,
                 .choices = {"bench", "gpu", "host"},
                 .fallback = json::array({"bench"}),
                 .help = "the times the full protocol takes: bench (do_bench), and gpu "
                         "(do_bench_cudagraph) and host (µs per call, back to back) when listed",
                 .surfaces = kEverywhere},
                times()),
      described({.name = "in_flight",
                 .option = "--in-flight",
                 .kind = K::Count,
                 .rule = {0, 100000, true},
                 .fallback = 0,
                 .help = "requests in the pool at once; 0: twice the workers, at least 4 (for "
                         "evolution, local and tpe at most a quarter of the budget)",
                 .surfaces = kOption},
                member(&ExploreSettings::in_flight)),
      described({.name = "input_seed",
                 .option = "",
                 .kind = K::Count,
                 .rule = {0, 2147483647, true},
                 .fallback = 0,
                 .help = "the seed of the inputs' random values",
                 .surfaces = kStored},
                member(&ExploreSettings::input_seed)),
      described({.name = "max_rejected_in_a_row",
                 .option = "",
                 .kind = K::Count,
                 .rule = {1, 1e12, true},
                 .fallback = 20000,
                 .help = "stop when this many proposals in a row were rejected before any "
                         "measurement",
                 .surfaces = 0},
                member(&ExploreSettings::max_rejected_in_a_row)),
  };
  return table;
}

const Setting& setting(std::string_view name) {
  for (const Setting& s : settings())
    if (name == s.name) return s;
  throw std::out_of_range("no setting `" + std::string(name) + "`");
}

ExploreSettings::ExploreSettings() {
  for (const Setting& s : settings())
    s.set(*this, s.fallback);
}

std::string Setting::describe() const {
  switch (kind) {
  case SettingKind::Count:
  case SettingKind::Number:
    return rule.describe();
  case SettingKind::Choice:
    return listed(choices, "or");
  case SettingKind::Choices:
    return listed(choices, "or") + ", separated by commas";
  case SettingKind::Text:
    return "at most " + std::to_string(max_length) + " characters";
  }
  return "";
}

std::string Setting::problem(const json& v) const {
  const std::string field = quoted(name);
  switch (kind) {
  case SettingKind::Count:
  case SettingKind::Number: {
    if (!v.is_number()) return field + " must be a number";
    if (kind == SettingKind::Count && v.is_number_integer()) {
      // Compared as the integer it is: 2^62 + 1 read as a double is 2^62, which is in range.
      bool in_range = !(v.is_number_unsigned() &&
                        v.get<std::uint64_t>() >
                            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
      if (in_range) {
        auto n = v.get<std::int64_t>();
        in_range =
            n >= static_cast<std::int64_t>(rule.lo) && n <= static_cast<std::int64_t>(rule.hi);
      }
      return in_range ? "" : field + " must be " + rule.describe();
    }
    std::string p = rule.problem(v.get<double>());
    return p.empty() ? "" : field + " " + p;
  }
  case SettingKind::Choice:
    if (!v.is_string()) return field + " must be a string";
    return chosen(*this, v.get<std::string>()) ? "" : field + " is " + describe();
  case SettingKind::Choices:
    if (!v.is_array()) return field + " is a list";
    for (const json& item : v)
      if (!item.is_string() || !chosen(*this, item.get<std::string>()))
        return field + " holds " + listed(choices, "and");
    return "";
  case SettingKind::Text:
    if (!v.is_string()) return field + " must be a string";
    return text_problem(v.get<std::string>());
  }
  return "";
}

std::string Setting::text_problem(const std::string& text) const {
  switch (kind) {
  case SettingKind::Count:
  case SettingKind::Number:
    return rule.problem(text);
  case SettingKind::Choice:
    return chosen(*this, text) ? "" : "`" + text + "` is not " + describe();
  case SettingKind::Choices:
    for (const std::string& item : comma_separated(text))
      if (!chosen(*this, item)) return "`" + item + "` is not " + listed(choices, "or");
    return "";
  case SettingKind::Text:
    if (text_rule)
      if (std::string p = text_rule(text); !p.empty()) return p;
    if (text.size() > max_length)
      return "at most " + std::to_string(max_length) + " characters, not " +
             std::to_string(text.size());
    return "";
  }
  return "";
}

json Setting::from_text(const std::string& text) const {
  switch (kind) {
  case SettingKind::Count:
    return std::stoll(text);
  case SettingKind::Number:
    return std::stod(text);
  case SettingKind::Choice:
  case SettingKind::Text:
    return text;
  case SettingKind::Choices:
    return comma_separated(text);
  }
  return text;
}

json request_fields(const ExploreSettings& s) {
  json out = json::object();
  for (const Setting& f : settings())
    if (f.on(kRequestField)) out[f.name] = f.get(s);
  return out;
}

json to_json(const ExploreSettings& s) {
  json out = json::object();
  for (const Setting& f : settings())
    if (f.on(kStored)) out[f.name] = f.get(s);
  return out;
}

ExploreSettings settings_from_json(const json& j) {
  ExploreSettings s;
  if (!j.is_object()) return s;
  json flat = j;
  // The form written before: nested do_bench times, the extra times as booleans.
  for (const char* protocol : {"screen", "full"})
    if (j.contains(protocol) && j[protocol].is_object())
      for (const char* time : {"warmup_ms", "rep_ms"})
        if (j[protocol].contains(time) && !j.contains(std::string(protocol) + "_" + time))
          flat[std::string(protocol) + "_" + time] = j[protocol][time];
  if (!j.contains("times") && (j.contains("gpu_time") || j.contains("host_time"))) {
    flat["times"] = {"bench"};
    if (j.value("gpu_time", false)) flat["times"].push_back("gpu");
    if (j.value("host_time", false)) flat["times"].push_back("host");
  }
  for (const Setting& f : settings())
    if (f.on(kStored) && flat.contains(f.name) && f.problem(flat[f.name]).empty())
      f.set(s, flat[f.name]);
  return s;
}

} // namespace dtx
