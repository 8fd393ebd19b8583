#pragma once
// The settings of an exploration, each described once (`settings()`, Settings.cpp): its name,
// what it holds, its rule, its default, one line of documentation, the member it binds to and
// where it can be given. dtx explore's options (cli/SettingOptions.h), dtxd's `explore:`
// configuration keys, a request's fields (POST /v1/explorations and /v1/expand), what
// `dtx explore --server` sends and the stored JSON of an exploration's settings are all read and
// written through that one table; a test holds server/openapi.json to it.
#include "dtx/Measurement.h"
#include "dtx/Request.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dtx {

/// What an exploration is searched and measured with. Every member but `in_flight_share` is
/// described in `settings()`, which gives its default (the constructor sets them all).
struct ExploreSettings {
  ExploreSettings();
  std::string strategy;
  std::uint64_t budget;
  double time_limit_s;
  std::uint64_t seed;
  BenchSettings screen; // do_bench warm-up and repetitions of the screening
  int top;
  int rounds;
  BenchSettings full; // of the full protocol
  bool gpu_time, host_time;
  int input_seed;
  double timeout_s;
  std::size_t in_flight;
  std::uint64_t max_rejected_in_a_row;
  std::string device;
  /// When set, read before every proposal instead of `in_flight`: a daemon running several
  /// explorations on one pool gives each its current share. How a run goes, not a setting.
  const std::atomic<std::size_t>* in_flight_share = nullptr;
};

/// The JSON shape of a setting's value (a request's field, a stored key).
enum class SettingKind {
  Count,   // a whole number (JSON integer) within `rule`
  Number,  // a number (JSON number) within `rule`
  Choice,  // one of `choices` (JSON string)
  Choices, // some of `choices` (JSON array of strings; as text, separated by commas)
  Text,    // at most `max_length` characters (JSON string)
};

/// Where a setting can be given, or is kept.
enum SettingSurface : unsigned {
  kOption = 1,        // an option of `dtx explore` (`Setting::option`)
  kTemplateField = 2, // a field of a template file, which the option overrides
  kRequestField = 4,  // a field of a request to dtxd, as `dtx explore --server` sends it
  kConfigKey = 8,     // a key of dtxd's `explore:` configuration: the default of the field
  kStored = 16,       // kept with the exploration; a resumed one runs with it again
};

struct Setting {
  const char* name;   // the field of a request and a template file, the key of the configuration
                      // and of the stored JSON
  const char* option; // of `dtx explore`; "" when none
  SettingKind kind;
  NumberRule rule{};                  // Count, Number
  std::vector<std::string> choices{}; // Choice, Choices
  std::size_t max_length = 0;         // Text
  /// Text: what a value of at most `max_length` characters must also be ("" when it is).
  std::string (*text_rule)(const std::string&) = nullptr;
  nlohmann::json fallback{}; // the default, as a request writes the value
  const char* help;          // one line: what it is (the option's help, openapi.json's description)
  unsigned surfaces;
  std::function<nlohmann::json(const ExploreSettings&)> get{}; // the member, as a request writes it
  std::function<void(ExploreSettings&, const nlohmann::json&)> set{}; // a value that fits

  bool on(SettingSurface s) const { return (surfaces & s) != 0; }
  /// What a value must be, in words: "a whole number from 0 to 10", "exhaustive, random,
  /// evolution or local", "bench, gpu or host, separated by commas", "at most 200 characters".
  std::string describe() const;
  /// "" when a request's value follows the rule, else why not, naming the field: "`top` must be
  /// a number", "`top` must be a whole number from 0 to 1000", "`strategy` is exhaustive,
  /// random, evolution or local", "`times` holds bench, gpu and host".
  std::string problem(const nlohmann::json& value) const;
  /// The same for text (an option, a configuration scalar), not naming the field, which the
  /// caller does: "`-5` is not a whole number from 0 to 10", "`wall` is not bench, gpu or host".
  std::string text_problem(const std::string& text) const;
  /// The value of text that has no problem, as a request writes it.
  nlohmann::json from_text(const std::string& text) const;
};

/// Every setting, in the order a request's fields are checked.
const std::vector<Setting>& settings();
/// The setting of this name; std::out_of_range for another.
const Setting& setting(std::string_view name);

/// The settings a request carries (kRequestField), as its fields: what `dtx explore --server`
/// sends.
nlohmann::json request_fields(const ExploreSettings& s);

/// The stored form (kStored), written by name as a request writes each value.
nlohmann::json to_json(const ExploreSettings& s);
/// Settings from their stored form: the default where a key is missing or its value breaks the
/// setting's rule. Also reads the form written before the settings were described once:
/// `screen` and `full` objects (`warmup_ms`, `rep_ms`), `gpu_time` and `host_time` booleans.
ExploreSettings settings_from_json(const nlohmann::json& j);

} // namespace dtx
