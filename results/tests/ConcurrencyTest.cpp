#include "TestSupport.h"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace dtx::results;
using namespace dtx::results::testing;

namespace {

constexpr int kPerWriter = 200;

} // namespace

TEST(Concurrency, TwoThreadsShareOneStore) {
  TempDir dir;
  auto store = Store::open(dir.file("results.db"));
  auto e = store->create_exploration(spec());
  std::vector<std::int64_t> ids[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      auto s = store->add_schedule(e, "block(" + std::to_string(t) + ");", t,
                                   "h" + std::to_string(t), "module");
      for (int i = 0; i < kPerWriter; ++i)
        ids[t].push_back(store->add_measurement(s, measurement("ok", 1.0 + i)));
    });
  threads.emplace_back([&] { // a reader alongside
    for (int i = 0; i < 50; ++i) {
      store->ranked(e);
      store->exploration(e);
    }
  });
  for (auto& t : threads)
    t.join();
  std::set<std::int64_t> all(ids[0].begin(), ids[0].end());
  all.insert(ids[1].begin(), ids[1].end());
  EXPECT_EQ(all.size(), 2u * kPerWriter);
  EXPECT_EQ(store->history("h0").size() + store->history("h1").size(), 2u * kPerWriter);
  EXPECT_EQ(store->exploration(e)->measured, 2);
}

TEST(Concurrency, TwoStoresOnOneFile) {
  TempDir dir;
  auto path = dir.file("results.db");
  std::int64_t e = Store::open(path)->create_exploration(spec());
  auto first = Store::open(path);
  auto second = Store::open(path);
  std::vector<std::int64_t> ids[2];
  std::int64_t schedule[2] = {0, 0};
  auto writer = [&](Store& store, int t) {
    // Both add the same schedule: one row for the pair, whichever comes first.
    schedule[t] = store.add_schedule(e, "block(shared);", 0, "shared", "module");
    for (int i = 0; i < kPerWriter; ++i) {
      ids[t].push_back(store.add_measurement(schedule[t], measurement("ok", 1.0 + i)));
      if (i % 50 == 0) store.set_state(e, State::Running);
    }
  };
  std::thread a(writer, std::ref(*first), 0);
  std::thread b(writer, std::ref(*second), 1);
  a.join();
  b.join();
  EXPECT_EQ(schedule[0], schedule[1]);
  first.reset();
  second.reset();
  auto store = Store::open(path);
  EXPECT_EQ(store->history("shared").size(), 2u * kPerWriter);
  std::set<std::int64_t> all(ids[0].begin(), ids[0].end());
  all.insert(ids[1].begin(), ids[1].end());
  EXPECT_EQ(all.size(), 2u * kPerWriter);
}

TEST(Concurrency, OpenersOfANewFileMigrateItOnce) {
  TempDir dir;
  auto path = dir.file("results.db");
  std::vector<std::thread> threads;
  std::atomic<int> opened{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      auto store = Store::open(path);
      if (store->version() == Store::latest_version()) ++opened;
      store->create_exploration(spec());
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(opened, 4);
  EXPECT_EQ(Store::open(path)->explorations().size(), 4u);
}

// A writer killed with SIGKILL loses at most the write in progress: every id it reported (after
// add_measurement returned) is in the file, and the file is intact.
TEST(Concurrency, KilledWriterLosesNothingCommitted) {
  TempDir dir;
  auto path = dir.file("results.db");
  std::int64_t schedule = 0;
  {
    auto store = Store::open(path);
    auto e = store->create_exploration(spec());
    schedule = store->add_schedule(e, "block(a);", 0, "h1", "module");
  } // the child opens its own connection: none crosses the fork

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    try {
      auto store = Store::open(path);
      for (int i = 0; i < 1000000; ++i) {
        std::int64_t id = store->add_measurement(schedule, measurement("ok", 1.0 + i));
        if (write(fds[1], &id, sizeof id) != sizeof id) _exit(2);
      }
    } catch (...) {
      _exit(1);
    }
    _exit(0);
  }
  close(fds[1]);
  std::vector<std::int64_t> reported;
  std::int64_t id = 0;
  while (reported.size() < 300 && read(fds[0], &id, sizeof id) == sizeof id)
    reported.push_back(id);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  while (read(fds[0], &id, sizeof id) == sizeof id) // what it reported before dying
    reported.push_back(id);
  close(fds[0]);
  ASSERT_GE(reported.size(), 300u);

  auto store = Store::open(path);
  auto history = store->history("h1");
  std::set<std::int64_t> stored;
  for (const auto& h : history)
    stored.insert(h.measurement.id);
  for (auto reported_id : reported)
    EXPECT_TRUE(stored.count(reported_id)) << "lost measurement " << reported_id;
  EXPECT_LE(stored.size(), reported.size() + 1); // at most one committed but not yet reported
  EXPECT_EQ(RawDb(path).text("PRAGMA integrity_check"), "ok");
  // And the store goes on.
  EXPECT_GT(store->add_measurement(schedule, measurement("ok", 1.0)), *stored.rbegin());
}
