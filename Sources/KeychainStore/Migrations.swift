/// The schema, as an append-only list: a released step is never edited, only followed.
/// `PRAGMA user_version` records how many steps a file has had.
enum Migrations {
    static let steps: [String] = [
        // 1: the first schema.
        """
        CREATE TABLE meta (
            key TEXT PRIMARY KEY NOT NULL,
            value
        );
        CREATE TABLE objects (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            uid BLOB NOT NULL UNIQUE,
            class INTEGER NOT NULL,
            protection INTEGER NOT NULL,
            record BLOB NOT NULL,
            record_version INTEGER NOT NULL,
            primary_key BLOB UNIQUE,
            created INTEGER NOT NULL,
            modified INTEGER NOT NULL
        );
        CREATE INDEX objects_by_class ON objects(class, protection);
        CREATE TABLE object_index (
            object_id INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
            attribute INTEGER NOT NULL,
            digest BLOB NOT NULL
        );
        CREATE INDEX object_index_lookup ON object_index(attribute, digest);
        CREATE INDEX object_index_owner ON object_index(object_id);
        """,
        // 2: per-row write epoch and index commitment, covered by the integrity manifest.
        """
        ALTER TABLE objects ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE objects ADD COLUMN index_commit BLOB;
        """,
    ]

    static var currentVersion: Int64 { Int64(steps.count) }

    /// Brings the file up to the current schema; refuses files from a newer version.
    static func migrate(_ database: Database) throws {
        // A file already at this version needs no write lock (opening must not wait on writers).
        var stored: Int64 = -1
        try database.query("PRAGMA user_version") { stored = $0.int64(0) }
        if stored == currentVersion { return }
        try database.write {
            var version: Int64 = 0
            try database.query("PRAGMA user_version") { version = $0.int64(0) }
            guard version >= 0 else { throw StoreError(.corrupt, "negative schema version \(version)") }
            guard version <= currentVersion else {
                throw StoreError(.schemaTooNew, "schema version \(version) is newer than this software (\(currentVersion))")
            }
            for step in Int(version)..<steps.count {
                try database.execute(steps[step])
            }
            if version < currentVersion {
                try database.execute("PRAGMA user_version = \(currentVersion)")
            }
        }
    }
}
