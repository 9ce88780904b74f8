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
    /// The master key of whoever is logged in, for writes of public objects (which the SO may
    /// make too): it opens the Always key and the manifest key where the device key cannot.
    var writingMaster: MasterKey? { master }
}
