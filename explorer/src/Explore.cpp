// One exploration from proposal to stored timing (see Explore.h for the plan).
#include "dtx/Explore.h"

#include "dtx/Measure.h"
#include "dtx/Protocol.h"
#include "dtx/Sha256.h"
#include "dtx/Strategy.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

namespace dtx {

namespace {

using Clock = std::chrono::steady_clock;

std::string shape_key_of(const ShapeSizes& shape) {
  results::Shape s(shape.begin(), shape.end());
  return results::shape_key(s);
}

results::MeasurementRecord record_of(const Result& r, const std::string& code_hash,
                                     const std::string& shape, const std::string& dtype,
                                     const std::string& protocol, const results::Environment& env) {
  results::MeasurementRecord m;
  m.code_hash = code_hash;
  m.shape = shape;
  m.dtype = dtype;
  m.protocol = protocol;
  m.status = std::string(status_name(r.status));
  m.message = r.message;
  auto q = [](const TimeStats& t) {
    return results::TimeQuantiles{t.median_ms, t.q20_ms, t.q80_ms, t.min_ms, t.max_ms, t.samples};
  };
  if (r.bench) m.bench = q(*r.bench);
  if (r.gpu) m.gpu = q(*r.gpu);
  if (r.host) m.host_us = r.host->per_call_us;
  if (r.status == Status::Ok && r.bench) m.time_ms = r.bench->median_ms;
  m.rounds = 1;
  if (r.check) {
    m.rel_l2 = r.check->rel_l2;
    m.max_abs = r.check->max_abs;
  }
  m.compile_s = r.ahead_compile_s.value_or(r.compile_s);
  m.env = r.worker ? environment_of(*r.worker) : env;
  return m;
}

BaselineSpec baseline_from_json(const nlohmann::json& j) {
  BaselineSpec b;
  b.reference = j.value("reference", false);
  b.file = j.value("file", "");
  b.function = j.value("function", "");
  b.torch_compile = j.value("torch_compile", false);
  return b;
}

nlohmann::json baseline_to_json(const NamedBaseline& b) {
  return {{"name", b.name},
          {"reference", b.spec.reference},
          {"file", b.spec.file},
          {"function", b.spec.function},
          {"torch_compile", b.spec.torch_compile}};
}

/// Results arrive on pool threads; the exploration consumes them on its own.
struct Inbox {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::pair<std::uint64_t, Result>> items; // (ticket, result)
  void push(std::uint64_t ticket, Result r) {
    {
      std::lock_guard lock(mutex);
      items.emplace_back(ticket, std::move(r));
    }
    cv.notify_one();
  }
  std::optional<std::pair<std::uint64_t, Result>> pop(double timeout_s) {
    std::unique_lock lock(mutex);
    if (!cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                     [&] { return !items.empty(); }))
      return std::nullopt;
    auto item = std::move(items.front());
    items.pop_front();
    return item;
  }
};

/// What the baselines and candidates measured so far ended with, to tell an exploration that
/// cannot succeed: the first few candidates and every baseline failing for one reason (a module
/// the workers cannot use, a wrong device, a Func the module lacks), or a whole search in which
/// no candidate passed.
class Outcomes {
public:
  /// Candidates that must all have failed, with the baselines, for one reason before the search
  /// stops early.
  static constexpr std::uint64_t kFailFast = 4;

  void baseline(const std::string& status, const std::string& message) {
    count(baselines_, status, message);
  }
  void candidate(const std::string& status, const std::string& message) {
    count(candidates_, status, message);
  }

  /// Whether the baselines and the first kFailFast candidates all failed, for one reason.
  bool hopeless() const {
    return baselines_.ended > 0 && baselines_.ok == 0 && candidates_.ended >= kFailFast &&
           candidates_.ok == 0 && reasons_.size() == 1;
  }

  /// Why the exploration failed, or "" when it did not: it stopped early (hopeless), or it
  /// measured candidates and none passed, or no candidate of the space passed the checks.
  std::string failure(std::uint64_t proposed,
                      const std::map<std::string, std::uint64_t>& rejected) const {
    if (hopeless())
      return "stopped early: every baseline (" + std::to_string(baselines_.ended) +
             ") and the first " + std::to_string(candidates_.ended) + " candidates failed with " +
             reasons_.begin()->first;
    if (candidates_.ended > 0 && candidates_.ok == 0) {
      std::string why = "all " + std::to_string(candidates_.ended) + " candidates measured failed:";
      for (const auto& [reason, n] : counted())
        why += "\n  " + std::to_string(n) + " x " + reason;
      return why;
    }
    if (candidates_.ended == 0 && proposed > 0) {
      std::string why = "no schedule of the space passed its checks (" + std::to_string(proposed) +
                        " proposed, all rejected):";
      for (const auto& [reason, n] : rejected)
        why += "\n  " + std::to_string(n) + " x " + reason;
      return why;
    }
    return "";
  }

private:
  /// How many baselines (or candidates) ended, and how many of them passed.
  struct Tally {
    std::uint64_t ended = 0, ok = 0;
  };

  /// One baseline's or candidate's end: counted, and its reason noted when it failed.
  void count(Tally& tally, const std::string& status, const std::string& message) {
    ++tally.ended;
    if (status == "ok")
      ++tally.ok;
    else
      note(status, message);
  }
  /// Counted by status and the message's first line, at most 300 bytes of it (cut between
  /// UTF-8 characters): enough to tell reasons apart, short enough to list.
  void note(const std::string& status, const std::string& message) {
    std::string line = message.substr(0, message.find('\n'));
    if (line.size() > 300) {
      std::size_t cut = 300;
      while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80)
        --cut; // not inside a character
      line = line.substr(0, cut) + "...";
    }
    ++reasons_[status + ": " + line];
  }
  /// The reasons, most frequent first.
  std::vector<std::pair<std::string, std::uint64_t>> counted() const {
    std::vector<std::pair<std::string, std::uint64_t>> out(reasons_.begin(), reasons_.end());
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    return out;
  }

  Tally baselines_, candidates_;                 // what ended, by kind
  std::map<std::string, std::uint64_t> reasons_; // "status: message" -> how many
};

/// Keeps an exploration's lease while this process runs it: renews it on a thread of its own
/// every `renew_s` seconds (the full protocol may write nothing for minutes), and before a write
/// when the latest renewal is older than half the lease (a process stopped for a while finds out
/// that it lost the lease before it writes anything); gives it up at the end. A renewal the
/// store refuses means another process took the lease over: lost() from then on.
class LeaseKeeper {
public:
  LeaseKeeper(results::Store& store, std::int64_t id, const ExploreControl& control)
      : store_(store), id_(id), instance_(control.holder.instance), ttl_s_(control.lease_s),
        renew_s_(std::max(0.05, control.renew_s)), renewed_(Clock::now().time_since_epoch()) {
    thread_ = std::thread([this] { loop(); });
  }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;
  ~LeaseKeeper() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    if (lost_) return;
    try {
      store_.release_lease(id_, instance_);
    } catch (const std::exception&) {
      // The store cannot be written: the lease stays this process's until it expires, and a
      // later run of this process renews it.
    }
  }

  bool lost() const { return lost_; }

  /// Whether the lease is still this process's, renewing it first when its latest renewal is
  /// older than half the lease.
  bool held() {
    if (lost_) return false;
    if (Clock::now().time_since_epoch() - renewed_.load() >
        std::chrono::duration<double>(ttl_s_ / 2))
      renew();
    return !lost_;
  }

private:
  void renew() {
    try {
      if (store_.renew_lease(id_, instance_, ttl_s_))
        renewed_ = Clock::now().time_since_epoch();
      else
        lost_ = true;
    } catch (const results::StoreError&) {
      // The store cannot be written now: the exploration's own writes fail too, and say why.
    }
  }

  void loop() {
    std::unique_lock lock(mutex_);
    while (!cv_.wait_for(lock, std::chrono::duration<double>(renew_s_), [&] { return stop_; })) {
      lock.unlock();
      renew();
      lock.lock();
    }
  }

  results::Store& store_;
  std::int64_t id_;
  std::string instance_;
  double ttl_s_, renew_s_;
  std::atomic<Clock::duration> renewed_;
  std::atomic<bool> lost_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

} // namespace

LeaseHeld::LeaseHeld(const results::Lease& held)
    : std::runtime_error(describe_lease(held)), lease(held) {}

LeaseLost::LeaseLost(std::int64_t exploration_id)
    : std::runtime_error("exploration " + std::to_string(exploration_id) +
                         ": another process took its lease over while this one ran it (it had "
                         "not renewed it in time); stopped, leaving it to that process") {}

std::string describe_lease(const results::Lease& lease) {
  return "exploration " + std::to_string(lease.exploration_id) + " is run by " +
         lease.holder.describe() + " since " + lease.acquired_at + "; its lease ends at " +
         lease.expires_at + " unless renewed";
}

nlohmann::json to_json(const ExploreSettings& s) {
  return {{"strategy", s.strategy},
          {"budget", s.budget},
          {"time_limit_s", s.time_limit_s},
          {"seed", s.seed},
          {"screen", {{"warmup_ms", s.screen.warmup_ms}, {"rep_ms", s.screen.rep_ms}}},
          {"top", s.top},
          {"rounds", s.rounds},
          {"full", {{"warmup_ms", s.full.warmup_ms}, {"rep_ms", s.full.rep_ms}}},
          {"gpu_time", s.gpu_time},
          {"host_time", s.host_time},
          {"input_seed", s.input_seed},
          {"timeout_s", s.timeout_s},
          {"in_flight", s.in_flight},
          {"device", s.device}};
}

ExploreSettings settings_from_json(const nlohmann::json& j) {
  ExploreSettings s;
  s.strategy = j.value("strategy", s.strategy);
  s.budget = j.value("budget", s.budget);
  s.time_limit_s = j.value("time_limit_s", s.time_limit_s);
  s.seed = j.value("seed", s.seed);
  if (j.contains("screen")) {
    s.screen.warmup_ms = j["screen"].value("warmup_ms", s.screen.warmup_ms);
    s.screen.rep_ms = j["screen"].value("rep_ms", s.screen.rep_ms);
  }
  s.top = j.value("top", s.top);
  s.rounds = j.value("rounds", s.rounds);
  if (j.contains("full")) {
    s.full.warmup_ms = j["full"].value("warmup_ms", s.full.warmup_ms);
    s.full.rep_ms = j["full"].value("rep_ms", s.full.rep_ms);
  }
  s.gpu_time = j.value("gpu_time", s.gpu_time);
  s.host_time = j.value("host_time", s.host_time);
  s.input_seed = j.value("input_seed", s.input_seed);
  s.timeout_s = j.value("timeout_s", s.timeout_s);
  s.in_flight = j.value("in_flight", s.in_flight);
  s.device = j.value("device", s.device);
  return s;
}

results::Environment environment_of(const WorkerInfo& w) {
  results::Environment e;
  e.device_name = w.device_name;
  e.device_kind = w.device_kind;
  e.torch = w.torch;
  e.triton = w.triton;
  const nlohmann::json& d = w.raw.contains("device") ? w.raw["device"] : nlohmann::json::object();
  if (d.is_object()) {
    if (d.contains("driver") && d["driver"].is_string()) e.driver = d["driver"];
    if (d.contains("cuda") && d["cuda"].is_string()) e.cuda = d["cuda"];
  }
  if (w.raw.contains("host") && w.raw["host"].is_string()) e.host = w.raw["host"];
  if (w.raw.contains("node") && w.raw["node"].is_string()) e.node = w.raw["node"];
  if (w.raw.contains("gpu") && w.raw["gpu"].is_number_integer()) e.gpu = w.raw["gpu"];
  return e;
}

ExploreJob job_of(const results::Exploration& x) {
  ExploreJob job;
  nlohmann::json s = nlohmann::json::parse(x.spec.settings_json, nullptr, false);
  if (s.is_discarded()) s = nlohmann::json::object();
  job.settings = settings_from_json(s);
  job.settings.strategy = x.spec.strategy;
  job.exploration_id = x.id;
  TemplateFile& f = job.file;
  f.kernel = x.spec.kernel;
  f.algorithm = x.spec.algorithm;
  f.algorithm_name = s.value("algorithm_name", x.spec.kernel + ".dt");
  f.schedule = x.spec.template_text;
  f.name = x.spec.template_file;
  f.path = x.spec.template_file;
  f.dtype = x.spec.dtype;
  if (s.contains("compile"))
    for (const auto& c : s["compile"])
      f.compile.push_back(c);
  if (s.contains("baselines"))
    for (const auto& b : s["baselines"])
      f.baselines.push_back({b.value("name", ""), baseline_from_json(b)});
  results::Shape shape = results::parse_shape(x.spec.shape);
  job.shape = ShapeSizes(shape.begin(), shape.end());
  return job;
}

results::ExplorationSpec spec_of(const ExploreJob& job) {
  const TemplateFile& tf = job.file;
  results::ExplorationSpec spec;
  spec.kernel = tf.kernel;
  spec.algorithm = tf.program();
  spec.template_text = tf.schedule;
  spec.template_file = tf.path.empty() ? tf.name : tf.path.string();
  spec.shape = shape_key_of(job.shape);
  spec.dtype = tf.dtype;
  spec.strategy = job.settings.strategy;
  nlohmann::json s = to_json(job.settings);
  s["algorithm_name"] = tf.algorithm_name;
  s["compile"] = tf.compile;
  s["baselines"] = nlohmann::json::array();
  for (const NamedBaseline& b : tf.baselines)
    s["baselines"].push_back(baseline_to_json(b));
  spec.settings_json = s.dump();
  return spec;
}

ExploreSummary explore(const ExploreJob& job, MeasurementBackend& backend, results::Store& store,
                       const ExploreProgressFn& progress, const ExploreControl& control) {
  const auto start = Clock::now();
  const ExploreSettings& set = job.settings;
  const TemplateFile& tf = job.file;
  const std::string shape = shape_key_of(job.shape);
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  // --- the exploration's row and its lease, before anything else is written
  std::int64_t id = job.exploration_id;
  const std::string program = tf.program();
  if (id == 0) {
    id = store.create_leased_exploration(spec_of(job), control.holder, control.lease_s);
  } else {
    results::LeaseAttempt attempt = store.acquire_lease(id, control.holder, control.lease_s);
    if (!attempt.acquired) throw LeaseHeld(attempt.lease);
    if (attempt.replaced && control.took_over) control.took_over(*attempt.replaced);
  }
  LeaseKeeper lease(store, id, control);
  // Before each write: a process that lost the lease stops without writing.
  auto owned = [&] {
    if (!lease.held()) throw LeaseLost(id);
  };
  ExploreSummary summary;
  summary.exploration_id = id;
  auto fail = [&](const std::string& message) {
    owned();
    store.set_state(id, results::State::Failed, message);
    throw std::runtime_error(message);
  };

  auto algorithm = std::make_shared<const dtc::Algorithm>(program, tf.algorithm_name);
  if (!algorithm->ok()) fail(algorithm->diagnostics());
  std::unique_ptr<Space> space;
  try {
    space = std::make_unique<Space>(algorithm, tf.parse_schedule(), job.shape,
                                    SpaceOptions{.dtype = tf.dtype});
  } catch (const TemplateFileError& e) {
    fail(e.what());
  } catch (const TemplateParseError& e) {
    fail(
        render_template_errors(e.errors, tf.name.empty() ? "template" : tf.name, tf.schedule_line));
  }
  std::unique_ptr<Strategy> strategy;
  try {
    strategy = make_strategy(
        set.strategy,
        {space->radices(), [&](Point p) { return space->normalize(std::move(p)); }, set.seed});
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  owned();
  store.set_state(id, results::State::Running);
  summary.space_size = space->size();
  // The space's size is known now; its candidates once the search has run.
  store.set_space(id, static_cast<std::int64_t>(space->size()), 0);

  // The Func to time: the template's first `compile` entry, or the module's first.
  std::string func = tf.func();
  if (func.empty())
    for (const dtc::FuncInfo& f : algorithm->funcs())
      if (f.compiled) {
        func = f.name;
        break;
      }
  if (func.empty())
    fail("the algorithm compiles no Func; add `f.compile();` or a `compile:` entry");

  // The environment: the timing workers' hello (waited for, so that reuse can look it up), of
  // the model asked for, else of the first worker.
  results::Environment env;
  auto of_model = [&]() -> std::optional<WorkerInfo> {
    for (const WorkerInfo& w : backend.timing_workers())
      if (set.device.empty() || w.device_name == set.device) return w;
    return std::nullopt;
  };
  // Up to 300 s for the first worker, then up to 30 s more for one of the model asked for (a
  // cluster's workers come up one by one).
  for (int i = 0; i < 6000 && backend.timing_workers().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 0; i < 600 && !of_model() && !backend.timing_workers().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (auto worker = of_model()) {
    env = environment_of(*worker);
  } else if (!set.device.empty()) {
    std::string models;
    for (const WorkerInfo& w : backend.timing_workers())
      if (models.find(w.device_name) == std::string::npos)
        models += (models.empty() ? "" : ", ") + w.device_name;
    fail("no timing worker of the device model `" + set.device +
         "` (the backend has: " + (models.empty() ? "none" : models) + ")");
  }
  if (!env.device_name.empty()) {
    owned();
    store.set_device(id, env.device_name);
  }

  ExploreProgress prog;
  prog.budget = set.budget;
  auto report = [&](const std::string& phase) {
    prog.phase = phase;
    prog.elapsed_s = elapsed();
    if (set.budget && prog.done > 0 && prog.done < set.budget)
      prog.eta_s = prog.elapsed_s / static_cast<double>(prog.done) *
                   static_cast<double>(set.budget - prog.done);
    else
      prog.eta_s.reset();
    if (progress) progress(prog);
  };
  Request base;
  base.kind = RequestKind::Measure;
  base.func = func;
  base.sizes = std::map<std::string, std::int64_t>(job.shape.begin(), job.shape.end());
  base.dtype = tf.dtype;
  base.seed = set.input_seed;
  base.check = true;
  base.timeout_s = set.timeout_s;
  base.device = set.device.empty() ? env.device_name : set.device;
  base.times.bench = set.screen;
  auto cancelled = [&] { return control.cancel && control.cancel->load(); };
  auto interrupted = [&] { return control.interrupt && control.interrupt->load(); };
  // Cancelled, interrupted, or no longer this process's: stop at once.
  auto stopping = [&] { return cancelled() || interrupted() || lease.lost(); };

  // --- 1. the baselines, screened (any generated module carries the inputs and reference)
  std::string any_module;
  {
    dtc::CompileResult own = algorithm->compile(algorithm->own_canonical());
    if (own.ok) any_module = own.output;
  }
  std::map<std::string, double> baseline_screen;
  std::set<std::string> screened_before; // resumed: baselines already screened
  Outcomes outcomes;
  for (const results::BaselineRecord& b : store.baselines(id))
    if (b.measurement.protocol == "screen") {
      screened_before.insert(b.name);
      outcomes.baseline(b.measurement.status, b.measurement.message);
      if (b.measurement.time_ms &&
          (!prog.best_baseline_ms || *b.measurement.time_ms < *prog.best_baseline_ms)) {
        prog.best_baseline_ms = b.measurement.time_ms;
        prog.best_baseline = b.name;
      }
    }
  if (!any_module.empty() && !tf.baselines.empty()) {
    report("baselines");
    std::vector<std::pair<std::string, std::future<Result>>> pending;
    for (const NamedBaseline& b : tf.baselines) {
      if (screened_before.count(b.name)) continue;
      Request r = base;
      r.kind = RequestKind::Baseline;
      r.module_source = any_module;
      r.baseline = b.spec;
      r.check = true;
      r.compile_first = false;
      pending.emplace_back(b.name, backend.submit(r));
    }
    for (auto& [name, f] : pending) {
      Result r = f.get();
      owned();
      store.add_baseline(id, name, record_of(r, "", shape, tf.dtype, "screen", env));
      outcomes.baseline(std::string(status_name(r.status)), r.message);
      if (r.status == Status::Ok && r.bench) {
        baseline_screen[name] = r.bench->median_ms;
        if (!prog.best_baseline_ms || r.bench->median_ms < *prog.best_baseline_ms) {
          prog.best_baseline_ms = r.bench->median_ms;
          prog.best_baseline = name;
        }
      }
    }
  }

  // --- 2 and 3: the search
  struct Known {
    std::optional<double> cost; // set once measured
    bool resolved = false;
    std::int64_t schedule_id = 0;
    std::string module, code_hash;
    std::vector<Point> waiting; // points with this canonical text awaiting the cost
  };
  std::unordered_map<std::string, Known> known; // by canonical text
  std::map<std::uint64_t, std::string> tickets; // in flight: ticket -> canonical
  std::uint64_t next_ticket = 0;
  // Shared with the pool's callbacks: results of requests abandoned by a cancel arrive after
  // this function returned.
  auto inbox = std::make_shared<Inbox>();
  std::uint64_t rejected_in_a_row = 0;
  bool exhausted = false;
  std::vector<std::pair<double, std::string>> ok_times; // (screen ms, canonical)

  auto resolve = [&](Known& k, std::optional<double> cost, const std::string& canonical,
                     const std::string& status, const std::string& message) {
    outcomes.candidate(status, message);
    k.cost = cost;
    k.resolved = true;
    for (const Point& p : k.waiting)
      strategy->observe(p, cost);
    k.waiting.clear();
    ++prog.done;
    if (cost) {
      ok_times.emplace_back(*cost, canonical);
      if (!prog.best_ms || *cost < *prog.best_ms) {
        prog.best_ms = *cost;
        prog.best_schedule = canonical;
      }
    } else {
      ++prog.failed;
    }
  };
  auto budget_left = [&] { return set.budget == 0 || prog.done + tickets.size() < set.budget; };
  auto out_of_time = [&] { return set.time_limit_s > 0 && elapsed() >= set.time_limit_s; };

  report("search");
  while (true) {
    // Propose while there is room in flight and budget left.
    while (!exhausted && !stopping() && !outcomes.hopeless() && !out_of_time() && budget_left() &&
           tickets.size() < (set.in_flight_share
                                 ? std::max<std::size_t>(1, set.in_flight_share->load())
                                 : set.in_flight)) {
      std::vector<Point> points = strategy->propose(1);
      if (points.empty()) {
        exhausted = true;
        break;
      }
      const Point& p = points.front();
      ++prog.proposed;
      Candidate c = space->evaluate(p);
      if (!c.ok) {
        ++summary.rejected[c.reason];
        ++prog.rejected;
        strategy->observe(p, std::nullopt);
        if (++rejected_in_a_row >= set.max_rejected_in_a_row) exhausted = true;
        continue;
      }
      rejected_in_a_row = 0;
      auto [it, fresh] = known.try_emplace(c.canonical);
      Known& k = it->second;
      if (!fresh) {
        ++prog.duplicates;
        if (k.resolved)
          strategy->observe(p, k.cost);
        else
          k.waiting.push_back(p);
        continue;
      }
      k.waiting.push_back(p);
      dtc::CompileResult module = algorithm->compile(c.schedule);
      if (!module.ok) { // lowering rejected what the quick check let through
        std::string reason = module.messages.empty() ? "lowering" : module.messages[0].code;
        ++summary.rejected[reason];
        ++prog.rejected;
        k.resolved = true;
        for (const Point& q : k.waiting)
          strategy->observe(q, std::nullopt);
        k.waiting.clear();
        continue;
      }
      k.module = module.output;
      k.code_hash = sha256_hex(k.module);
      owned();
      k.schedule_id = store.add_schedule(id, c.canonical, static_cast<std::int64_t>(c.index),
                                         k.code_hash, k.module);
      // Reuse: this exploration's own earlier screening (resume), or another's.
      std::optional<results::MeasurementRecord> stored;
      if (auto mine = store.schedule(k.schedule_id); mine && mine->screen)
        stored = mine->screen;
      else if (auto other = store.find_measurement(k.code_hash, shape, tf.dtype, "screen", env)) {
        store.add_measurement(k.schedule_id, *other);
        stored = other;
      }
      if (stored) {
        ++prog.reused;
        resolve(k, stored->status == "ok" ? stored->time_ms : std::nullopt, c.canonical,
                stored->status, stored->message);
        report("search");
        continue;
      }
      Request r = base;
      r.module_source = k.module;
      std::uint64_t ticket = next_ticket++;
      tickets[ticket] = c.canonical;
      backend.submit(std::move(r),
                     [inbox, ticket](const Result& res) { inbox->push(ticket, res); });
    }
    // Stopped, or failing for one reason: the requests in flight are abandoned (their results
    // are not stored), so that the exploration stops at once.
    if (tickets.empty() || stopping() || outcomes.hopeless()) break;
    auto item = inbox->pop(1.0);
    if (!item) continue;
    auto t = tickets.find(item->first);
    std::string canonical = t->second;
    tickets.erase(t);
    Known& k = known.at(canonical);
    results::MeasurementRecord m =
        record_of(item->second, k.code_hash, shape, tf.dtype, "screen", env);
    owned();
    if (env.device_name.empty() && item->second.worker) {
      env = environment_of(*item->second.worker);
      store.set_device(id, env.device_name);
    }
    store.add_measurement(k.schedule_id, m);
    resolve(k, m.status == "ok" ? m.time_ms : std::nullopt, canonical, m.status, m.message);
    report("search");
  }
  owned();
  store.set_rejections(
      id, std::map<std::string, std::int64_t>(summary.rejected.begin(), summary.rejected.end()));
  store.set_space(id, static_cast<std::int64_t>(space->size()),
                  static_cast<std::int64_t>(known.size()));
  if (!stopping()) {
    if (std::string why = outcomes.failure(prog.proposed, summary.rejected); !why.empty())
      fail(why);
  }

  // --- 4. the best few and the baselines with the full protocol
  if (!stopping() && set.top > 0 && !ok_times.empty()) {
    report("full");
    std::sort(ok_times.begin(), ok_times.end());
    MeasureConfig config;
    config.source = program;
    config.file_name = tf.algorithm_name;
    config.func = func;
    config.sizes = base.sizes;
    config.dtype = tf.dtype;
    config.seed = set.input_seed;
    config.times.bench = set.full;
    if (set.gpu_time) config.times.gpu = GpuSettings{set.full.rep_ms};
    if (set.host_time) config.times.host = HostSettings{};
    config.rank_by = "bench";
    config.rounds = std::max(1, set.rounds);
    config.shuffle = config.rounds > 1;
    config.order_seed = static_cast<unsigned>(set.seed);
    config.timeout_s = set.timeout_s;
    config.device = base.device;
    std::set<std::string> chosen;
    for (const auto& [ms, canonical] : ok_times) {
      if (static_cast<int>(chosen.size()) >= set.top) break;
      if (!chosen.insert(canonical).second) continue;
      auto mine = store.schedule(known.at(canonical).schedule_id);
      if (mine && mine->full) continue; // resumed: already done
      config.modules.emplace_back(canonical, known.at(canonical).module);
    }
    if (!config.modules.empty() || store.baselines(id).empty()) {
      for (const NamedBaseline& b : tf.baselines)
        config.baselines.push_back(b.spec);
    }
    if (!config.modules.empty()) {
      Report full = run_measure(config, backend);
      owned();
      std::optional<double> full_baseline, full_best;
      for (const Entry& e : full.entries) {
        results::MeasurementRecord m;
        const Result* last = e.results.empty() ? nullptr : &e.results.back();
        if (last) m = record_of(*last, "", shape, tf.dtype, "full", env);
        m.protocol = "full";
        m.status = e.status;
        m.message = e.message;
        m.rounds = static_cast<int>(e.results.size());
        m.time_ms.reset();
        if (auto it = e.times.find("bench"); it != e.times.end() && e.status == "ok") {
          m.time_ms = it->second.mean;
          m.time_stdev_ms = it->second.stdev;
        }
        if (e.baseline) {
          std::string name = e.label;
          for (const NamedBaseline& nb : tf.baselines)
            if (baseline_label(nb.spec) == e.label) name = nb.name;
          store.add_baseline(id, name, m);
          if (m.time_ms && (!full_baseline || *m.time_ms < *full_baseline)) {
            full_baseline = m.time_ms;
            prog.best_baseline_ms = m.time_ms;
            prog.best_baseline = name;
          }
          continue;
        }
        const Known& k = known.at(e.label);
        m.code_hash = k.code_hash;
        store.add_measurement(k.schedule_id, m);
        if (m.time_ms && (!full_best || *m.time_ms < *full_best)) {
          full_best = m.time_ms;
          prog.best_ms = m.time_ms;
          prog.best_schedule = e.label;
        }
      }
    }
  }

  owned();
  if (cancelled()) {
    summary.state = results::State::Cancelled;
    store.set_state(id, summary.state, "cancelled");
  } else if (interrupted()) {
    summary.state = results::State::Queued; // checkpointed: a later start resumes it
    store.set_state(id, summary.state, control.interrupt_message);
  } else {
    summary.state = results::State::Done;
    store.set_state(id, summary.state, "");
  }
  summary.wall_s = elapsed();
  report("done");
  summary.progress = prog;
  return summary;
}

} // namespace dtx
