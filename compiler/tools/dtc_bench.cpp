// Benchmark (not a test): median time to compile a DT file to Python through the library API.
//   dtc_bench FILE.dt [--iterations N]
#include "dtc/Compiler.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: dtc_bench FILE.dt [--iterations N]\n";
    return 2;
  }
  int iterations = 2000;
  for (int i = 2; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--iterations") iterations = std::max(1, std::atoi(argv[i + 1]));
  std::ifstream in(argv[1]);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string source = ss.str();
  dtc::CompileOptions options;
  options.file_name = argv[1];
  dtc::CompileResult first = dtc::compile(source, options);
  if (!first.ok) {
    std::cerr << first.diagnostics;
    return 1;
  }
  std::vector<double> times;
  times.reserve(iterations);
  for (int i = 0; i < iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    dtc::CompileResult r = dtc::compile(source, options);
    auto t1 = std::chrono::steady_clock::now();
    if (!r.ok) return 1;
    times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(times.begin(), times.end());
  double median = times[times.size() / 2];
  std::cout << "dtc_bench " << argv[1] << ": " << iterations << " compiles, median " << median
            << " us, p10 " << times[times.size() / 10] << " us, p90 "
            << times[times.size() * 9 / 10] << " us, output " << first.output.size()
            << " bytes; target < 1000 us: " << (median < 1000 ? "met" : "missed") << "\n";
  return 0;
}
