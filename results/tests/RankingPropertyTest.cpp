// The ranking that the store keeps as measurements arrive (and that migration 2 fills in for
// older files) against one computed here from the measurements themselves.
#include "Schema.h"
#include "TestSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

using namespace dtx::results;
using namespace dtx::results::testing;

namespace {

struct Result {
  std::string protocol, status;
  std::optional<double> time_ms;
};

/// Random results for `schedules` schedules: ties in time, ok results without a time, other
/// protocols, and schedules never measured.
std::vector<std::pair<int, Result>> random_results(int schedules, int count, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::pair<int, Result>> out;
  const char* protocols[] = {"screen", "screen", "full", "other"};
  const char* statuses[] = {"ok", "ok", "ok", "wrong_result", "timeout", "compile_error"};
  for (int i = 0; i < count; ++i) {
    Result r;
    r.protocol = protocols[rng() % 4];
    r.status = statuses[rng() % 6];
    if (r.status == "ok" && rng() % 20 != 0) r.time_ms = 0.25 * (1 + rng() % 12);
    if (r.status != "ok" && rng() % 3 == 0) r.time_ms = 0.5;        // failures may carry a time
    out.emplace_back(static_cast<int>(rng() % (schedules - 3)), r); // the last 3: none
  }
  return out;
}

struct Expected {
  std::int64_t schedule_id;
  int group; // 0 ranked, 1 not ranked, 2 other protocols only, 3 not measured
  double time;
  std::string status; // of the ranking measurement
  int tier = 1;       // ranked: 0 by a `full` time, 1 by a `screen` time
};

/// The store's rules, computed directly: the ranking measurement is the latest `full`, else
/// the latest `screen`; ranked ones with a `full` time first, then those with a `screen` time
/// only, each by time, then the rest by group, ties by schedule id.
std::vector<Expected> expected_ranking(const std::vector<std::int64_t>& schedule_ids,
                                       const std::vector<std::pair<int, Result>>& results) {
  std::vector<Expected> out;
  for (std::size_t s = 0; s < schedule_ids.size(); ++s) {
    std::optional<Result> screen, full;
    bool any = false;
    for (const auto& [index, r] : results) {
      if (index != static_cast<int>(s)) continue;
      any = true;
      if (r.protocol == "screen") screen = r;
      if (r.protocol == "full") full = r;
    }
    Expected e{schedule_ids[s], 3, 0, ""};
    if (auto ranking = full ? full : screen) {
      bool ranked = ranking->status == "ok" && ranking->time_ms;
      e.group = ranked ? 0 : 1;
      e.tier = full ? 0 : 1;
      e.time = ranked ? *ranking->time_ms : 0;
      e.status = ranking->status;
    } else if (any) {
      e.group = 2;
    }
    out.push_back(e);
  }
  std::sort(out.begin(), out.end(), [](const Expected& a, const Expected& b) {
    int ta = a.group == 0 ? a.tier : 0, tb = b.group == 0 ? b.tier : 0;
    return std::tie(a.group, ta, a.time, a.schedule_id) <
           std::tie(b.group, tb, b.time, b.schedule_id);
  });
  return out;
}

void expect_store_ranks(const Store& store, std::int64_t exploration,
                        const std::vector<Expected>& expected) {
  RankedQuery all;
  all.limit = -1;
  auto rows = store.ranked(exploration, all);
  ASSERT_EQ(rows.size(), expected.size());
  std::int64_t measured = 0, failed = 0;
  std::optional<double> best;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& want = expected[i];
    EXPECT_EQ(rows[i].schedule_id, want.schedule_id) << "row " << i;
    EXPECT_EQ(rows[i].rank, want.group == 0 ? static_cast<int>(i) + 1 : 0) << "row " << i;
    const auto& ranking = rows[i].full ? rows[i].full : rows[i].screen;
    EXPECT_EQ(ranking ? ranking->status : "", want.status) << "row " << i;
    if (want.group == 0) {
      EXPECT_EQ(ranking->time_ms, want.time) << "row " << i;
    }
    EXPECT_EQ(store.schedule(rows[i].schedule_id)->rank, rows[i].rank) << "row " << i;
    measured += want.group < 3;
    failed += want.group == 1;
    if (want.group == 0 && !best) best = want.time;
  }
  auto e = store.exploration(exploration);
  EXPECT_EQ(e->measured, measured);
  EXPECT_EQ(e->failed, failed);
  EXPECT_EQ(e->best_ms, best);

  // Pages put together give the whole list, with the same ranks.
  for (std::int64_t size : {1, 3, 7}) {
    std::vector<RankedSchedule> joined;
    for (std::int64_t offset = 0;; offset += size) {
      RankedQuery page;
      page.offset = offset;
      page.limit = size;
      auto part = store.ranked(exploration, page);
      if (part.empty()) break;
      joined.insert(joined.end(), part.begin(), part.end());
    }
    ASSERT_EQ(joined.size(), rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(joined[i].schedule_id, rows[i].schedule_id);
      EXPECT_EQ(joined[i].rank, rows[i].rank);
    }
  }
  // A status filter keeps the order and the ranks.
  for (const char* status : {"ok", "wrong_result", "timeout"}) {
    RankedQuery q;
    q.status = status;
    q.limit = -1;
    std::vector<std::pair<std::int64_t, int>> want, got;
    for (const auto& r : rows) {
      const auto& ranking = r.full ? r.full : r.screen;
      if (ranking && ranking->status == status) want.emplace_back(r.schedule_id, r.rank);
    }
    for (const auto& r : store.ranked(exploration, q))
      got.emplace_back(r.schedule_id, r.rank);
    EXPECT_EQ(got, want) << status;
  }
}

} // namespace

TEST(RankingProperty, KeptAsMeasurementsArrive) {
  for (unsigned seed : {1u, 2u, 3u}) {
    auto store = Store::open(":memory:");
    auto e = store->create_exploration(spec());
    std::vector<std::int64_t> schedules;
    for (int i = 0; i < 40; ++i)
      schedules.push_back(
          store->add_schedule(e, "s" + std::to_string(i), i, "h" + std::to_string(i), "module"));
    auto results = random_results(40, 300, seed);
    for (const auto& [index, r] : results) {
      auto m = measurement(r.status, r.time_ms, r.protocol);
      store->add_measurement(schedules[index], m);
    }
    SCOPED_TRACE(seed);
    expect_store_ranks(*store, e, expected_ranking(schedules, results));
  }
}

TEST(RankingProperty, FilledInByTheMigration) {
  TempDir dir;
  auto path = dir.file("v1.db");
  auto results = random_results(30, 200, 4);
  std::vector<std::int64_t> schedules;
  {
    RawDb raw(path);
    detail::migrate_to(raw.handle(), 1);
    raw.exec("INSERT INTO algorithms (id, sha256, source) VALUES (1, 'a', 'algorithm');"
             "INSERT INTO templates (id, sha256, text) VALUES (1, 't', 'template');"
             "INSERT INTO explorations (id, kernel, algorithm_id, template_id, shape, dtype,"
             " strategy) VALUES (1, 'geglu', 1, 1, 'x=16,y=32', 'float32', 'exhaustive');");
    for (int i = 0; i < 30; ++i) {
      schedules.push_back(i + 1);
      raw.exec("INSERT INTO schedules (id, exploration_id, canonical, candidate_index) VALUES (" +
               std::to_string(i + 1) + ", 1, 's" + std::to_string(i) + "', " + std::to_string(i) +
               ")");
    }
    for (const auto& [index, r] : results)
      raw.exec("INSERT INTO measurements (schedule_id, code_hash, shape, dtype, protocol, status,"
               " message, time_ms, rounds, compile_s, device_name, device_kind, driver, cuda,"
               " torch, triton, host) VALUES (" +
               std::to_string(index + 1) + ", '', 'x=16,y=32', 'float32', '" + r.protocol + "', '" +
               r.status + "', '', " +
               (r.time_ms ? std::to_string(*r.time_ms) : std::string("NULL")) +
               ", 1, 0, 'd', 'cuda', '', '', '', '', '')");
  }
  auto store = Store::open(path);
  ASSERT_EQ(store->version(), Store::latest_version());
  expect_store_ranks(*store, 1, expected_ranking(schedules, results));
  // And the store keeps it from there.
  store->add_measurement(schedules[29], measurement("ok", 0.01, "full"));
  EXPECT_EQ(store->ranked(1).front().schedule_id, schedules[29]);
  EXPECT_EQ(store->schedule(schedules[29])->rank, 1);
}
