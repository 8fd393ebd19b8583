// dtc: the DT compiler driver.
#include "dtc/Compiler.h"

#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

static const char* kUsage =
    "usage: dtc FILE.dt [-o OUT.py] [--check] [--emit=ast|ir|python] [--schedule \"STATEMENTS\"]\n"
    "           [--canonical]\n"
    "\n"
    "Compiles a Decoupled Triton program to a Python module of Triton kernels and wrappers.\n"
    "  -o OUT.py            write the module to OUT.py (default: standard output)\n"
    "  --check              report diagnostics only\n"
    "  --emit=KIND          ast, ir or python (default python)\n"
    "  --schedule TEXT      replace the file's schedule (its compile statements stay)\n"
    "  --canonical          print the canonical text of the schedule\n";

int main(int argc, char** argv) {
  std::string input, output;
  dtc::CompileOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "dtc: " << flag << " needs a value\n" << kUsage;
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "-o") {
      output = value("-o");
    } else if (arg == "--check") {
      options.emit = dtc::Emit::Check;
    } else if (arg == "--canonical") {
      options.emit = dtc::Emit::Canonical;
    } else if (arg == "--schedule") {
      options.schedule = value("--schedule");
    } else if (arg.rfind("--schedule=", 0) == 0) {
      options.schedule = arg.substr(11);
    } else if (arg.rfind("--emit=", 0) == 0) {
      std::string kind = arg.substr(7);
      if (kind == "ast")
        options.emit = dtc::Emit::Ast;
      else if (kind == "ir")
        options.emit = dtc::Emit::Ir;
      else if (kind == "python")
        options.emit = dtc::Emit::Python;
      else {
        std::cerr << "dtc: unknown --emit kind `" << kind << "` (ast, ir or python)\n";
        return 2;
      }
    } else if (!arg.empty() && arg[0] == '-' && arg != "-") {
      std::cerr << "dtc: unknown option `" << arg << "`\n" << kUsage;
      return 2;
    } else if (input.empty()) {
      input = arg;
    } else {
      std::cerr << "dtc: more than one input file (`" << input << "` and `" << arg << "`)\n";
      return 2;
    }
  }
  if (input.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  std::stringstream source;
  if (input == "-") {
    source << std::cin.rdbuf();
    options.file_name = "<stdin>";
  } else {
    std::ifstream in(input, std::ios::binary);
    if (!in) {
      std::cerr << "dtc: cannot read `" << input << "`: " << std::strerror(errno) << "\n";
      return 2;
    }
    source << in.rdbuf();
    options.file_name = input;
  }
  dtc::CompileResult result = dtc::compile(source.str(), options);
  std::cerr << result.diagnostics;
  if (!result.ok) return 1;
  if (options.emit == dtc::Emit::Check) return 0;
  if (output.empty()) {
    std::cout << result.output;
    return 0;
  }
  std::ofstream out(output, std::ios::binary);
  out << result.output;
  if (!out) {
    std::cerr << "dtc: cannot write `" << output << "`\n";
    return 2;
  }
  return 0;
}
