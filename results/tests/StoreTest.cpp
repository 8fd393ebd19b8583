#include "TestSupport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

using namespace dtx::results;
using namespace dtx::results::testing;

namespace {

std::vector<std::int64_t> ids(const std::vector<Exploration>& list) {
  std::vector<std::int64_t> out;
  for (const auto& e : list)
    out.push_back(e.id);
  return out;
}

std::vector<std::int64_t> schedule_ids(const std::vector<RankedSchedule>& list) {
  std::vector<std::int64_t> out;
  for (const auto& r : list)
    out.push_back(r.schedule_id);
  return out;
}

std::vector<int> ranks(const std::vector<RankedSchedule>& list) {
  std::vector<int> out;
  for (const auto& r : list)
    out.push_back(r.rank);
  return out;
}

bool is_timestamp(const std::string& text) {
  static const std::regex format(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  return std::regex_match(text, format);
}

} // namespace

// --- opening

TEST(Store, OpensInMemoryAtTheLatestVersion) {
  auto store = Store::open(":memory:");
  EXPECT_GE(Store::latest_version(), 2);
  EXPECT_EQ(store->version(), Store::latest_version());
  EXPECT_TRUE(store->explorations().empty());
  EXPECT_TRUE(store->unfinished().empty());
}

TEST(Store, InMemoryStoresAreSeparate) {
  auto a = Store::open(":memory:");
  auto b = Store::open(":memory:");
  a->create_exploration(spec());
  EXPECT_EQ(a->explorations().size(), 1u);
  EXPECT_TRUE(b->explorations().empty());
}

TEST(Store, CreatesTheFileAndReopeningKeepsEverything) {
  TempDir dir;
  auto path = dir.file("results.db");
  std::int64_t id = 0, schedule = 0, measured = 0, baseline = 0;
  {
    auto store = Store::open(path);
    id = store->create_exploration(spec());
    schedule = store->add_schedule(id, "block(geglu, x, 16);", 3, "hash-1", "def kernel(): pass");
    measured = store->add_measurement(schedule, measurement("ok", 1.5));
    baseline = store->add_baseline(id, "torch", measurement("ok", 2.0));
    store->set_rejections(id, {{"too_big", 4}});
    store->set_state(id, State::Done);
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  auto store = Store::open(path);
  EXPECT_EQ(store->version(), Store::latest_version());
  auto e = store->exploration(id);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->state, State::Done);
  EXPECT_EQ(e->measured, 1);
  EXPECT_EQ(e->best_ms, 1.5);
  EXPECT_EQ(e->best_baseline_ms, 2.0);
  auto ranked = store->ranked(id);
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_EQ(ranked[0].schedule_id, schedule);
  ASSERT_TRUE(ranked[0].screen);
  EXPECT_EQ(ranked[0].screen->id, measured);
  EXPECT_EQ(store->module_source("hash-1"), "def kernel(): pass");
  ASSERT_EQ(store->baselines(id).size(), 1u);
  EXPECT_EQ(store->baselines(id)[0].id, baseline);
  EXPECT_EQ(store->rejections(id), (std::map<std::string, std::int64_t>{{"too_big", 4}}));
}

TEST(Store, FileIsInWalMode) {
  TempDir dir;
  auto path = dir.file("results.db");
  auto store = Store::open(path);
  store->create_exploration(spec());
  RawDb raw(path);
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "wal");
  EXPECT_TRUE(std::filesystem::exists(dir.file("results.db-wal")));
}

TEST(Store, ErrorsNameTheFileAndTheOperation) {
  TempDir dir;
  auto path = dir.file("results.db");
  auto store = Store::open(path);
  try {
    store->set_state(41, State::Done);
    FAIL() << "no exception";
  } catch (const StoreError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(path.string()), std::string::npos) << what;
    EXPECT_NE(what.find("set_state"), std::string::npos) << what;
    EXPECT_NE(what.find("no exploration 41"), std::string::npos) << what;
  }
}

TEST(Store, ReadOnlyOpenReadsAndWritesNothing) {
  TempDir dir;
  auto path = dir.file("results.db");
  std::int64_t id = 0;
  {
    auto store = Store::open(path);
    id = store->create_exploration(spec());
    store->set_state(id, State::Done);
  }
  auto size = std::filesystem::file_size(path);
  auto store = Store::open_read_only(path);
  EXPECT_EQ(store->version(), Store::latest_version());
  ASSERT_TRUE(store->exploration(id));
  EXPECT_EQ(store->exploration(id)->state, State::Done);
  EXPECT_EQ(store->explorations().size(), 1u);
  EXPECT_THROW(store->create_exploration(spec()), StoreError);
  EXPECT_THROW(store->set_state(id, State::Failed), StoreError);
  store.reset();
  EXPECT_EQ(std::filesystem::file_size(path), size);
  EXPECT_EQ(Store::open(path)->exploration(id)->state, State::Done);
  // Nothing to read is an error, and no file is made.
  EXPECT_THROW(Store::open_read_only(dir.file("none.db")), StoreError);
  EXPECT_FALSE(std::filesystem::exists(dir.file("none.db")));
}

TEST(Store, DamagedPagesAreFound) {
  TempDir dir;
  auto path = dir.file("results.db");
  {
    auto store = Store::open(path);
    std::int64_t id = store->create_exploration(spec());
    std::int64_t schedule = store->add_schedule(id, "block(geglu, x, 16);", 0, "h", "module");
    store->add_measurement(schedule, measurement("ok", 1.5));
    EXPECT_EQ(store->damage(), "");
  }
  std::int64_t page = 0, page_size = 0;
  {
    RawDb raw(path);
    page = raw.integer("SELECT rootpage FROM sqlite_master WHERE name = 'measurements'");
    page_size = raw.integer("PRAGMA page_size");
  }
  ASSERT_GT(page, 1);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((page - 1) * page_size);
    std::string junk(static_cast<std::size_t>(page_size), '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto store = Store::open(path); // the pages it reads to open are sound
  std::string damage = store->damage();
  EXPECT_NE(damage, "");
  EXPECT_NE(damage.find("Page " + std::to_string(page)), std::string::npos) << damage;
}

// --- explorations

TEST(Explorations, RoundTripWithDefaults) {
  auto store = Store::open(":memory:");
  ExplorationSpec s = spec();
  s.template_file = "templates/geglu.sched";
  auto id = store->create_exploration(s);
  auto e = store->exploration(id);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->id, id);
  EXPECT_EQ(e->spec.kernel, s.kernel);
  EXPECT_EQ(e->spec.algorithm, s.algorithm);
  EXPECT_EQ(e->spec.template_text, s.template_text);
  EXPECT_EQ(e->spec.template_file, s.template_file);
  EXPECT_EQ(e->spec.shape, s.shape);
  EXPECT_EQ(e->spec.dtype, s.dtype);
  EXPECT_EQ(e->spec.strategy, s.strategy);
  EXPECT_EQ(e->spec.settings_json, s.settings_json);
  EXPECT_EQ(e->state, State::Queued);
  EXPECT_EQ(e->message, "");
  EXPECT_EQ(e->space_size, 0);
  EXPECT_EQ(e->candidates, 0);
  EXPECT_EQ(e->measured, 0);
  EXPECT_EQ(e->failed, 0);
  EXPECT_FALSE(e->best_ms);
  EXPECT_FALSE(e->best_baseline_ms);
  EXPECT_EQ(e->device_name, "");
  EXPECT_TRUE(is_timestamp(e->created_at)) << e->created_at;
  EXPECT_EQ(e->updated_at, e->created_at);
  EXPECT_FALSE(store->exploration(id + 1));
}

TEST(Explorations, SourcesAreStoredOncePerText) {
  TempDir dir;
  auto path = dir.file("results.db");
  auto store = Store::open(path);
  store->create_exploration(spec());
  store->create_exploration(spec());
  ExplorationSpec other = spec();
  other.algorithm += "\n# changed";
  auto id = store->create_exploration(other);
  EXPECT_EQ(store->exploration(id)->spec.algorithm, other.algorithm);
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT COUNT(*) FROM algorithms"), 2);
  EXPECT_EQ(raw.integer("SELECT COUNT(*) FROM templates"), 1);
  EXPECT_EQ(raw.integer("SELECT COUNT(*) FROM explorations"), 3);
}

TEST(Explorations, ListFiltersByKernelAndStateNewestFirst) {
  auto store = Store::open(":memory:");
  std::vector<std::int64_t> id;
  for (const char* kernel : {"a", "b", "a", "b", "a"})
    id.push_back(store->create_exploration(spec(kernel)));
  store->set_state(id[2], State::Running);
  store->set_state(id[4], State::Done);

  EXPECT_EQ(ids(store->explorations()),
            (std::vector<std::int64_t>{id[4], id[3], id[2], id[1], id[0]}));
  ExplorationQuery q;
  q.kernel = "a";
  EXPECT_EQ(ids(store->explorations(q)), (std::vector<std::int64_t>{id[4], id[2], id[0]}));
  q.state = State::Queued;
  EXPECT_EQ(ids(store->explorations(q)), (std::vector<std::int64_t>{id[0]}));
  q.kernel.reset();
  EXPECT_EQ(ids(store->explorations(q)), (std::vector<std::int64_t>{id[3], id[1], id[0]}));
  q.state = State::Cancelled;
  EXPECT_TRUE(store->explorations(q).empty());
  q = {};
  q.kernel = "zzz";
  EXPECT_TRUE(store->explorations(q).empty());

  ExplorationQuery page;
  page.offset = 1;
  page.limit = 2;
  EXPECT_EQ(ids(store->explorations(page)), (std::vector<std::int64_t>{id[3], id[2]}));
  page.offset = 4;
  EXPECT_EQ(ids(store->explorations(page)), (std::vector<std::int64_t>{id[0]}));
  page.offset = 5;
  EXPECT_TRUE(store->explorations(page).empty());
  page.offset = 0;
  page.limit = -1; // no limit
  EXPECT_EQ(store->explorations(page).size(), 5u);
}

TEST(Explorations, SettersUpdateTheRow) {
  auto store = Store::open(":memory:");
  auto id = store->create_exploration(spec());
  auto created = store->exploration(id)->created_at;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));

  store->set_state(id, State::Failed, "worker died");
  auto e = store->exploration(id);
  EXPECT_EQ(e->state, State::Failed);
  EXPECT_EQ(e->message, "worker died");
  EXPECT_EQ(e->created_at, created);
  EXPECT_TRUE(is_timestamp(e->updated_at));
  EXPECT_GT(e->updated_at, created);
  store->set_state(id, State::Running);
  EXPECT_EQ(store->exploration(id)->message, "");

  store->set_space(id, 1000, 250);
  store->set_device(id, "NVIDIA H100 80GB HBM3");
  e = store->exploration(id);
  EXPECT_EQ(e->space_size, 1000);
  EXPECT_EQ(e->candidates, 250);
  EXPECT_EQ(e->device_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(e->state, State::Running);
}

TEST(Explorations, RejectionsAreReplaced) {
  auto store = Store::open(":memory:");
  auto id = store->create_exploration(spec());
  auto other = store->create_exploration(spec());
  EXPECT_TRUE(store->rejections(id).empty());
  store->set_rejections(id, {{"too_big", 3}, {"bad_block", 4}});
  store->set_rejections(other, {{"too_big", 1}});
  EXPECT_EQ(store->rejections(id),
            (std::map<std::string, std::int64_t>{{"bad_block", 4}, {"too_big", 3}}));
  store->set_rejections(id, {{"warps", 7}});
  EXPECT_EQ(store->rejections(id), (std::map<std::string, std::int64_t>{{"warps", 7}}));
  store->set_rejections(id, {});
  EXPECT_TRUE(store->rejections(id).empty());
  EXPECT_EQ(store->rejections(other), (std::map<std::string, std::int64_t>{{"too_big", 1}}));
}

TEST(Explorations, UnknownIdsAreErrors) {
  auto store = Store::open(":memory:");
  EXPECT_THROW(store->set_state(7, State::Done), StoreError);
  EXPECT_THROW(store->set_space(7, 1, 1), StoreError);
  EXPECT_THROW(store->set_device(7, "x"), StoreError);
  EXPECT_THROW(store->set_rejections(7, {{"a", 1}}), StoreError);
  EXPECT_THROW(store->add_schedule(7, "s", 0, "h", "src"), StoreError);
  EXPECT_THROW(store->add_baseline(7, "torch", measurement("ok", 1.0)), StoreError);
  EXPECT_THROW(store->add_measurement(7, measurement("ok", 1.0)), StoreError);
  EXPECT_TRUE(store->rejections(7).empty());
  EXPECT_TRUE(store->ranked(7).empty());
  EXPECT_TRUE(store->baselines(7).empty());
}

TEST(Explorations, UnfinishedAreQueuedOrRunningOldestFirst) {
  auto store = Store::open(":memory:");
  std::vector<std::int64_t> id;
  for (int i = 0; i < 6; ++i)
    id.push_back(store->create_exploration(spec()));
  store->set_state(id[0], State::Running);
  store->set_state(id[1], State::Done);
  store->set_state(id[3], State::Cancelled);
  store->set_state(id[4], State::Failed, "boom");
  store->set_state(id[5], State::Running);
  EXPECT_EQ(ids(store->unfinished()), (std::vector<std::int64_t>{id[0], id[2], id[5]}));
}

// --- schedules and modules

TEST(Schedules, AddScheduleIsIdempotentAndModulesAreStoredOnce) {
  TempDir dir;
  auto path = dir.file("results.db");
  auto store = Store::open(path);
  auto e1 = store->create_exploration(spec());
  auto e2 = store->create_exploration(spec());
  auto a = store->add_schedule(e1, "block(a);", 0, "h1", "module one");
  EXPECT_EQ(store->add_schedule(e1, "block(a);", 0, "h1", "module one"), a);
  auto b = store->add_schedule(e1, "block(b);", 1, "h1", "module one"); // same generated code
  auto c = store->add_schedule(e2, "block(a);", 0, "h1", "module one"); // other exploration
  auto d = store->add_schedule(e1, "block(d);", 2, "h2", "module two");
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(b, d);
  EXPECT_EQ(store->module_source("h1"), "module one");
  EXPECT_EQ(store->module_source("h2"), "module two");
  EXPECT_FALSE(store->module_source("h3"));
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT COUNT(*) FROM modules"), 2);
  EXPECT_EQ(raw.integer("SELECT COUNT(*) FROM schedules"), 4);
}

TEST(Schedules, RepeatedAddLearnsAnUnknownIndexOnly) {
  auto store = Store::open(":memory:");
  auto e = store->create_exploration(spec());
  auto id = store->add_schedule(e, "block(a);", -1, "h1", "m");
  EXPECT_EQ(store->schedule(id)->candidate_index, -1);
  EXPECT_EQ(store->add_schedule(e, "block(a);", 5, "h1", "m"), id);
  EXPECT_EQ(store->schedule(id)->candidate_index, 5);
  EXPECT_EQ(store->add_schedule(e, "block(a);", 9, "h1", "m"), id);
  EXPECT_EQ(store->schedule(id)->candidate_index, 5);
}

TEST(Schedules, AScheduleWithoutCodeHasNoModule) {
  auto store = Store::open(":memory:");
  auto e = store->create_exploration(spec());
  auto id = store->add_schedule(e, "block(bad);", 0, "", "");
  auto s = store->schedule(id);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->code_hash, "");
  EXPECT_EQ(s->canonical, "block(bad);");
  store->add_measurement(id, measurement("compile_error", std::nullopt));
  EXPECT_EQ(store->exploration(e)->failed, 1);
  EXPECT_FALSE(store->module_source(""));
}

TEST(Schedules, UnknownScheduleIsNullopt) {
  auto store = Store::open(":memory:");
  EXPECT_FALSE(store->schedule(12));
}

// --- measurements

TEST(Measurements, EveryFieldRoundTrips) {
  auto store = Store::open(":memory:");
  auto e = store->create_exploration(spec());
  auto s = store->add_schedule(e, "block(a);", 0, "h1", "m");
  MeasurementRecord m = measurement("ok", 1.25, "full");
  m.id = 999;                 // ignored
  m.created_at = "yesterday"; // ignored
  m.message = "fine";
  m.bench = TimeQuantiles{1.0, 0.9, 1.1, 0.8, 1.3, 40};
  m.gpu = TimeQuantiles{0.7, 0.65, 0.75, 0.6, 0.9, 100};
  m.host_us = 12.5;
  m.time_stdev_ms = 0.01;
  m.rounds = 3;
  m.rel_l2 = 1e-7;
  m.max_abs = 2e-6;
  m.compile_s = 0.42;
  m.env.node = "6649a91d0e";
  m.env.gpu = 1;
  auto id = store->add_measurement(s, m);
  EXPECT_NE(id, 999);

  auto found = store->find_measurement("h1", m.shape, m.dtype, "full", m.env);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, id);
  EXPECT_EQ(found->code_hash, "h1"); // taken from the schedule
  EXPECT_EQ(found->shape, m.shape);
  EXPECT_EQ(found->dtype, m.dtype);
  EXPECT_EQ(found->protocol, "full");
  EXPECT_EQ(found->status, "ok");
  EXPECT_EQ(found->message, "fine");
  ASSERT_TRUE(found->bench);
  EXPECT_EQ(found->bench->median_ms, 1.0);
  EXPECT_EQ(found->bench->q20_ms, 0.9);
  EXPECT_EQ(found->bench->q80_ms, 1.1);
  EXPECT_EQ(found->bench->min_ms, 0.8);
  EXPECT_EQ(found->bench->max_ms, 1.3);
  EXPECT_EQ(found->bench->samples, 40);
  ASSERT_TRUE(found->gpu);
  EXPECT_EQ(found->gpu->median_ms, 0.7);
  EXPECT_EQ(found->gpu->q20_ms, 0.65);
  EXPECT_EQ(found->gpu->q80_ms, 0.75);
  EXPECT_EQ(found->gpu->min_ms, 0.6);
  EXPECT_EQ(found->gpu->max_ms, 0.9);
  EXPECT_EQ(found->gpu->samples, 100);
  EXPECT_EQ(found->host_us, 12.5);
  EXPECT_EQ(found->time_ms, 1.25);
  EXPECT_EQ(found->time_stdev_ms, 0.01);
  EXPECT_EQ(found->rounds, 3);
  EXPECT_EQ(found->rel_l2, 1e-7);
  EXPECT_EQ(found->max_abs, 2e-6);
  EXPECT_EQ(found->compile_s, 0.42);
  EXPECT_EQ(found->env.device_name, m.env.device_name);
  EXPECT_EQ(found->env.device_kind, m.env.device_kind);
  EXPECT_EQ(found->env.driver, m.env.driver);
  EXPECT_EQ(found->env.cuda, m.env.cuda);
  EXPECT_EQ(found->env.torch, m.env.torch);
  EXPECT_EQ(found->env.triton, m.env.triton);
  EXPECT_EQ(found->env.host, m.env.host);
  EXPECT_EQ(found->env.node, "6649a91d0e");
  EXPECT_EQ(found->env.gpu, 1);
  EXPECT_TRUE(is_timestamp(found->created_at)) << found->created_at;
}

TEST(Measurements, AbsentOptionalsStayAbsent) {
  auto store = Store::open(":memory:");
  auto e = store->create_exploration(spec());
  auto s = store->add_schedule(e, "block(a);", 0, "h1", "m");
  MeasurementRecord m = measurement("runtime_error", std::nullopt);
  m.message = "illegal memory access";
  m.bench = TimeQuantiles{}; // present, all zero
  store->add_measurement(s, m);
  auto found = store->find_measurement("h1", m.shape, m.dtype, m.protocol, m.env);
  ASSERT_TRUE(found);
  ASSERT_TRUE(found->bench);
  EXPECT_EQ(found->bench->samples, 0);
  EXPECT_FALSE(found->gpu);
  EXPECT_FALSE(found->host_us);
  EXPECT_FALSE(found->time_ms);
  EXPECT_FALSE(found->time_stdev_ms);
  EXPECT_FALSE(found->rel_l2);
  EXPECT_FALSE(found->max_abs);
  EXPECT_EQ(found->message, "illegal memory access");
}

TEST(Measurements, CodeHashMustBeTheSchedules) {
  auto store = Store::open(":memory:");
  auto e = store->create_exploration(spec());
  auto s = store->add_schedule(e, "block(a);", 0, "h1", "m");
  MeasurementRecord m = measurement("ok", 1.0);
  m.code_hash = "h1";
  EXPECT_NO_THROW(store->add_measurement(s, m));
  m.code_hash = "h2";
  EXPECT_THROW(store->add_measurement(s, m), StoreError);
  EXPECT_THROW(store->add_measurement(s + 100, measurement("ok", 1.0)), StoreError);
  EXPECT_EQ(store->history("h1").size(), 1u);
  EXPECT_TRUE(store->history("h2").empty());
}

TEST(Measurements, FindMatchesEveryPartOfTheKey) {
  auto store = Store::open(":memory:");
  auto e = store->create_exploration(spec());
  auto s = store->add_schedule(e, "block(a);", 0, "h1", "m");
  MeasurementRecord m = measurement("ok", 1.0, "full");
  auto id = store->add_measurement(s, m);
  const Environment env = m.env;
  auto find = [&](const std::string& hash, const std::string& shape, const std::string& dtype,
                  const std::string& protocol, const Environment& where) {
    return store->find_measurement(hash, shape, dtype, protocol, where);
  };
  ASSERT_TRUE(find("h1", m.shape, m.dtype, "full", env));
  EXPECT_EQ(find("h1", m.shape, m.dtype, "full", env)->id, id);

  EXPECT_FALSE(find("h2", m.shape, m.dtype, "full", env));
  EXPECT_FALSE(find("h1", "x=16,y=64", m.dtype, "full", env));
  EXPECT_FALSE(find("h1", m.shape, "float16", "full", env));
  EXPECT_FALSE(find("h1", m.shape, m.dtype, "screen", env)); // a screen never stands for a full
  for (std::string Environment::*part :
       {&Environment::device_name, &Environment::device_kind, &Environment::driver,
        &Environment::cuda, &Environment::torch, &Environment::triton}) {
    Environment other = env;
    other.*part += "-other";
    EXPECT_FALSE(find("h1", m.shape, m.dtype, "full", other)) << other.*part;
  }
  Environment other_host = env;
  other_host.host = "elsewhere"; // not part of the identity, nor are node and GPU
  other_host.node = "another-node";
  other_host.gpu = 7;
  EXPECT_TRUE(find("h1", m.shape, m.dtype, "full", other_host));
}

TEST(Measurements, FindReturnsTheLatestAcrossExplorations) {
  auto store = Store::open(":memory:");
  auto e1 = store->create_exploration(spec());
  auto e2 = store->create_exploration(spec());
  auto s1 = store->add_schedule(e1, "block(a);", 0, "h1", "m");
  auto s2 = store->add_schedule(e2, "block(a) ;", 4, "h1", "m");
  store->add_measurement(s1, measurement("ok", 1.0));
  auto later = store->add_measurement(s2, measurement("wrong_result", std::nullopt));
  auto m = measurement("ok", 0.0);
  auto found = store->find_measurement("h1", m.shape, m.dtype, m.protocol, m.env);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, later); // other failures are properties of the code: reused
  EXPECT_EQ(found->status, "wrong_result");
}

TEST(Measurements, TimeoutsAndCrashesAreNotReused) {
  auto store = Store::open(":memory:");
  auto e = store->create_exploration(spec());
  auto s = store->add_schedule(e, "block(a);", 0, "h1", "m");
  auto m = measurement("ok", 0.0);
  store->add_measurement(s, measurement("timeout", std::nullopt));
  EXPECT_FALSE(store->find_measurement("h1", m.shape, m.dtype, m.protocol, m.env));
  auto ok = store->add_measurement(s, measurement("ok", 2.0));
  store->add_measurement(s, measurement("crashed", std::nullopt));
  store->add_measurement(s, measurement("timeout", std::nullopt));
  auto found = store->find_measurement("h1", m.shape, m.dtype, m.protocol, m.env);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, ok);
  for (const char* status : {"compile_error", "out_of_resources", "runtime_error"}) {
    auto id = store->add_measurement(s, measurement(status, std::nullopt));
    EXPECT_EQ(store->find_measurement("h1", m.shape, m.dtype, m.protocol, m.env)->id, id);
  }
}

TEST(Measurements, TheBestBaselineIsOfTheBestScheduleProtocol) {
  // A screening time is never set against a full one: the exploration's best baseline is the
  // fastest of the protocol of its best schedule, where there is one.
  auto store = Store::open(":memory:");
  auto e = store->create_exploration(spec());
  auto s = store->add_schedule(e, "block(geglu, x, 16);", 0, "h1", "src");
  store->add_measurement(s, measurement("ok", 1.0, "screen"));
  store->add_baseline(e, "torch", measurement("ok", 0.9, "screen"));
  auto x = store->exploration(e);
  EXPECT_EQ(x->best_protocol, "screen");
  EXPECT_EQ(x->best_baseline_ms, 0.9);
  EXPECT_EQ(x->best_baseline_protocol, "screen");
  // The schedule gets a full time: its best baseline is a full one, slower or not.
  store->add_measurement(s, measurement("ok", 1.1, "full"));
  x = store->exploration(e);
  EXPECT_EQ(x->best_protocol, "full");
  EXPECT_EQ(x->best_baseline_ms, 0.9); // none of the full protocol yet: the screening one
  EXPECT_EQ(x->best_baseline_protocol, "screen");
  store->add_baseline(e, "torch", measurement("ok", 1.3, "full"));
  x = store->exploration(e);
  EXPECT_EQ(x->best_baseline_ms, 1.3);
  EXPECT_EQ(x->best_baseline_protocol, "full");
}

TEST(Measurements, BaselinesAreListedAndNeverReused) {
  auto store = Store::open(":memory:");
  auto e = store->create_exploration(spec());
  auto other = store->create_exploration(spec());
  auto torch = store->add_baseline(e, "torch", measurement("ok", 2.2));
  auto compiled = store->add_baseline(e, "torch.compile", measurement("ok", 1.8));
  store->add_baseline(e, "baselines.py:torch_geglu", measurement("runtime_error", std::nullopt));
  store->add_baseline(other, "torch", measurement("ok", 0.1));
  auto list = store->baselines(e);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].id, torch);
  EXPECT_EQ(list[0].name, "torch");
  EXPECT_EQ(list[0].exploration_id, e);
  EXPECT_EQ(list[0].measurement.time_ms, 2.2);
  EXPECT_EQ(list[1].id, compiled);
  EXPECT_EQ(list[2].measurement.status, "runtime_error");
  EXPECT_EQ(store->exploration(e)->best_baseline_ms, 1.8);
  auto m = measurement("ok", 0.0);
  EXPECT_FALSE(store->find_measurement("", m.shape, m.dtype, m.protocol, m.env));
  EXPECT_TRUE(store->history("").empty());
  EXPECT_TRUE(store->ranked(e).empty());
}

// --- ranking

class Ranking : public ::testing::Test {
protected:
  void SetUp() override {
    store = Store::open(":memory:");
    e = store->create_exploration(spec());
    a = add("a", 0, {{"screen", "ok", 3.0}});
    // The full time ranks it, and before every schedule that was only screened.
    b = add("b", 1, {{"screen", "ok", 1.0}, {"full", "ok", 4.0}});
    c = add("c", 2, {{"screen", "ok", 2.0}});
    d = add("d", 3, {{"screen", "wrong_result", 0.0}});
    x = add("x", 4, {{"screen", "ok", 0.5}, {"full", "crashed", 0.0}}); // full failed
    f = add("f", 5, {});                                                // not measured
    g = add("g", -1, {{"screen", "ok", 2.5}, {"screen", "ok", 5.0}});   // latest counts
    o = add("o", 6, {{"other", "ok", 0.1}}); // measured, but not under a ranking protocol
  }

  struct Step {
    const char* protocol;
    const char* status;
    double ms;
  };
  std::int64_t add(const std::string& name, std::int64_t index, std::vector<Step> steps) {
    auto id = store->add_schedule(e, "block(" + name + ");", index, "hash-" + name, name);
    for (const auto& step : steps) {
      std::optional<double> ms;
      if (std::string(step.status) == "ok") ms = step.ms;
      store->add_measurement(id, measurement(step.status, ms, step.protocol));
    }
    return id;
  }

  std::unique_ptr<Store> store;
  std::int64_t e = 0, a = 0, b = 0, c = 0, d = 0, x = 0, f = 0, g = 0, o = 0;
};

TEST_F(Ranking, OkFirstByRankingTimeThenFailuresThenUnmeasured) {
  auto rows = store->ranked(e);
  EXPECT_EQ(schedule_ids(rows), (std::vector<std::int64_t>{b, c, a, g, d, x, o, f}));
  EXPECT_EQ(ranks(rows), (std::vector<int>{1, 2, 3, 4, 0, 0, 0, 0}));
  const auto& rb = rows[0];
  ASSERT_TRUE(rb.screen && rb.full);
  EXPECT_EQ(rb.screen->time_ms, 1.0);
  EXPECT_EQ(rb.full->time_ms, 4.0);
  EXPECT_EQ(rb.canonical, "block(b);");
  EXPECT_EQ(rb.code_hash, "hash-b");
  EXPECT_EQ(rb.candidate_index, 1);
  EXPECT_EQ(rows[3].screen->time_ms, 5.0);
  EXPECT_EQ(rows[3].candidate_index, -1);
  EXPECT_FALSE(rows[3].full);
  EXPECT_EQ(rows[5].full->status, "crashed");
  EXPECT_FALSE(rows[6].screen || rows[6].full);
  EXPECT_FALSE(rows[7].screen || rows[7].full);
}

TEST_F(Ranking, StatusFilterUsesTheRankingMeasurement) {
  RankedQuery q;
  q.status = "ok";
  auto ok = store->ranked(e, q);
  EXPECT_EQ(schedule_ids(ok), (std::vector<std::int64_t>{b, c, a, g}));
  EXPECT_EQ(ranks(ok), (std::vector<int>{1, 2, 3, 4}));
  q.status = "crashed";
  EXPECT_EQ(schedule_ids(store->ranked(e, q)), (std::vector<std::int64_t>{x}));
  q.status = "wrong_result";
  EXPECT_EQ(schedule_ids(store->ranked(e, q)), (std::vector<std::int64_t>{d}));
  q.status = "timeout";
  EXPECT_TRUE(store->ranked(e, q).empty());
}

TEST_F(Ranking, PagingKeepsGlobalRanks) {
  RankedQuery q;
  q.offset = 1;
  q.limit = 2;
  auto page = store->ranked(e, q);
  EXPECT_EQ(schedule_ids(page), (std::vector<std::int64_t>{c, a}));
  EXPECT_EQ(ranks(page), (std::vector<int>{2, 3}));
  q.offset = 4;
  q.limit = 10;
  EXPECT_EQ(schedule_ids(store->ranked(e, q)), (std::vector<std::int64_t>{d, x, o, f}));
  q.status = "ok";
  q.offset = 3;
  auto last_ok = store->ranked(e, q);
  ASSERT_EQ(last_ok.size(), 1u);
  EXPECT_EQ(last_ok[0].rank, 4);
}

TEST_F(Ranking, ScheduleCarriesItsRank) {
  auto rb = store->schedule(b);
  ASSERT_TRUE(rb);
  EXPECT_EQ(rb->rank, 1);
  EXPECT_EQ(rb->full->time_ms, 4.0);
  EXPECT_EQ(store->schedule(c)->rank, 2);
  EXPECT_EQ(store->schedule(d)->rank, 0);
  EXPECT_EQ(store->schedule(f)->rank, 0);
  EXPECT_EQ(store->schedule(o)->rank, 0);
}

TEST_F(Ranking, ExplorationSummaryFollowsTheRanking) {
  auto ex = store->exploration(e);
  EXPECT_EQ(ex->measured, 7);  // all but f
  EXPECT_EQ(ex->failed, 2);    // d, x
  EXPECT_EQ(ex->best_ms, 4.0); // b's full time ranks first
  EXPECT_FALSE(ex->best_baseline_ms);
  // The listing computes the same.
  auto listed = store->explorations();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].measured, 7);
  EXPECT_EQ(listed[0].failed, 2);
  EXPECT_EQ(listed[0].best_ms, 4.0);
}

TEST_F(Ranking, MeasuredIndicesPerProtocol) {
  EXPECT_EQ(store->measured_indices(e, "screen"), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(store->measured_indices(e, "full"), (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(store->measured_indices(e, "other"), (std::vector<std::int64_t>{6}));
  EXPECT_TRUE(store->measured_indices(e, "none").empty());
  auto other = store->create_exploration(spec());
  EXPECT_TRUE(store->measured_indices(other, "screen").empty());
}

// --- best and history

TEST(Best, PrefersFullOverScreenAndFiltersByKey) {
  auto store = Store::open(":memory:");
  auto e1 = store->create_exploration(spec());
  auto s1 = store->add_schedule(e1, "block(1);", 0, "h1", "module 1");
  auto s2 = store->add_schedule(e1, "block(2);", 1, "h2", "module 2");
  auto s3 = store->add_schedule(e1, "block(3);", 2, "h3", "module 3");
  auto s4 = store->add_schedule(e1, "block(4);", 3, "h4", "module 4");
  store->add_measurement(s1, measurement("ok", 1.0, "screen"));
  store->add_measurement(s2, measurement("ok", 2.0, "full"));
  store->add_measurement(s3, measurement("ok", 1.5, "full", h200()));
  store->add_measurement(s4, measurement("wrong_result", 0.1, "full"));
  const std::string shape = "x=16,y=32";

  auto best = store->best("geglu", shape, "float32");
  ASSERT_TRUE(best);
  EXPECT_EQ(best->schedule_id, s3); // fastest full, though a screen is faster
  EXPECT_EQ(best->exploration_id, e1);
  EXPECT_EQ(best->kernel, "geglu");
  EXPECT_EQ(best->canonical, "block(3);");
  EXPECT_EQ(best->code_hash, "h3");
  EXPECT_EQ(best->module_source, "module 3");
  EXPECT_EQ(best->algorithm, spec().algorithm);
  EXPECT_EQ(best->measurement.time_ms, 1.5);
  EXPECT_EQ(best->measurement.protocol, "full");

  EXPECT_EQ(store->best("geglu", shape, "float32", "h100")->schedule_id, s2);
  EXPECT_EQ(store->best("geglu", shape, "float32", "nvidia H200")->schedule_id, s3);
  EXPECT_EQ(store->best("geglu", shape, "float32", "")->schedule_id, s3);
  EXPECT_FALSE(store->best("geglu", shape, "float32", "A100"));
  EXPECT_FALSE(store->best("geglu", "x=16,y=64", "float32"));
  EXPECT_FALSE(store->best("geglu", shape, "bfloat16"));
  EXPECT_FALSE(store->best("other", shape, "float32"));

  // Only screenings at float16: the fastest screening.
  auto half = measurement("ok", 0.9, "screen");
  half.dtype = "float16";
  store->add_measurement(s1, half);
  half.time_ms = 0.7;
  store->add_measurement(s2, half);
  EXPECT_EQ(store->best("geglu", shape, "float16")->schedule_id, s2);
  EXPECT_EQ(store->best("geglu", shape, "float16")->measurement.protocol, "screen");
  EXPECT_FALSE(store->best("geglu", shape, "float16", "h200"));
}

TEST(Best, SearchesEveryExplorationOfTheKernel) {
  auto store = Store::open(":memory:");
  auto e1 = store->create_exploration(spec());
  ExplorationSpec newer = spec();
  newer.algorithm = "func geglu(x, y) = y * x;";
  auto e2 = store->create_exploration(newer);
  auto other = store->create_exploration(spec("softmax"));
  auto s1 = store->add_schedule(e1, "block(1);", 0, "h1", "module 1");
  auto s2 = store->add_schedule(e2, "block(2);", 0, "h2", "module 2");
  auto s3 = store->add_schedule(other, "block(3);", 0, "h3", "module 3");
  store->add_measurement(s1, measurement("ok", 2.0, "full"));
  store->add_measurement(s2, measurement("ok", 1.2, "full"));
  store->add_measurement(s3, measurement("ok", 0.1, "full"));
  auto best = store->best("geglu", "x=16,y=32", "float32");
  ASSERT_TRUE(best);
  EXPECT_EQ(best->schedule_id, s2);
  EXPECT_EQ(best->exploration_id, e2);
  EXPECT_EQ(best->algorithm, newer.algorithm);
  EXPECT_EQ(best->module_source, "module 2");
  EXPECT_EQ(store->best("softmax", "x=16,y=32", "float32")->schedule_id, s3);
}

TEST(History, FollowsACodeHashAcrossExplorations) {
  auto store = Store::open(":memory:");
  auto e1 = store->create_exploration(spec());
  auto e2 = store->create_exploration(spec());
  auto s1 = store->add_schedule(e1, "block(a);", 0, "h1", "m");
  auto s2 = store->add_schedule(e2, "block(a);", 0, "h1", "m");
  auto s3 = store->add_schedule(e2, "block(b);", 1, "h2", "n");
  auto m1 = store->add_measurement(s1, measurement("ok", 1.0));
  auto m2 = store->add_measurement(s2, measurement("ok", 1.1, "full", h200()));
  store->add_measurement(s3, measurement("ok", 3.0));
  auto m3 = store->add_measurement(s1, measurement("timeout", std::nullopt));
  auto h = store->history("h1");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].exploration_id, e1);
  EXPECT_EQ(h[0].measurement.id, m1);
  EXPECT_EQ(h[1].exploration_id, e2);
  EXPECT_EQ(h[1].measurement.id, m2);
  EXPECT_EQ(h[1].measurement.env.device_name, "NVIDIA H200");
  EXPECT_EQ(h[2].measurement.id, m3);
  EXPECT_EQ(store->history("h2").size(), 1u);
  EXPECT_TRUE(store->history("nope").empty());
}
