// `dtx explore TEMPLATE.yaml`: searches a template's space per shape, measuring through the
// worker pool and keeping everything in the results store; a progress line while it runs and
// a ranked summary at the end.
#include "Commands.h"
#include "RemoteClient.h"
#include "dtx/Explore.h"
#include "dtx/Request.h"
#include "dtx/cli/SettingOptions.h"

#include <nlohmann/json.hpp>

#include <csignal>
#include <iomanip>
#include <iostream>
#include <set>
#include <unistd.h>

namespace dtx::cli {
namespace {

std::atomic<bool> g_cancel{false};
extern "C" void on_signal(int) {
  g_cancel = true;
}

struct ExploreArgs {
  std::string file, shape, db;
  ExploreSettings settings;    // the options' (add_setting_options)...
  std::set<std::string> given; // ...of the settings given
  std::int64_t resume = 0;
  bool json = false, test_shapes = false;
  PoolArgs pool;
  Remote remote;
};

std::string duration(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600,
                  static_cast<int>(s) / 60 % 60);
  return buf;
}

std::string progress_line(const ExploreProgress& p) {
  std::ostringstream o;
  o << "[" << p.done;
  if (p.budget) o << "/" << p.budget;
  o << "] " << p.phase;
  if (p.best_ms) {
    o << "  best " << fmt_ms(*p.best_ms) << " ms";
    if (p.best_baseline_ms)
      o << " (" << std::fixed << std::setprecision(2) << *p.best_baseline_ms / *p.best_ms
        << std::defaultfloat << "x " << p.best_baseline << " " << fmt_ms(*p.best_baseline_ms)
        << " ms)";
  } else if (p.best_baseline_ms) {
    o << "  " << p.best_baseline << " " << fmt_ms(*p.best_baseline_ms) << " ms";
  }
  o << "  rejected " << p.rejected << ", failed " << p.failed;
  if (p.reused) o << ", reused " << p.reused;
  if (p.eta_s) o << "  ETA " << duration(*p.eta_s);
  return o.str();
}

void print_summary(results::Store& store, std::int64_t id, const ExploreSummary& s) {
  auto x = store.exploration(id);
  std::cout << "\nexploration " << id << ": " << x->spec.kernel << " at " << x->spec.shape << " "
            << x->spec.dtype << " on " << (x->device_name.empty() ? "?" : x->device_name) << ", "
            << results::state_name(s.state) << " in " << duration(s.wall_s) << "\n";
  std::cout << "  space " << s.space_size << (s.space_overflowed ? "+" : "") << ", proposed "
            << s.progress.proposed << ", rejected " << s.progress.rejected << ", duplicates "
            << s.progress.duplicates << ", measured " << s.progress.done << " ("
            << s.progress.reused << " reused, " << s.progress.failed << " failed)\n";
  for (const auto& [reason, n] : s.rejected)
    std::cout << "    " << reason << ": " << n << "\n";
  std::optional<double> best_baseline;
  std::vector<results::BaselineRecord> baselines = store.baselines(id);
  for (const auto& b : baselines)
    if (b.measurement.protocol == "full" && b.measurement.time_ms &&
        (!best_baseline || *b.measurement.time_ms < *best_baseline))
      best_baseline = b.measurement.time_ms;
  std::cout << "\n rank  time ms   spread   vs best baseline  schedule\n";
  results::RankedQuery q;
  q.limit = 10;
  for (const results::RankedSchedule& r : store.ranked(id, q)) {
    const auto& m = r.full ? r.full : r.screen;
    if (!m) continue;
    std::ostringstream line;
    line << std::setw(5) << (r.rank ? std::to_string(r.rank) : "-") << "  ";
    if (m->time_ms) {
      line << std::setw(8) << fmt_ms(*m->time_ms) << "  " << std::setw(7)
           << (m->time_stdev_ms ? fmt_ms(*m->time_stdev_ms) : std::string("")) << "  "
           << std::setw(16)
           << (best_baseline ? fmt_ms(*best_baseline / *m->time_ms) + "x" : std::string(""));
    } else {
      line << std::setw(35) << m->status;
    }
    line << "  " << r.canonical << (r.full ? "" : "  (screening)");
    std::cout << line.str() << "\n";
  }
  if (!baselines.empty()) std::cout << "\n baselines\n";
  for (const auto& b : baselines)
    if (b.measurement.protocol == "full" || baselines.size() <= 4)
      std::cout << "  " << std::setw(8)
                << (b.measurement.time_ms ? fmt_ms(*b.measurement.time_ms) : b.measurement.status)
                << " ms  " << b.name << " (" << b.measurement.protocol << ")\n";
}

int explore_cmd(const ExploreArgs& a) {
  if (int rc = check_remote(a.remote)) return rc;
  std::unique_ptr<results::Store> store;
  try {
    store = results::Store::open(a.db);
  } catch (const std::exception& e) {
    std::cerr << "dtx: " << e.what() << "\n";
    return 1;
  }
  std::vector<ExploreJob> jobs;
  if (a.resume) {
    auto x = store->exploration(a.resume);
    if (!x) {
      std::cerr << "dtx: no exploration " << a.resume << " in " << a.db << "\n";
      return 1;
    }
    // Said before the workers start; explore() takes the lease (or refuses) for certain.
    if (x->lease && x->lease->live() &&
        x->lease->holder.instance != results::LeaseHolder::this_process("dtx").instance) {
      std::cerr << "dtx: " << describe_lease(*x->lease) << "; not resuming it here\n";
      return kLeaseHeld;
    }
    jobs.push_back(job_of(*x));
  } else {
    if (a.file.empty()) {
      std::cerr << "dtx: give a TEMPLATE file, or --resume ID\n";
      return kUsageError;
    }
    TemplateFile tf;
    try {
      tf = load_template_file(a.file);
    } catch (const std::exception& e) {
      std::cerr << e.what();
      return 1;
    }
    ExploreSettings s = a.settings;
    // The file's strategy and budget unless the command line gives them; exhaustive, given no
    // budget anywhere, searches the whole space.
    if (!a.given.count("strategy") && !tf.strategy.empty()) s.strategy = tf.strategy;
    if (!a.given.count("budget") && tf.budget) s.budget = *tf.budget;
    if (!a.given.count("budget") && !tf.budget && s.strategy == "exhaustive") s.budget = 0;
    std::vector<ShapeSizes> shapes;
    std::string shapes_field = "shapes";
    const bool ray = a.pool.backend == "ray" || !a.pool.ray_address.empty();
    bool gpu = ray ? a.pool.ray_interpreter_workers == 0 : !make_pool_options(a.pool).gpus.empty();
    if (!a.shape.empty()) {
      shapes.push_back(parse_shape(a.shape));
      shapes_field = "--shape";
    } else if (a.test_shapes || (!gpu && !tf.test_shapes.empty())) {
      if (!a.test_shapes)
        std::cerr << "dtx: no GPU: exploring the template's test_shapes on the Triton "
                     "interpreter (give --shape to choose)\n";
      shapes = tf.test_shapes;
      shapes_field = "test_shapes";
    } else {
      shapes = tf.shapes;
    }
    if (shapes.empty()) {
      std::cerr << "dtx: the template lists no shapes; give --shape\n";
      return kUsageError;
    }
    // The rules of dtx expand and of dtxd's API: a shape that does not fit the algorithm would
    // fail every measurement, so it is refused now.
    try {
      check_request(tf, shapes, shapes_field);
    } catch (const RequestError& e) {
      return report(e, a.file);
    }
    for (const ShapeSizes& shape : shapes)
      jobs.push_back({tf, shape, s, 0});
  }

  if (!a.remote.url.empty()) {
    if (a.resume) {
      std::cerr << "dtx: --resume works on a local database; a server resumes by itself\n";
      return kUsageError;
    }
    try {
      return remote_explore(
          a.remote, jobs.front().file,
          [&] {
            std::vector<ShapeSizes> shapes;
            for (const ExploreJob& j : jobs)
              shapes.push_back(j.shape);
            return shapes;
          }(),
          jobs.front().settings, a.json);
    } catch (const std::exception& e) {
      std::cerr << "dtx: " << e.what() << "\n";
      return 1;
    }
  }
  std::size_t workers = 1;
  std::string description;
  std::unique_ptr<MeasurementBackend> backend;
  try {
    backend = make_backend(a.pool, workers, description);
  } catch (const std::exception& e) {
    std::cerr << "dtx: " << e.what() << "\n";
    return 1;
  }
  for (ExploreJob& j : jobs)
    j.settings.in_flight =
        a.settings.in_flight ? a.settings.in_flight : std::max<std::size_t>(4, 2 * workers);
  std::cerr << "dtx: " << description << "; results in " << a.db << "\n";
  MeasurementBackend& pool = *backend;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const bool tty = isatty(STDERR_FILENO);
  nlohmann::json out = nlohmann::json::array();
  int rc = 0;
  for (const ExploreJob& job : jobs) {
    std::cerr << "dtx: exploring " << job.file.kernel << " at " << shape_text(job.shape) << " with "
              << job.settings.strategy << ", budget "
              << (job.settings.budget ? std::to_string(job.settings.budget) : "the whole space")
              << "\n";
    double last_print = -1;
    auto progress = [&](const ExploreProgress& p) {
      if (tty) {
        std::cerr << "\r\033[K" << progress_line(p) << std::flush;
      } else if (p.elapsed_s - last_print >= 10 || p.phase == "done" || p.phase == "full") {
        last_print = p.elapsed_s;
        std::cerr << (progress_line(p) + "\n");
      }
    };
    ExploreControl control;
    control.cancel = &g_cancel;
    control.took_over = [](const results::Lease& replaced) {
      // One write: the worker pool's threads write lines of their own to stderr meanwhile.
      std::cerr << ("dtx: exploration " + std::to_string(replaced.exploration_id) +
                    " was left by " + replaced.holder.describe() +
                    (replaced.holder_gone ? ", which has ended" : ", whose lease expired") +
                    "; resuming it\n");
    };
    try {
      ExploreSummary s = explore(job, pool, *store, progress, control);
      if (tty) std::cerr << "\n";
      if (a.json) {
        nlohmann::json j = {{"exploration", s.exploration_id},
                            {"kernel", job.file.kernel},
                            {"shape", job.shape},
                            {"state", results::state_name(s.state)},
                            {"space_size", s.space_size},
                            {"space_overflowed", s.space_overflowed},
                            {"measured", s.progress.done},
                            {"reused", s.progress.reused},
                            {"failed", s.progress.failed},
                            {"rejected", s.rejected},
                            {"wall_s", s.wall_s}};
        if (s.progress.best_ms) j["best_ms"] = *s.progress.best_ms;
        j["best_schedule"] = s.progress.best_schedule;
        if (s.progress.best_baseline_ms) j["best_baseline_ms"] = *s.progress.best_baseline_ms;
        j["best_baseline"] = s.progress.best_baseline;
        out.push_back(j);
      } else {
        print_summary(*store, s.exploration_id, s);
      }
    } catch (const LeaseHeld& e) {
      // Another process runs it: measuring it here too would measure everything twice.
      std::cerr << "dtx: " << e.what() << "; not resuming it here\n";
      rc = kLeaseHeld;
    } catch (const std::exception& e) {
      if (tty) std::cerr << "\n";
      std::cerr << "dtx: " << e.what() << (std::string(e.what()).back() == '\n' ? "" : "\n");
      rc = 1;
    }
    if (g_cancel) break;
  }
  pool.shutdown();
  if (a.json)
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return g_cancel ? 130 : rc;
}

} // namespace

Command add_explore_command(CLI::App& app) {
  auto a = std::make_shared<ExploreArgs>();
  a->db = default_db();
  CLI::App* sub = app.add_subcommand(
      "explore", "search a template's space for the fastest correct schedule, per shape");
  sub->add_option("TEMPLATE", a->file, "a template file (YAML, see templates/)")
      ->check(CLI::ExistingFile);
  sub->add_option("--shape", a->shape, "sizes by DT label (default: each shape of the file)");
  sub->add_flag("--test-shapes", a->test_shapes,
                "explore the file's small test_shapes (the default without a GPU)");
  // The settings: their names, help, checks and defaults from their description (Settings.h).
  add_setting_options(*sub, a->settings, a->given);
  sub->add_option("--db", a->db, "the results database (default $DTX_DB or ./dtx.db)")
      ->check(output_file_check());
  sub->add_option("--resume", a->resume, "resume exploration ID of the database")
      ->check(number_check({1, 9e18}));
  sub->add_flag("--json", a->json, "print a JSON summary");
  add_pool_options(*sub, a->pool);
  add_remote_options(*sub, a->remote);
  for (CLI::Option* opt : sub->get_options())
    opt->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  return {sub, [a] { return explore_cmd(*a); }};
}

} // namespace dtx::cli
