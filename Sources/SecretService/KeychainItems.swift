import KeychainCore
import KeychainCrypto

/// What calls found in one keychain, kept while the keychain is unchanged (its version: any
/// write, here or in another process, moves it) and locked or unlocked as it was: the row of each
/// item path asked for (nil: no served item), what its properties show, and the answers of recent
/// searches. Never a secret: GetSecret opens the record each time. A client's
/// GetSecret reaches the item three times (sd-bus asks whether the object exists before each
/// call, for each interface) and repeats its searches; each is looked up and checked once.
final class KeychainLookups {
    let version: KeychainVersion
    let unlocked: Bool
    var rows: [String: Int64?] = [:]
    var searches: [[String: String]: [String]] = [:]
    /// What Item properties show (label, attributes, times; never the secret), by unique ID.
    var descriptions: [String: ItemDescription] = [:]
    /// Searches kept at most (the oldest answers go first when more are asked).
    static let searchLimit = 64
    private var searchOrder: [[String: String]] = []

    init(version: KeychainVersion, unlocked: Bool) {
        self.version = version
        self.unlocked = unlocked
    }

    func remember(_ wanted: [String: String], _ paths: [String]) {
        if searches[wanted] == nil {
            searchOrder.append(wanted)
            if searchOrder.count > Self.searchLimit { searches[searchOrder.removeFirst()] = nil }
        }
        searches[wanted] = paths
    }
}

/// A keychain collection opened for one call: its keychain and master key (nil while locked).
/// Items are its password records (SecretServiceItems maps them); looking one up, searching,
/// adding, changing and removing are done here.
struct KeychainItems {
    let collection: KeychainCollection
    let keychain: Keychain
    let master: MasterKey?
    /// What earlier calls found, while the keychain is unchanged (nil: nothing is kept).
    var lookups: KeychainLookups?

    /// The item's row and object; NoSuchObject when it is gone, not a password, or one whose
    /// access control asks a credential at each use (user presence, an application password):
    /// the Secret Service has no way to ask it, so such items are not served over D-Bus.
    /// Damage found on the way is reported, not hidden as a missing item.
    func item(uniqueID: String) throws(BusError) -> (row: Int64, object: ObjectAttributes) {
        if let known = lookups?.rows[uniqueID] {
            guard let row = known else { throw .noSuchObject }
            // The row found before, read again (and checked again by the keychain).
            if var object = try? keychain.object(id: row, master: master) {
                if object[.uniqueID] == Array(uniqueID.utf8), Self.isServed(object) { return (row, object) }
                object.wipeValues()
            }
            lookups?.rows[uniqueID] = nil
        }
        do {
            let rows = try keychain.find([(.uniqueID, Array(uniqueID.utf8)), (.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue))], master: master)
            guard let row = rows.first else {
                lookups?.rows[uniqueID] = .some(nil)
                throw BusError.noSuchObject
            }
            var object = try keychain.object(id: row.id, master: master)
            guard Self.isServed(object) else {
                object.wipeValues()
                lookups?.rows[uniqueID] = .some(nil)
                throw BusError.noSuchObject
            }
            lookups?.rows[uniqueID] = row.id
            return (row.id, object)
        } catch let failure as BusError {
            throw failure
        } catch let error as KeychainError where error.code == .recordCorrupted {
            throw .failed("keychain '\(printable(collection.label))' is damaged or was altered: \(error.reason) (keychainctl verify)")
        } catch {
            throw .noSuchObject
        }
    }

    /// Whether the item at this unique ID is served: from what earlier calls found when they can
    /// tell, else looked up (and remembered).
    func has(uniqueID: String) -> Bool {
        if let known = lookups?.rows[uniqueID] { return known != nil }
        guard var found = try? item(uniqueID: uniqueID) else { return false }
        found.object.wipeValues()
        return true
    }

    /// Items whose secret needs nothing beyond the unlocked keychain.
    static func isServed(_ object: ObjectAttributes) -> Bool { object.requiredCredential == .none }

    /// The paths of the items showing every pair of `wanted` (those served over D-Bus); while the
    /// keychain is locked, those its locked-lookup index finds (none when the index is off).
    func search(_ wanted: [String: String]) throws(BusError) -> [String] {
        if let known = lookups?.searches[wanted] { return known }
        let found = try searchKeychain(wanted)
        lookups?.remember(wanted, found)
        return found
    }

    private func searchKeychain(_ wanted: [String: String]) throws(BusError) -> [String] {
        if master == nil {
            do {
                let uids = try keychain.lockedSearch(wanted) ?? []
                return uids.map { SecretCollection.keychain(collection).itemPath(String(decoding: Hex.digits($0), as: UTF8.self)) }
            } catch {
                throw .failed("keychain '\(printable(collection.label))' could not be searched: \(error.reason) (keychainctl verify)")
            }
        }
        var seen: Set<Int64> = []
        var paths: [String] = []
        do {
            for template in SecretServiceItems.searchTemplates(wanted) {
                for row in try keychain.find(template, master: master) where !seen.contains(row.id) {
                    seen.insert(row.id)
                    guard var object = try? keychain.object(id: row.id, master: master) else { continue }
                    defer { object.wipeValues() }
                    guard Self.isServed(object), SecretServiceItems.matches(object, wanted), let path = itemPath(object) else { continue }
                    paths.append(path)
                }
            }
        } catch {
            throw .failed("keychain '\(printable(collection.label))' could not be searched: \(error.reason) (keychainctl verify)")
        }
        return paths
    }

    func itemPath(_ object: ObjectAttributes) -> String? {
        guard let unique = object[.uniqueID], !unique.isEmpty else { return nil }
        return SecretCollection.keychain(collection).itemPath(String(decoding: unique, as: UTF8.self))
    }

    static func contentType(_ object: ObjectAttributes) -> String {
        guard let bytes = object[.contentType], !bytes.isEmpty else { return "text/plain" }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The master key of an unlocked keychain; IsLocked otherwise.
    func unlockedMaster() throws(BusError) -> MasterKey {
        guard let master else { throw .isLocked("Keychain '\(collection.label)'") }
        return master
    }

    /// Stores a new password item; its path.
    func add(_ attributes: [String: String], label: String, contentType: String, secret: [UInt8]) throws(BusError) -> String {
        let master = try unlockedMaster()
        let object: ObjectAttributes
        do {
            object = try SecretServiceItems.add(attributes, label: label, contentType: contentType, secret: secret, to: keychain, master: master)
        } catch {
            throw .failed("the keychain refuses the item: \(error.reason)")
        }
        guard let itemPath = itemPath(object) else { throw .failed("the item was not stored") }
        return itemPath
    }

    /// Applies `changes` to the item's record.
    func change(_ found: (row: Int64, object: ObjectAttributes), _ changes: Template) throws(BusError) {
        let master = try unlockedMaster()
        do {
            var changed = try ObjectTemplate.set(changes, on: found.object)
            defer { changed.wipeValues() }
            try keychain.replace(id: found.row, with: changed, master: master)
        } catch {
            throw .failed("the keychain refuses the change: \(error.reason)")
        }
    }

    func remove(_ found: (row: Int64, object: ObjectAttributes)) throws(BusError) {
        let master = try unlockedMaster()
        do { try keychain.remove(id: found.row, master: master) } catch { throw .failed(error.reason) }
    }
}

extension SecretServiceServer {
    /// The keychain of `collection` with its master key from the key source (a use of the key:
    /// it restarts the idle timer); the key is nil while the keychain is locked.
    func open(_ collection: KeychainCollection) throws(BusError) -> KeychainItems {
        let keychain = try keychain(collection)
        let master = masterKey(collection, keychain)
        return KeychainItems(collection: collection, keychain: keychain, master: master, lookups: lookups(collection, keychain, unlocked: master != nil))
    }

    /// The master key of an unlocked keychain: the one made for this session key last time (a
    /// new unlock hands out another key; the keychain checks each new one against its key check).
    private func masterKey(_ collection: KeychainCollection, _ keychain: Keychain) -> MasterKey? {
        guard let key = keys.sessionKey(path: collection.file) else {
            masters[collection.file] = nil
            return nil
        }
        if let cached = masters[collection.file], cached.sessionKey.constantTimeEquals(key) { return cached.master }
        guard let master = try? keychain.masterKey(fromSession: key) else {
            masters[collection.file] = nil
            return nil
        }
        masters[collection.file] = (key, master)
        return master
    }

    /// What earlier calls found in this keychain, while it is unchanged and as locked as it was.
    private func lookups(_ collection: KeychainCollection, _ keychain: Keychain, unlocked: Bool) -> KeychainLookups? {
        guard let version = try? keychain.version() else {
            lookupCache[collection.file] = nil
            return nil
        }
        if let kept = lookupCache[collection.file], kept.version == version, kept.unlocked == unlocked { return kept }
        let fresh = KeychainLookups(version: version, unlocked: unlocked)
        lookupCache[collection.file] = fresh
        return fresh
    }

    /// `open`, for what needs the keychain unlocked: IsLocked while it is not.
    func unlocked(_ collection: KeychainCollection) throws(BusError) -> KeychainItems {
        let items = try open(collection)
        _ = try items.unlockedMaster()
        return items
    }
}
