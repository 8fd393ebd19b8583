// dtc: the DT compiler driver. Command-line parsing is CLI11's: it rejects an option given twice,
// options that exclude each other, and unknown options, with one message each.
#include "dtc/Compiler.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

// Exit status: 0 success, 1 the program has errors, 2 a usage or file error.
constexpr int kUsageError = 2;

// The input: a readable regular file, or `-` for standard input.
std::string check_input(const std::string& path) {
  if (path == "-") return {};
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return "cannot read `" + path + "`: no such file";
  if (std::filesystem::is_directory(status))
    return "`" + path + "` is a directory; give a .dt file";
  if (!std::filesystem::is_regular_file(status) && !std::filesystem::is_fifo(status) &&
      !std::filesystem::is_character_file(status))
    return "`" + path + "` is not a regular file";
  return {};
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Compiles a Decoupled Triton program to a Python module of Triton kernels, "
               "wrappers and a PyTorch reference.",
               "dtc"};
  const char* usage = "usage: dtc FILE.dt [-o OUT.py] [--check | --canonical | "
                      "--emit=ast|ir|python] [--schedule \"STATEMENTS\"] [--dump-after=PASS]";
  std::string input, output, emit, schedule;
  std::vector<std::string> dump_after;
  bool check_only = false, canonical_only = false;
  app.add_option("FILE", input, "the DT program (`-` reads standard input)")
      ->required()
      ->check(CLI::Validator(check_input, "FILE", "input"));
  app.add_option("-o,--output", output, "write the module to OUT.py (default: standard output)")
      ->option_text("OUT.py");
  auto* check = app.add_flag("--check", check_only, "report diagnostics only");
  auto* canonical =
      app.add_flag("--canonical", canonical_only, "print the canonical text of the schedule");
  auto* emit_opt = app.add_option("--emit", emit, "what to print: ast, ir or python (default)")
                       ->check(CLI::IsMember({"ast", "ir", "python"}))
                       ->option_text("KIND");
  auto* schedule_opt =
      app.add_option("--schedule", schedule,
                     "replace the file's schedule (its compile statements stay) with these "
                     "statements, separated by `;` or newlines")
          ->option_text("TEXT");
  std::vector<std::string> passes = dtc::kernel_passes();
  std::string pass_list;
  for (const std::string& p : passes)
    pass_list += p + ", ";
  passes.push_back("all");
  auto* dump_opt = app.add_option("--dump-after", dump_after,
                                  "print each kernel's IR to standard error after this pass (" +
                                      pass_list + "or all; repeatable)")
                       ->check(CLI::IsMember(passes))
                       ->option_text("PASS");
  check->excludes(canonical)->excludes(emit_opt);
  canonical->excludes(emit_opt);
  // A value given twice is a mistake, not an override.
  for (CLI::Option* opt : app.get_options())
    opt->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  dump_opt->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);

  try {
    app.parse(argc, argv);
    if (check->count() > 1 || canonical->count() > 1)
      throw CLI::ArgumentMismatch("--check and --canonical may be given once");
  } catch (const CLI::CallForHelp&) {
    std::cout << usage << "\n\n" << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (auto at = what.find(": At Most 1 required but received"); at != std::string::npos)
      what = "`" + what.substr(0, at) + "` is given more than once; give it once";
    std::cerr << "dtc: " << what << "\n" << usage << "\nRun `dtc --help` for more.\n";
    return kUsageError;
  }

  dtc::CompileOptions options;
  if (check_only) options.emit = dtc::Emit::Check;
  if (canonical_only) options.emit = dtc::Emit::Canonical;
  if (emit == "ast") options.emit = dtc::Emit::Ast;
  if (emit == "ir") options.emit = dtc::Emit::Ir;
  if (*schedule_opt) options.schedule = schedule;
  options.dump_after = dump_after;

  std::stringstream source;
  if (input == "-") {
    source << std::cin.rdbuf();
    options.file_name = "<stdin>";
  } else {
    std::ifstream in(input, std::ios::binary);
    if (in) source << in.rdbuf(); // an empty file is an empty program
    if (!in.is_open() || in.bad()) {
      std::cerr << "dtc: cannot read `" << input << "`: " << std::strerror(errno) << "\n";
      return kUsageError;
    }
    options.file_name = input;
  }
  dtc::CompileResult result = dtc::compile(source.str(), options);
  std::cerr << result.dumps << result.diagnostics;
  if (!result.ok) return 1;
  if (options.emit == dtc::Emit::Check) return 0;
  if (output.empty() || output == "-") {
    std::cout << result.output;
    return 0;
  }
  std::ofstream out(output, std::ios::binary);
  out << result.output;
  if (!out) {
    std::cerr << "dtc: -o/--output: cannot write `" << output << "`: " << std::strerror(errno)
              << "\n";
    return kUsageError;
  }
  return 0;
}
