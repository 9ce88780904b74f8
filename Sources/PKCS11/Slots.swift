import CPKCS11
import KeychainCore
import KeychainCrypto

/// A keychain opened as a PKCS#11 token, with this process's login state.
final class Token {
    enum Login: Equatable {
        case none, user, securityOfficer
    }

    let slotID: CK_SLOT_ID
    let keychain: Keychain
    private(set) var login: Login = .none
    private var master: MasterKey?
    /// Parsed keys by object handle, ready for signing; dropped at logout and finalize.
    var keyCache: [CK_OBJECT_HANDLE: ReadyKey] = [:]
    /// Token keys' attributes without their secret parts, valid while the keychain's version is
    /// unchanged: each C_SignInit then checks usage flags without decrypting the record again.
    var policyCache: [CK_OBJECT_HANDLE: (version: KeychainVersion, attributes: ObjectAttributes)] = [:]
    /// AES contexts with their key schedule, left by finished operations of cached keys for the
    /// next C_EncryptInit/C_DecryptInit on the same key, mode and direction to restart with a new
    /// IV. Each belongs to the key bytes it was made from (`keyCache`'s entry, compared by
    /// identity) and goes with them: dropped at logout, finalize and the key's destruction
    /// (EVP_CIPHER_CTX_free cleanses the schedule).
    /// A few entries, searched in order (cheaper than hashing at this size); oldest first.
    private(set) var idleCiphers: [(entry: IdleCipher, key: SecureBytes, cipher: SymmetricCipher)] = []

    struct IdleCipher: Equatable {
        let handle: CK_OBJECT_HANDLE
        let mode: SymmetricCipher.Mode
        let encrypting: Bool
    }

    /// At most this many idle contexts per token (a host cycling through more keys than this
    /// makes new ones, as without the cache).
    static let idleCipherLimit = 16

    /// Takes the idle context of `entry` made from `key`, if there is one.
    func takeIdleCipher(_ entry: IdleCipher, key: SecureBytes) -> SymmetricCipher? {
        guard let index = idleCiphers.firstIndex(where: { $0.entry == entry }) else { return nil }
        let idle = idleCiphers.remove(at: index)
        return idle.key === key ? idle.cipher : nil
    }

    /// Keeps a finished operation's context for the next operation on the same key.
    func keepIdle(_ cipher: SymmetricCipher, as entry: IdleCipher, key: SecureBytes) {
        guard !idleCiphers.contains(where: { $0.entry == entry }) else { return }
        if idleCiphers.count >= Self.idleCipherLimit { idleCiphers.removeFirst() }
        idleCiphers.append((entry, key, cipher))
    }

    /// Forgets every cached form of key `handle`.
    func forgetKey(_ handle: CK_OBJECT_HANDLE) {
        keyCache[handle] = nil
        policyCache[handle] = nil
        idleCiphers.removeAll { $0.entry.handle == handle }
    }

    init(slotID: CK_SLOT_ID, keychain: Keychain) {
        self.slotID = slotID
        self.keychain = keychain
    }

    func logIn(_ login: Login, master: MasterKey) {
        self.login = login
        self.master = master
    }

    /// Drops the master key (its buffer wipes itself when the last reference goes).
    func logout() {
        login = .none
        master = nil
        keyCache.removeAll()
        policyCache.removeAll()
        idleCiphers.removeAll()
    }

    /// The master key while the normal user is logged in: the only state that sees private objects.
    var userMaster: MasterKey? { login == .user ? master : nil }

    /// The master key while the SO is logged in (to set the user PIN).
    var securityOfficerMaster: MasterKey? { login == .securityOfficer ? master : nil }
}

/// A slot: a keychain file, or the one empty slot where C_InitToken creates a keychain.
final class Slot {
    let id: CK_SLOT_ID
    let path: String?
    var token: Token?

    init(id: CK_SLOT_ID, path: String?, token: Token?) {
        self.id = id
        self.path = path
        self.token = token
    }
}

/// The slots of this process, with IDs that stay with their keychain (DESIGN §3 Slots).
struct SlotTable {
    private var slots: [CK_SLOT_ID: Slot] = [:]
    private(set) var emptySlotID: CK_SLOT_ID = 1
    /// Slots that appeared or went away since C_WaitForSlotEvent last reported.
    var events: [CK_SLOT_ID] = []

    subscript(_ id: CK_SLOT_ID) -> Slot? {
        if id == emptySlotID, slots[id] == nil { return Slot(id: id, path: nil, token: nil) }
        return slots[id]
    }

    /// Keychain slots in ID order, then the empty slot.
    var all: [Slot] {
        slots.keys.sorted().compactMap { slots[$0] } + [Slot(id: emptySlotID, path: nil, token: nil)]
    }

    /// Adds a keychain just created in the empty slot, and moves the empty slot on.
    mutating func adopt(_ keychain: Keychain, slotID: CK_SLOT_ID, directory: KeychainDirectory) {
        slots[slotID] = Slot(id: slotID, path: keychain.path, token: Token(slotID: slotID, keychain: keychain))
        updateEmptySlot(directory: directory)
    }

    /// Re-reads the keychain folder: new files become slots (keeping the ID stored in the file),
    /// vanished files lose their slot unless a session is still open on it.
    mutating func refresh(directory: KeychainDirectory, keepingSlotsWith busy: Set<CK_SLOT_ID>) {
        let files = directory.keychainFiles()
        var byPath: [String: Slot] = [:]
        for slot in slots.values { if let path = slot.path { byPath[path] = slot } }
        var refreshed: [CK_SLOT_ID: Slot] = [:]
        for path in files {
            if let slot = byPath[path] {
                refreshed[slot.id] = slot
                continue
            }
            guard let keychain = try? Keychain.open(at: path) else {
                logger.warning("skipping \(path): not a usable keychain")
                continue
            }
            let stored = (try? keychain.info(countingObjects: false).slotID).flatMap { $0 }.map { CK_SLOT_ID($0) }
            let id: CK_SLOT_ID?
            if let stored, stored < CK_SLOT_ID(KeychainDirectory.maximumSlotID), refreshed[stored] == nil,
               slots[stored].map({ $0.path == path }) ?? true {
                id = stored
            } else {
                // No ID yet, or a copy of another keychain's file: give it an ID of its own.
                id = try? directory.withNextSlotID { next in (next, next + 1) }
                if let id { try? keychain.assignSlotID(UInt(id)) }
            }
            guard let id else { continue }
            refreshed[id] = Slot(id: id, path: path, token: Token(slotID: id, keychain: keychain))
            events.append(id)
        }
        for (id, slot) in slots where refreshed[id] == nil {
            if busy.contains(id) { refreshed[id] = slot } else { events.append(id) }
        }
        slots = refreshed
        updateEmptySlot(directory: directory)
    }

    private mutating func updateEmptySlot(directory: KeychainDirectory) {
        let floor = (slots.keys.max() ?? 0) + 1
        let previous = emptySlotID
        emptySlotID = (try? directory.emptySlotID(above: UInt(floor))).map { CK_SLOT_ID($0) } ?? max(floor, emptySlotID)
        if previous != emptySlotID, slots[previous] == nil { events.append(emptySlotID) }
    }
}
