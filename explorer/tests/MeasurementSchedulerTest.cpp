// The measurement scheduler's rules on a cluster of in-process slots (no process, no Ray):
// node-local compile then time, prefetch, device models kept apart, what a lost slot and a lost
// placement cost, and what a worker that hangs, dies or never starts costs. WorkerPoolTest runs
// the same scheduler on real processes, tests/ray/test_ray_backend.py on a Ray cluster.
#include "MeasurementScheduler.h"
#include "dtx/Protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>

using namespace dtx;
using namespace dtx::detail;
using namespace std::chrono_literals;

namespace {

struct Call {
  std::string slot; // name#restarts
  std::string node, type, id, prefetch;
};

class FakeCluster;

// A worker that answers by the request's func, as fake_worker.py does: ok (after the cluster's
// delay), sleep (never answers), kill (dies during the request), cuda (a CUDA error, then it
// exits), raise (runtime_error), raise_exit (runtime_error, then it exits as it reads the next
// request), exit_idle (ok, then it exits before the next request).
class FakeLink final : public WorkerLink {
public:
  FakeLink(FakeCluster& cluster, SlotSpec spec, std::string key)
      : c_(cluster), spec_(std::move(spec)), key_(std::move(key)) {}
  Io start(Clock::time_point, const StopFn&, std::string& error) override;
  bool has_worker() const override { return live_; }
  bool running() override { return live_; }
  Io exchange(const nlohmann::json& request, Clock::time_point deadline, const StopFn& stop,
              nlohmann::json& reply) override;
  void kill() override { live_ = false; }
  std::string reap() override {
    live_ = false;
    return how_;
  }
  std::string stderr_tail() const override { return tail_; }
  const WorkerInfo& info() const override { return info_; }
  long pid() const override { return info_.pid; }
  std::string lost_reason() const override { return "actor died"; }

private:
  FakeCluster& c_;
  SlotSpec spec_;
  std::string key_;
  enum class Then { Serve, ExitIdle, ExitOnRead } then_ = Then::Serve;
  bool live_ = false;
  std::string how_, tail_;
  WorkerInfo info_;
};

class FakeCluster : public Placement {
public:
  std::vector<SlotSpec> specs;
  std::map<std::string, std::string> models; // node -> device name (default GPU-A)
  std::chrono::milliseconds delay{10};
  std::function<void(const SlotSpec&)> before_open;
  int plans = 0;

  std::mutex m;
  std::vector<Call> calls;
  std::vector<std::string> opened;          // name#restarts
  std::set<std::string> lose;               // slot names: their next call is lost
  std::set<std::string> lose_always;        // name#restarts: every call is lost
  std::set<std::string> dead_nodes;         // not alive; a slot cannot be opened there again
  std::set<std::string> fail_open;          // slot names that cannot be placed
  std::set<std::string> no_hello;           // slot names whose worker never says hello
  std::map<std::string, int> worker_starts; // by slot name
  int next_pid = 100;

  std::vector<SlotSpec> plan() override {
    std::lock_guard lock(m);
    ++plans;
    return specs;
  }
  std::unique_ptr<WorkerLink> open(const SlotSpec& spec, int restarts, const StopFn&,
                                   std::string& error) override {
    if (before_open) before_open(spec);
    std::lock_guard lock(m);
    if ((restarts && dead_nodes.count(spec.node)) || fail_open.count(spec.name)) {
      error = "node is gone";
      return nullptr;
    }
    std::string key = spec.name + "#" + std::to_string(restarts);
    opened.push_back(key);
    return std::make_unique<FakeLink>(*this, spec, key);
  }
  bool node_alive(const std::string& node) override {
    std::lock_guard lock(m);
    return dead_nodes.count(node) == 0;
  }

  std::vector<Call> calls_of(const std::string& id) {
    std::lock_guard lock(m);
    std::vector<Call> out;
    for (const Call& c : calls)
      if (c.id == id) out.push_back(c);
    return out;
  }
};

WorkerLink::Io FakeLink::start(Clock::time_point, const StopFn&, std::string& error) {
  std::lock_guard lock(c_.m);
  ++c_.worker_starts[spec_.name];
  if (c_.no_hello.count(spec_.name)) {
    error = "no hello from the worker within the startup timeout";
    tail_ = "fake worker starting";
    return Io::Closed;
  }
  live_ = true;
  then_ = Then::Serve;
  std::string model = c_.models.count(spec_.node) ? c_.models[spec_.node] : "GPU-A";
  nlohmann::json hello = {{"type", "hello"},
                          {"protocol", 1},
                          {"role", spec_.timing ? "timing" : "compile"},
                          {"pid", ++c_.next_pid},
                          {"host", spec_.node},
                          {"node", spec_.node},
                          {"name", key_},
                          {"device", {{"kind", "cuda"}, {"name", model}}}};
  info_ = *parse_hello(hello);
  return Io::Done;
}

WorkerLink::Io FakeLink::exchange(const nlohmann::json& request, Clock::time_point deadline,
                                  const StopFn& stop, nlohmann::json& reply) {
  const std::string id = request["id"], func = request.value("func", "ok");
  std::string prefetch;
  if (request.contains("prefetch")) prefetch = request["prefetch"]["id"];
  {
    std::lock_guard lock(c_.m);
    c_.calls.push_back({key_, spec_.node, request["type"], id, prefetch});
  }
  if (then_ != Then::Serve) {
    how_ = "exited with status 3";
    live_ = false;
    return then_ == Then::ExitIdle ? Io::Unsent : Io::Closed;
  }
  tail_ = "request " + id + " " + request["type"].get<std::string>() + " " + func;
  auto wait_until = [&](Clock::time_point until) {
    while (Clock::now() < until)
      if (stop())
        return false;
      else
        std::this_thread::sleep_for(2ms);
    return true;
  };
  if (!wait_until(Clock::now() + c_.delay)) return Io::Stopped;
  {
    std::lock_guard lock(c_.m);
    if (c_.lose.erase(spec_.name) || c_.lose_always.count(key_)) return Io::Lost;
  }
  nlohmann::json base = {{"type", "result"}, {"id", id}, {"compile_s", 0.25}};
  if (func == "sleep") return wait_until(deadline) ? Io::Timeout : Io::Stopped;
  if (func == "kill") {
    how_ = "killed by signal 9 (SIGKILL)";
    return Io::Closed;
  }
  if (func == "exit_idle") then_ = Then::ExitIdle;
  if (func == "cuda" || func == "raise" || func == "raise_exit") {
    if (func != "raise") then_ = func == "cuda" ? Then::ExitIdle : Then::ExitOnRead;
    base["status"] = "runtime_error";
    base["message"] = func == "cuda"
                          ? "RuntimeError: CUDA error: an illegal memory access was encountered"
                          : "ValueError: boom";
    reply = base;
    return Io::Done;
  }
  base["status"] = "ok";
  base["message"] = spec_.name;
  reply = base;
  return Io::Done;
}

std::vector<SlotSpec> specs(const std::vector<std::string>& nodes, int gpus = 1, int compiles = 1) {
  std::vector<SlotSpec> out;
  for (const std::string& node : nodes) {
    for (int i = 0; i < gpus; ++i)
      out.push_back({"t-" + node + "-" + std::to_string(i), node, true, nlohmann::json::object()});
    for (int i = 0; i < compiles; ++i)
      out.push_back({"c-" + node + "-" + std::to_string(i), node, false, nlohmann::json::object()});
  }
  return out;
}

Request req(const std::string& func = "ok", const std::string& device = "",
            RequestKind kind = RequestKind::Measure, double timeout_s = 30) {
  Request r;
  r.kind = kind;
  r.module_source = "# module";
  r.func = func;
  r.device = device;
  r.timeout_s = timeout_s;
  r.times.bench = BenchSettings{};
  return r;
}

SchedulerOptions quick(int max_resends = 3, int max_restarts = 5) {
  SchedulerOptions o;
  o.max_resends = max_resends;
  o.max_restarts = max_restarts;
  o.startup_timeout_s = 5;
  return o;
}

// Submits `requests` once the slots had `settle` to open; their results in order.
std::vector<Result> run(FakeCluster& cluster, const std::vector<Request>& requests,
                        std::chrono::milliseconds settle = 50ms, std::function<void()> during = {},
                        SchedulerOptions options = quick()) {
  MeasurementScheduler scheduler(cluster, std::move(options));
  scheduler.start();
  std::this_thread::sleep_for(settle);
  std::vector<std::future<Result>> futures;
  for (const Request& r : requests)
    futures.push_back(scheduler.submit(r));
  if (during) during();
  std::vector<Result> results;
  for (auto& f : futures) {
    EXPECT_EQ(f.wait_for(20s), std::future_status::ready);
    results.push_back(f.get());
  }
  return results;
}

std::string node_of(const Result& r) {
  return r.worker ? r.worker->raw.value("node", "") : "";
}

} // namespace

TEST(MeasurementScheduler, MeasureCompilesThenTimesOnTheSameNode) {
  FakeCluster c;
  c.specs = specs({"n1", "n2"});
  auto results = run(c, std::vector<Request>(8, req()));
  std::set<std::string> nodes;
  for (const Result& r : results) {
    ASSERT_EQ(r.status, Status::Ok) << r.message;
    auto calls = c.calls_of(r.id);
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0].type, "compile");
    EXPECT_EQ(calls[1].type, "measure");
    EXPECT_EQ(calls[0].node, calls[1].node); // one node: its Triton cache has the kernels
    ASSERT_TRUE(r.ahead_compile_s);
    EXPECT_DOUBLE_EQ(*r.ahead_compile_s, 0.25);
    nodes.insert(calls[0].node);
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"n1", "n2"})); // both nodes worked
}

TEST(MeasurementScheduler, RequestsWaitForCompileSlotsThatAreStillStarting) {
  // A timing slot up before the compile slots must not compile requests itself.
  FakeCluster c;
  c.specs = specs({"n1"});
  c.before_open = [](const SlotSpec& s) {
    if (!s.timing) std::this_thread::sleep_for(100ms);
  };
  for (const Result& r : run(c, std::vector<Request>(4, req()), 10ms)) {
    EXPECT_EQ(r.status, Status::Ok) << r.message;
    ASSERT_TRUE(r.ahead_compile_s);
    EXPECT_DOUBLE_EQ(*r.ahead_compile_s, 0.25);
  }
}

TEST(MeasurementScheduler, ANodeWhoseCompileSlotsNeverOpenTimesWithoutThem) {
  FakeCluster c;
  c.specs = specs({"n1"});
  c.fail_open.insert("c-n1-0");
  for (const Result& r : run(c, std::vector<Request>(3, req()), 0ms))
    EXPECT_EQ(r.status, Status::Ok) << r.message;
  for (const Call& call : c.calls)
    EXPECT_EQ(call.type, "measure");
}

TEST(MeasurementScheduler, BaselinesGoStraightToTimingAndCompileRequestsEndAtCompile) {
  FakeCluster c;
  c.specs = specs({"n1"});
  auto results =
      run(c, {req("ok", "", RequestKind::Baseline), req("ok", "", RequestKind::Compile)});
  auto b = c.calls_of(results[0].id), k = c.calls_of(results[1].id);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].type, "baseline");
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0].type, "compile");
  EXPECT_EQ(k[0].slot, "c-n1-0#0");
  ASSERT_TRUE(results[1].worker);
  EXPECT_EQ(results[1].worker->role, "compile");
}

TEST(MeasurementScheduler, ATimingSlotIsToldToReadyItsNextRequest) {
  FakeCluster c;
  c.specs = specs({"n1"}, 1, 2);
  c.delay = 20ms;
  run(c, std::vector<Request>(6, req()));
  std::vector<Call> timed;
  for (const Call& call : c.calls)
    if (call.type == "measure") timed.push_back(call);
  int prefetched = 0;
  // A request readied by the slot is the one that slot times next.
  for (std::size_t i = 0; i < timed.size(); ++i)
    if (!timed[i].prefetch.empty()) {
      ++prefetched;
      ASSERT_LT(i + 1, timed.size());
      EXPECT_EQ(timed[i + 1].id, timed[i].prefetch);
    }
  EXPECT_GT(prefetched, 0);
}

TEST(MeasurementScheduler, WithoutPrefetchNothingIsReadied) {
  FakeCluster c;
  c.specs = specs({"n1"}, 1, 2);
  c.delay = 20ms;
  SchedulerOptions o = quick();
  o.prefetch = false;
  run(c, std::vector<Request>(6, req()), 50ms, {}, o);
  for (const Call& call : c.calls)
    EXPECT_TRUE(call.prefetch.empty()) << call.id;
}

TEST(MeasurementScheduler, DeviceModelsAreKeptApart) {
  FakeCluster c;
  c.specs = specs({"h100", "a100"});
  c.models = {{"h100", "NVIDIA H100"}, {"a100", "NVIDIA A100"}};
  std::vector<Request> requests;
  for (int i = 0; i < 5; ++i) {
    requests.push_back(req("ok", "NVIDIA H100"));
    requests.push_back(req("ok", "NVIDIA A100"));
  }
  auto results = run(c, requests);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    ASSERT_EQ(r.status, Status::Ok) << r.message;
    EXPECT_EQ(r.worker->device_name, requests[i].device);
    std::string node = i % 2 == 0 ? "h100" : "a100";
    for (const Call& call : c.calls_of(r.id))
      EXPECT_EQ(call.node, node);
  }
}

TEST(MeasurementScheduler, AModelTheClusterLacksIsAClearError) {
  FakeCluster c;
  c.specs = specs({"n1"});
  Result r = run(c, {req("ok", "NVIDIA B200")})[0];
  EXPECT_EQ(r.status, Status::RuntimeError);
  EXPECT_NE(r.message.find("no timing worker of the device model `NVIDIA B200`"), std::string::npos)
      << r.message;
  EXPECT_NE(r.message.find("GPU-A"), std::string::npos) << r.message;
}

TEST(MeasurementScheduler, ALostTimingSlotCostsNothingAndIsOpenedAgain) {
  FakeCluster c;
  c.specs = specs({"n1", "n2"});
  c.lose.insert("t-n1-0"); // its next call: the actor dies under the request
  auto results = run(c, std::vector<Request>(10, req()));
  for (const Result& r : results)
    EXPECT_EQ(r.status, Status::Ok) << r.message;
  int resent = 0; // timed twice: the first time on the slot that was lost
  for (const Result& r : results) {
    auto calls = c.calls_of(r.id);
    resent += std::count_if(calls.begin(), calls.end(),
                            [](const Call& call) { return call.type == "measure"; }) > 1;
  }
  EXPECT_EQ(resent, 1);
  EXPECT_NE(std::find(c.opened.begin(), c.opened.end(), "t-n1-0#1"), c.opened.end());
}

TEST(MeasurementScheduler, ALostNodeMovesItsRequestsToTheOthers) {
  // n2 is up when the run starts, then its slots are lost and it is gone (not opened again).
  FakeCluster c;
  c.specs = specs({"n1", "n2"});
  c.delay = 20ms;
  auto results = run(c, std::vector<Request>(12, req()), 50ms, [&] {
    std::this_thread::sleep_for(30ms);
    std::lock_guard lock(c.m);
    c.lose.insert({"t-n2-0", "c-n2-0"});
    c.dead_nodes.insert("n2");
  });
  for (const Result& r : results)
    EXPECT_EQ(r.status, Status::Ok) << r.message;
  std::vector<std::string> timed;
  for (const Call& call : c.calls)
    if (call.type == "measure") timed.push_back(call.id);
  for (std::size_t i = timed.size() - 4; i < timed.size(); ++i)
    for (const Result& r : results) {
      if (r.id == timed[i]) {
        EXPECT_EQ(node_of(r), "n1");
      }
    }
  EXPECT_EQ(std::count(c.opened.begin(), c.opened.end(), "t-n2-0#1"), 0);
}

TEST(MeasurementScheduler, WhenEveryTimingSlotIsGoneRequestsFailWithTheReason) {
  FakeCluster c;
  c.specs = specs({"n1"});
  c.lose_always.insert("t-n1-0#0");
  c.dead_nodes.insert("n1"); // up at the start, gone once its slot is lost: not opened again
  Result r = run(c, {req()})[0];
  EXPECT_EQ(r.status, Status::Crashed);
  EXPECT_NE(r.message.find("no timing worker is left"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("actor died"), std::string::npos) << r.message;
}

TEST(MeasurementScheduler, ARequestThatKeepsLosingSlotsGivesUp) {
  FakeCluster c;
  c.specs = specs({"n1"});
  for (int k = 0; k < 10; ++k)
    c.lose_always.insert("t-n1-0#" + std::to_string(k));
  Result r = run(c, {req()}, 50ms, {}, quick(2, 10))[0];
  EXPECT_EQ(r.status, Status::Crashed);
  EXPECT_NE(r.message.find("lost 3 workers"), std::string::npos) << r.message;
}

TEST(MeasurementScheduler, ShutdownFailsWhatIsQueued) {
  FakeCluster c;
  c.specs = specs({"n1"});
  c.delay = 200ms;
  std::vector<std::future<Result>> futures;
  {
    MeasurementScheduler s(c, quick());
    s.start();
    std::this_thread::sleep_for(50ms);
    for (int i = 0; i < 4; ++i)
      futures.push_back(s.submit(req()));
    std::this_thread::sleep_for(50ms);
    s.shutdown();
    EXPECT_EQ(s.submit(req()).get().message, "the pool shut down");
  }
  for (auto& f : futures) {
    Result r = f.get();
    EXPECT_EQ(r.status, Status::Crashed);
    EXPECT_EQ(r.message, "the pool shut down");
  }
}

TEST(MeasurementScheduler, RequestsBeforeAnySlotIsReadyWaitForOne) {
  for (int n : {1, 3}) {
    FakeCluster c;
    c.specs = specs({"n1"});
    c.before_open = [](const SlotSpec&) { std::this_thread::sleep_for(30ms); };
    for (const Result& r : run(c, std::vector<Request>(n, req()), 0ms))
      EXPECT_EQ(r.status, Status::Ok) << r.message;
  }
}

TEST(MeasurementScheduler, BackPressure) {
  FakeCluster c;
  c.specs = specs({"n1"}, 1, 0);
  c.delay = 300ms;
  SchedulerOptions o = quick();
  o.capacity = 2;
  MeasurementScheduler s(c, o);
  s.start();
  auto a = s.submit(req()), b = s.submit(req());
  EXPECT_FALSE(s.try_submit(req()));
  auto start = Clock::now();
  auto d = s.submit(req()); // blocks until one of the first two is done
  EXPECT_GT(Clock::now() - start, 150ms);
  for (auto* f : {&a, &b, &d})
    EXPECT_EQ(f->get().status, Status::Ok);
  EXPECT_EQ(s.in_flight(), 0u);
}

// What a worker costs, on one timing slot without a compile stage.

TEST(MeasurementScheduler, RequestsAreAnsweredByOneWorker) {
  FakeCluster c;
  c.specs = specs({"n1"}, 1, 0);
  for (const Result& r : run(c, std::vector<Request>(3, req())))
    EXPECT_EQ(r.status, Status::Ok) << r.message;
  EXPECT_EQ(c.worker_starts["t-n1-0"], 1);
}

TEST(MeasurementScheduler, AHungRequestTimesOutAndTheNextGetsANewWorker) {
  FakeCluster c;
  c.specs = specs({"n1"}, 1, 0);
  auto results = run(c, {req("sleep", "", RequestKind::Measure, 0.3), req()});
  EXPECT_EQ(results[0].status, Status::Timeout);
  EXPECT_NE(results[0].message.find("no reply within"), std::string::npos) << results[0].message;
  EXPECT_NE(results[0].stderr_tail.find("request " + results[0].id + " measure sleep"),
            std::string::npos)
      << results[0].stderr_tail;
  EXPECT_EQ(results[1].status, Status::Ok) << results[1].message;
  EXPECT_EQ(c.worker_starts["t-n1-0"], 2);
}

TEST(MeasurementScheduler, AWorkerThatDiesCostsItsRequestOnly) {
  FakeCluster c;
  c.specs = specs({"n1"}, 1, 0);
  auto results = run(c, {req("kill"), req()});
  EXPECT_EQ(results[0].status, Status::Crashed);
  EXPECT_NE(results[0].message.find("the worker died: killed by signal 9"), std::string::npos)
      << results[0].message;
  EXPECT_EQ(results[1].status, Status::Ok) << results[1].message;
  EXPECT_EQ(c.worker_starts["t-n1-0"], 2);
}

// After a CUDA error the worker is replaced; one that exits after an error, or while idle, is
// replaced when the next request finds it gone, at no cost to that request.
TEST(MeasurementScheduler, AWorkerExitingAfterAnErrorOrWhileIdleCostsTheNextRequestNothing) {
  for (const char* func : {"cuda", "raise_exit", "exit_idle"}) {
    FakeCluster c;
    c.specs = specs({"n1"}, 1, 0);
    auto results = run(c, {req(func), req()});
    EXPECT_EQ(results[0].status,
              std::string(func) == "exit_idle" ? Status::Ok : Status::RuntimeError)
        << func;
    EXPECT_EQ(results[1].status, Status::Ok) << func << ": " << results[1].message;
    EXPECT_EQ(c.worker_starts["t-n1-0"], 2) << func;
  }
}

TEST(MeasurementScheduler, AWorkerThatNeverSaysHelloIsReported) {
  FakeCluster c;
  c.specs = specs({"n1"}, 1, 0);
  c.no_hello.insert("t-n1-0");
  Result r = run(c, {req()})[0];
  EXPECT_EQ(r.status, Status::Crashed);
  EXPECT_NE(r.message.find("worker did not start: no hello from the worker"), std::string::npos)
      << r.message;
  EXPECT_EQ(r.stderr_tail, "fake worker starting");
}

TEST(MeasurementScheduler, ALostPlacementFailsItsRequestsAndTheNextPlansAgain) {
  FakeCluster c;
  c.specs = specs({"n1"});
  c.delay = 300ms;
  MeasurementScheduler s(c, quick());
  s.start();
  auto running = s.submit(req()), queued = s.submit(req());
  std::this_thread::sleep_for(100ms);
  s.placement_lost("the Ray driver exited with status 1: boom", "Traceback");
  for (auto* f : {&running, &queued}) {
    Result r = f->get();
    EXPECT_EQ(r.status, Status::Crashed);
    EXPECT_EQ(r.message, "the Ray driver exited with status 1: boom");
    EXPECT_EQ(r.stderr_tail, "Traceback");
  }
  EXPECT_EQ(s.submit(req()).get().status, Status::Ok);
  EXPECT_EQ(c.plans, 2);
  EXPECT_EQ(s.in_flight(), 0u);
}

TEST(MeasurementScheduler, APlanThatFailsFailsTheRequestsWaitingForIt) {
  struct Failing : FakeCluster {
    std::vector<SlotSpec> plan() override {
      if (++plans > 1) throw std::runtime_error("the Ray backend could not start: no cluster");
      return specs;
    }
  } c;
  c.specs = specs({"n1"});
  MeasurementScheduler s(c, quick());
  s.start();
  s.placement_lost("gone", "");
  Result r = s.submit(req()).get();
  EXPECT_EQ(r.status, Status::Crashed);
  EXPECT_EQ(r.message, "the Ray backend could not start: no cluster");
}

// A request the timing slot was told to ready (prefetch) is withdrawn: the slot goes on with the
// next request, nothing hangs, the other owners' requests are timed, and the count of requests
// in flight returns to 0.
TEST(MeasurementScheduler, AReadiedRequestThatIsWithdrawnCostsNothing) {
  FakeCluster c;
  c.specs = specs({"n1"}, 1, 4);
  c.delay = 150ms;
  MeasurementScheduler s(c, quick());
  s.start();
  std::this_thread::sleep_for(50ms);
  auto owned = [](std::uint64_t owner) {
    Request r = req();
    r.owner = owner;
    return r;
  };
  auto a = s.submit(owned(1));
  auto b = s.submit(owned(2));
  auto b2 = s.submit(owned(2));
  auto d = s.submit(owned(3));
  // a compiled (150 ms), then timed while b is compiled and then readied by the timing slot.
  std::this_thread::sleep_for(250ms);
  s.withdraw(2);
  for (auto* f : {&a, &b, &b2, &d})
    ASSERT_EQ(f->wait_for(20s), std::future_status::ready);
  EXPECT_EQ(a.get().status, Status::Ok);
  EXPECT_EQ(d.get().status, Status::Ok);
  for (auto* f : {&b, &b2}) {
    Result r = f->get();
    if (r.status != Status::Ok) {
      EXPECT_NE(r.message.find("withdrawn"), std::string::npos) << r.message;
    }
  }
  EXPECT_EQ(s.in_flight(), 0u);
  auto e = s.submit(owned(2)); // the owner's id is usable again
  ASSERT_EQ(e.wait_for(20s), std::future_status::ready);
  EXPECT_EQ(e.get().status, Status::Ok);
}
