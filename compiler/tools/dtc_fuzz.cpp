// Bounded-time fuzzer over the whole compiler: mutates seed programs (byte flips, token splices,
// truncations, random token soups) and checks that compiling never crashes, never reports an
// internal error, and that every failure carries at least one diagnostic.
//   dtc_fuzz --seconds N --seed S DIR_OF_SEEDS
#include "dtc/Compiler.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <vector>

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  double seconds = 10;
  unsigned seed = 1;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc)
      seconds = std::atof(argv[++i]);
    else if (a == "--seed" && i + 1 < argc)
      seed = static_cast<unsigned>(std::atoi(argv[++i]));
    else
      dir = a;
  }
  std::vector<std::string> seeds;
  if (!dir.empty() && fs::is_directory(dir))
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.path().extension() == ".dt") {
        std::ifstream in(entry.path());
        std::stringstream ss;
        ss << in.rdbuf();
        seeds.push_back(ss.str());
      }
  if (!dir.empty() && seeds.empty()) {
    // A fuzz run over a missing corpus would look green while testing almost nothing.
    std::cerr << "dtc_fuzz: no .dt files in `" << dir << "`\n";
    return 2;
  }
  if (seeds.empty()) seeds.push_back("Func f; In A; Var x; f[x] = A[x] * 2; f.compile();");
  static const char* tokens[] = {
      "Func",      "In",  "SIn", "Var", "RVar",  "f",     "A",         "x",    "y",       "k",
      "[",         "]",   "(",   ")",   ",",     ";",     ":",         ".",    "=",       "+",
      "-",         "*",   "/",   "%",   "<",     "==",    "rsum",      "rdot", "reshape", "len",
      "exp",       "pow", "1",   "0",   "2.5e3", "block", "tensorize", "map",  "fuse_at", "compile",
      "num_warps", "\n",  "#",   "xi",  "/",     "4",     "tanh",      "where"};
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto start = std::chrono::steady_clock::now();
  long runs = 0, failures = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
         seconds) {
    std::string src = seeds[pick(seeds.size())];
    int mutations = 1 + static_cast<int>(pick(6));
    for (int m = 0; m < mutations; ++m) {
      size_t pos = src.empty() ? 0 : pick(src.size() + 1);
      switch (pick(5)) {
      case 0:
        if (!src.empty() && pos < src.size()) src[pos] = static_cast<char>(rng());
        break;
      case 1:
        src.insert(pos, std::string(" ") + tokens[pick(std::size(tokens))] + " ");
        break;
      case 2:
        if (pos < src.size()) src.erase(pos, 1 + pick(8));
        break;
      case 3:
        src = src.substr(0, pos);
        break;
      case 4: {
        const std::string& other = seeds[pick(seeds.size())];
        size_t from = pick(other.size() + 1);
        src.insert(pos, other.substr(from, pick(40)));
        break;
      }
      }
    }
    dtc::CompileOptions options;
    options.file_name = "fuzz.dt";
    if (pick(4) == 0) options.schedule = "f.block(x:" + std::to_string(pick(70)) + ")";
    dtc::CompileResult r = dtc::compile(src, options);
    ++runs;
    if (r.diagnostics.find("internal error") != std::string::npos ||
        (!r.ok && r.diagnostics.find("error:") == std::string::npos)) {
      ++failures;
      std::cerr << "dtc_fuzz: bad result for input:\n----\n"
                << src << "\n----\n"
                << r.diagnostics << "\n";
      if (failures > 5) break;
    }
  }
  std::cout << "dtc_fuzz: " << runs << " programs in " << seconds << " s, " << failures
            << " failures\n";
  return failures ? 1 : 0;
}
