// A store whose file cannot be written: the error says so (StoreError::unwritable), the store
// remembers it (write_health) until a write succeeds, and probe_write finds out when it can be
// written again. The file is made unwritable for real, in a child process whose RLIMIT_FSIZE
// stops the write-ahead log from growing (writes fail with EFBIG, as on a full disk with
// ENOSPC), and then writable again by lifting the limit.
#include "TestSupport.h"

#include <gtest/gtest.h>

#include <csignal>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace dtx::results;
using namespace dtx::results::testing;

TEST(WriteHealth, OtherErrorsAreNotUnwritable) {
  EXPECT_FALSE(StoreError("results store 'x': set_state: no exploration 41").unwritable());
  TempDir dir;
  auto store = Store::open(dir.file("results.db"));
  try {
    store->set_state(41, State::Done);
    FAIL() << "no error";
  } catch (const StoreError& e) {
    EXPECT_FALSE(e.unwritable()) << e.what();
    EXPECT_EQ(e.sqlite_code(), 0);
  }
  EXPECT_TRUE(store->write_health().ok); // an unknown id says nothing about the file
  EXPECT_TRUE(store->probe_write().ok);
}

TEST(WriteHealth, WritesCountsTheWritesThatChangedRows) {
  TempDir dir;
  auto store = Store::open(dir.file("results.db"));
  const std::int64_t start = store->writes();
  const std::int64_t id = store->create_exploration(spec());
  EXPECT_EQ(store->writes(), start + 1);
  store->exploration(id);
  store->explorations();
  EXPECT_EQ(store->writes(), start + 1); // reads count nothing
  EXPECT_THROW(store->set_state(id + 1, State::Done), StoreError);
  EXPECT_EQ(store->writes(), start + 1); // nor writes that changed nothing
  store->set_state(id, State::Done);
  EXPECT_EQ(store->writes(), start + 2);
}

TEST(WriteHealth, AFileThatCannotGrowIsReportedUntilAWriteSucceeds) {
  TempDir dir;
  auto path = dir.file("results.db");
  std::int64_t exploration = 0, schedule = 0;
  {
    auto store = Store::open(path);
    exploration = store->create_exploration(spec());
    schedule = store->add_schedule(exploration, "block(a);", 0, "h1", "module");
  } // the child opens its own connection: none crosses the fork

  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int step = 0; // the exit status: the first check that failed
    auto check = [&](bool ok) {
      ++step;
      if (!ok) _exit(step);
    };
    try {
      std::signal(SIGXFSZ, SIG_IGN); // a write past the limit fails with EFBIG instead
      auto store = Store::open(path);
      LeaseHolder holder = LeaseHolder::this_process("test");
      holder.instance = "holder";
      store->acquire_lease(exploration, holder, 3600);
      store->add_measurement(schedule, measurement("ok", 1.0));
      check(store->write_health().ok); // 1
      // The log ends at the last commit: no more of it can be written.
      rlimit unlimited{};
      getrlimit(RLIMIT_FSIZE, &unlimited);
      rlimit limit = unlimited;
      limit.rlim_cur = std::filesystem::file_size(path.string() + "-wal");
      check(setrlimit(RLIMIT_FSIZE, &limit) == 0); // 2

      MeasurementRecord big = measurement("ok", 2.0);
      big.message = std::string(100000, 'x');
      bool unwritable = false;
      std::string message;
      try {
        store->add_measurement(schedule, big);
      } catch (const StoreError& e) {
        unwritable = e.unwritable();
        message = e.what();
      }
      check(unwritable);                                           // 3
      check(message.find("add_measurement") != std::string::npos); // 4
      WriteHealth failed = store->write_health();
      check(!failed.ok && failed.error == message);                   // 5
      check(failed.since.size() == 24 && failed.since.back() == 'Z'); // 6
      check(store->exploration(exploration).has_value());             // 7: reads go on
      check(!store->probe_write().ok);                                // 8
      check(store->write_health().since == failed.since);             // 9: since the first
      bool refused = false;
      try {
        store->create_explorations({spec("a"), spec("b")});
      } catch (const StoreError& e) {
        refused = e.unwritable();
      }
      check(refused); // 10
      // A lease refused writes nothing, and does not make the file look writable.
      LeaseHolder other = holder;
      other.instance = "other";
      check(!store->acquire_lease(exploration, other, 60).acquired && // 11
            !store->write_health().ok);

      check(setrlimit(RLIMIT_FSIZE, &unlimited) == 0); // 12: room again
      WriteHealth probed = store->probe_write();
      check(probed.ok && probed.error.empty() && probed.since.empty());      // 13
      check(store->add_measurement(schedule, big) > 0);                      // 14
      check(store->create_explorations({spec("a"), spec("b")}).size() == 2); // 15
      check(store->write_health().ok);                                       // 16
    } catch (...) {
      _exit(100);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "check " << WEXITSTATUS(status) << " failed";

  auto store = Store::open(path);
  EXPECT_EQ(store->explorations().size(), 3u); // the refused pair stored nothing
  EXPECT_EQ(store->history("h1").size(), 2u);
  EXPECT_EQ(RawDb(path).text("PRAGMA integrity_check"), "ok");
}
