#pragma once
// The options of `dtx explore` that give an exploration's settings, one per setting described
// with an option (Settings.h): its name, its help (the setting's line and default) and its check
// (the setting's rule) all come from the description.
#include "dtx/Settings.h"

#include <CLI/CLI.hpp>

#include <set>
#include <string>

namespace dtx::cli {

/// A value of the setting as text: the rule's problem is a CLI::ValidationError naming the
/// option (exit status 2). An option given empty text where the setting is text is refused too:
/// leaving it out gives the default.
inline CLI::Validator setting_check(const Setting& s) {
  return CLI::Validator(
      [&s](std::string& text) {
        if (s.kind == SettingKind::Text && text.empty())
          return std::string("give a value, or leave the option out");
        return s.text_problem(text);
      },
      s.describe());
}

/// The default as an option's help shows it ("" for empty text).
inline std::string default_text(const Setting& s) {
  switch (s.kind) {
  case SettingKind::Count:
  case SettingKind::Number:
    return number_text(s.fallback.get<double>());
  case SettingKind::Choice:
  case SettingKind::Text:
    return s.fallback.get<std::string>();
  case SettingKind::Choices: {
    std::string out;
    for (const auto& v : s.fallback)
      out += (out.empty() ? "" : ",") + v.get<std::string>();
    return out;
  }
  }
  return "";
}

/// The setting's line and its default; a template file's field is the default when the file
/// gives it.
inline std::string option_help(const Setting& s) {
  std::string value = default_text(s);
  if (s.on(kTemplateField))
    return std::string(s.help) + " (default: the file's, else " + value + ")";
  return value.empty() ? std::string(s.help) : std::string(s.help) + " (default " + value + ")";
}

/// An option for every setting that has one: given, it writes its value into `settings` and
/// its name into `given`.
inline void add_setting_options(CLI::App& app, ExploreSettings& settings,
                                std::set<std::string>& given) {
  for (const Setting& s : dtx::settings()) {
    if (!s.on(kOption)) continue;
    const char* type = s.kind == SettingKind::Count    ? "UINT"
                       : s.kind == SettingKind::Number ? "FLOAT"
                                                       : "TEXT";
    app.add_option_function<std::string>(
           s.option,
           [&s, &settings, &given](const std::string& text) {
             s.set(settings, s.from_text(text));
             given.insert(s.name);
           },
           option_help(s))
        ->type_name(type)
        ->check(setting_check(s));
  }
}

} // namespace dtx::cli
