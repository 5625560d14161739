// The SQLite schema: a public interface (docs/schema.md). Versioned in
// PRAGMA user_version and migrated forward by a cumulative ladder.
#pragma once

namespace diffeval::store {

// The schema version this build writes.
inline constexpr int k_schema_version = 16;

} // namespace diffeval::store
