// `dtx measure`: compiles schedules of a DT program with the dtc library and checks and times
// them (and baselines) through the worker pool.
#include "Commands.h"
#include "dtx/Measure.h"
#include "dtx/RayBackend.h"
#include "dtx/WorkerPool.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <unistd.h>

namespace dtx::cli {
namespace {

dtx::BaselineSpec parse_baseline(const std::string& text) {
  dtx::BaselineSpec b;
  if (text == "reference") {
    b.reference = true;
    return b;
  }
  auto parts = split(text, ':');
  if (parts.size() == 3 && parts[2] == "compile") {
    b.torch_compile = true;
    parts.pop_back();
  }
  if (parts.size() != 2)
    throw CLI::ValidationError("--baseline",
                               "`" + text + "` is not FILE.py:FUNCTION[:compile] or reference");
  std::error_code ec;
  auto path = std::filesystem::absolute(parts[0], ec);
  if (!std::filesystem::is_regular_file(path))
    throw CLI::ValidationError("--baseline", "cannot read `" + parts[0] + "`");
  b.file = path.string();
  b.function = parts[1];
  return b;
}

std::vector<std::string> read_schedules(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw CLI::ValidationError("--schedules", "cannot read `" + path + "`");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    auto last = line.find_last_not_of(" \t\r");
    out.push_back(line.substr(first, last - first + 1));
  }
  return out;
}

int measure(const std::string& file, const std::string& shape, const std::string& dtype,
            const std::vector<std::string>& schedule_args, const std::string& schedules_file,
            const std::vector<std::string>& baseline_args,
            const std::vector<std::string>& module_args, const std::string& times_arg,
            const PoolArgs& pool_args, CLI::App& sub) {
  dtx::MeasureConfig config;
  std::ifstream in(file, std::ios::binary);
  std::stringstream source;
  source << in.rdbuf();
  if (!in) {
    std::cerr << "dtx: cannot read `" << file << "`\n";
    return kUsageError;
  }
  config.source = source.str();
  config.file_name = file;
  config.sizes = parse_shape(shape);
  config.dtype = dtype;
  config.schedules = schedules_file.empty() ? schedule_args : read_schedules(schedules_file);
  for (const auto& b : baseline_args)
    config.baselines.push_back(parse_baseline(b));
  for (const auto& m : module_args) {
    std::ifstream module_in(m, std::ios::binary);
    std::stringstream text;
    text << module_in.rdbuf();
    if (!module_in) throw CLI::ValidationError("--module", "cannot read `" + m + "`");
    config.modules.emplace_back(std::filesystem::path(m).filename().string(), text.str());
  }

  std::string protocol = sub.get_option("--protocol")->as<std::string>();
  if (protocol == "thesis") dtx::apply_thesis_protocol(config);
  std::vector<std::string> kinds = split(times_arg, ',');
  for (const auto& k : kinds) {
    if (k == "bench" && !config.times.bench)
      config.times.bench = dtx::BenchSettings{};
    else if (k == "gpu")
      config.times.gpu = dtx::GpuSettings{};
    else if (k == "host")
      config.times.host = dtx::HostSettings{};
    else if (k != "bench")
      throw CLI::ValidationError("--times", "`" + k + "` is not bench, gpu or host");
  }
  if (kinds.empty()) throw CLI::ValidationError("--times", "name at least one time");
  if (protocol != "thesis") config.rank_by = kinds.front();
  if (!config.times.bench && protocol == "thesis") config.times.bench = dtx::BenchSettings{};
  if (auto* o = sub.get_option("--warmup"); o->count()) {
    if (!config.times.bench) config.times.bench = dtx::BenchSettings{};
    config.times.bench->warmup_ms = o->as<double>();
  }
  if (auto* o = sub.get_option("--rep"); o->count()) {
    if (!config.times.bench) config.times.bench = dtx::BenchSettings{};
    config.times.bench->rep_ms = o->as<double>();
    if (config.times.gpu) config.times.gpu->rep_ms = o->as<double>();
  }
  if (auto* o = sub.get_option("--host-calls"); o->count() && config.times.host)
    config.times.host->calls = o->as<int>();
  if (auto* o = sub.get_option("--rounds"); o->count()) {
    config.rounds = o->as<int>();
    if (config.rounds > 1) config.shuffle = true;
  }
  if (auto* o = sub.get_option("--rank-by"); o->count()) config.rank_by = o->as<std::string>();
  config.order_seed = sub.get_option("--order-seed")->as<unsigned>();
  config.seed = sub.get_option("--seed")->as<int>();
  config.timeout_s = sub.get_option("--timeout")->as<double>();
  config.func = sub.get_option("--func")->as<std::string>();
  if (!config.func.empty() && config.modules.empty()) {
    // Said now, before any worker starts: a Func the program does not compile.
    dtc::Algorithm program(config.source, file);
    std::string compiled;
    bool found = false;
    for (const dtc::FuncInfo& f : program.funcs())
      if (f.compiled) {
        compiled += (compiled.empty() ? "" : ", ") + f.name;
        found |= f.name == config.func;
      }
    if (program.ok() && !found)
      throw CLI::ValidationError("--func", "`" + config.func + "` is not a compiled Func of " +
                                               file + " (it compiles " + compiled + ")");
  }

  bool json = sub.get_option("--json")->count() > 0;
  std::mutex log_mutex; // progress lines from pool threads
  std::size_t workers = 1;
  std::string description;
  std::unique_ptr<dtx::MeasurementBackend> backend;
  try {
    backend = make_backend(pool_args, workers, description);
  } catch (const std::exception& e) {
    std::cerr << "dtx: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "dtx: " << description << "\n";
  dtx::MeasurementBackend& pool = *backend;
  auto progress = [&](std::size_t done, std::size_t total, const dtx::Entry& e,
                      const dtx::Result& r) {
    std::ostringstream line;
    line << "[" << done << "/" << total << "] " << (e.baseline ? "[baseline] " : "")
         << (e.schedule.empty() ? e.label : e.schedule) << ": " << dtx::status_name(r.status);
    if (r.bench) line << " bench " << fmt_ms(r.bench->median_ms) << " ms";
    if (r.gpu) line << " gpu " << fmt_ms(r.gpu->median_ms) << " ms";
    if (r.host) line << " host " << fmt_ms(r.host->per_call_us) << " us";
    if (r.status != dtx::Status::Ok && !r.message.empty())
      line << " (" << r.message.substr(0, r.message.find('\n')) << ")";
    std::lock_guard lock(log_mutex);
    std::cerr << line.str() << "\n";
  };
  dtx::Report report;
  try {
    report = dtx::run_measure(config, pool, progress);
  } catch (const std::exception& e) {
    std::cerr << e.what();
    if (std::string(e.what()).back() != '\n') std::cerr << "\n";
    return 1;
  }
  pool.shutdown();
  for (const auto& e : report.entries)
    if (e.status == "rejected")
      std::cerr << "dtx: schedule `" << e.label << "` rejected:\n" << e.message;
  if (json)
    std::cout << dtx::to_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  else
    std::cout << dtx::format_table(report);
  return 0;
}

} // namespace

Command add_measure_command(CLI::App& app) {
  struct Args {
    std::string file, shape, dtype = "float16", schedules_file, times = "bench",
                             protocol = "single";
    std::vector<std::string> schedules, baselines, modules;
    bool json_flag = false;
    PoolArgs pool;
  };
  auto args = std::make_shared<Args>();
  auto& [file, shape, dtype, schedules_file, times, protocol, schedules, baselines, modules,
         json_flag, pool] = *args;
  CLI::App* sub = app.add_subcommand(
      "measure", "compile each schedule of FILE.dt, check and time the kernels and the "
                 "baselines, print them ranked");
  sub->add_option("FILE", file, "the DT program")->required()->check(CLI::ExistingFile);
  sub->add_option("--shape", shape, "sizes by DT label: x=4096,y=4096")->required();
  sub->add_option("--dtype", dtype, "float32, float16 (default) or bfloat16")
      ->check(CLI::IsMember({"float32", "float16", "bfloat16"}));
  auto* sched = sub->add_option("--schedule", schedules,
                                "a replacement schedule (repeatable); default: the file's own")
                    ->option_text("TEXT");
  auto* sched_file = sub->add_option("--schedules", schedules_file,
                                     "a file of schedules, one per line (`#` comments)")
                         ->check(CLI::ExistingFile);
  sched->excludes(sched_file);
  sub->add_option("--module", modules,
                  "a generated (perhaps edited) module to measure as it is; "
                  "repeatable")
      ->check(CLI::ExistingFile)
      ->option_text("FILE.py");
  sub->add_option("--baseline", baselines,
                  "a baseline: FILE.py:FUNCTION[:compile] (`:compile` under torch.compile) "
                  "or `reference` (the module's PyTorch reference); repeatable")
      ->option_text("SPEC");
  sub->add_option("--func", "the compiled Func to measure (default: the first)")->default_str("");
  sub->add_option("--times", times, "times to take: bench,gpu,host (default bench)");
  sub->add_option("--rank-by", "rank by bench, gpu or host (default: the first of --times)")
      ->check(CLI::IsMember({"bench", "gpu", "host"}));
  sub->add_option("--protocol", protocol,
                  "single (one round) or thesis (do_bench 25/100 ms, 5 rounds in a fresh "
                  "random order each, mean of the rounds' medians)")
      ->check(CLI::IsMember({"single", "thesis"}));
  sub->add_option("--rounds", "rounds (each times everything once, in a fresh random order)")
      ->check(number_check({1, 1000}));
  sub->add_option("--order-seed", "seed of the rounds' random orders")
      ->default_val(0)
      ->check(number_check({0, 4294967295.0}));
  sub->add_option("--seed", "seed of the inputs")
      ->default_val(0)
      ->check(number_check({0, 2147483647.0}));
  // do_bench's times, by the rules of an exploration's (setting_rule).
  sub->add_option("--warmup", "do_bench warm-up in ms (default 25)")
      ->check(setting_check("full_warmup_ms"));
  sub->add_option("--rep", "do_bench repetitions in ms (default 100)")
      ->check(setting_check("full_rep_ms"));
  sub->add_option("--host-calls", "calls timed back to back for `host`")
      ->check(number_check({1, 1e7}));
  sub->add_flag("--json", json_flag, "print the report as JSON");
  add_pool_options(*sub, pool);
  sub->add_option("--timeout", "seconds per request and stage before the worker is killed")
      ->default_val(300)
      ->check(setting_check("timeout_s"));
  for (CLI::Option* opt : sub->get_options())
    if (opt->get_name() != "--schedule" && opt->get_name() != "--baseline" &&
        opt->get_name() != "--module")
      opt->multi_option_policy(CLI::MultiOptionPolicy::Throw);

  return {sub, [args, sub] {
            return measure(args->file, args->shape, args->dtype, args->schedules,
                           args->schedules_file, args->baselines, args->modules, args->times,
                           args->pool, *sub);
          }};
}

} // namespace dtx::cli
