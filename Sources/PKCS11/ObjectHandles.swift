import CPKCS11
import KeychainCore
import KeychainCrypto

/// An object that lives only as long as the session that created it. Every session of the
/// application sees it, from any thread: its attributes are read and replaced whole, under a
/// lock of its own.
final class SessionObject: @unchecked Sendable {
    private var stored: ObjectAttributes
    /// The attributes without secret parts, for the checks of each C_SignInit (nothing to wipe),
    /// and the key checks read from them (`KeyUse`): made at the first such check (most session
    /// keys of KEMs and derivations never see one), remade after a change.
    private var storedPolicy: ObjectAttributes?
    private var storedUse: KeyUse?
    private let lock = PThreadMutex()
    let owner: CK_SESSION_HANDLE

    init(attributes: ObjectAttributes, owner: CK_SESSION_HANDLE) {
        self.stored = attributes
        self.owner = owner
    }

    deinit {
        // The last holder of the secret parts (callers' copies are wiped by the callers).
        stored.wipeSecretValues()
    }

    var attributes: ObjectAttributes {
        get { lock.withLock { stored } }
        set {
            lock.withLock {
                stored = newValue
                storedPolicy = nil
                storedUse = nil
            }
        }
    }

    var policy: ObjectAttributes {
        lock.withLock {
            if let storedPolicy { return storedPolicy }
            let made = stored.withoutSecrets
            storedPolicy = made
            return made
        }
    }

    var use: KeyUse {
        lock.withLock {
            if let storedUse { return storedUse }
            let made = KeyUse(stored)
            storedUse = made
            return made
        }
    }
}

/// What an object handle refers to.
struct ObjectEntry {
    enum Location {
        case token(rowID: Int64)
        case session(SessionObject)
    }

    let slotID: CK_SLOT_ID
    let location: Location
    /// CKA_PRIVATE, which never changes in place, so visibility is decided without decrypting.
    let isPrivate: Bool

    var isTokenObject: Bool {
        if case .token = location { return true }
        return false
    }
}

/// Object handles of this process. A token object keeps one handle for as long as the module is
/// initialised, however often it is found; handles are never reused.
struct ObjectHandleTable {
    private struct TokenKey: Hashable {
        let slotID: CK_SLOT_ID
        let rowID: Int64
    }

    private var entries = HandleMap<ObjectEntry>()
    private var tokenHandles: [TokenKey: CK_OBJECT_HANDLE] = [:]
    /// The session objects' handles, kept apart so that a search does not walk every token
    /// object's handle (there may be 100,000 of those).
    private var sessionHandles: Set<CK_OBJECT_HANDLE> = []
    private var nextHandle: CK_OBJECT_HANDLE = 1

    subscript(_ handle: CK_OBJECT_HANDLE) -> ObjectEntry? { entries[handle] }

    mutating func handle(forTokenObject rowID: Int64, slotID: CK_SLOT_ID, isPrivate: Bool) -> CK_OBJECT_HANDLE {
        let key = TokenKey(slotID: slotID, rowID: rowID)
        if let handle = tokenHandles[key] {
            // SecItemUpdate can move an item between private and public: the search has the truth.
            if let entry = entries[handle], entry.isPrivate != isPrivate {
                entries[handle] = ObjectEntry(slotID: entry.slotID, location: entry.location, isPrivate: isPrivate)
            }
            return handle
        }
        let handle = allocate(ObjectEntry(slotID: slotID, location: .token(rowID: rowID), isPrivate: isPrivate))
        tokenHandles[key] = handle
        return handle
    }

    mutating func add(_ object: SessionObject, slotID: CK_SLOT_ID) -> CK_OBJECT_HANDLE {
        let handle = allocate(ObjectEntry(slotID: slotID, location: .session(object), isPrivate: object.attributes.isPrivate))
        sessionHandles.insert(handle)
        return handle
    }

    private mutating func allocate(_ entry: ObjectEntry) -> CK_OBJECT_HANDLE {
        let handle = nextHandle
        nextHandle += 1
        entries[handle] = entry
        return handle
    }

    mutating func remove(_ handle: CK_OBJECT_HANDLE) {
        guard let entry = entries.removeValue(forKey: handle) else { return }
        if case .token(let rowID) = entry.location {
            tokenHandles[TokenKey(slotID: entry.slotID, rowID: rowID)] = nil
        } else {
            sessionHandles.remove(handle)
        }
    }

    /// Session objects of a slot visible with the given login, in handle order.
    func sessionObjects(onSlot slotID: CK_SLOT_ID) -> [(handle: CK_OBJECT_HANDLE, object: SessionObject)] {
        sessionHandles.sorted().compactMap { handle in
            guard let entry = entries[handle], entry.slotID == slotID, case .session(let object) = entry.location else { return nil }
            return (handle, object)
        }
    }

    /// Removes a session's objects; returns their handles.
    @discardableResult
    mutating func removeSessionObjects(ownedBy session: CK_SESSION_HANDLE) -> [CK_OBJECT_HANDLE] {
        var removed: [CK_OBJECT_HANDLE] = []
        for handle in sessionHandles {
            if case .session(let object)? = entries[handle]?.location, object.owner == session {
                entries[handle] = nil
                removed.append(handle)
            }
        }
        sessionHandles.subtract(removed)
        return removed
    }

    mutating func removeSessionObjects(onSlot slotID: CK_SLOT_ID) {
        for handle in sessionHandles where entries[handle]?.slotID == slotID {
            entries[handle] = nil
            sessionHandles.remove(handle)
        }
    }

    /// Forgets every handle of a slot (its keychain was re-initialised).
    mutating func removeAll(onSlot slotID: CK_SLOT_ID) {
        for (handle, entry) in entries where entry.slotID == slotID { remove(handle) }
    }
}
