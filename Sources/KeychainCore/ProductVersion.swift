import KeychainStore

/// The project's version, one place for the module's CK_INFO, keychainctl --version and keychaind.
public enum ProductVersion {
    public static let major: UInt8 = 0
    public static let minor: UInt8 = 1
    public static let patch: UInt8 = 0
    public static var text: String { "\(major).\(minor).\(patch)" }

    /// The keychain file's schema version this build writes (SQLite user_version), and the
    /// newest record format it reads.
    public static var schemaVersion: Int64 { KeychainDatabase.schemaVersion }
    public static var recordFormat: UInt32 { SealedRecord.currentVersion }
}
