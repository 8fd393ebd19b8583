// dtxd's HTTP server (src/Connection.h) on a real socket: stopping it ends its listening loop
// whether the stop comes before that loop has begun or while it runs.
#include "Connection.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace {

using namespace std::chrono_literals;

TEST(HttpServer, AStopBeforeTheListeningLoopBeginsEndsIt) {
  // dtxd stopped by a signal between binding its port and entering httplib's loop: httplib's
  // own stop() did nothing then, and the loop ran for ever.
  dtx::server::HttpServer http({});
  ASSERT_GT(http.bind_to_any_port("127.0.0.1"), 0);
  http.shut_down();
  auto loop = std::async(std::launch::async, [&] { return http.listen_after_bind(); });
  EXPECT_EQ(loop.wait_for(10s), std::future_status::ready);
  if (loop.wait_for(0s) != std::future_status::ready) http.stop(); // it runs now: end the test
}

TEST(HttpServer, AStopWhileListeningEndsIt) {
  dtx::server::HttpServer http({});
  ASSERT_GT(http.bind_to_any_port("127.0.0.1"), 0);
  auto loop = std::async(std::launch::async, [&] { return http.listen_after_bind(); });
  for (int i = 0; i < 1000 && !http.is_running(); ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(http.is_running());
  http.shut_down();
  EXPECT_EQ(loop.wait_for(10s), std::future_status::ready);
}

} // namespace
