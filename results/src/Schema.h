#pragma once
// The schema of the results store: an ordered list of migrations. The file's `PRAGMA
// user_version` is the number of migrations applied to it; `PRAGMA application_id` marks it as
// a dtx results store. Migrations only ever append: a released step is never edited.
#include <cstdint>

struct sqlite3;

namespace dtx::results::detail {

/// 'DTXR', in the database header (PRAGMA application_id).
constexpr std::int32_t kApplicationId = 0x44545852;

/// The number of migrations, i.e. the schema version this program writes.
int latest_version();
/// The file's schema version (PRAGMA user_version).
int schema_version(sqlite3* db);
/// Throws StoreError unless the file is empty (no tables yet) or a dtx results store whose
/// version this program knows. Reads only: an unrelated file is left as it was.
void check_store(sqlite3* db);
/// Applies the migrations after the file's version up to `version`, each in its own write
/// transaction (re-reading the version inside it, so concurrent openers migrate once). Throws
/// StoreError when the file is newer than `version` allows or than this program.
/// Exposed for tests, which make a version-1 file with migrate_to(db, 1).
void migrate_to(sqlite3* db, int version);

} // namespace dtx::results::detail
