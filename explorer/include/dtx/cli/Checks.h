#pragma once
// Checks of command-line values for the tools built with CLI11 (dtx and dtxd), by the rules of
// Request.h and WorkerPool.h. A value that breaks a rule is a CLI::ValidationError naming the
// option (exit status 2); nothing a user types reaches a conversion that throws, or wraps a
// negative count around to 2^64 - 5.
#include "dtx/Request.h"
#include "dtx/WorkerPool.h"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace dtx::cli {

/// A number in the rule's range: the whole text one number (digits only for a count), never
/// NaN or infinity.
inline CLI::Validator number_check(NumberRule rule) {
  return CLI::Validator([rule](std::string& text) { return rule.problem(text); }, rule.describe());
}

/// The rule of an exploration setting (setting_rule): as a template file and dtxd's API have it.
inline CLI::Validator setting_check(const std::string& field) {
  return number_check(setting_rule(field));
}

/// `0,1` or `none` (parse_gpus).
inline CLI::Validator gpus_check() {
  return CLI::Validator(
      [](std::string& text) {
        try {
          parse_gpus(text);
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      },
      "0,1|none");
}

/// An executable, a path or a name on PATH (program_problem).
inline CLI::Validator program_check() {
  return CLI::Validator([](std::string& text) { return program_problem(text); }, "PROGRAM");
}

/// A kernel's name (kernel_name_problem).
inline CLI::Validator kernel_name_check() {
  return CLI::Validator([](std::string& text) { return kernel_name_problem(text); }, "NAME");
}

/// A device model to measure on (device_problem), not empty.
inline CLI::Validator device_check() {
  return CLI::Validator(
      [](std::string& text) {
        return text.empty() ? std::string("give a device model, or leave the option out")
                            : device_problem(text);
      },
      "MODEL");
}

/// A bearer token (token_problem).
inline CLI::Validator token_check() {
  return CLI::Validator([](std::string& text) { return token_problem(text); }, "TOKEN");
}

/// A file to write or create (a database, an output): not a directory, in a directory that
/// exists.
inline CLI::Validator output_file_check() {
  return CLI::Validator(
      [](std::string& text) {
        std::filesystem::path p(text);
        std::error_code ec;
        if (text.empty()) return std::string("give a file name");
        if (std::filesystem::is_directory(p, ec)) return "`" + text + "` is a directory";
        std::filesystem::path dir = p.parent_path();
        if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
          return "the directory " + dir.string() + " does not exist";
        return std::string();
      },
      "FILE");
}

/// Any text but none.
inline CLI::Validator non_empty_check() {
  return CLI::Validator(
      [](std::string& text) { return text.empty() ? std::string("give a value") : std::string(); },
      "TEXT");
}

} // namespace dtx::cli
