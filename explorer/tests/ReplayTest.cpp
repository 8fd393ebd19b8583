// The strategies replayed on real timings: exhaustive explorations recorded on an H100 and an
// H200 (tests/data/recorded/, screening times of every distinct schedule of a template's space,
// or the failure of one that failed on the GPU). A
// strategy searches the same space as `dtx explore` does (points evaluated by the Space,
// rejected points and repeated schedules cost nothing) and its measurements are answered from
// the recording. Target: within 2% of the exhaustive best after at most 10% of the schedules
// (where a recording says otherwise, its own).
#include "dtx/Space.h"
#include "dtx/Strategy.h"
#include "dtx/TemplateFile.h"

#include <gtest/gtest.h>

#include <deque>
#include <fstream>
#include <random>
#include <unordered_map>

namespace {

struct Recording {
  std::string name, template_file;
  dtx::ShapeSizes shape;
  double within;          // the target: this close to the exhaustive best...
  int seeds;              // ...in at least this many of 10 seeded searches...
  std::size_t budget = 0; // ...after this many schedules (0: a tenth of the space)
};

// Each schedule's screening time, or none where its measurement failed (status other than ok:
// the pool's answer is then a failure, which the strategy observes as such).
using Times = std::unordered_map<std::string, std::optional<double>>;

Times load(const std::string& file) {
  std::ifstream in(std::string(DTX_SOURCE_DIR) + "/tests/data/recorded/" + file);
  EXPECT_TRUE(in) << file;
  Times times;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("canonical,", 0) == 0) continue;
    // "canonical",status,screen_ms (the canonical text holds commas, so it is quoted)
    size_t close = line.find("\",", 1);
    std::string canonical = line.substr(1, close - 1);
    std::string rest = line.substr(close + 2);
    size_t comma = rest.find(',');
    if (rest.substr(0, comma) == "ok")
      times[canonical] = std::stod(rest.substr(comma + 1));
    else
      times[canonical] = std::nullopt;
  }
  return times;
}

struct Outcome {
  double best = 0;
  std::size_t measured = 0;
};

/// Searches with `strategy` until `budget` distinct schedules are measured; `in_flight` of
/// them outstanding at once, finishing in a scrambled order as a pool's do.
Outcome search(const dtx::Space& space, const Times& times, const std::string& strategy,
               std::uint64_t seed, std::size_t budget, std::size_t in_flight) {
  auto s = dtx::make_strategy(
      strategy,
      {space.radices(), [&](dtx::Point p) { return space.normalize(std::move(p)); }, seed});
  std::unordered_map<std::string, std::optional<double>> known;
  std::deque<std::pair<dtx::Point, std::string>> pending;
  std::mt19937_64 order(seed);
  Outcome out;
  out.best = 1e30;
  int idle = 0;
  while (true) {
    while (pending.size() < in_flight && out.measured + pending.size() < budget && idle < 100000) {
      std::vector<dtx::Point> ps = s->propose(1);
      if (ps.empty()) break;
      dtx::Candidate c = space.evaluate(ps[0]);
      if (!c.ok) {
        s->observe(ps[0], std::nullopt);
        ++idle;
        continue;
      }
      if (auto k = known.find(c.canonical); k != known.end()) {
        s->observe(ps[0], k->second); // the same schedule: no new measurement
        ++idle;
        continue;
      }
      idle = 0;
      known[c.canonical] = std::nullopt;
      pending.emplace_back(ps[0], c.canonical);
    }
    if (pending.empty()) break;
    std::size_t k = std::uniform_int_distribution<std::size_t>(0, pending.size() - 1)(order);
    auto [p, canonical] = pending[k];
    pending.erase(pending.begin() + static_cast<long>(k));
    auto t = times.find(canonical);
    std::optional<double> cost = t != times.end() ? t->second : std::nullopt;
    known[canonical] = cost;
    ++out.measured;
    if (cost) out.best = std::min(out.best, *cost);
    s->observe(p, cost);
  }
  return out;
}

class Replay : public ::testing::TestWithParam<Recording> {};

TEST_P(Replay, EachStrategyReachesTheBestWithinTenPercent) {
  const Recording& r = GetParam();
  auto times = load(r.name + ".csv");
  ASSERT_GT(times.size(), 100u);
  double best = 1e30;
  for (const auto& [c, t] : times)
    if (t) best = std::min(best, *t);
  dtx::TemplateFile tf =
      dtx::load_template_file(std::string(DTX_SOURCE_DIR) + "/templates/" + r.template_file);
  auto algorithm = std::make_shared<const dtc::Algorithm>(tf.program(), tf.algorithm_name);
  ASSERT_TRUE(algorithm->ok()) << algorithm->diagnostics();
  dtx::Space space(algorithm, tf.parse_schedule(), r.shape, {.dtype = tf.dtype});
  // The recording is this space: every distinct schedule of it was timed.
  dtx::Enumerator en(space);
  std::size_t distinct = 0, recorded = 0;
  while (auto c = en.next()) {
    ++distinct;
    recorded += times.count(c->canonical);
  }
  ASSERT_EQ(recorded, distinct) << "the recording does not match templates/" << r.template_file;
  const std::size_t budget = r.budget ? r.budget : distinct / 10;
  for (const std::string strategy : {"evolution", "local", "tpe"}) {
    int within = 0, within2 = 0;
    std::string detail;
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
      Outcome o = search(space, times, strategy, seed, budget, seed % 2 ? 1 : 8);
      EXPECT_LE(o.measured, budget);
      within += o.best <= best * (1 + r.within);
      within2 += o.best <= best * 1.02;
      char buf[16];
      std::snprintf(buf, sizeof buf, " %.3f", o.best / best);
      detail += buf;
    }
    EXPECT_GE(within, r.seeds) << strategy << " on " << r.name << ", budget " << budget
                               << ", best/exhaustive per seed:" << detail;
    std::cout << "[ replay ] " << r.name << " " << strategy << ": " << within2
              << "/10 seeds within 2% of the exhaustive best after " << budget << " of " << distinct
              << " schedules; best/exhaustive:" << detail << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(
    H100, Replay,
    ::testing::Values(
        Recording{"geglu_16384x16384", "geglu.yaml", {{"x", 16384}, {"y", 16384}}, 0.02, 9},
        Recording{"geglu_128x65536", "geglu.yaml", {{"x", 128}, {"y", 65536}}, 0.02, 9},
        Recording{"dyt_128x65536", "dyt.yaml", {{"x", 128}, {"y", 65536}}, 0.02, 8},
        // RMSNorm's best schedules are a few narrow peaks (x:1 blocks with particular tensor
        // widths and warp counts): 2% in 3 (evolution), 5 (local) and 7 (tpe) of 10 seeds; 5%
        // in 7, 9 and 10.
        Recording{"rmsnorm_2048x4096", "rmsnorm.yaml", {{"x", 2048}, {"y", 4096}}, 0.05, 6},
        // One schedule of the 420 is within 2% of the best (the next is 3.8% slower), so a
        // tenth of the space finds it only sometimes: the bar here is 5%, most of the time.
        Recording{"softmax_4096x512", "softmax.yaml", {{"x", 4096}, {"y", 512}}, 0.05, 6}),
    [](const auto& p) { return p.param.name; });

// On an H200: FlashAttention at 16×16×1024×128 in bf16, plain (106 schedules) and causal (212),
// one schedule of each failed on the GPU. The plain kernel's fastest are the warp-specialized,
// persistent ones, 10 of the space (all with 128-row blocks, descriptors and 8 warps), and the
// best is 12% ahead of the next kind: a tenth of the space (10 points, TPE's start) finds it in
// no seed. The causal kernel's best two are of both kinds (a persistent warp-specialized one and
// a Triton one of 64-row blocks), within 0.1% of each other. Over 40 seeds, TPE within 2% after
// 24 and 48 schedules: plain 19 and 35 with a random start, 32 and 40 with the covering start
// (Tpe::start_point); causal 17 and 25, then 18 and 29.
INSTANTIATE_TEST_SUITE_P(
    H200, Replay,
    ::testing::Values(
        Recording{"flash_attention_16x16x1024x128",
                  "flash_attention.yaml",
                  {{"b", 16}, {"h", 16}, {"m", 1024}, {"l", 1024}, {"k", 128}, {"n", 128}},
                  0.02,
                  5,
                  48},
        Recording{"flash_attention_causal_16x16x1024x128",
                  "flash_attention_causal.yaml",
                  {{"b", 16}, {"h", 16}, {"m", 1024}, {"l", 1024}, {"k", 128}, {"n", 128}},
                  0.02,
                  5,
                  48}),
    [](const auto& p) { return p.param.name; });

} // namespace
