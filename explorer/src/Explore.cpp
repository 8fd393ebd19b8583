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
#include <future>
#include <limits>
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

std::size_t search_window(bool learns, std::uint64_t budget, std::size_t timing_workers) {
  if (!learns || budget == 0) return std::numeric_limits<std::size_t>::max();
  return std::max<std::size_t>({4, 2 * timing_workers, static_cast<std::size_t>(budget / 4)});
}

std::int64_t kept_space_size(const Space& space) {
  if (space.overflowed() || space.size() >= static_cast<std::uint64_t>(kSpaceSizeKept))
    return kSpaceSizeKept;
  return static_cast<std::int64_t>(space.size());
}

std::string describe_lease(const results::Lease& lease) {
  return "exploration " + std::to_string(lease.exploration_id) + " is run by " +
         lease.holder.describe() + " since " + lease.acquired_at + "; its lease ends at " +
         lease.expires_at + " unless renewed";
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

namespace {

/// A schedule the search met, by canonical text.
struct Known {
  std::optional<double> cost; // set once measured
  bool resolved = false;
  std::int64_t schedule_id = 0;
  std::string module, code_hash;
  std::vector<Point> waiting; // points with this canonical text awaiting the cost
};

/// One run of explore(): the job, what it runs on, and what its steps hand on to one another.
/// explore() calls the steps once each, in order; a step that finds the exploration cannot go on
/// throws (fail(), LeaseHeld, LeaseLost, results::StoreError). The lease is given up when the
/// object goes: after finish() built the summary, or while an exception leaves explore().
class Exploration {
public:
  Exploration(const ExploreJob& job, MeasurementBackend& backend, results::Store& store,
              const ExploreProgressFn& progress, const ExploreControl& control)
      : job_(job), set_(job.settings), tf_(job.file), backend_(backend), store_(store),
        progress_(progress), control_(control), start_(Clock::now()),
        shape_(shape_key_of(job.shape)), program_(tf_.program()), id_(job.exploration_id) {
    prog_.budget = set_.budget;
  }
  /// What it still has queued in the backend is withdrawn (finish() does, and an exception
  /// leaving explore() too).
  ~Exploration() {
    if (id_ > 0) backend_.withdraw(static_cast<std::uint64_t>(id_));
  }
  Exploration(const Exploration&) = delete;
  Exploration& operator=(const Exploration&) = delete;

  /// The exploration's row and its lease, before anything else is written: a new exploration is
  /// stored with its lease; a stored one (resumed) has its lease taken, unless another process
  /// holds it (LeaseHeld).
  void open_or_resume();
  /// The algorithm, the template's space at the shape, the strategy; from here the exploration
  /// is `running`, with its space's size stored.
  void build_space();
  /// The Func to time: the template's first `compile` entry, or the module's first.
  void choose_func();
  /// The environment: the timing workers' hello (waited for, so that reuse can look it up), of
  /// the model asked for, else of the first worker.
  void find_environment();
  /// The screening request that every baseline and candidate starts from.
  void plan_screening();
  /// 1. The baselines, screened (any generated module carries the inputs and reference); those
  /// a resumed exploration screened already are counted, not measured again.
  void run_baselines();
  /// 2 and 3. Propose → evaluate → dedupe → compile → store → reuse or screen, until the space,
  /// the strategy, the budget or the time runs out, a stop, or a hopeless outcome.
  void search();
  /// The rejections by reason and the candidates met, stored even when stopping.
  void record_search();
  /// Fails an exploration that cannot succeed (Outcomes::failure), unless it is stopping.
  void fail_if_nothing_passed();
  /// 4. The best few and the baselines with the full protocol.
  void full_protocol();
  /// The final state (cancelled; queued when interrupted, for a later start to resume; done),
  /// the last progress event, and the summary.
  ExploreSummary finish();

private:
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  /// Before each write: a process that lost the lease stops without writing.
  void owned() {
    if (!lease_->held()) throw LeaseLost(id_);
  }
  [[noreturn]] void fail(const std::string& message) {
    owned();
    store_.set_state(id_, results::State::Failed, message);
    throw std::runtime_error(message);
  }
  void report(const std::string& phase);
  bool cancelled() const { return control_.cancel && control_.cancel->load(); }
  bool interrupted() const { return control_.interrupt && control_.interrupt->load(); }
  /// Cancelled, interrupted, or no longer this process's: stop at once.
  bool stopping() const { return cancelled() || interrupted() || lease_->lost(); }

  // The search's steps (search() only).
  /// Room in flight, budget and time left, and no reason to stop.
  bool may_propose() const;
  bool budget_left() const;
  bool out_of_time() const;
  /// The requests the search keeps in the pool at once.
  std::size_t room_in_flight() const;
  /// One point from the strategy: evaluated (a rejection counted), answered from memory when its
  /// canonical text was met before, else compiled and screened.
  void propose_one();
  /// A new schedule: compiled (lowering may still reject it), stored, then answered by a stored
  /// screening of the same module, else submitted to the pool.
  void compile_and_screen(const Candidate& c, Known& k);
  /// Waits up to a second for a screening from the pool; stores it and tells the strategy.
  void receive_one();
  /// A schedule's cost is known: the strategy told for every point waiting on it, the outcome
  /// and the progress counted.
  void resolve(Known& k, std::optional<double> cost, const std::string& canonical,
               const std::string& status, const std::string& message);

  // The full protocol's steps (full_protocol() only).
  /// The full protocol's settings, the best few not yet measured with it, and the baselines.
  MeasureConfig full_config();
  /// Stores the full protocol's times; the best schedule and baseline of progress are theirs.
  void store_full(const Report& full);

  // What the caller gave, for the whole run.
  const ExploreJob& job_;
  const ExploreSettings& set_;
  const TemplateFile& tf_;
  MeasurementBackend& backend_;
  results::Store& store_;
  const ExploreProgressFn& progress_;
  const ExploreControl& control_;
  const Clock::time_point start_; // for elapsed(): progress, the time limit, the summary
  const std::string shape_;       // the shape's key in the store
  const std::string program_;     // the template's DT program

  /// The stored exploration (open_or_resume; the job's when resumed).
  std::int64_t id_;
  /// Held from open_or_resume() on; declared before what the steps build, so that it is given up
  /// after them.
  std::optional<LeaseKeeper> lease_;
  /// Built by build_space(): the algorithm, its space at the shape, the strategy searching it.
  std::shared_ptr<const dtc::Algorithm> algorithm_;
  std::unique_ptr<Space> space_;
  std::unique_ptr<Strategy> strategy_;
  /// The Func to time (choose_func).
  std::string func_;
  /// Where the times come from (find_environment; the first result's worker when no hello
  /// named a device).
  results::Environment env_;
  /// The screening request (plan_screening); the full protocol takes its sizes and device.
  Request base_;
  /// Requests in flight without a daemon's share: `in_flight`, else twice the timing workers,
  /// at least 4 (plan_screening).
  std::size_t in_flight_ = 4;
  /// The baselines' and candidates' results, to tell an exploration that cannot succeed
  /// (run_baselines, search; fail_if_nothing_passed).
  Outcomes outcomes_;
  /// The search's requests in flight and its reasons to stop proposing (search's steps only).
  struct Flight {
    std::map<std::uint64_t, std::string> tickets; // in flight: ticket -> canonical
    std::uint64_t next_ticket = 0;
    /// Shared with the pool's callbacks: results of requests abandoned by a cancel arrive after
    /// explore() returned.
    std::shared_ptr<Inbox> inbox = std::make_shared<Inbox>();
    std::uint64_t rejected_in_a_row = 0;
    bool exhausted = false; // the strategy proposes nothing more, or rejections in a row
  } flight_;
  /// The schedules the search met, by canonical text (search; record_search counts them, the
  /// full protocol takes their modules).
  std::unordered_map<std::string, Known> known_;
  /// (screen ms, canonical) of every candidate that passed (search; the full protocol picks the
  /// best few).
  std::vector<std::pair<double, std::string>> ok_times_;
  /// What progress events carry, updated by every step from run_baselines() on.
  ExploreProgress prog_;
  double phase_started_s_ = 0; // elapsed() when prog_.phase last changed
  /// The result: the id and space size (open_or_resume, build_space), the rejections by reason
  /// (search), the state and wall time (finish).
  ExploreSummary summary_;
};

void Exploration::report(const std::string& phase) {
  if (phase != prog_.phase) phase_started_s_ = elapsed();
  prog_.phase = phase;
  prog_.elapsed_s = elapsed();
  if (phase == "search") {
    prog_.phase_done = prog_.done;
    prog_.phase_total = set_.budget;
  }
  // The time left in this phase, at the pace of this phase so far.
  double in_phase = prog_.elapsed_s - phase_started_s_;
  if (prog_.phase_total && prog_.phase_done > 0 && prog_.phase_done < prog_.phase_total)
    prog_.eta_s = in_phase / static_cast<double>(prog_.phase_done) *
                  static_cast<double>(prog_.phase_total - prog_.phase_done);
  else
    prog_.eta_s.reset();
  if (progress_) progress_(prog_);
}

void Exploration::open_or_resume() {
  if (id_ == 0) {
    id_ = store_.create_leased_exploration(spec_of(job_), control_.holder, control_.lease_s);
  } else {
    results::LeaseAttempt attempt = store_.acquire_lease(id_, control_.holder, control_.lease_s);
    if (!attempt.acquired) throw LeaseHeld(attempt.lease);
    if (attempt.replaced && control_.took_over) control_.took_over(*attempt.replaced);
  }
  lease_.emplace(store_, id_, control_);
  summary_.exploration_id = id_;
}

void Exploration::build_space() {
  algorithm_ = std::make_shared<const dtc::Algorithm>(program_, tf_.algorithm_name);
  if (!algorithm_->ok()) fail(algorithm_->diagnostics());
  try {
    space_ = std::make_unique<Space>(algorithm_, tf_.parse_schedule(), job_.shape,
                                     SpaceOptions{.dtype = tf_.dtype});
  } catch (const TemplateFileError& e) {
    fail(e.what());
  } catch (const TemplateParseError& e) {
    fail(render_template_errors(e.errors, tf_.name.empty() ? "template" : tf_.name,
                                tf_.schedule_line));
  }
  try {
    strategy_ = make_strategy(
        set_.strategy, {space_->radices(),
                        [this](Point p) { return space_->normalize(std::move(p)); }, set_.seed});
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  owned();
  store_.set_state(id_, results::State::Running);
  summary_.space_size = kept_space_size(*space_);
  summary_.space_overflowed = space_size_overflowed(summary_.space_size);
  // The space's size is known now; its candidates once the search has run.
  store_.set_space(id_, summary_.space_size, 0);
}

void Exploration::choose_func() {
  func_ = tf_.func();
  if (func_.empty())
    for (const dtc::FuncInfo& f : algorithm_->funcs())
      if (f.compiled) {
        func_ = f.name;
        break;
      }
  if (func_.empty())
    fail("the algorithm compiles no Func; add `f.compile();` or a `compile:` entry");
}

void Exploration::find_environment() {
  auto of_model = [&]() -> std::optional<WorkerInfo> {
    for (const WorkerInfo& w : backend_.timing_workers())
      if (set_.device.empty() || w.device_name == set_.device) return w;
    return std::nullopt;
  };
  // Up to 300 s for the first worker, then up to 30 s more for one of the model asked for (a
  // cluster's workers come up one by one).
  for (int i = 0; i < 6000 && backend_.timing_workers().empty() && !stopping(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 0; i < 600 && !of_model() && !backend_.timing_workers().empty() && !stopping(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (stopping()) return;
  if (auto worker = of_model()) {
    env_ = environment_of(*worker);
  } else if (!set_.device.empty()) {
    std::string models;
    for (const WorkerInfo& w : backend_.timing_workers())
      if (models.find(w.device_name) == std::string::npos)
        models += (models.empty() ? "" : ", ") + w.device_name;
    fail("no timing worker of the device model `" + set_.device +
         "` (the backend has: " + (models.empty() ? "none" : models) + ")");
  }
  if (!env_.device_name.empty()) {
    owned();
    store_.set_device(id_, env_.device_name);
  }
}

void Exploration::plan_screening() {
  base_.kind = RequestKind::Measure;
  base_.func = func_;
  base_.sizes = std::map<std::string, std::int64_t>(job_.shape.begin(), job_.shape.end());
  base_.dtype = tf_.dtype;
  base_.seed = set_.input_seed;
  base_.check = true;
  base_.timeout_s = set_.timeout_s;
  base_.device = set_.device.empty() ? env_.device_name : set_.device;
  base_.times.bench = set_.screen;
  base_.owner = static_cast<std::uint64_t>(id_);
  in_flight_ = set_.in_flight ? set_.in_flight
                              : std::max<std::size_t>(4, 2 * backend_.timing_workers().size());
}

void Exploration::run_baselines() {
  std::string any_module;
  {
    dtc::CompileResult own = algorithm_->compile(algorithm_->own_canonical());
    if (own.ok) any_module = own.output;
  }
  std::set<std::string> screened_before; // resumed: baselines already screened
  for (const results::BaselineRecord& b : store_.baselines(id_))
    if (b.measurement.protocol == "screen") {
      screened_before.insert(b.name);
      outcomes_.baseline(b.measurement.status, b.measurement.message);
      if (b.measurement.time_ms &&
          (!prog_.best_baseline_ms || *b.measurement.time_ms < *prog_.best_baseline_ms)) {
        prog_.best_baseline_ms = b.measurement.time_ms;
        prog_.best_baseline = b.name;
      }
    }
  if (any_module.empty() || tf_.baselines.empty()) return;
  prog_.phase_done = screened_before.size();
  prog_.phase_total = tf_.baselines.size();
  report("baselines");
  std::vector<std::pair<std::string, std::future<Result>>> pending;
  for (const NamedBaseline& b : tf_.baselines) {
    if (screened_before.count(b.name)) continue;
    Request r = base_;
    r.kind = RequestKind::Baseline;
    r.module_source = any_module;
    r.baseline = b.spec;
    r.check = true;
    r.compile_first = false;
    auto f = submit_unless(backend_, std::move(r), {}, [this] { return stopping(); });
    if (!f) break;
    pending.emplace_back(b.name, std::move(*f));
  }
  for (auto& [name, f] : pending) {
    // Awaited a little at a time: a stop abandons the baselines not measured yet, as it
    // abandons the search's requests, instead of waiting out their measurements.
    while (f.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready && !stopping()) {
    }
    if (stopping()) break;
    Result r = f.get();
    owned();
    store_.add_baseline(id_, name, record_of(r, "", shape_, tf_.dtype, "screen", env_));
    outcomes_.baseline(std::string(status_name(r.status)), r.message);
    if (r.status == Status::Ok && r.bench &&
        (!prog_.best_baseline_ms || r.bench->median_ms < *prog_.best_baseline_ms)) {
      prog_.best_baseline_ms = r.bench->median_ms;
      prog_.best_baseline = name;
    }
    ++prog_.phase_done;
    report("baselines");
  }
}

void Exploration::search() {
  report("search");
  while (true) {
    while (may_propose())
      propose_one();
    // Stopped, or failing for one reason: the requests in flight are abandoned (their results
    // are not stored), so that the exploration stops at once.
    if (flight_.tickets.empty() || stopping() || outcomes_.hopeless()) break;
    receive_one();
  }
}

bool Exploration::may_propose() const {
  return !flight_.exhausted && !stopping() && !outcomes_.hopeless() && !out_of_time() &&
         budget_left() && flight_.tickets.size() < room_in_flight();
}

bool Exploration::budget_left() const {
  return set_.budget == 0 || prog_.done + flight_.tickets.size() < set_.budget;
}

bool Exploration::out_of_time() const {
  return set_.time_limit_s > 0 && elapsed() >= set_.time_limit_s;
}

std::size_t Exploration::room_in_flight() const {
  const std::size_t room =
      set_.in_flight_share ? std::max<std::size_t>(1, set_.in_flight_share->load()) : in_flight_;
  return std::min(
      room, search_window(strategy_->learns(), set_.budget, backend_.timing_workers().size()));
}

void Exploration::propose_one() {
  std::vector<Point> points = strategy_->propose(1);
  if (points.empty()) {
    flight_.exhausted = true;
    return;
  }
  const Point& p = points.front();
  ++prog_.proposed;
  Candidate c = space_->evaluate(p);
  if (!c.ok) {
    ++summary_.rejected[c.reason];
    ++prog_.rejected;
    strategy_->observe(p, std::nullopt);
    if (++flight_.rejected_in_a_row >= set_.max_rejected_in_a_row) flight_.exhausted = true;
    return;
  }
  flight_.rejected_in_a_row = 0;
  auto [it, fresh] = known_.try_emplace(c.canonical);
  Known& k = it->second;
  if (!fresh) {
    ++prog_.duplicates;
    if (k.resolved)
      strategy_->observe(p, k.cost);
    else
      k.waiting.push_back(p);
    return;
  }
  k.waiting.push_back(p);
  compile_and_screen(c, k);
}

void Exploration::compile_and_screen(const Candidate& c, Known& k) {
  dtc::CompileResult module = algorithm_->compile(c.schedule);
  if (!module.ok) { // lowering rejected what the quick check let through
    std::string reason = module.messages.empty() ? "lowering" : module.messages[0].code;
    ++summary_.rejected[reason];
    ++prog_.rejected;
    k.resolved = true;
    for (const Point& q : k.waiting)
      strategy_->observe(q, std::nullopt);
    k.waiting.clear();
    return;
  }
  k.module = module.output;
  k.code_hash = sha256_hex(k.module);
  owned();
  k.schedule_id = store_.add_schedule(id_, c.canonical, static_cast<std::int64_t>(c.index),
                                      k.code_hash, k.module);
  // Reuse: this exploration's own earlier screening (resume), or another's.
  std::optional<results::MeasurementRecord> stored;
  if (auto mine = store_.schedule(k.schedule_id); mine && mine->screen)
    stored = mine->screen;
  else if (auto other = store_.find_measurement(k.code_hash, shape_, tf_.dtype, "screen", env_)) {
    store_.add_measurement(k.schedule_id, *other);
    stored = other;
  }
  if (stored) {
    ++prog_.reused;
    resolve(k, stored->status == "ok" ? stored->time_ms : std::nullopt, c.canonical, stored->status,
            stored->message);
    report("search");
    return;
  }
  Request r = base_;
  r.module_source = k.module;
  std::uint64_t ticket = flight_.next_ticket++;
  auto submitted = submit_unless(
      backend_, std::move(r),
      [inbox = flight_.inbox, ticket](const Result& res) { inbox->push(ticket, res); },
      [this] { return stopping(); });
  if (submitted) flight_.tickets[ticket] = c.canonical; // else stopping: nothing in flight
}

void Exploration::receive_one() {
  auto item = flight_.inbox->pop(1.0);
  if (!item) return;
  auto t = flight_.tickets.find(item->first);
  std::string canonical = t->second;
  flight_.tickets.erase(t);
  Known& k = known_.at(canonical);
  results::MeasurementRecord m =
      record_of(item->second, k.code_hash, shape_, tf_.dtype, "screen", env_);
  owned();
  if (env_.device_name.empty() && item->second.worker) {
    env_ = environment_of(*item->second.worker);
    store_.set_device(id_, env_.device_name);
  }
  store_.add_measurement(k.schedule_id, m);
  resolve(k, m.status == "ok" ? m.time_ms : std::nullopt, canonical, m.status, m.message);
  report("search");
}

void Exploration::resolve(Known& k, std::optional<double> cost, const std::string& canonical,
                          const std::string& status, const std::string& message) {
  outcomes_.candidate(status, message);
  k.cost = cost;
  k.resolved = true;
  for (const Point& p : k.waiting)
    strategy_->observe(p, cost);
  k.waiting.clear();
  ++prog_.done;
  if (cost) {
    ok_times_.emplace_back(*cost, canonical);
    if (!prog_.best_ms || *cost < *prog_.best_ms) {
      prog_.best_ms = *cost;
      prog_.best_schedule = canonical;
    }
  } else {
    ++prog_.failed;
  }
}

void Exploration::record_search() {
  owned();
  store_.set_rejections(
      id_, std::map<std::string, std::int64_t>(summary_.rejected.begin(), summary_.rejected.end()));
  store_.set_space(id_, summary_.space_size, static_cast<std::int64_t>(known_.size()));
}

void Exploration::fail_if_nothing_passed() {
  if (stopping()) return;
  if (std::string why = outcomes_.failure(prog_.proposed, summary_.rejected); !why.empty())
    fail(why);
}

void Exploration::full_protocol() {
  if (stopping() || set_.top <= 0 || ok_times_.empty()) return;
  MeasureConfig config = full_config();
  prog_.phase_done = 0;
  prog_.phase_total = (config.modules.size() + config.baselines.size()) *
                      static_cast<std::uint64_t>(std::max(1, config.rounds));
  report("full");
  if (config.modules.empty()) return;
  Report full = run_measure(
      config, backend_, [this](std::size_t done, std::size_t total, const Entry&, const Result&) {
        prog_.phase_done = done;
        prog_.phase_total = total;
        report("full");
      });
  owned();
  // Stopped midway: its rounds are not all there, and none of them is stored.
  if (stopping()) full.entries.clear();
  store_full(full);
}

MeasureConfig Exploration::full_config() {
  MeasureConfig config;
  config.source = program_;
  config.file_name = tf_.algorithm_name;
  config.owner = static_cast<std::uint64_t>(id_);
  config.func = func_;
  config.sizes = base_.sizes;
  config.dtype = tf_.dtype;
  config.seed = set_.input_seed;
  config.times.bench = set_.full;
  if (set_.gpu_time) config.times.gpu = GpuSettings{set_.full.rep_ms};
  if (set_.host_time) config.times.host = HostSettings{};
  config.rank_by = "bench";
  config.rounds = std::max(1, set_.rounds);
  config.shuffle = config.rounds > 1;
  config.order_seed = static_cast<unsigned>(set_.seed);
  config.timeout_s = set_.timeout_s;
  config.device = base_.device;
  config.stop = [this] { return stopping(); };
  std::sort(ok_times_.begin(), ok_times_.end());
  std::set<std::string> chosen;
  for (const auto& [ms, canonical] : ok_times_) {
    if (static_cast<int>(chosen.size()) >= set_.top) break;
    if (!chosen.insert(canonical).second) continue;
    auto mine = store_.schedule(known_.at(canonical).schedule_id);
    if (mine && mine->full) continue; // resumed: already done
    config.modules.emplace_back(canonical, known_.at(canonical).module);
  }
  if (!config.modules.empty() || store_.baselines(id_).empty()) {
    for (const NamedBaseline& b : tf_.baselines)
      config.baselines.push_back(b.spec);
  }
  return config;
}

void Exploration::store_full(const Report& full) {
  std::optional<double> full_baseline, full_best;
  for (const Entry& e : full.entries) {
    results::MeasurementRecord m;
    const Result* last = e.results.empty() ? nullptr : &e.results.back();
    if (last) m = record_of(*last, "", shape_, tf_.dtype, "full", env_);
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
      for (const NamedBaseline& nb : tf_.baselines)
        if (baseline_label(nb.spec) == e.label) name = nb.name;
      store_.add_baseline(id_, name, m);
      if (m.time_ms && (!full_baseline || *m.time_ms < *full_baseline)) {
        full_baseline = m.time_ms;
        prog_.best_baseline_ms = m.time_ms;
        prog_.best_baseline = name;
      }
      continue;
    }
    const Known& k = known_.at(e.label);
    m.code_hash = k.code_hash;
    store_.add_measurement(k.schedule_id, m);
    if (m.time_ms && (!full_best || *m.time_ms < *full_best)) {
      full_best = m.time_ms;
      prog_.best_ms = m.time_ms;
      prog_.best_schedule = e.label;
    }
  }
}

ExploreSummary Exploration::finish() {
  owned();
  if (cancelled()) {
    summary_.state = results::State::Cancelled;
    store_.set_state(id_, summary_.state, "cancelled");
  } else if (interrupted()) {
    summary_.state = results::State::Queued; // checkpointed: a later start resumes it
    store_.set_state(id_, summary_.state, control_.interrupt_message);
  } else {
    summary_.state = results::State::Done;
    store_.set_state(id_, summary_.state, "");
  }
  summary_.wall_s = elapsed();
  summary_.withdrawn = backend_.withdraw(static_cast<std::uint64_t>(id_));
  report("done");
  summary_.progress = prog_;
  return summary_;
}

} // namespace

ExploreSummary explore(const ExploreJob& job, MeasurementBackend& backend, results::Store& store,
                       const ExploreProgressFn& progress, const ExploreControl& control) {
  Exploration exploration(job, backend, store, progress, control);
  exploration.open_or_resume();
  exploration.build_space();
  exploration.choose_func();
  exploration.find_environment();
  exploration.plan_screening();
  exploration.run_baselines();
  exploration.search();
  exploration.record_search();
  exploration.fail_if_nothing_passed();
  exploration.full_protocol();
  return exploration.finish();
}

} // namespace dtx
