// How many candidates an exploration keeps in flight (search_window): a strategy that learns
// from results gets at most a quarter of its budget at once, so that its later proposals know
// the results of the earlier ones; random sampling and exhaustive search fill the pool's room.
// Run on a backend that answers each request 100 ms later and counts the most it
// held at once.
#include "dtx/Explore.h"
#include "dtx/Settings.h"
#include "dtx/TemplateFile.h"
#include "dtx/results/Store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

using namespace dtx;

namespace {

class CountingBackend : public MeasurementBackend {
public:
  std::future<Result> submit(Request request, ResultCallback callback) override {
    return *try_submit(std::move(request), std::move(callback));
  }
  std::optional<std::future<Result>> try_submit(Request request, ResultCallback callback) override {
    std::lock_guard lock(mutex_);
    if (request.kind == RequestKind::Measure && request.baseline == std::nullopt) {
      ++candidates_held_;
      most_held_ = std::max(most_held_, candidates_held_);
    }
    auto promise = std::make_shared<std::promise<Result>>();
    auto future = promise->get_future();
    threads_.emplace_back([this, request, promise, callback] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      Result r;
      r.status = Status::Ok;
      r.id = "x";
      r.bench = TimeStats{};
      // A time of its own for each module: the strategies see a landscape.
      r.bench->median_ms =
          1.0 + static_cast<double>(std::hash<std::string>{}(request.module_source + request.func) %
                                    1000) /
                    1000.0;
      r.check = Check{};
      {
        std::lock_guard answered(mutex_);
        if (request.kind == RequestKind::Measure && request.baseline == std::nullopt)
          --candidates_held_;
      }
      if (callback) callback(r);
      promise->set_value(r);
    });
    return future;
  }
  std::size_t withdraw(std::uint64_t) override { return 0; }
  void shutdown() override {}
  std::vector<WorkerInfo> timing_workers() const override {
    WorkerInfo w;
    w.role = "timing";
    w.protocol = 1;
    w.device_kind = "cpu-interpreter";
    w.device_name = "cpu-interpreter";
    return {w};
  }
  ~CountingBackend() override {
    for (auto& t : threads_)
      t.join();
  }
  std::size_t most_held() {
    std::lock_guard lock(mutex_);
    return most_held_;
  }

private:
  std::mutex mutex_;
  std::size_t candidates_held_ = 0, most_held_ = 0;
  std::vector<std::thread> threads_;
};

std::size_t most_in_flight(const std::string& strategy, std::uint64_t budget) {
  CountingBackend backend;
  auto store = results::Store::open(":memory:");
  ExploreJob job;
  job.file = load_template_file(std::string(DTX_SOURCE_DIR) + "/templates/geglu.yaml");
  job.shape = {{"x", 256}, {"y", 512}};
  job.settings = settings_from_json(nlohmann::json::object());
  job.settings.strategy = strategy;
  job.settings.budget = budget;
  job.settings.in_flight = 64; // the pool's room: more than any window here
  job.settings.top = 1;
  job.settings.rounds = 1;
  ExploreSummary s = explore(job, backend, *store);
  EXPECT_EQ(s.state, results::State::Done) << strategy;
  EXPECT_EQ(s.progress.done, budget) << strategy;
  return backend.most_held();
}

} // namespace

TEST(SearchWindow, AQuarterOfTheBudgetForAStrategyThatLearns) {
  EXPECT_EQ(search_window(true, 32, 1), 8u);
  EXPECT_EQ(search_window(true, 8, 1), 4u);  // at least 4
  EXPECT_EQ(search_window(true, 8, 8), 16u); // two a timing worker
  EXPECT_EQ(search_window(true, 0, 1), std::numeric_limits<std::size_t>::max()); // no budget
  EXPECT_EQ(search_window(false, 32, 1), std::numeric_limits<std::size_t>::max());
}

TEST(SearchWindow, AnExplorationHoldsNoMoreThanItsWindow) {
  for (const char* strategy : {"tpe", "evolution"})
    EXPECT_LE(most_in_flight(strategy, 40), 10u) << strategy;
  // Random sampling does not wait for results: the pool's room, or the budget.
  EXPECT_GT(most_in_flight("random", 40), 10u);
}
