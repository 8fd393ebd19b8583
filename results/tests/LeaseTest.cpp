// Leases: one process runs an exploration at a time (docs/results-store.md, "Leases").
#include "TestSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace dtx::results;
using namespace dtx::results::testing;

namespace {

/// A holder that is this process under another instance id (a second runner that is alive).
LeaseHolder holder(const std::string& instance, const std::string& program = "test") {
  LeaseHolder h = LeaseHolder::this_process(program);
  h.instance = instance;
  return h;
}

/// A holder on another machine: its process cannot be looked at, only its lease's expiry counts.
LeaseHolder remote(const std::string& instance) {
  LeaseHolder h = holder(instance, "dtxd");
  h.host = "elsewhere";
  h.pid = 999999999; // no such process here, which must not matter
  h.pid_scope = "another-boot pid:[1]";
  return h;
}

void sleep_s(double s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

} // namespace

TEST(Lease, ThisProcessIsNamedAndAlive) {
  LeaseHolder me = LeaseHolder::this_process("dtxd");
  EXPECT_EQ(me.pid, getpid());
  EXPECT_GT(me.started, 0);
  EXPECT_FALSE(me.host.empty());
  EXPECT_FALSE(me.pid_scope.empty());
  EXPECT_EQ(me.instance.size(), 32u);
  EXPECT_EQ(LeaseHolder::this_process("dtx").instance, me.instance); // one per process
  EXPECT_FALSE(me.gone());
  EXPECT_EQ(me.describe(), "dtxd (pid " + std::to_string(getpid()) + " on host " + me.host + ")");
  LeaseHolder reused = me; // the same pid, another start: a process that reused the pid
  reused.started += 1;
  EXPECT_TRUE(reused.gone());
  EXPECT_FALSE(remote("r").gone()); // cannot be told: not gone
}

TEST(Lease, AcquireRenewRelease) {
  TempDir dir;
  auto store = Store::open(dir.file("results.db"));
  auto e = store->create_exploration(spec());
  EXPECT_FALSE(store->lease(e));
  EXPECT_FALSE(store->exploration(e)->lease);

  LeaseAttempt a = store->acquire_lease(e, holder("a", "dtxd"), 60);
  ASSERT_TRUE(a.acquired);
  EXPECT_FALSE(a.replaced);
  EXPECT_EQ(a.lease.exploration_id, e);
  EXPECT_EQ(a.lease.holder.instance, "a");
  EXPECT_EQ(a.lease.holder.program, "dtxd");
  EXPECT_EQ(a.lease.holder.pid, getpid());
  EXPECT_TRUE(a.lease.live());
  EXPECT_LT(a.lease.renewed_at, a.lease.expires_at);
  EXPECT_EQ(a.lease.acquired_at.size(), 24u); // 2026-01-02T03:04:05.678Z

  // Reads of the exploration say who runs it.
  auto x = store->exploration(e);
  ASSERT_TRUE(x->lease);
  EXPECT_EQ(x->lease->holder.instance, "a");
  EXPECT_TRUE(x->lease->live());
  ASSERT_EQ(store->unfinished().size(), 1u);
  EXPECT_EQ(store->unfinished()[0].lease->holder.instance, "a");
  EXPECT_EQ(store->explorations()[0].lease->holder.instance, "a");

  // The holder acquiring again renews it, keeping its acquisition time.
  sleep_s(0.01);
  LeaseAttempt again = store->acquire_lease(e, holder("a", "dtxd"), 60);
  ASSERT_TRUE(again.acquired);
  EXPECT_FALSE(again.replaced);
  EXPECT_EQ(again.lease.acquired_at, a.lease.acquired_at);
  EXPECT_GT(again.lease.renewed_at, a.lease.renewed_at);

  EXPECT_TRUE(store->renew_lease(e, "a", 120));
  EXPECT_GT(store->lease(e)->expires_at, again.lease.expires_at);
  EXPECT_FALSE(store->renew_lease(e, "b", 120)); // not b's

  store->release_lease(e, "b"); // not b's: nothing happens
  EXPECT_TRUE(store->lease(e));
  store->release_lease(e, "a");
  EXPECT_FALSE(store->lease(e));
  EXPECT_FALSE(store->renew_lease(e, "a", 60));                   // released: nothing to renew
  EXPECT_TRUE(store->acquire_lease(e, holder("b"), 60).acquired); // free again
}

TEST(Lease, RefusedWhileLive) {
  TempDir dir;
  auto store = Store::open(dir.file("results.db"));
  auto e = store->create_exploration(spec());
  ASSERT_TRUE(store->acquire_lease(e, holder("a", "dtxd"), 60).acquired);
  Lease before = *store->lease(e);
  for (const LeaseHolder& other : {holder("b"), remote("c")}) {
    LeaseAttempt b = store->acquire_lease(e, other, 60);
    EXPECT_FALSE(b.acquired);
    EXPECT_EQ(b.lease.holder.instance, "a"); // says who holds it
    EXPECT_EQ(b.lease.holder.program, "dtxd");
    EXPECT_EQ(b.lease.holder.pid, getpid());
  }
  Lease after = *store->lease(e);
  EXPECT_EQ(after.holder.instance, "a");
  EXPECT_EQ(after.expires_at, before.expires_at); // a refusal writes nothing
  EXPECT_EQ(after.renewed_at, before.renewed_at);

  // Another machine's holder keeps others out just the same while its lease lasts.
  auto e2 = store->create_exploration(spec());
  ASSERT_TRUE(store->acquire_lease(e2, remote("r"), 60).acquired);
  EXPECT_FALSE(store->acquire_lease(e2, holder("b"), 60).acquired);
}

TEST(Lease, TakenOverAfterExpiry) {
  TempDir dir;
  auto store = Store::open(dir.file("results.db"));
  auto e = store->create_exploration(spec());
  ASSERT_TRUE(store->acquire_lease(e, remote("a"), 0.3).acquired);
  EXPECT_FALSE(store->acquire_lease(e, holder("b"), 60).acquired);
  sleep_s(0.4);
  Lease expired = *store->lease(e);
  EXPECT_TRUE(expired.expired);
  EXPECT_FALSE(expired.live());

  LeaseAttempt b = store->acquire_lease(e, holder("b"), 60);
  ASSERT_TRUE(b.acquired);
  ASSERT_TRUE(b.replaced);
  EXPECT_EQ(b.replaced->holder.instance, "a");
  EXPECT_EQ(b.replaced->holder.host, "elsewhere");
  EXPECT_EQ(b.lease.holder.instance, "b");
  EXPECT_GT(b.lease.acquired_at, expired.acquired_at);

  // The old holder, back, has lost it: it cannot renew, release or take it.
  EXPECT_FALSE(store->renew_lease(e, "a", 60));
  store->release_lease(e, "a");
  EXPECT_EQ(store->lease(e)->holder.instance, "b");
  EXPECT_FALSE(store->acquire_lease(e, remote("a"), 60).acquired);

  // An expired lease that no one took is still its holder's to renew.
  auto e2 = store->create_exploration(spec());
  ASSERT_TRUE(store->acquire_lease(e2, remote("c"), 0.05).acquired);
  sleep_s(0.1);
  EXPECT_TRUE(store->renew_lease(e2, "c", 60));
  EXPECT_TRUE(store->lease(e2)->live());
}

TEST(Lease, TakenOverAtOnceFromAProcessOfThisMachineThatEnded) {
  TempDir dir;
  auto path = dir.file("results.db");
  std::int64_t e = Store::open(path)->create_exploration(spec());
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      LeaseHolder h = LeaseHolder::this_process("dtx explore");
      h.instance = "child";
      _exit(Store::open(path)->acquire_lease(e, h, 3600).acquired ? 0 : 1);
    } catch (...) {
      _exit(2);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  auto store = Store::open(path);
  Lease left = *store->lease(e);
  EXPECT_EQ(left.holder.pid, child);
  EXPECT_EQ(left.holder.program, "dtx explore");
  EXPECT_FALSE(left.expired); // an hour to go
  EXPECT_TRUE(left.holder_gone);
  EXPECT_FALSE(left.live());
  LeaseAttempt b = store->acquire_lease(e, holder("b"), 60);
  ASSERT_TRUE(b.acquired);
  ASSERT_TRUE(b.replaced);
  EXPECT_EQ(b.replaced->holder.pid, child);
}

TEST(Lease, ANewExplorationCanBeCreatedLeased) {
  TempDir dir;
  auto store = Store::open(dir.file("results.db"));
  auto e = store->create_leased_exploration(spec(), holder("a", "dtx explore"), 60);
  auto x = store->exploration(e);
  ASSERT_TRUE(x && x->lease);
  EXPECT_EQ(x->lease->holder.instance, "a");
  EXPECT_EQ(x->state, State::Queued);
  EXPECT_FALSE(store->acquire_lease(e, holder("b"), 60).acquired);
}

TEST(Lease, AnUnknownExplorationIsAnError) {
  TempDir dir;
  auto store = Store::open(dir.file("results.db"));
  EXPECT_THROW(store->acquire_lease(42, holder("a"), 60), StoreError);
  EXPECT_FALSE(store->renew_lease(42, "a", 60));
  EXPECT_FALSE(store->lease(42));
}

// Many acquirers at once, each with its own connection: exactly one wins each exploration, and
// every other is told who did.
TEST(Lease, OfConcurrentAcquirersExactlyOneWins) {
  TempDir dir;
  auto path = dir.file("results.db");
  constexpr int kThreads = 8, kRounds = 10;
  std::vector<std::int64_t> explorations;
  {
    auto store = Store::open(path);
    for (int r = 0; r < kRounds; ++r)
      explorations.push_back(store->create_exploration(spec()));
  }
  std::vector<std::unique_ptr<Store>> stores;
  for (int t = 0; t < kThreads; ++t)
    stores.push_back(Store::open(path));
  std::barrier start(kThreads);
  std::vector<std::vector<LeaseAttempt>> attempts(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (std::int64_t e : explorations) {
        start.arrive_and_wait();
        attempts[t].push_back(stores[t]->acquire_lease(e, holder("t" + std::to_string(t)), 60));
      }
    });
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < kRounds; ++r) {
    std::set<std::string> winners, named;
    for (int t = 0; t < kThreads; ++t) {
      const LeaseAttempt& a = attempts[t][r];
      if (a.acquired) winners.insert("t" + std::to_string(t));
      named.insert(a.lease.holder.instance);
    }
    ASSERT_EQ(winners.size(), 1u) << "round " << r;
    EXPECT_EQ(named, winners) << "round " << r; // every loser named the winner
    EXPECT_EQ(stores[0]->lease(explorations[r])->holder.instance, *winners.begin());
  }
}

// The same between processes, after the lease expired: of several processes that find it
// expired at once, one takes it over. Each stays alive until all have tried (a holder that has
// ended would be taken over from, rightly).
TEST(Lease, OfConcurrentProcessesExactlyOneTakesAnExpiredLeaseOver) {
  TempDir dir;
  auto path = dir.file("results.db");
  std::int64_t e = 0;
  {
    auto store = Store::open(path);
    e = store->create_exploration(spec());
    ASSERT_TRUE(store->acquire_lease(e, remote("old"), 0.2).acquired);
  }
  sleep_s(0.3);
  constexpr int kChildren = 6;
  int go[2], results[2], done[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(results), 0);
  ASSERT_EQ(pipe(done), 0);
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(go[1]);
      close(results[0]);
      close(done[1]);
      char outcome = 'x';
      try {
        auto store = Store::open(path);
        char byte;
        if (read(go[0], &byte, 1) != 0) _exit(3); // released together when the pipe closes
        LeaseHolder h = LeaseHolder::this_process("dtxd");
        h.instance = "child" + std::to_string(c);
        outcome = store->acquire_lease(e, h, 60).acquired ? 'y' : 'n';
      } catch (...) {
      }
      if (write(results[1], &outcome, 1) != 1) _exit(4);
      char byte;
      if (read(done[0], &byte, 1) != 0) _exit(5); // alive until every child has tried
      _exit(0);
    }
    children.push_back(child);
  }
  close(go[0]);
  close(results[1]);
  close(done[0]);
  sleep_s(0.2); // every child has opened the store
  close(go[1]);
  std::string outcomes;
  char outcome;
  while (outcomes.size() < kChildren && read(results[0], &outcome, 1) == 1)
    outcomes += outcome;
  close(done[1]);
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  close(results[0]);
  ASSERT_EQ(outcomes.size(), std::size_t{kChildren}) << outcomes;
  EXPECT_EQ(std::count(outcomes.begin(), outcomes.end(), 'y'), 1) << outcomes;
  EXPECT_EQ(std::count(outcomes.begin(), outcomes.end(), 'n'), kChildren - 1) << outcomes;
  Lease now = *Store::open(path)->lease(e);
  EXPECT_EQ(now.holder.instance.rfind("child", 0), 0u);
}
