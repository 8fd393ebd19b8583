// The Ray backend against tests/fake_ray_driver.py (the driver's protocol without Ray): slots
// planned from the driver's nodes and reached through it, baseline files shipped, a lost actor
// and a driver that dies. tests/ray/test_ray_backend.py runs the real driver on a Ray cluster.
#include "dtx/RayBackend.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace dtx;

namespace {

RayOptions fake_options() {
  RayOptions o;
  o.address = "fake:1";
  o.python = DTX_TEST_PYTHON3;
  o.driver_script = std::string(DTX_EXPLORER_TEST_DIR) + "/fake_ray_driver.py";
  o.worker_script = std::string(DTX_EXPLORER_TEST_DIR) + "/fake_worker.py";
  o.startup_timeout_s = 10;
  o.connect_timeout_s = 10;
  return o;
}

Request fake(const std::string& func, RequestKind kind = RequestKind::Measure) {
  Request r;
  r.kind = kind;
  r.module_source = "# module";
  r.func = func;
  r.times.bench = BenchSettings{};
  r.timeout_s = 10;
  return r;
}

} // namespace

TEST(RayBackend, SlotsArePlannedFromTheDriversNodesAndReachedThroughIt) {
  RayBackend ray(fake_options());
  nlohmann::json cluster = ray.cluster();
  EXPECT_EQ(cluster.value("timing_workers", 0), 1);
  EXPECT_EQ(cluster.value("compile_workers", 0), 1);
  Result r = ray.submit(fake("ok")).get();
  ASSERT_EQ(r.status, Status::Ok) << r.message;
  EXPECT_EQ(r.message.rfind("timing timing-ffffffff-0-0 measure", 0), 0u) << r.message;
  ASSERT_TRUE(r.ahead_compile_s);
  EXPECT_DOUBLE_EQ(*r.ahead_compile_s, 0.5);
  ASSERT_TRUE(r.worker);
  EXPECT_EQ(r.worker->raw["node"], std::string(56, 'f'));
  auto timing = ray.timing_workers();
  ASSERT_EQ(timing.size(), 1u);
  EXPECT_EQ(timing[0].device_name, "FAKE GPU");
}

TEST(RayBackend, ABaselineFileTravelsWithItsRequest) {
  auto file = std::filesystem::temp_directory_path() / "dtx_ray_backend_test_baseline.py";
  std::ofstream(file) << "def f(a):\n    return a\n";
  RayBackend ray(fake_options());
  Request r = fake("baseline", RequestKind::Baseline);
  r.baseline = BaselineSpec{false, file.string(), "f", false};
  Result got = ray.submit(r).get();
  EXPECT_EQ(got.status, Status::Ok) << got.message;
  EXPECT_EQ(got.message, "def f(a):\n    return a\n");
  r.baseline->file = "/nonexistent/baseline.py";
  got = ray.submit(r).get();
  EXPECT_EQ(got.status, Status::RuntimeError);
  EXPECT_NE(got.message.find("cannot read the baseline file /nonexistent/baseline.py"),
            std::string::npos)
      << got.message;
  std::filesystem::remove(file);
}

TEST(RayBackend, ALostActorCostsNothing) {
  RayBackend ray(fake_options());
  Request lose = fake("lose");
  lose.compile_first = false; // the timing actor dies under it
  Result r = ray.submit(lose).get();
  EXPECT_EQ(r.status, Status::Ok) << r.message;
  EXPECT_EQ(r.message.rfind("timing timing-ffffffff-0-1 measure", 0), 0u) << r.message;
}

TEST(RayBackend, ADriverThatDiesFailsItsRequestsAndTheNextStartsAnother) {
  RayBackend ray(fake_options());
  Result r = ray.submit(fake("die")).get();
  EXPECT_EQ(r.status, Status::Crashed);
  EXPECT_NE(r.message.find("the Ray driver exited with status 7: dying on purpose"),
            std::string::npos)
      << r.message;
  Result next = ray.submit(fake("ok")).get();
  EXPECT_EQ(next.status, Status::Ok) << next.message;
  EXPECT_EQ(ray.in_flight(), 0u);
}

TEST(RayBackend, AClusterWithoutGpusIsAClearError) {
  ::setenv("FAKE_RAY_GPUS", "0", 1);
  try {
    RayBackend ray(fake_options());
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("the Ray cluster at fake:1 has no GPU (1 node(s), 4 "
                                         "CPU(s))"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("FAKE_RAY_GPUS");
}
