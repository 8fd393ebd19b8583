// The pool against tests/fake_worker.py (protocol 1 without torch): routing through the compile
// stage, back-pressure, timeouts, crashes, restarts, and no process left behind.
#include "dtx/WorkerPool.h"

#include <gtest/gtest.h>

#include <csignal>
#include <map>
#include <mutex>
#include <thread>

using namespace dtx;

namespace {

PoolOptions fake_options(int compile_workers = 1) {
  PoolOptions o;
  o.python = DTX_TEST_PYTHON3;
  o.worker_script = std::string(DTX_EXPLORER_TEST_DIR) + "/fake_worker.py";
  o.compile_workers = compile_workers;
  o.startup_timeout_s = 30;
  return o;
}

Request fake(const std::string& func, double timeout_s = 20, int delay_ms = 0) {
  Request r;
  r.module_source = "# module";
  r.func = func;
  r.sizes = {{"delay_ms", delay_ms}};
  r.times.bench = BenchSettings{};
  r.timeout_s = timeout_s;
  return r;
}

bool alive(long pid) {
  return ::kill(static_cast<pid_t>(pid), 0) == 0;
}

} // namespace

TEST(WorkerPool, MeasureGoesThroughCompileWorkerThenTiming) {
  WorkerPool pool(fake_options());
  Result r = pool.submit(fake("ok")).get();
  EXPECT_EQ(r.status, Status::Ok) << r.message;
  EXPECT_NE(r.message.find("timing"), std::string::npos) << r.message;
  ASSERT_TRUE(r.ahead_compile_s);
  EXPECT_DOUBLE_EQ(*r.ahead_compile_s, 0.5);
  ASSERT_TRUE(r.bench);
  ASSERT_TRUE(r.worker);
  EXPECT_EQ(r.worker->role, "timing");
  EXPECT_EQ(r.worker->raw["cache"], r.worker->raw["cache"]); // shared dir set
  EXPECT_FALSE(r.worker->raw["cache"].get<std::string>().empty());
  auto timing = pool.timing_workers();
  ASSERT_EQ(timing.size(), 1u);
  EXPECT_FALSE(timing[0].comparable);
}

TEST(WorkerPool, WithoutCompileWorkersTimingDoesAll) {
  WorkerPool pool(fake_options(0));
  Result r = pool.submit(fake("ok")).get();
  EXPECT_EQ(r.status, Status::Ok);
  EXPECT_FALSE(r.ahead_compile_s);
  Request c = fake("ok");
  c.kind = RequestKind::Compile;
  EXPECT_EQ(pool.submit(c).get().status, Status::Ok);
}

TEST(WorkerPool, EveryStatusAndNothingQueuedIsLost) {
  WorkerPool pool(fake_options(2));
  std::vector<std::pair<std::string, std::future<Result>>> futures;
  std::vector<std::string> funcs = {"ok", "sleep", "ok", "kill", "ok", "exit",
                                    "ok", "raise", "ok", "cuda", "ok", "ok"};
  for (const auto& f : funcs)
    futures.emplace_back(f, pool.submit(fake(f, 2.0)));
  for (auto& [func, fut] : futures) {
    Result r = fut.get();
    if (func == "ok") {
      EXPECT_EQ(r.status, Status::Ok) << r.message;
    }
    if (func == "sleep") {
      EXPECT_EQ(r.status, Status::Timeout) << r.message;
    }
    if (func == "kill") {
      EXPECT_EQ(r.status, Status::Crashed);
      EXPECT_NE(r.message.find("signal 9"), std::string::npos) << r.message;
      EXPECT_NE(r.stderr_tail.find("request"), std::string::npos) << r.stderr_tail;
    }
    if (func == "exit") {
      EXPECT_EQ(r.status, Status::Crashed);
      EXPECT_NE(r.message.find("status 3"), std::string::npos) << r.message;
    }
    if (func == "raise" || func == "cuda") {
      EXPECT_EQ(r.status, Status::RuntimeError);
    }
  }
  EXPECT_EQ(pool.in_flight(), 0u);
}

TEST(WorkerPool, ATimeoutCarriesTheOutputOfItsOwnRequestOnly) {
  // One worker answers both: what the first request wrote on standard error (the real worker
  // logs a failed request's traceback there) must not come back as the second one's.
  PoolOptions o = fake_options(0);
  o.prefetch = false;
  WorkerPool pool(std::move(o));
  Result failed = pool.submit(fake("raise")).get();
  ASSERT_EQ(failed.status, Status::RuntimeError) << failed.message;
  Result hung = pool.submit(fake("sleep", 1.0)).get();
  ASSERT_EQ(hung.status, Status::Timeout) << hung.message;
  EXPECT_NE(hung.stderr_tail.find("request " + hung.id + " measure sleep"), std::string::npos)
      << hung.stderr_tail;
  EXPECT_EQ(hung.stderr_tail.find("request " + failed.id + " "), std::string::npos)
      << hung.stderr_tail;
  Result crashed = pool.submit(fake("kill")).get();
  ASSERT_EQ(crashed.status, Status::Crashed) << crashed.message;
  EXPECT_EQ(crashed.stderr_tail.find("starting"), std::string::npos) << crashed.stderr_tail;
  EXPECT_EQ(crashed.stderr_tail.find("request " + hung.id + " "), std::string::npos)
      << crashed.stderr_tail;
}

TEST(WorkerPool, BackPressure) {
  PoolOptions o = fake_options(0);
  o.capacity = 2;
  WorkerPool pool(std::move(o));
  auto a = pool.submit(fake("ok", 20, 500));
  auto b = pool.submit(fake("ok", 20, 500));
  EXPECT_FALSE(pool.try_submit(fake("ok")));
  auto start = std::chrono::steady_clock::now();
  auto c = pool.submit(fake("ok")); // blocks until one of the first two is done
  EXPECT_GT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  EXPECT_EQ(a.get().status, Status::Ok);
  EXPECT_EQ(b.get().status, Status::Ok);
  EXPECT_EQ(c.get().status, Status::Ok);
}

// A timing worker's request names the Measure request queued behind it, so the worker can
// ready that one while it times this one: only one a compile worker has passed, never one
// already sent, and not when off.
TEST(WorkerPool, TimingRequestNamesTheNextQueuedMeasure) {
  for (bool prefetch : {true, false}) {
    PoolOptions o = fake_options(1);
    o.prefetch = prefetch;
    WorkerPool pool(std::move(o));
    // Compiled at once, then timed for 300 ms while b and c are compiled and queue: the timing
    // request of `a` leaves long before they exist, b's after both are compiled.
    Request slow = fake("ok");
    slow.sizes = {{"timing_delay_ms", 300}};
    auto a = pool.submit(slow);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto b = pool.submit(fake("ok"));
    auto c = pool.submit(fake("ok"));
    Result ra = a.get(), rb = b.get(), rc = c.get();
    for (const Result* r : {&ra, &rb, &rc})
      EXPECT_EQ(r->status, Status::Ok) << r->message;
    EXPECT_EQ(ra.message.find("prefetch"), std::string::npos) << ra.message;
    if (prefetch)
      EXPECT_NE(rb.message.find("prefetch " + rc.id), std::string::npos) << rb.message;
    else
      EXPECT_EQ(rb.message.find("prefetch"), std::string::npos) << rb.message;
    EXPECT_EQ(rc.message.find("prefetch"), std::string::npos) << rc.message;
  }
  // Without a compile stage nothing vouches for the next module: it is not named.
  WorkerPool pool(fake_options(0));
  auto a = pool.submit(fake("ok", 20, 300));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto b = pool.submit(fake("ok"));
  auto c = pool.submit(fake("ok"));
  a.get();
  Result rb = b.get();
  c.get();
  EXPECT_EQ(rb.message.find("prefetch"), std::string::npos) << rb.message;
}

// With two timing workers, the request a worker was told to ready is the one it takes next:
// the other worker taking it would waste the preparation.
TEST(WorkerPool, ANamedRequestGoesToTheWorkerThatReadiesIt) {
  PoolOptions o = fake_options(8); // all compiled at once: the timing queue fills up
  o.gpus = {0, 1};
  WorkerPool pool(std::move(o));
  std::vector<std::future<Result>> futures;
  for (int i = 0; i < 8; ++i)
    futures.push_back(pool.submit(fake("ok", 20, 150)));
  std::map<std::string, Result> by_id;
  for (auto& f : futures) {
    Result r = f.get();
    ASSERT_EQ(r.status, Status::Ok) << r.message;
    by_id[r.id] = r;
  }
  int named = 0;
  for (const auto& [id, r] : by_id) {
    auto at = r.message.find("prefetch ");
    if (at == std::string::npos) continue;
    ++named;
    const Result& next = by_id.at(r.message.substr(at + 9));
    ASSERT_TRUE(r.worker && next.worker);
    EXPECT_EQ(next.worker->pid, r.worker->pid) << r.message;
  }
  EXPECT_GE(named, 2);
}

TEST(WorkerPool, CallbackRunsBeforeTheFuture) {
  WorkerPool pool(fake_options(0));
  std::mutex m;
  std::vector<std::string> seen;
  auto f = pool.submit(fake("ok"), [&](const Result& r) {
    std::lock_guard lock(m);
    seen.push_back(std::string(status_name(r.status)));
  });
  f.get();
  std::lock_guard lock(m);
  EXPECT_EQ(seen, std::vector<std::string>{"ok"});
}

TEST(WorkerPool, BadPythonIsReportedNotHung) {
  PoolOptions o = fake_options(0);
  o.python = "/nonexistent/python";
  WorkerPool pool(std::move(o));
  Result r = pool.submit(fake("ok")).get();
  EXPECT_EQ(r.status, Status::Crashed);
  EXPECT_NE(r.message.find("did not start"), std::string::npos) << r.message;
}

TEST(WorkerPool, WorkerThatNeverSaysHelloTimesOut) {
  ::setenv("FAKE_WORKER_NO_HELLO", "1", 1);
  PoolOptions o = fake_options(0);
  o.startup_timeout_s = 1;
  o.eager_start = false;
  WorkerPool pool(std::move(o));
  Result r = pool.submit(fake("ok")).get();
  ::unsetenv("FAKE_WORKER_NO_HELLO");
  EXPECT_EQ(r.status, Status::Crashed);
  EXPECT_NE(r.message.find("no hello"), std::string::npos) << r.message;
}

TEST(WorkerPool, ShutdownKillsWorkersAndFailsQueued) {
  std::vector<long> pids;
  std::future<Result> running, queued;
  {
    WorkerPool pool(fake_options(1));
    running = pool.submit(fake("sleep", 60));
    queued = pool.submit(fake("ok"));
    for (int i = 0; i < 100 && pool.worker_pids().size() < 2; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pids = pool.worker_pids();
    ASSERT_EQ(pids.size(), 2u);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    pool.shutdown();
    EXPECT_EQ(pool.submit(fake("ok")).get().status, Status::Crashed);
  }
  EXPECT_EQ(running.get().status, Status::Crashed);
  EXPECT_EQ(queued.get().status, Status::Crashed);
  for (long pid : pids)
    EXPECT_FALSE(alive(pid)) << pid;
}

// The binaries run the worker of the dtx package installed for their interpreter (deploy/setup.sh
// installs it editable into .venv), and pass the protocol they speak.
TEST(WorkerPool, TheWorkerIsFoundThroughTheInstalledPackage) {
  std::filesystem::path venv = std::filesystem::path(DTX_SOURCE_DIR) / ".venv" / "bin" / "python";
  if (!std::filesystem::exists(venv)) GTEST_SKIP() << venv << " is not set up";
  EXPECT_EQ(std::filesystem::canonical(package_worker_script(venv)),
            std::filesystem::canonical(std::filesystem::path(DTX_SOURCE_DIR) / "src" / "dtx" /
                                       "worker.py"));
  // The system's python3, without the package, finds none; an interpreter that does not exist
  // neither.
  EXPECT_TRUE(package_worker_script(DTX_TEST_PYTHON3).empty());
  EXPECT_TRUE(package_worker_script("/nonexistent/python3").empty());
}

// A stopped exploration takes back what it still has queued: those requests end at once
// (`crashed`, "withdrawn") and never reach a worker; the one running ends normally, and another
// owner's requests are untouched.
TEST(WorkerPool, WithdrawTakesBackAnOwnersQueuedRequests) {
  PoolOptions o = fake_options(0);
  o.capacity = 8;
  WorkerPool pool(std::move(o));
  auto owned = [](Request r, std::uint64_t owner) {
    r.owner = owner;
    return r;
  };
  ASSERT_EQ(pool.submit(fake("ok")).get().status, Status::Ok); // the worker is up
  auto running = pool.submit(owned(fake("ok", 20, 2000), 7));
  auto queued1 = pool.submit(owned(fake("ok"), 7));
  auto queued2 = pool.submit(owned(fake("ok"), 7));
  auto other = pool.submit(owned(fake("ok"), 8));
  std::this_thread::sleep_for(std::chrono::milliseconds(500)); // `running` is on the worker
  EXPECT_EQ(pool.withdraw(0), 0u);                             // nobody's: nothing
  EXPECT_EQ(pool.withdraw(7), 2u);
  for (auto* f : {&queued1, &queued2}) {
    ASSERT_EQ(f->wait_for(std::chrono::milliseconds(100)), std::future_status::ready);
    Result r = f->get();
    EXPECT_EQ(r.status, Status::Crashed);
    EXPECT_NE(r.message.find("withdrawn"), std::string::npos) << r.message;
  }
  EXPECT_EQ(running.get().status, Status::Ok);
  EXPECT_EQ(other.get().status, Status::Ok);
  EXPECT_EQ(pool.withdraw(7), 0u);
  EXPECT_EQ(pool.in_flight(), 0u);
}

// A Measure request withdrawn while a compile worker has it is not timed afterwards.
TEST(WorkerPool, AWithdrawnMeasureStopsAfterItsCompile) {
  WorkerPool pool(fake_options(1));
  ASSERT_EQ(pool.submit(fake("ok")).get().status, Status::Ok); // both workers are up
  Request r = fake("ok", 20, 2000);
  r.owner = 3;
  auto f = pool.submit(r);
  std::this_thread::sleep_for(std::chrono::milliseconds(500)); // compiling
  EXPECT_EQ(pool.withdraw(3), 0u);                             // none queued
  Result got = f.get();
  EXPECT_EQ(got.status, Status::Crashed);
  EXPECT_NE(got.message.find("withdrawn"), std::string::npos) << got.message;
  EXPECT_EQ(pool.submit(fake("ok")).get().status, Status::Ok); // the pool goes on
}

// An exploration that stops while the pool is full does not wait for room.
TEST(WorkerPool, SubmitUnlessGivesUpWhenAskedToStop) {
  PoolOptions o = fake_options(0);
  o.capacity = 1;
  WorkerPool pool(std::move(o));
  auto busy = pool.submit(fake("ok", 20, 1500));
  auto start = std::chrono::steady_clock::now();
  auto stop = [&] {
    return std::chrono::steady_clock::now() - start > std::chrono::milliseconds(200);
  };
  EXPECT_FALSE(submit_unless(pool, fake("ok"), {}, stop));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
  auto later = submit_unless(pool, fake("ok"), {}, [] { return false; }); // waits for room
  ASSERT_TRUE(later);
  EXPECT_EQ(later->get().status, Status::Ok);
  EXPECT_EQ(busy.get().status, Status::Ok);
}
