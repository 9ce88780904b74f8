import Glibc
import KeychainCore
import KeychainCrypto

/// What Item properties show of an item.
struct ItemDescription {
    let label: String
    let attributes: [String: String]
    let created: UInt64
    let modified: UInt64
}

/// A change to an item (SetSecret, or a writable Item property).
enum ItemChange {
    case secret([UInt8], contentType: String)
    case label(String)
    case attributes([String: String])
}

// What the interfaces ask of a collection and its items, one switch per question over the kinds
// of collection (Collections.swift): a keychain, or the session collection in memory.
extension SecretServiceServer {
    /// Whether its items are sealed until it is unlocked (asking is not a use of the key).
    func isLocked(_ collection: SecretCollection) -> Bool {
        switch collection {
        case .keychain(let keychain): return !keys.isHeld(path: keychain.file)
        case .session: return false
        }
    }

    func lock(_ collection: SecretCollection) {
        switch collection {
        case .keychain(let keychain): keys.lock(path: keychain.file)
        case .session: break
        }
    }

    /// Collection.Label: a keychain's display name (its token label when none was set), or the
    /// session collection's label.
    func displayLabel(_ collection: SecretCollection) -> String {
        switch collection {
        case .keychain(let keychain):
            return ((try? self.keychain(keychain).displayName()) ?? nil) ?? keychain.label
        case .session:
            return sessionCollection.label
        }
    }

    /// Sets Collection.Label: a keychain's display name, while it is unlocked (changing it is a
    /// use of the keychain, as `keychainctl set-display-name` needs the PIN or the session).
    func setDisplayLabel(_ collection: SecretCollection, _ label: String) throws(BusError) {
        switch collection {
        case .keychain(let keychain):
            let opened = try unlocked(keychain).keychain
            do throws(KeychainError) { try opened.setDisplayName(label) } catch {
                if error.code == .argumentsBad { throw .invalid(error.reason) }
                throw .failed("the keychain refuses the label: \(error.reason)")
            }
        case .session:
            guard label.utf8.count <= Keychain.maximumDisplayNameBytes else {
                throw .invalid("a label has at most \(Keychain.maximumDisplayNameBytes) bytes")
            }
            sessionCollection.label = label
        }
    }

    /// Created and Modified, in seconds since 1970 (0 when unknown).
    func times(_ collection: SecretCollection) -> (created: UInt64, modified: UInt64) {
        switch collection {
        case .keychain(let keychain):
            guard let info = try? System.stat(keychain.file) else { return (0, 0) }
            return (UInt64(max(0, info.st_ctim.tv_sec)), UInt64(max(0, info.st_mtim.tv_sec)))
        case .session:
            return (sessionCollection.created, sessionCollection.modified)
        }
    }

    /// The paths of its items showing every pair of `wanted`, and whether it was locked (then
    /// only what can be found without the key is).
    func findItems(in collection: SecretCollection, matching wanted: [String: String]) throws(BusError) -> (paths: [String], locked: Bool) {
        switch collection {
        case .keychain(let keychain):
            let items = try open(keychain)
            return (try items.search(wanted), items.master == nil)
        case .session:
            return (sessionCollection.search(wanted).map(collection.itemPath), false)
        }
    }

    /// Whether the item is served. A locked keychain's items cannot be looked up (their index
    /// needs the master key): a well-formed item path there counts, and its calls answer IsLocked.
    func hasItem(_ collection: SecretCollection, uniqueID: String) -> Bool {
        switch collection {
        case .keychain(let keychain):
            if isLocked(collection) { return true }
            guard let items = try? open(keychain) else { return false }
            return items.has(uniqueID: uniqueID)
        case .session:
            return sessionCollection.items[uniqueID] != nil
        }
    }

    /// What the Item properties show (asked while the collection is unlocked).
    func describeItem(_ collection: SecretCollection, uniqueID: String) throws(BusError) -> ItemDescription {
        switch collection {
        case .keychain(let keychain):
            let items = try open(keychain)
            if let known = items.lookups?.descriptions[uniqueID] { return known }
            var found = try items.item(uniqueID: uniqueID)
            defer { found.object.wipeValues() }
            let object = found.object
            let description = ItemDescription(label: object[.label].map { String(decoding: $0, as: UTF8.self) } ?? "",
                                   attributes: SecretServiceItems.attributes(of: object),
                                   created: object[.creationTime].flatMap(AttributeValue.decodeULong).map(UInt64.init) ?? 0,
                                   modified: object[.modificationTime].flatMap(AttributeValue.decodeULong).map(UInt64.init) ?? 0)
            items.lookups?.descriptions[uniqueID] = description
            return description
        case .session:
            guard let item = sessionCollection.items[uniqueID] else { throw .noSuchObject }
            return ItemDescription(label: item.label, attributes: item.attributes, created: item.created, modified: item.modified)
        }
    }

    /// GetSecret: `body` gets the secret and its content type (wiped after); IsLocked while the
    /// collection is locked.
    func withSecret<R>(_ collection: SecretCollection, uniqueID: String,
                       _ body: (_ secret: [UInt8], _ contentType: String) throws(BusError) -> R) throws(BusError) -> R {
        switch collection {
        case .keychain(let keychain):
            let items = try unlocked(keychain)
            var found = try items.item(uniqueID: uniqueID)
            defer { found.object.wipeValues() }
            return try body(found.object[.value] ?? [], KeychainItems.contentType(found.object))
        case .session:
            guard let item = sessionCollection.items[uniqueID] else { throw .noSuchObject }
            var secret = item.secret.withUnsafeBytes { Array($0) }
            defer { wipe(&secret) }
            return try body(secret, item.contentType)
        }
    }

    /// GetSecrets: the secret and content type of an item of an unlocked collection; nil when
    /// locked or not found (such items are left out). The caller wipes the secret.
    func readableSecret(_ collection: SecretCollection, uniqueID: String) throws(BusError) -> (secret: [UInt8], contentType: String)? {
        switch collection {
        case .keychain(let keychain):
            let items = try open(keychain)
            guard items.master != nil, var found = try? items.item(uniqueID: uniqueID) else { return nil }
            defer { found.object.wipeValues() }
            return (found.object[.value] ?? [], KeychainItems.contentType(found.object))
        case .session:
            guard let item = sessionCollection.items[uniqueID] else { return nil }
            return (item.secret.withUnsafeBytes { Array($0) }, item.contentType)
        }
    }

    /// CreateItem: stores a new item, or with `replace` updates the one whose attributes are
    /// exactly these. Returns its path, and whether it replaced one.
    func addItem(to collection: SecretCollection, label: String, attributes: [String: String], secret: [UInt8], contentType: String,
                 replace: Bool) throws(BusError) -> (path: String, replaced: Bool) {
        switch collection {
        case .keychain(let keychain):
            let items = try unlocked(keychain)
            if replace {
                for itemPath in try items.search(attributes) {
                    guard case .item(_, let uniqueID)? = resolve(itemPath), var existing = try? items.item(uniqueID: uniqueID) else { continue }
                    defer { existing.object.wipeValues() }
                    guard SecretServiceItems.attributes(of: existing.object) == attributes else { continue }
                    try items.change(existing, [(.value, secret), (.label, Array(label.utf8)), (.contentType, Array(contentType.utf8))])
                    return (itemPath, true)
                }
            }
            return (try items.add(attributes, label: label, contentType: contentType, secret: secret), false)
        case .session:
            do {
                let stored = try sessionCollection.store(label: label, attributes: attributes, secret: secret, contentType: contentType, replace: replace)
                return (collection.itemPath(stored.id), !stored.created)
            } catch {
                throw .failed(error.reason)
            }
        }
    }

    func changeItem(_ collection: SecretCollection, uniqueID: String, _ change: ItemChange) throws(BusError) {
        switch collection {
        case .keychain(let keychain):
            let items = try unlocked(keychain)
            var found = try items.item(uniqueID: uniqueID)
            defer { found.object.wipeValues() }
            switch change {
            case .secret(let value, let contentType):
                try items.change(found, [(.value, value), (.contentType, Array(contentType.utf8))])
            case .label(let label):
                try items.change(found, [(.label, Array(label.utf8))])
            case .attributes(let attributes):
                let label = found.object[.label].map { String(decoding: $0, as: UTF8.self) } ?? ""
                // The mapped fields follow the new attributes (the item keeps its class).
                var changes = SecretServiceItems.fields(attributes, label: label, contentType: KeychainItems.contentType(found.object),
                                                        asInternet: found.object.itemClass == .internetPassword)
                changes.removeAll { $0.type == .itemClass }
                try items.change(found, changes)
            }
        case .session:
            guard sessionCollection.items[uniqueID] != nil else { throw .noSuchObject }
            switch change {
            case .secret(let value, let contentType):
                do { try sessionCollection.setSecret(uniqueID, value, contentType: contentType) } catch { throw .failed(error.reason) }
            case .label(let label):
                sessionCollection.setLabel(uniqueID, label)
            case .attributes(let attributes):
                sessionCollection.setAttributes(uniqueID, attributes)
            }
        }
    }

    func deleteItem(_ collection: SecretCollection, uniqueID: String) throws(BusError) {
        switch collection {
        case .keychain(let keychain):
            let items = try unlocked(keychain)
            var found = try items.item(uniqueID: uniqueID)
            defer { found.object.wipeValues() }
            try items.remove(found)
        case .session:
            guard sessionCollection.items[uniqueID] != nil else { throw .noSuchObject }
            sessionCollection.delete(uniqueID)
        }
    }
}
