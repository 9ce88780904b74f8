/// Whether a keychain's Secret Service items sync (`keychainctl secret-service sync yes|no`): a
/// choice per keychain, off by default, kept in its meta table. A Secret Service item is a data
/// object with lookup attributes (made over D-Bus or by import-secret-service; see
/// `SecretServiceItems`). With the choice on, such items made afterwards are synchronizable;
/// turning it on or off marks the existing ones so. Passwords of the other doors are not touched.
public struct SecretServiceSyncReport: Sendable, Equatable {
    /// One item left as it was, and why (`SyncRule`'s reason, a duplicate, damage).
    public struct Skipped: Sendable, Equatable {
        public let label: String
        public let reason: String
    }

    /// Items whose flag changed.
    public var changed = 0
    /// Items that had the flag asked for already.
    public var unchanged = 0
    public var skipped: [Skipped] = []
}

extension SecretServiceItems {
    /// Whether `object` is a Secret Service item: a data object with lookup attributes.
    public static func isSecretServiceItem(_ object: ObjectAttributes) -> Bool {
        guard object.objectClass == .data, let encoded = object[.lookupAttributes] else { return false }
        return !(LookupAttributes(encoded: encoded)?.isEmpty ?? true)
    }
}

extension Keychain {
    /// The meta key of the choice: 1 on, 0 or absent off.
    static let secretServiceSyncMeta = "sync.secret_service"

    /// Whether this keychain's Secret Service items sync (default: no). Needs no unlock.
    public func secretServiceItemsSync() throws(KeychainError) -> Bool {
        try lock.withLock { () throws(KeychainError) -> Bool in
            try translatingErrors { try store.metaInteger(Self.secretServiceSyncMeta) ?? 0 } != 0
        }
    }

    /// Sets the choice, then marks every existing Secret Service item synchronizable (`on`) or
    /// not. Each item is its own write: an item that cannot sync (`SyncRule`: a ThisDeviceOnly
    /// class, user presence) or whose change is refused stays as it was and is reported; the others
    /// change. Running it again finishes what an interrupted run left.
    public func setSecretServiceItemsSync(_ on: Bool, master: MasterKey) throws(KeychainError) -> SecretServiceSyncReport {
        try lock.withLock { () throws(KeychainError) in
            try translatingErrors { try store.write { try store.setMeta(Self.secretServiceSyncMeta, integer: on ? 1 : 0) } }
        }
        var report = SecretServiceSyncReport()
        for row in try find([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue))], master: master) {
            var object = try object(id: row.id, master: master)
            defer { object.wipeValues() }
            guard SecretServiceItems.isSecretServiceItem(object) else { continue }
            guard object.isSynchronizable != on else {
                report.unchanged += 1
                continue
            }
            let label = String(decoding: object[.label] ?? [], as: UTF8.self)
            if on, let refusal = SyncRule.refusal(for: object) {
                report.skipped.append(.init(label: label, reason: refusal.reason))
                continue
            }
            do {
                var changed = try ObjectTemplate.set([(.synchronizable, AttributeValue.bool(on))], on: object)
                defer { changed.wipeValues() }
                try replace(id: row.id, with: changed, master: master)
                report.changed += 1
            } catch where error.code == .duplicateItem || error.code == .actionProhibited {
                report.skipped.append(.init(label: label, reason: error.reason))
            }
        }
        return report
    }
}
