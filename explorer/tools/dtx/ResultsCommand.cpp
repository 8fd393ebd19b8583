// `dtx results [ID]`: the explorations of a results database, or one exploration ranked.
#include "Commands.h"
#include "RemoteClient.h"

#include <dtx/results/Store.h>

#include <nlohmann/json.hpp>

#include <iomanip>
#include <iostream>

namespace dtx::cli {
namespace {

struct ResultsArgs {
  std::string db, kernel, state;
  std::int64_t id = 0;
  std::int64_t limit = 20;
  bool json = false;
  Remote remote;
};

nlohmann::json record_json(const results::MeasurementRecord& m) {
  nlohmann::json j = {{"protocol", m.protocol},    {"status", m.status},
                      {"message", m.message},      {"device", m.env.device_name},
                      {"torch", m.env.torch},      {"triton", m.env.triton},
                      {"created_at", m.created_at}};
  if (m.time_ms) j["time_ms"] = *m.time_ms;
  if (m.time_stdev_ms) j["stdev_ms"] = *m.time_stdev_ms;
  if (m.bench) j["bench_median_ms"] = m.bench->median_ms;
  if (m.gpu) j["gpu_median_ms"] = m.gpu->median_ms;
  if (m.host_us) j["host_us"] = *m.host_us;
  if (m.rel_l2) j["rel_l2"] = *m.rel_l2;
  return j;
}

int results_cmd(const ResultsArgs& a) {
  if (int rc = check_remote(a.remote)) return rc;
  if (!a.remote.url.empty()) {
    try {
      return remote_results(a.remote, a.id, a.kernel, a.state, a.limit, a.json);
    } catch (const std::exception& e) {
      std::cerr << "dtx: " << e.what() << "\n";
      return 1;
    }
  }
  std::unique_ptr<results::Store> store;
  try {
    store = results::Store::open_read_only(a.db); // it reads only: a read-only store will do
  } catch (const std::exception& e) {
    std::cerr << "dtx: " << e.what() << "\n";
    return 1;
  }
  if (a.id == 0) {
    results::ExplorationQuery q;
    if (!a.kernel.empty()) q.kernel = a.kernel;
    if (!a.state.empty()) q.state = results::parse_state(a.state);
    q.limit = a.limit;
    auto list = store->explorations(q);
    if (a.json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& x : list) {
        nlohmann::json j = {{"id", x.id},
                            {"kernel", x.spec.kernel},
                            {"shape", x.spec.shape},
                            {"dtype", x.spec.dtype},
                            {"strategy", x.spec.strategy},
                            {"state", results::state_name(x.state)},
                            {"measured", x.measured},
                            {"failed", x.failed},
                            {"device", x.device_name},
                            {"created_at", x.created_at}};
        if (x.best_ms) j["best_ms"] = *x.best_ms;
        if (x.best_baseline_ms) j["best_baseline_ms"] = *x.best_baseline_ms;
        out.push_back(j);
      }
      std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return 0;
    }
    std::cout << "   id  kernel        shape                 dtype     strategy    state      "
                 "measured   best ms  vs baseline  device\n";
    for (const auto& x : list) {
      std::cout << std::setw(5) << x.id << "  " << std::left << std::setw(12) << x.spec.kernel
                << "  " << std::setw(20) << x.spec.shape << "  " << std::setw(8) << x.spec.dtype
                << "  " << std::setw(10) << x.spec.strategy << "  " << std::setw(9)
                << results::state_name(x.state) << std::right << "  " << std::setw(8) << x.measured
                << "  " << std::setw(8) << (x.best_ms ? fmt_ms(*x.best_ms) : "-") << "  "
                << std::setw(11)
                << (x.best_ms && x.best_baseline_ms ? fmt_ms(*x.best_baseline_ms / *x.best_ms) + "x"
                                                    : "-")
                << "  " << x.device_name << "\n";
    }
    return 0;
  }
  auto x = store->exploration(a.id);
  if (!x) {
    std::cerr << "dtx: no exploration " << a.id << " in " << a.db << "\n";
    return 1;
  }
  results::RankedQuery q;
  q.limit = a.limit;
  auto ranked = store->ranked(a.id, q);
  auto baselines = store->baselines(a.id);
  if (a.json) {
    nlohmann::json out = {{"id", x->id},
                          {"kernel", x->spec.kernel},
                          {"shape", x->spec.shape},
                          {"dtype", x->spec.dtype},
                          {"state", results::state_name(x->state)},
                          {"device", x->device_name},
                          {"rejected", store->rejections(a.id)},
                          {"schedules", nlohmann::json::array()},
                          {"baselines", nlohmann::json::array()}};
    for (const auto& r : ranked) {
      nlohmann::json j = {{"rank", r.rank},
                          {"schedule_id", r.schedule_id},
                          {"canonical", r.canonical},
                          {"code_hash", r.code_hash}};
      if (r.screen) j["screen"] = record_json(*r.screen);
      if (r.full) j["full"] = record_json(*r.full);
      out["schedules"].push_back(j);
    }
    for (const auto& b : baselines)
      out["baselines"].push_back({{"name", b.name}, {"measurement", record_json(b.measurement)}});
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::cout << "exploration " << x->id << ": " << x->spec.kernel << " at " << x->spec.shape << " "
            << x->spec.dtype << ", " << x->spec.strategy << ", " << results::state_name(x->state)
            << ", " << x->measured << " measured, device " << x->device_name << "\n";
  if (x->lease && x->lease->live())
    std::cout << "  run by " << x->lease->holder.describe() << " since " << x->lease->acquired_at
              << "\n";
  std::cout << " rank   full ms  screen ms  status          schedule\n";
  for (const auto& r : ranked) {
    std::cout << std::setw(5) << (r.rank ? std::to_string(r.rank) : "-") << "  " << std::setw(8)
              << (r.full && r.full->time_ms ? fmt_ms(*r.full->time_ms) : "") << "  " << std::setw(9)
              << (r.screen && r.screen->time_ms ? fmt_ms(*r.screen->time_ms) : "") << "  "
              << std::left << std::setw(14)
              << (r.full     ? r.full->status
                  : r.screen ? r.screen->status
                             : "")
              << std::right << "  " << r.canonical << "\n";
  }
  for (const auto& b : baselines)
    std::cout << "  baseline " << b.name << " (" << b.measurement.protocol << "): "
              << (b.measurement.time_ms ? fmt_ms(*b.measurement.time_ms) + " ms"
                                        : b.measurement.status)
              << "\n";
  return 0;
}

} // namespace

Command add_results_command(CLI::App& app) {
  auto a = std::make_shared<ResultsArgs>();
  a->db = default_db();
  CLI::App* sub = app.add_subcommand(
      "results", "list the explorations of a results database, or show one ranked");
  sub->add_option("EXPLORATION", a->id, "an exploration's id")->check(number_check({1, 9e18}));
  sub->add_option("--db", a->db, "the results database (default $DTX_DB or ./dtx.db)")
      ->check(CLI::ExistingFile);
  sub->add_option("--kernel", a->kernel, "only this kernel's explorations")
      ->check(non_empty_check());
  sub->add_option("--state", a->state, "only explorations in this state")
      ->check(CLI::IsMember({"queued", "running", "done", "failed", "cancelled"}));
  sub->add_option("--limit", a->limit, "rows to show (default 20)")
      ->check(number_check({1, 100000}));
  sub->add_flag("--json", a->json, "print JSON");
  add_remote_options(*sub, a->remote);
  return {sub, [a] { return results_cmd(*a); }};
}

} // namespace dtx::cli
