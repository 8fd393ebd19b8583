#pragma once
// The `dtx` subcommands: each file adds one to the CLI11 app and returns how to run it.
#include "dtx/Space.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dtx::cli {

constexpr int kUsageError = 2;

struct Command {
  CLI::App* sub;
  std::function<int()> run;
};

Command add_measure_command(CLI::App& app);
Command add_expand_command(CLI::App& app);

std::vector<std::string> split(const std::string& s, char sep);
/// `x=4096,y=4096`; throws CLI::ValidationError naming `option`.
ShapeSizes parse_shape(const std::string& text, const std::string& option = "--shape");
std::string fmt_ms(double v);
std::string shape_text(const ShapeSizes& shape);

} // namespace dtx::cli
