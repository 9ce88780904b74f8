import CPKCS11
import KeychainCore
import KeychainCrypto

/// A keychain opened as a PKCS#11 token, with this process's login state.
///
/// Shared by every session on the token and so by many threads: the login state and the caches
/// are read and changed only under `lock`, each access on its own and briefly (never across a
/// key's parsing, a database call or cryptography). The keychain has its own lock.
final class Token: @unchecked Sendable {
    enum Login: Equatable {
        case none, user, securityOfficer
    }

    let slotID: CK_SLOT_ID
    let keychain: Keychain
    /// Held while this process checks a user or SO PIN for the token: threads logging in at once
    /// take turns, and those after a success find the token logged in instead of each running
    /// scrypt again. Nothing but logins waits for it.
    let loginGate = PThreadMutex()
    private let lock = PThreadMutex()
    private var currentLogin: Login = .none
    private var master: MasterKey?
    /// How many logouts there have been: sessions compare it to drop what a logout ends.
    private var logoutCount: UInt64 = 0
    /// Each session's last symmetric context on a cached key, by `KeptCipher.slot`: used without
    /// checking the key again, so everything that can make those checks wrong drops it here.
    private var keptCiphers = HandleMap<KeptCipher>()
    /// Parsed keys by object handle, ready for signing; dropped at logout and finalize. Shared
    /// read-only by the sessions (an EVP_PKEY is used by many threads, each with its own context).
    private var keyCache = HandleMap<ReadyKey>()
    /// Token keys' attributes without their secret parts, valid while the keychain's version is
    /// unchanged: each C_SignInit then checks usage flags without decrypting the record again.
    private var policyCache = HandleMap<(version: KeychainVersion, attributes: ObjectAttributes, use: KeyUse)>()
    /// AES contexts with their key schedule, left by finished operations of cached keys for the
    /// next C_EncryptInit/C_DecryptInit on the same key, mode and direction to restart with a new
    /// IV. Each belongs to the key bytes it was made from (`keyCache`'s entry, compared by
    /// identity) and goes with them: dropped at logout, finalize and the key's destruction
    /// (EVP_CIPHER_CTX_free cleanses the schedule).
    /// A few entries, searched in order (cheaper than hashing at this size); oldest first.
    private var idleCiphers: [(entry: IdleCipher, key: SecureBytes, cipher: SymmetricCipher)] = []

    struct IdleCipher: Equatable {
        let handle: CK_OBJECT_HANDLE
        let mode: SymmetricCipher.Mode
        let encrypting: Bool
    }

    /// At most this many idle contexts per token (a host cycling through more keys than this
    /// makes new ones, as without the cache).
    static let idleCipherLimit = 16

    init(slotID: CK_SLOT_ID, keychain: Keychain) {
        self.slotID = slotID
        self.keychain = keychain
        // Unlocked once since the login session began (keychaind): AfterFirstUnlock items are
        // usable before C_Login, as after a login in this process.
        UnlockSession.applyFirstUnlock(to: keychain)
    }

    // MARK: login

    var login: Login { lock.withLock { currentLogin } }
    var logouts: UInt64 { lock.withLock { logoutCount } }

    /// A session key's attributes changed: checks made before on it no longer hold.
    func attributesChanged(_ handle: CK_OBJECT_HANDLE) {
        let dropped = lock.withLock { takeKeptCiphers { $0.handle == handle } }
        _ = dropped
    }

    /// Logs in with a master key just checked. Two logins may check PINs at once: the first to
    /// get here wins, the other gets what it would have got a moment later.
    func logIn(_ wanted: Login, master: MasterKey) throws(CKError) {
        try lock.withLock { () throws(CKError) in
            if currentLogin == wanted { throw CKError(CK_RV(CKR_USER_ALREADY_LOGGED_IN), "already logged in") }
            if currentLogin != .none { throw CKError(CK_RV(CKR_USER_ANOTHER_ALREADY_LOGGED_IN), "another user is logged in") }
            currentLogin = wanted
            self.master = master
        }
    }

    /// Drops the master key (its buffer wipes itself when the last reference goes) and every
    /// cached form of a key. False when nobody was logged in.
    @discardableResult
    func logout() -> Bool {
        let (wasLoggedIn, dropped) = lock.withLock { () -> (Bool, (HandleMap<ReadyKey>, Int)) in
            let was = currentLogin != .none
            currentLogin = .none
            master = nil
            logoutCount &+= 1
            let dropped = (keyCache, idleCiphers.count)
            keptCiphers.removeAll()
            keyCache.removeAll()
            policyCache.removeAll()
            idleCiphers.removeAll()
            return (was, dropped)
        }
        // The keys are freed here, outside the lock (freeing an RSA key wipes its numbers).
        _ = dropped
        return wasLoggedIn
    }

    /// The master key while the normal user is logged in: the only state that sees private objects.
    var userMaster: MasterKey? { lock.withLock { currentLogin == .user ? master : nil } }
    /// The master key while the SO is logged in (to set the user PIN).
    var securityOfficerMaster: MasterKey? { lock.withLock { currentLogin == .securityOfficer ? master : nil } }
    /// The master key of whoever is logged in, for writes of public objects (which the SO may
    /// make too): it opens the Always key and the manifest key where the device key cannot.
    var writingMaster: MasterKey? { lock.withLock { master } }

    // MARK: caches

    func cachedKey(_ handle: CK_OBJECT_HANDLE) -> ReadyKey? { lock.withLock { keyCache[handle] } }

    /// Keeps a key just parsed, unless another thread kept one first (then that one is used).
    /// `logoutsBefore` is `logouts` from before the key was read: a key read across a logout is
    /// used by its operation but not kept (nothing of a logged-out user stays).
    func keep(_ key: ReadyKey, for handle: CK_OBJECT_HANDLE, logoutsBefore: UInt64, dropReadyKeysFirst: Bool) -> ReadyKey {
        let (winner, dropped) = lock.withLock { () -> (ReadyKey, [ReadyKey]) in
            if let existing = keyCache[handle] { return (existing, []) }
            var dropped: [ReadyKey] = []
            if dropReadyKeysFirst { dropped = takeAsymmetricKeys() }
            if logoutCount == logoutsBefore { keyCache[handle] = key }
            return (key, dropped)
        }
        _ = dropped
        return winner
    }

    /// Forgets the parsed asymmetric keys (operations under way keep theirs until they end);
    /// false when there were none.
    func dropReadyAsymmetricKeys() -> Bool {
        let dropped = lock.withLock { takeAsymmetricKeys() }
        return !dropped.isEmpty
    }

    private func takeAsymmetricKeys() -> [ReadyKey] {
        let asymmetric = keyCache.filter { $0.value.asymmetric != nil }
        guard !asymmetric.isEmpty else { return [] }
        for entry in asymmetric { keyCache.removeValue(forKey: entry.key) }
        return asymmetric.map(\.value)
    }

    func cachedPolicy(_ handle: CK_OBJECT_HANDLE, version: KeychainVersion) -> ObjectAttributes? {
        lock.withLock { policyCache[handle].flatMap { $0.version == version ? $0.attributes : nil } }
    }

    /// The key checks of a cached policy, with the ready key when there is one, in one look.
    func cachedUse(_ handle: CK_OBJECT_HANDLE, version: KeychainVersion) -> (use: KeyUse, key: ReadyKey?)? {
        lock.withLock {
            guard let cached = policyCache[handle], cached.version == version else { return nil }
            return (cached.use, keyCache[handle])
        }
    }

    func keepPolicy(_ attributes: ObjectAttributes, for handle: CK_OBJECT_HANDLE, version: KeychainVersion) {
        let use = KeyUse(attributes)
        lock.withLock { policyCache[handle] = (version, attributes, use) }
    }

    /// Takes the idle context of `entry` made from `key`, if there is one.
    func takeIdleCipher(_ entry: IdleCipher, key: SecureBytes) -> SymmetricCipher? {
        lock.withLock {
            guard let index = idleCiphers.firstIndex(where: { $0.entry == entry }) else { return nil }
            let idle = idleCiphers.remove(at: index)
            return idle.key === key ? idle.cipher : nil
        }
    }

    /// Keeps a finished operation's context for the next operation on the same key, if the key
    /// is still the cached one (not after a logout or the key's destruction).
    func keepIdle(_ cipher: SymmetricCipher, as entry: IdleCipher, key: SecureBytes) {
        lock.withLock {
            guard keyCache[entry.handle]?.secret === key, !idleCiphers.contains(where: { $0.entry == entry }) else { return }
            if idleCiphers.count >= Self.idleCipherLimit { idleCiphers.removeFirst() }
            idleCiphers.append((entry, key, cipher))
        }
    }

    /// Forgets every cached form of key `handle`.
    func forgetKey(_ handle: CK_OBJECT_HANDLE) {
        let dropped = lock.withLock { () -> (ReadyKey?, [KeptCipher]) in
            policyCache[handle] = nil
            idleCiphers.removeAll { $0.entry.handle == handle }
            return (keyCache.removeValue(forKey: handle), takeKeptCiphers { $0.handle == handle })
        }
        _ = dropped
    }

    // MARK: kept ciphers (`KeptCipher`)

    func keptCipher(session: CK_SESSION_HANDLE, encrypting: Bool) -> KeptCipher? {
        lock.withLock { keptCiphers[KeptCipher.slot(session: session, encrypting: encrypting)] }
    }

    /// Keeps `kept` as its session's, in place of the one before, if its key is still the cached
    /// one (not after a logout or the key's destruction). Answers whether it was kept.
    func keep(_ kept: KeptCipher, session: CK_SESSION_HANDLE) -> Bool {
        let (done, replaced) = lock.withLock { () -> (Bool, KeptCipher?) in
            guard keyCache[kept.handle]?.secret === kept.key else { return (false, nil) }
            let slot = KeptCipher.slot(session: session, encrypting: kept.encrypting)
            let replaced = keptCiphers.removeValue(forKey: slot)
            keptCiphers[slot] = kept
            return (true, replaced)
        }
        _ = replaced  // freed here, outside the lock
        return done
    }

    /// Drops `kept` if it is still the session's.
    func dropKeptCipher(_ kept: KeptCipher, session: CK_SESSION_HANDLE) {
        let dropped = lock.withLock { () -> KeptCipher? in
            let slot = KeptCipher.slot(session: session, encrypting: kept.encrypting)
            return keptCiphers[slot] === kept ? keptCiphers.removeValue(forKey: slot) : nil
        }
        _ = dropped
    }

    /// A session closed: its kept ciphers go.
    func dropKeptCiphers(session: CK_SESSION_HANDLE) {
        let dropped = lock.withLock { () -> [KeptCipher?] in
            [true, false].map { keptCiphers.removeValue(forKey: KeptCipher.slot(session: session, encrypting: $0)) }
        }
        _ = dropped
    }

    /// Removes the kept ciphers `matching` says; the caller holds the lock and frees them after.
    private func takeKeptCiphers(matching: (KeptCipher) -> Bool) -> [KeptCipher] {
        guard !keptCiphers.isEmpty else { return [] }
        let matched = keptCiphers.filter { matching($0.value) }
        for (slot, _) in matched { _ = keptCiphers.removeValue(forKey: slot) }
        return matched.map(\.value)
    }
}
