// The rules of a request (Request.h): one place for dtx and dtxd.
#include "dtx/Request.h"

#include "dtx/Settings.h"
#include "dtx/Strategy.h"

#include <dtx/results/Store.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace dtx {

RequestError::RequestError(Kind k, std::string f, const std::string& message, std::vector<Detail> d,
                           std::string r)
    : std::runtime_error(message), kind(k), field(std::move(f)), details(std::move(d)),
      rendered(std::move(r)) {}

namespace {

bool ascii_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/// Letters, digits, `_`, `.` and `-`, at most `max`, the first a letter, a digit or `_`. A scan,
/// not a regex: the text is a user's, of any length.
bool is_name(const std::string& s, std::size_t max) {
  if (s.empty() || s.size() > max || s[0] == '.' || s[0] == '-') return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return ascii_alnum(c) || c == '_' || c == '.' || c == '-'; });
}

/// An optional sign and 1 to 19 digits.
bool is_integer(const std::string& s) {
  std::size_t digits = s.size() - (!s.empty() && (s[0] == '+' || s[0] == '-'));
  return digits >= 1 && digits <= 19 &&
         std::all_of(s.end() - static_cast<std::ptrdiff_t>(digits), s.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

} // namespace

std::string number_text(double v) {
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 9.2e18)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string NumberRule::describe() const {
  return std::string(whole ? "a whole number" : "a number") + " from " + number_text(lo) + " to " +
         number_text(hi);
}

std::string NumberRule::problem(double v) const {
  if (!std::isfinite(v) || v < lo || v > hi || (whole && v != std::floor(v)))
    return "must be " + describe();
  return "";
}

std::string NumberRule::problem(const std::string& text) const {
  std::string bad = "`" + text + "` is not " + describe();
  if (whole && !is_integer(text)) return bad;
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return bad;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return bad;
  if (whole) {
    // Compared as the integer it is: 2^62 + 1 reads as the double 2^62, which is in range.
    long long n = 0;
    auto [stop, ec] = std::from_chars(text.data() + (text[0] == '+'), end, n);
    if (ec != std::errc() || n < static_cast<long long>(lo) || n > static_cast<long long>(hi))
      return bad;
  }
  return problem(v).empty() ? "" : bad;
}

const NumberRule& setting_rule(const std::string& field) {
  const Setting& s = setting(field);
  if (s.kind != SettingKind::Count && s.kind != SettingKind::Number)
    throw std::out_of_range("the setting `" + field + "` is not a number");
  return s.rule;
}

const NumberRule& pool_rule(const std::string& field) {
  static const std::map<std::string, NumberRule> rules = {
      {"compile_workers", {0, 256, true}},
      {"startup_timeout_s", {1, 86400, false}},
      {"ray_interpreter_workers", {0, 1024, true}},
      {"ray_compile_per_node", {0, 1024, true}},
  };
  return rules.at(field);
}

std::string kernel_name_problem(const std::string& name) {
  if (is_name(name, 100)) return "";
  return "`kernel` is a name of letters, digits, `_`, `.` and `-` (up to 100), starting with a "
         "letter, a digit or `_`";
}

std::string algorithm_name_problem(const std::string& name) {
  if (is_name(name, 120)) return "";
  return "`algorithm_name` is a file name of letters, digits, `_`, `.` and `-`, starting with a "
         "letter, a digit or `_`";
}

std::string dtype_problem(const std::string& dtype) {
  if (dtype == "float32" || dtype == "float16" || dtype == "bfloat16") return "";
  return "`dtype` is float32, float16 or bfloat16";
}

std::string strategy_problem(const std::string& strategy) {
  const auto& names = strategy_names();
  if (std::find(names.begin(), names.end(), strategy) != names.end()) return "";
  return "`strategy` is " + strategy_list();
}

std::string baseline_name_problem(const std::string& name) {
  if (name.size() <= kMaxBaselineLength) return "";
  return "a baseline's name is at most " + std::to_string(kMaxBaselineLength) +
         " characters (torch, torch.compile, reference or FILE.py:FUNCTION[:compile]), not " +
         std::to_string(name.size());
}

std::string device_problem(const std::string& device) {
  if (device.size() <= kMaxDeviceLength) return "";
  return "a device model is named in at most " + std::to_string(kMaxDeviceLength) +
         " characters (as the workers name it: `NVIDIA H100 80GB HBM3`), not " +
         std::to_string(device.size());
}

std::string token_problem(const std::string& token) {
  if (token.empty()) return "a token cannot be empty";
  for (char c : token)
    if (c <= ' ' || c > '~') return "a token is printable ASCII without spaces";
  return "";
}

namespace {

std::vector<RequestError::Detail> details_of(const std::vector<TemplateError>& errors) {
  std::vector<RequestError::Detail> out;
  for (const TemplateError& e : errors)
    out.push_back({e.loc.line, e.loc.col, "", "error", e.message});
  return out;
}

/// Template errors located in the file the template came from (as TemplateFile does).
std::string rendered_in_file(const TemplateFile& file, std::vector<TemplateError> errors) {
  for (TemplateError& e : errors)
    if (e.loc.line == 1) e.loc.col += file.schedule_col;
  return render_template_errors(errors, file.name.empty() ? std::string("template") : file.name,
                                file.schedule_line);
}

[[noreturn]] void bad(const std::string& field, const std::string& message) {
  throw RequestError(RequestError::Kind::BadField, field, message);
}

} // namespace

CheckedRequest check_request(const TemplateFile& file, const std::vector<ShapeSizes>& shapes,
                             const std::string& shapes_field) {
  if (std::string p = kernel_name_problem(file.kernel); !p.empty()) bad("kernel", p);
  if (std::string p = algorithm_name_problem(file.algorithm_name); !p.empty())
    bad("algorithm_name", p);
  if (std::string p = dtype_problem(file.dtype); !p.empty()) bad("dtype", p);
  if (!file.strategy.empty())
    if (std::string p = strategy_problem(file.strategy); !p.empty()) bad("strategy", p);
  if (file.budget)
    if (std::string p = setting_rule("budget").problem(static_cast<double>(*file.budget));
        !p.empty())
      bad("budget", "`budget` " + p);
  for (auto it = file.baselines.begin(); it != file.baselines.end(); ++it) {
    if (std::string p = baseline_name_problem(it->name); !p.empty()) bad("baselines", p);
    auto same = [&](const NamedBaseline& b) { return b.name == it->name; };
    if (std::find_if(file.baselines.begin(), it, same) != it)
      bad("baselines", "baseline `" + it->name + "` is listed twice: name each baseline once");
  }
  if (shapes.size() > kMaxShapes)
    bad(shapes_field, "a request lists at most " + std::to_string(kMaxShapes) + " shapes, not " +
                          std::to_string(shapes.size()) + ": send the others in another request");

  // The template and the algorithm must be usable: errors now, with their place.
  if (std::all_of(file.algorithm.begin(), file.algorithm.end(),
                  [](unsigned char c) { return std::isspace(c); }))
    bad("algorithm", "the algorithm is empty: give the DT program's text");
  CheckedRequest out;
  try {
    out.tmpl = parse_template(file.schedule);
  } catch (const TemplateParseError& e) {
    throw RequestError(RequestError::Kind::TemplateError, "schedule",
                       "the schedule template has errors", details_of(e.errors),
                       rendered_in_file(file, e.errors));
  }
  out.algorithm = std::make_shared<const dtc::Algorithm>(file.program(), file.algorithm_name);
  if (!out.algorithm->ok()) {
    std::vector<RequestError::Detail> details;
    for (const dtc::Message& m : out.algorithm->messages())
      details.push_back({m.line, m.col, m.code, m.severity, m.text});
    throw RequestError(RequestError::Kind::AlgorithmError, "algorithm", "the algorithm has errors",
                       std::move(details), out.algorithm->diagnostics());
  }
  if (out.algorithm->funcs().empty())
    bad("algorithm", "the algorithm is empty: it declares no Func");
  try {
    Space space(out.algorithm, out.tmpl, {}, SpaceOptions{.dtype = file.dtype});
  } catch (const TemplateParseError& e) {
    throw RequestError(RequestError::Kind::TemplateError, "schedule",
                       "the schedule template does not fit the algorithm", details_of(e.errors),
                       rendered_in_file(file, e.errors));
  }
  for (auto it = shapes.begin(); it != shapes.end(); ++it) {
    for (const auto& [label, size] : *it)
      if (label.size() > kMaxLabelLength)
        bad(shapes_field, "a label of a shape is at most " + std::to_string(kMaxLabelLength) +
                              " characters, not " + std::to_string(label.size()));
    std::string key = results::shape_key(results::Shape(it->begin(), it->end()));
    for (const auto& [label, size] : *it)
      if (size > kMaxShapeSize)
        bad(shapes_field, "shape " + key + ": the size of `" + label + "` is more than 2^40 (" +
                              std::to_string(kMaxShapeSize) +
                              "), the largest size a shape may give; give a smaller one");
    if (std::string problem = shape_problem(*out.algorithm, *it); !problem.empty())
      bad(shapes_field, "shape " + key + ": " + problem);
    if (std::find(shapes.begin(), it, *it) != it)
      bad(shapes_field, "shape " + key + " is listed twice");
  }
  return out;
}

} // namespace dtx
