import Glibc
import KeychainCore
import KeychainCrypto

/// The `session` collection (libsecret's SECRET_COLLECTION_SESSION, alias `session`, as
/// gnome-keyring offers it): items kept in this daemon's memory only — never written to a file,
/// gone when the daemon stops. Secrets sit in SecureBytes (locked in memory, kept out of core
/// dumps, wiped when released). It is never locked. Touched on the bus thread only.
final class SessionCollection {
    /// Its path element and its alias.
    static let name = "session"

    struct Item {
        var label: String
        var attributes: [String: String]
        var secret: SecureBytes
        var contentType: String
        let created: UInt64
        var modified: UInt64
    }

    /// A bound on what clients may keep here (the memory is locked, and locked memory is scarce).
    static let maximumItems = 10_000
    static let maximumSecretBytes = 16 << 20

    var label = "Session"
    let created: UInt64
    private(set) var modified: UInt64
    /// Items by unique ID (32 hex digits), and their order of creation.
    private(set) var items: [String: Item] = [:]
    private var order: [String] = []
    private var secretBytes = 0

    init() {
        created = Self.now()
        modified = created
    }

    static func now() -> UInt64 { UInt64(max(0, time(nil))) }

    var ids: [String] { order }

    /// Unique IDs of the items showing every pair of `wanted`, oldest first.
    func search(_ wanted: [String: String]) -> [String] {
        order.filter { id in
            guard let item = items[id] else { return false }
            return wanted.allSatisfy { item.attributes[$0.key] == $0.value }
        }
    }

    /// Why an item was not stored.
    struct Refusal: Error {
        let reason: String
    }

    /// Adds an item, or with `replace` changes the one with exactly these attributes. Returns its ID.
    func store(label: String, attributes: [String: String], secret: [UInt8], contentType: String, replace: Bool) throws(Refusal) -> (id: String, created: Bool) {
        if replace, let id = order.first(where: { items[$0]?.attributes == attributes }), var item = items[id] {
            try reserve(secret.count - item.secret.count, items: 0)
            item.label = label
            item.secret = SecureBytes(secret)
            item.contentType = contentType
            item.modified = Self.now()
            items[id] = item
            modified = item.modified
            return (id, false)
        }
        try reserve(secret.count, items: 1)
        guard let random = try? Random.bytes(UniqueID.byteCount) else {
            secretBytes -= secret.count
            throw Refusal(reason: "the random generator failed")
        }
        let id = String(decoding: Hex.digits(random), as: UTF8.self)
        let now = Self.now()
        items[id] = Item(label: label, attributes: attributes, secret: SecureBytes(secret), contentType: contentType, created: now, modified: now)
        order.append(id)
        modified = now
        return (id, true)
    }

    func setSecret(_ id: String, _ secret: [UInt8], contentType: String) throws(Refusal) {
        guard var item = items[id] else { return }
        try reserve(secret.count - item.secret.count, items: 0)
        item.secret = SecureBytes(secret)
        item.contentType = contentType
        touch(id, &item)
    }

    func setLabel(_ id: String, _ label: String) {
        guard var item = items[id] else { return }
        item.label = label
        touch(id, &item)
    }

    func setAttributes(_ id: String, _ attributes: [String: String]) {
        guard var item = items[id] else { return }
        item.attributes = attributes
        touch(id, &item)
    }

    /// Removes every item (the collection's Delete: the collection itself stays, empty).
    func removeAll() -> [String] {
        let removed = order
        items.removeAll()
        order.removeAll()
        secretBytes = 0
        modified = Self.now()
        return removed
    }

    func delete(_ id: String) {
        guard let item = items.removeValue(forKey: id) else { return }
        secretBytes -= item.secret.count
        order.removeAll { $0 == id }
        modified = Self.now()
    }

    private func touch(_ id: String, _ item: inout Item) {
        item.modified = Self.now()
        items[id] = item
        modified = item.modified
    }

    private func reserve(_ bytes: Int, items added: Int) throws(Refusal) {
        guard order.count + added <= Self.maximumItems else { throw Refusal(reason: "the session collection holds at most \(Self.maximumItems) items") }
        guard secretBytes + bytes <= Self.maximumSecretBytes else {
            throw Refusal(reason: "the session collection holds at most \(Self.maximumSecretBytes >> 20) MiB of secrets")
        }
        secretBytes += bytes
    }
}
