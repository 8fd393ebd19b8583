// Expansion speed: canonical, pruned schedules per second for the schedule-template spec's
// GeGLU example (its section 2) at 16384x16384, and for a larger space around it. Each
// expansion starts from a fresh Space (cold statement cache), as an exploration does.
//   dtx_expand_bench [--seconds S] [--threads N]
#include "dtx/Space.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace {

const char* kSpecExample = R"(
$BY = {128..4096};
geglu.block(x:{1, 2, 4}, y:$BY);
geglu.tensorize(x:0, y:{0, 64, 128, 256});
geglu.map({(x, y), (y, x)});
geglu.num_warps({4..32});
where geglu.tensorize.y == 0 or geglu.tensorize.y < $BY;
)";

struct Rate {
  double schedules_per_s = 0, points_per_s = 0;
  std::uint64_t distinct = 0, points = 0;
};

Rate measure(std::shared_ptr<const dtc::Algorithm> algorithm, const std::string& text,
             unsigned threads, double seconds) {
  using Clock = std::chrono::steady_clock;
  dtx::Template t = dtx::parse_template(text);
  Rate r;
  std::uint64_t schedules = 0, points = 0;
  auto start = Clock::now();
  double elapsed = 0;
  do {
    dtx::Space space(algorithm, t, {{"x", 16384}, {"y", 16384}});
    dtx::Enumerator en(space, 0, UINT64_MAX, threads);
    while (en.next()) {
    }
    schedules += en.stats().distinct;
    points += en.stats().visited + en.stats().unused;
    r.distinct = en.stats().distinct;
    r.points = space.size();
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  r.schedules_per_s = static_cast<double>(schedules) / elapsed;
  r.points_per_s = static_cast<double>(points) / elapsed;
  return r;
}

} // namespace

int main(int argc, char** argv) {
  double seconds = 2;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  std::ifstream in(std::string(DTX_SOURCE_DIR) + "/tests/conformance/l4_01_geglu.dt");
  std::stringstream ss;
  ss << in.rdbuf();
  auto algorithm = std::make_shared<const dtc::Algorithm>(ss.str(), "geglu.dt");
  const std::string larger = std::string(kSpecExample) + "geglu.num_stages({1..8:+1});";
  const double target = 200000;
  std::printf("expansion of the spec's GeGLU example at x=16384,y=16384 (target %.0f "
              "schedules/s)\n",
              target);
  std::printf("%-28s %8s %9s %14s %14s %8s\n", "space", "threads", "distinct", "schedules/s",
              "points/s", "/target");
  for (const auto& [name, text] :
       {std::pair<std::string, std::string>{"spec example", kSpecExample},
        {"spec example x num_stages", larger}})
    for (unsigned t : {1u, threads}) {
      if (t == threads && threads == 1 && t != 1u) continue;
      Rate r = measure(algorithm, text, t, seconds);
      std::printf("%-28s %8u %9llu %14.0f %14.0f %7.2fx\n", name.c_str(), t,
                  static_cast<unsigned long long>(r.distinct), r.schedules_per_s, r.points_per_s,
                  r.schedules_per_s / target);
      if (threads == 1) break;
    }
  return 0;
}
