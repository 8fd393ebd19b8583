#include "Schema.h"
#include "TestSupport.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace dtx::results;
using namespace dtx::results::testing;

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

/// The message of the StoreError that opening `path` throws ("" when it opens).
std::string open_error(const std::filesystem::path& path) {
  try {
    Store::open(path);
  } catch (const StoreError& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(Schema, MigratesAVersion1FileToTheLatestKeepingRows) {
  TempDir dir;
  auto path = dir.file("v1.db");
  {
    RawDb raw(path);
    detail::migrate_to(raw.handle(), 1);
    ASSERT_EQ(raw.integer("PRAGMA user_version"), 1);
    EXPECT_EQ(raw.integer("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = "
                          "'measurements_by_schedule'"),
              0);
    raw.exec(R"sql(
INSERT INTO algorithms (id, sha256, source) VALUES (1, 'a', 'func f(x) = x;');
INSERT INTO templates (id, sha256, text) VALUES (1, 't', 'block(f, x, {16});');
INSERT INTO explorations (id, kernel, algorithm_id, template_id, shape, dtype, strategy,
                          settings_json, state, created_at, updated_at)
  VALUES (1, 'f', 1, 1, 'x=16', 'float32', 'exhaustive', '{}', 'running',
          '2026-01-02T03:04:05.678Z', '2026-01-02T03:04:05.678Z');
INSERT INTO modules (code_hash, source) VALUES ('h1', 'module');
INSERT INTO schedules (id, exploration_id, canonical, candidate_index, code_hash)
  VALUES (1, 1, 'block(f, x, 16);', 0, 'h1');
INSERT INTO measurements (schedule_id, code_hash, shape, dtype, protocol, status, message,
                          time_ms, rounds, compile_s, device_name, device_kind, driver, cuda,
                          torch, triton, host)
  VALUES (1, 'h1', 'x=16', 'float32', 'screen', 'ok', '', 0.25, 1, 0.5,
          'NVIDIA H100 80GB HBM3', 'cuda', '550.54.15', '12.4', '2.4.0', '3.0.0', 'node-1');
)sql");
  }
  auto store = Store::open(path);
  EXPECT_EQ(store->version(), Store::latest_version());
  auto e = store->exploration(1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->spec.kernel, "f");
  EXPECT_EQ(e->state, State::Running);
  EXPECT_EQ(e->created_at, "2026-01-02T03:04:05.678Z");
  EXPECT_EQ(e->measured, 1);
  EXPECT_EQ(e->best_ms, 0.25);
  EXPECT_EQ(store->unfinished().size(), 1u);
  auto ranked = store->ranked(1);
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_EQ(ranked[0].rank, 1);
  EXPECT_EQ(store->measured_indices(1, "screen"), (std::vector<std::int64_t>{0}));
  auto found = store->find_measurement("h1", "x=16", "float32", "screen", h100());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->time_ms, 0.25);
  // New rows go on from the old ones.
  auto next = store->create_exploration(spec());
  EXPECT_EQ(next, 2);
  store.reset();

  RawDb raw(path);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), Store::latest_version());
  EXPECT_EQ(raw.integer("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = "
                        "'measurements_by_schedule'"),
            1);
}

// The release before leases (version 4): an exploration it left running gains no lease, so that
// the first process to start after the upgrade takes it up; the probe row is made on demand.
TEST(Schema, AVersion4FileGainsLeasesAndTheWriteProbe) {
  TempDir dir;
  auto path = dir.file("v4.db");
  const std::int64_t e = 7;
  {
    RawDb raw(path);
    detail::migrate_to(raw.handle(), 4);
    raw.exec(R"sql(
INSERT INTO algorithms (id, sha256, source) VALUES (1, 'a', 'func f(x) = x;');
INSERT INTO templates (id, sha256, text) VALUES (1, 't', 'block(f, x, {16});');
INSERT INTO explorations (id, kernel, algorithm_id, template_id, shape, dtype, strategy, state)
  VALUES (7, 'f', 1, 1, 'x=16', 'float32', 'exhaustive', 'running');
)sql");
    EXPECT_EQ(raw.integer("SELECT COUNT(*) FROM sqlite_master WHERE name = 'leases'"), 0);
  }
  auto store = Store::open(path);
  EXPECT_EQ(store->version(), Store::latest_version());
  auto x = store->exploration(e);
  ASSERT_TRUE(x);
  EXPECT_EQ(x->state, State::Running);
  EXPECT_FALSE(x->lease);
  LeaseHolder me = LeaseHolder::this_process("dtxd");
  EXPECT_TRUE(store->acquire_lease(e, me, 60).acquired);
  EXPECT_TRUE(store->probe_write().ok);
  store.reset();
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT COUNT(*) FROM write_probe"), 1);
  EXPECT_EQ(raw.text("SELECT instance FROM leases WHERE exploration_id = 7"), me.instance);
}

TEST(Schema, MigrationIsIdempotent) {
  TempDir dir;
  auto path = dir.file("results.db");
  Store::open(path)->create_exploration(spec());
  {
    RawDb raw(path);
    detail::migrate_to(raw.handle(), Store::latest_version());
    detail::migrate_to(raw.handle(), 1); // never goes back
    EXPECT_EQ(detail::schema_version(raw.handle()), Store::latest_version());
    EXPECT_THROW(detail::migrate_to(raw.handle(), Store::latest_version() + 1), StoreError);
  }
  EXPECT_EQ(Store::open(path)->explorations().size(), 1u);
}

TEST(Schema, RefusesAFileNewerThanThisProgram) {
  TempDir dir;
  auto path = dir.file("results.db");
  Store::open(path)->create_exploration(spec());
  int newer = Store::latest_version() + 1;
  RawDb(path).exec("PRAGMA user_version = " + std::to_string(newer));
  auto error = open_error(path);
  EXPECT_NE(error.find("newer"), std::string::npos) << error;
  EXPECT_NE(error.find("schema version " + std::to_string(newer)), std::string::npos) << error;
  EXPECT_NE(error.find(path.filename().string()), std::string::npos) << error;
  EXPECT_EQ(RawDb(path).integer("PRAGMA user_version"), newer); // left alone
}

TEST(Schema, RefusesATextFile) {
  TempDir dir;
  auto path = dir.file("notes.txt");
  std::string text;
  for (int i = 0; i < 100; ++i)
    text += "this is a text file, line " + std::to_string(i) + "\n";
  std::ofstream(path) << text;
  auto error = open_error(path);
  EXPECT_NE(error.find("not a dtx results store"), std::string::npos) << error;
  EXPECT_NE(error.find("notes.txt"), std::string::npos) << error;
  EXPECT_EQ(read_file(path), text);
  EXPECT_FALSE(std::filesystem::exists(dir.file("notes.txt-wal")));
}

TEST(Schema, RefusesAShortTextFile) {
  TempDir dir;
  auto path = dir.file("short.txt");
  std::ofstream(path) << "hello\n";
  EXPECT_NE(open_error(path).find("not a dtx results store"), std::string::npos);
}

TEST(Schema, RefusesAnSQLiteFileWithOtherTables) {
  TempDir dir;
  auto path = dir.file("people.db");
  RawDb(path).exec("CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('ada');");
  auto error = open_error(path);
  EXPECT_NE(error.find("not a dtx results store"), std::string::npos) << error;
  EXPECT_NE(error.find("people"), std::string::npos) << error;
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT COUNT(*) FROM sqlite_master"), 1);
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "delete"); // not switched to WAL
  EXPECT_EQ(raw.integer("PRAGMA user_version"), 0);
}

TEST(Schema, RefusesAnotherProgramsVersionedFile) {
  TempDir dir;
  auto path = dir.file("other.db");
  RawDb(path).exec("PRAGMA user_version = 1");
  EXPECT_NE(open_error(path).find("not a dtx results store"), std::string::npos);
  auto path2 = dir.file("other2.db");
  RawDb(path2).exec("PRAGMA application_id = 42");
  EXPECT_NE(open_error(path2).find("application_id 42"), std::string::npos);
}

TEST(Schema, AnEmptyFileBecomesAStore) {
  TempDir dir;
  auto path = dir.file("empty.db");
  std::ofstream{path};
  ASSERT_EQ(std::filesystem::file_size(path), 0u);
  auto store = Store::open(path);
  EXPECT_EQ(store->version(), Store::latest_version());
  EXPECT_EQ(RawDb(path).integer("PRAGMA application_id"), detail::kApplicationId);
}

TEST(Schema, AMissingDirectoryIsAnError) {
  TempDir dir;
  auto path = dir.file("missing") / "results.db";
  auto error = open_error(path);
  EXPECT_NE(error.find(path.string()), std::string::npos) << error;
  EXPECT_NE(error.find("open"), std::string::npos) << error;
}
