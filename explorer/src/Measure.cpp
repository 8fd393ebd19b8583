#include "dtx/Measure.h"

#include "dtc/Compiler.h"
#include "dtx/Protocol.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

namespace dtx {

void apply_thesis_protocol(MeasureConfig& config) {
  config.times.bench = BenchSettings{25, 100};
  config.rank_by = "bench";
  config.rounds = kThesisRounds;
  config.shuffle = true;
}

Aggregate aggregate(std::vector<double> values) {
  Aggregate a;
  a.values = std::move(values);
  if (a.values.empty()) return a;
  double n = static_cast<double>(a.values.size());
  a.mean = std::accumulate(a.values.begin(), a.values.end(), 0.0) / n;
  a.min = *std::min_element(a.values.begin(), a.values.end());
  a.max = *std::max_element(a.values.begin(), a.values.end());
  if (a.values.size() > 1) {
    double ss = 0;
    for (double v : a.values)
      ss += (v - a.mean) * (v - a.mean);
    a.stdev = std::sqrt(ss / (n - 1));
  }
  return a;
}

std::vector<std::string> compiled_funcs(const std::string& module_source) {
  // The first line `COMPILED = ("f", "g")`, as dtc prints it (DT names are identifiers: no
  // quotes or parentheses inside), found by a scan rather than a regex over the module's text.
  std::vector<std::string> out;
  const std::string head = "COMPILED = (";
  std::size_t at = 0;
  while (at < module_source.size() && module_source.compare(at, head.size(), head) != 0) {
    at = module_source.find('\n', at);
    if (at == std::string::npos) return out;
    ++at;
  }
  std::size_t end = module_source.find_first_of(")\n", at + head.size());
  if (at >= module_source.size() || end == std::string::npos || module_source[end] != ')')
    return out;
  std::string inner = module_source.substr(at + head.size(), end - at - head.size());
  for (std::size_t q = inner.find('"'); q != std::string::npos; q = inner.find('"', q)) {
    std::size_t close = inner.find('"', q + 1);
    if (close == std::string::npos) break;
    if (close > q + 1) out.push_back(inner.substr(q + 1, close - q - 1));
    q = close + 1;
  }
  return out;
}

namespace {

std::optional<double> time_of(const Result& r, const std::string& kind) {
  if (kind == "bench" && r.bench) return r.bench->median_ms;
  if (kind == "gpu" && r.gpu) return r.gpu->median_ms;
  if (kind == "host" && r.host) return r.host->per_call_us;
  return std::nullopt;
}

struct Item {
  std::size_t entry;
  Request request;
};

} // namespace

std::string baseline_label(const BaselineSpec& b) {
  if (b.reference) return "reference";
  std::string file = std::filesystem::path(b.file).filename().string();
  return (b.torch_compile ? "torch.compile(" : "") + file + ":" + b.function +
         (b.torch_compile ? ")" : "");
}

Report run_measure(const MeasureConfig& config, MeasurementBackend& backend,
                   const ProgressFn& progress) {
  auto start = std::chrono::steady_clock::now();
  Report report;
  report.rank_by = config.rank_by;
  report.rounds = std::max(1, config.rounds);

  Request base;
  base.sizes = config.sizes;
  base.dtype = config.dtype;
  base.seed = config.seed;
  base.times = config.times;
  base.timeout_s = config.timeout_s;
  base.device = config.device;
  base.owner = config.owner;

  // Candidates: each schedule compiled in-process; a rejected one keeps its diagnostics.
  std::vector<Item> items;
  std::vector<std::optional<std::string>> schedules;
  if (config.schedules.empty() && config.modules.empty())
    schedules.push_back(std::nullopt);
  else
    schedules.assign(config.schedules.begin(), config.schedules.end());
  std::string any_module;
  for (const auto& schedule : schedules) {
    Entry e;
    e.label = schedule ? *schedule : "(the file's schedule)";
    dtc::CompileOptions options;
    options.file_name = config.file_name;
    options.schedule = schedule;
    dtc::CompileResult compiled = dtc::compile(config.source, options);
    e.schedule = compiled.canonical_schedule;
    if (!compiled.ok) {
      e.status = "rejected";
      e.message = compiled.diagnostics;
    } else {
      Request r = base;
      r.kind = RequestKind::Measure;
      r.module_source = compiled.output;
      any_module = compiled.output;
      items.push_back({report.entries.size(), std::move(r)});
    }
    report.entries.push_back(std::move(e));
  }
  for (const auto& [label, module] : config.modules) {
    Entry e;
    e.label = label;
    Request r = base;
    r.kind = RequestKind::Measure;
    r.module_source = module;
    if (any_module.empty()) any_module = module;
    items.push_back({report.entries.size(), std::move(r)});
    report.entries.push_back(std::move(e));
  }
  if (any_module.empty()) {
    // Without any compiled module, say why with the file's own schedule.
    dtc::CompileOptions options;
    options.file_name = config.file_name;
    dtc::CompileResult own = dtc::compile(config.source, options);
    if (!own.ok) throw std::runtime_error(own.diagnostics);
    if (config.schedules.empty() && config.modules.empty())
      throw std::runtime_error("the program does not compile");
    any_module = own.output; // every given schedule was rejected: baselines still run
  }
  std::vector<std::string> funcs = compiled_funcs(any_module);
  if (funcs.empty()) { // an edited module may not say: take the program's own
    dtc::CompileOptions options;
    options.file_name = config.file_name;
    dtc::CompileResult own = dtc::compile(config.source, options);
    if (own.ok) funcs = compiled_funcs(own.output);
  }
  if (funcs.empty())
    throw std::runtime_error("the program compiles no Func (no `compile` statement)");
  report.func = config.func.empty() ? funcs.front() : config.func;
  if (std::find(funcs.begin(), funcs.end(), report.func) == funcs.end())
    throw std::runtime_error("`" + report.func + "` is not a compiled Func of the program");
  for (auto& item : items)
    item.request.func = report.func;

  for (const auto& b : config.baselines) {
    Entry e;
    e.label = baseline_label(b);
    e.baseline = true;
    Request r = base;
    r.kind = RequestKind::Baseline;
    r.module_source = any_module;
    r.func = report.func;
    r.baseline = b;
    items.push_back({report.entries.size(), std::move(r)});
    report.entries.push_back(std::move(e));
  }

  // When each result arrives (futures are read in submission order, not arrival order): the
  // throughput window runs from the first arrival to the last. Shared with the pool's
  // callbacks: the results of requests abandoned by a stop arrive after this function returned.
  struct Arrivals {
    std::mutex mutex;
    std::vector<std::pair<double, double>> ok; // (seconds since start, timed_s) of ok ones
    std::map<std::string, double> at;          // result id -> seconds since start
  };
  auto arrivals = std::make_shared<Arrivals>();
  ResultCallback arrived = [arrivals, start](const Result& r) {
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard lock(arrivals->mutex);
    arrivals->at[r.id] = t;
    if (r.status == Status::Ok) arrivals->ok.push_back({t, r.timed_s});
  };
  // Whether a stop came while `future` was awaited (a little at a time, then).
  auto stopped_waiting = [&](std::future<Result>& future) {
    if (!config.stop) return false;
    while (future.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready)
      if (config.stop()) return true;
    return false;
  };
  bool stopped = false;
  std::mt19937 rng(config.order_seed);
  std::size_t total = items.size() * static_cast<std::size_t>(report.rounds), done = 0;
  for (int round = 0; round < report.rounds && !stopped; ++round) {
    std::vector<Item*> order;
    for (auto& item : items)
      if (report.entries[item.entry].status.empty() || report.entries[item.entry].status == "ok")
        order.push_back(&item);
      else
        total -= 1; // a failed entry is not measured again
    if (config.shuffle) std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::pair<Item*, std::future<Result>>> futures;
    for (Item* item : order) {
      Request r = item->request;
      r.compile_first = round == 0; // later rounds find the kernels compiled
      auto f = submit_unless(backend, std::move(r), arrived, config.stop);
      if ((stopped = !f)) break;
      futures.emplace_back(item, std::move(*f));
    }
    for (auto& [item, future] : futures) {
      if (stopped_waiting(future)) {
        stopped = true;
        break;
      }
      Result result = future.get();
      Entry& e = report.entries[item->entry];
      if (result.status == Status::Ok) {
        if (e.status.empty()) e.status = "ok";
      } else if (e.status.empty() || e.status == "ok") {
        e.status = std::string(status_name(result.status));
        e.message = result.message;
        if (!result.stderr_tail.empty()) e.message += "\n" + result.stderr_tail;
      }
      if (result.check && !e.check) e.check = result.check;
      if (result.worker && report.devices.empty() && result.worker->role == "timing")
        report.devices.push_back(*result.worker);
      {
        std::lock_guard lock(arrivals->mutex);
        if (auto it = arrivals->at.find(result.id); it != arrivals->at.end())
          result.arrived_s = it->second;
      }
      e.results.push_back(result);
      ++done;
      if (progress) progress(done, total, e, result);
    }
  }

  // Aggregate: the mean of the rounds' medians, per time.
  for (Entry& e : report.entries) {
    for (const char* kind : {"bench", "gpu", "host"}) {
      std::vector<double> values;
      for (const Result& r : e.results)
        if (r.status == Status::Ok)
          if (auto t = time_of(r, kind)) values.push_back(*t);
      if (!values.empty()) e.times[kind] = aggregate(std::move(values));
    }
  }
  auto rank_time = [&](const Entry& e) -> std::optional<double> {
    if (e.status != "ok") return std::nullopt;
    auto it = e.times.find(config.rank_by);
    if (it == e.times.end()) return std::nullopt;
    return it->second.mean;
  };
  std::optional<double> best_baseline;
  for (const Entry& e : report.entries)
    if (e.baseline)
      if (auto t = rank_time(e); t && (!best_baseline || *t < *best_baseline)) best_baseline = t;
  for (Entry& e : report.entries)
    if (auto t = rank_time(e); t && best_baseline && *t > 0) e.speedup = *best_baseline / *t;
  std::stable_sort(report.entries.begin(), report.entries.end(),
                   [&](const Entry& a, const Entry& b) {
                     auto ta = rank_time(a), tb = rank_time(b);
                     if (ta && tb) return *ta < *tb;
                     return ta.has_value() && !tb.has_value();
                   });
  int rank = 0;
  for (Entry& e : report.entries)
    if (rank_time(e)) e.rank = ++rank;
  report.comparable = !report.devices.empty();
  for (const auto& d : report.devices)
    report.comparable = report.comparable && d.comparable;
  report.devices = backend.timing_workers();
  if (!report.devices.empty()) {
    report.comparable = true;
    for (const auto& d : report.devices)
      report.comparable = report.comparable && d.comparable;
  }
  report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  {
    std::lock_guard lock(arrivals->mutex);
    std::vector<std::pair<double, double>>& ok = arrivals->ok;
    std::sort(ok.begin(), ok.end());
    if (!ok.empty()) {
      report.first_result_s = ok.front().first;
      report.first_timed_s = ok.front().second;
      report.last_result_s = ok.back().first;
    }
  }
  return report;
}

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string show_time(const Aggregate& a, const char* unit) {
  std::string s = fmt("%.4g", a.mean);
  (void)unit;
  if (a.values.size() > 1) s += " ±" + fmt("%.2g", a.stdev);
  return s + " " + unit;
}

std::string one_line(std::string s, std::size_t width) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  if (s.size() > width) s = s.substr(0, width - 3) + "...";
  return s;
}

} // namespace

std::string format_table(const Report& report) {
  std::vector<std::string> header = {"#", "schedule", "status"};
  std::vector<std::string> kinds;
  for (const char* kind : {"bench", "gpu", "host"})
    for (const Entry& e : report.entries)
      if (e.times.count(kind)) {
        kinds.push_back(kind);
        header.push_back(std::string(kind) +
                         (std::string(kind) == "host" ? " (us/call)" : " (ms)"));
        break;
      }
  header.push_back("max rel err");
  header.push_back("vs best baseline");
  header.push_back("message");
  std::vector<std::vector<std::string>> rows;
  for (const Entry& e : report.entries) {
    std::vector<std::string> row;
    row.push_back(e.rank ? std::to_string(e.rank) : "-");
    row.push_back(one_line(
        e.baseline ? "[baseline] " + e.label : (e.schedule.empty() ? e.label : e.schedule), 60));
    row.push_back(e.status);
    for (const auto& kind : kinds) {
      auto it = e.times.find(kind);
      row.push_back(it == e.times.end() ? "" : show_time(it->second, ""));
      while (!row.back().empty() && row.back().back() == ' ')
        row.back().pop_back();
    }
    row.push_back(e.check ? fmt("%.2g", e.check->max_rel) : "");
    row.push_back(e.speedup ? fmt("%.3gx", *e.speedup) : "");
    row.push_back(e.status == "ok" ? "" : one_line(e.message, 70));
    rows.push_back(std::move(row));
  }
  std::vector<std::size_t> width(header.size());
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size(); ++i)
      width[i] = std::max(width[i], row[i].size());
  };
  measure(header);
  for (const auto& row : rows)
    measure(row);
  std::ostringstream out;
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    out << line << "\n";
  };
  print(header);
  for (const auto& row : rows)
    print(row);
  out << "func " << report.func << ", ranked by " << report.rank_by << "; "
      << (report.rounds > 1
              ? "mean ± stdev of " + std::to_string(report.rounds) + " rounds' medians"
              : "median")
      << "; device ";
  for (std::size_t i = 0; i < report.devices.size(); ++i)
    out << (i ? ", " : "") << report.devices[i].device_name;
  out << "\n";
  double timing_compile = 0, ahead = 0, timed = 0;
  int measured = 0;
  for (const Entry& e : report.entries)
    for (const Result& r : e.results) {
      timing_compile += r.compile_s;
      ahead += r.ahead_compile_s.value_or(0);
      timed += r.timed_s;
      measured += r.status == Status::Ok;
    }
  out << "compile time: " << fmt("%.3g", ahead) << " s in compile workers, "
      << fmt("%.3g", timing_compile) << " s in the timing worker(s); wall "
      << fmt("%.3g", report.wall_s) << " s\n";
  // Throughput: what an exploration gets from this pool, after the first result (worker start-up
  // and the first compile). Busy: the share of that time the timing worker(s) spent taking
  // times, per timing worker.
  double steady = report.last_result_s - report.first_result_s;
  if (measured > 1 && steady > 0) {
    double per_worker = static_cast<double>(std::max<std::size_t>(1, report.devices.size()));
    double busy = std::min(timed - report.first_timed_s, steady * per_worker);
    out << "throughput: " << measured << " timed results; after the first (at "
        << fmt("%.3g", report.first_result_s)
        << " s): " << fmt("%.0f", (measured - 1) * 60 / steady) << " per minute, timing workers "
        << fmt("%.0f", 100 * busy / steady / per_worker) << "% busy taking times\n";
  }
  if (!report.comparable)
    out << "note: measured under the Triton interpreter (cpu-interpreter): these times are not "
           "comparable with GPU times\n";
  return out.str();
}

nlohmann::json to_json(const Report& report) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : report.devices)
    devices.push_back(to_json(d));
  nlohmann::json entries = nlohmann::json::array();
  for (const Entry& e : report.entries) {
    nlohmann::json j = {{"label", e.label},   {"baseline", e.baseline}, {"schedule", e.schedule},
                        {"status", e.status}, {"message", e.message},   {"rank", e.rank}};
    if (e.check) j["check"] = to_json(*e.check);
    nlohmann::json times = nlohmann::json::object();
    for (const auto& [kind, a] : e.times)
      times[kind] = {{"mean", a.mean},     {"stdev", a.stdev},
                     {"min", a.min},       {"max", a.max},
                     {"rounds", a.values}, {"unit", kind == "host" ? "us" : "ms"}};
    j["times"] = times;
    j["speedup"] = e.speedup ? nlohmann::json(*e.speedup) : nlohmann::json();
    nlohmann::json results = nlohmann::json::array();
    for (const Result& r : e.results)
      results.push_back(to_json(r));
    j["results"] = results;
    entries.push_back(j);
  }
  return {{"func", report.func},
          {"rank_by", report.rank_by},
          {"rounds", report.rounds},
          {"comparable", report.comparable},
          {"devices", devices},
          {"wall_s", report.wall_s},
          {"first_result_s", report.first_result_s},
          {"last_result_s", report.last_result_s},
          {"first_timed_s", report.first_timed_s},
          {"entries", entries}};
}

} // namespace dtx
