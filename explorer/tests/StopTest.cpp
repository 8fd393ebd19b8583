// A stop is final: run_measure submits nothing after it, and submit_unless on a backend that
// has shut down fails the request at once, as submit does, instead of waiting for room.
#include "dtx/Measure.h"
#include "dtx/WorkerPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

using namespace dtx;

namespace {

// Capacity 1; each request is answered (ok, a bench time) 100 ms after it was taken. Counts the
// requests taken after `stop_at` said the caller stops.
class SlowBackend : public MeasurementBackend {
public:
  std::future<Result> submit(Request request, ResultCallback callback) override {
    for (;;) {
      if (auto f = try_submit(request, callback)) return std::move(*f);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::optional<std::future<Result>> try_submit(Request, ResultCallback callback) override {
    std::lock_guard lock(mutex_);
    if (in_flight_ >= 1) return std::nullopt;
    ++in_flight_;
    ++taken_;
    if (stopped && stopped->load()) ++taken_after_stop_;
    auto promise = std::make_shared<std::promise<Result>>();
    auto future = promise->get_future();
    threads_.emplace_back([this, promise, callback] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      Result r;
      r.status = Status::Ok;
      r.id = "x";
      r.bench = TimeStats{};
      r.bench->median_ms = 1.0;
      {
        std::lock_guard answered(mutex_);
        --in_flight_;
      }
      if (callback) callback(r);
      promise->set_value(r);
    });
    return future;
  }
  std::size_t withdraw(std::uint64_t) override { return 0; }
  void shutdown() override {}
  std::vector<WorkerInfo> timing_workers() const override { return {}; }
  ~SlowBackend() override {
    for (auto& t : threads_)
      t.join();
  }
  std::atomic<bool>* stopped = nullptr;
  int taken() {
    std::lock_guard lock(mutex_);
    return taken_;
  }
  int taken_after_stop() {
    std::lock_guard lock(mutex_);
    return taken_after_stop_;
  }

private:
  std::mutex mutex_;
  int in_flight_ = 0, taken_ = 0, taken_after_stop_ = 0;
  std::vector<std::thread> threads_;
};

const char* kProgram = "Func f;\nIn A;\nVar x;\nf[x] = A[x] * 2;\nf.compile();\n";

} // namespace

// Two candidates, three rounds, room for one request: the stop comes while the second candidate
// of round 0 waits for room. submit_unless gives up; the first candidate's result, answered
// normally, must not make run_measure go on to round 1 (a request a timing worker could take
// before the exploration withdraws it).
TEST(Stop, RunMeasureSubmitsNothingAfterAStop) {
  SlowBackend backend;
  std::atomic<bool> stop{false};
  backend.stopped = &stop;
  MeasureConfig config;
  config.source = kProgram;
  config.schedules = {"f.block(x:64); f.compile()", "f.block(x:128); f.compile()"};
  config.sizes = {{"x", 1024}};
  config.rounds = 3;
  config.times.bench = BenchSettings{};
  config.stop = [&] { return stop.load(); };
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(40)); // round 0's first is running
    stop = true;
  });
  Report report = run_measure(config, backend);
  stopper.join();
  EXPECT_EQ(backend.taken_after_stop(), 0)
      << "requests submitted after the stop (of " << backend.taken() << " in all)";
}

// submit() on a pool that has shut down fails the request at once ("the pool shut down"), and so
// do try_submit and submit_unless, even for a caller that never stops (run_measure without
// `stop`: `dtx measure`).
TEST(Stop, SubmitUnlessOnAShutDownPoolFailsAtOnce) {
  PoolOptions o;
  o.python = DTX_TEST_PYTHON3;
  o.worker_script = std::string(DTX_EXPLORER_TEST_DIR) + "/fake_worker.py";
  o.compile_workers = 0;
  o.startup_timeout_s = 30;
  WorkerPool pool(std::move(o));
  pool.shutdown();
  Request r;
  r.module_source = "# module";
  r.func = "ok";
  r.times.bench = BenchSettings{};
  EXPECT_EQ(pool.submit(r).get().status, Status::Crashed); // as submit says
  std::atomic<bool> give_up{false};
  auto f = std::async(std::launch::async,
                      [&] { return submit_unless(pool, r, {}, [&] { return give_up.load(); }); });
  bool returned = f.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
  give_up = true; // let the thread end either way
  auto got = f.get();
  EXPECT_TRUE(returned) << "submit_unless still spinning 2 s after the pool shut down";
  if (returned) {
    ASSERT_TRUE(got);
    EXPECT_EQ(got->get().status, Status::Crashed);
  }
}
