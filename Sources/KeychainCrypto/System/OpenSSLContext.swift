internal import COpenSSL

/// The OpenSSL library context all of our OpenSSL work runs in (DESIGN §13), with the default
/// provider loaded into it (and the legacy one when `LegacyProvider.load()` asks).
///
/// The module runs inside other programs. OpenSSL's default context is theirs: a host whose
/// `OPENSSL_CONF` activates pkcs11-provider over this very module would otherwise serve our key
/// decoding and key management from inside a `C_SignInit` — the provider imports the key with
/// `C_CreateObject` on us, signs with it, and so on until the sessions run out — and the first
/// fetch in the default context loads the host's configuration, from inside our `C_Initialize`.
/// No configuration file is ever read into this context.
///
/// Made on first use, once (a `static let` is initialised under `swift_once`), and never freed:
/// the module runs nothing at process exit while host threads may still be inside it. The
/// pointer stays reachable from here, which is what LeakSanitizer checks.
enum OpenSSLContext {
    nonisolated(unsafe) private static let made: OpaquePointer? = {
        guard let context = OSSL_LIB_CTX_new() else {
            OpenSSLErrorQueue.discardOwn()
            return nil
        }
        // Loaded for good: the provider object stays with the context (never unloaded).
        guard OSSL_PROVIDER_load(context, "default") != nil else {
            OpenSSLErrorQueue.discardOwn()
            OSSL_LIB_CTX_free(context)
            return nil
        }
        return context
    }()

    /// Our library context; a `CryptoError` when OpenSSL could not make it. Never pass nil in
    /// its place: OpenSSL reads nil as the host's default context.
    static func get() throws(CryptoError) -> OpaquePointer {
        guard let made else { throw CryptoError(.library, "OpenSSL library context with the default provider") }
        return made
    }

    /// A BN_CTX whose random numbers (blinding, prime tests) come from our context.
    static func withBigNumberContext<R>(secure: Bool = false, _ body: (OpaquePointer) throws -> R) throws -> R {
        let context = try get()
        guard let bn = secure ? BN_CTX_secure_new_ex(context) : BN_CTX_new_ex(context) else { throw CryptoError.library("BN_CTX_new_ex") }
        defer { BN_CTX_free(bn) }
        return try body(bn)
    }
}

/// Algorithms fetched from our context once and kept for the life of the process (like the
/// context): a fetch is a name lookup in the provider's method store under a lock, which costs
/// more than a short digest or cipher call. A fetch that fails is not remembered (single DES
/// appears once the legacy provider is loaded).
enum Fetched {
    private enum Kind { case cipher, digest, mac, kdf }
    private struct Key: Hashable {
        let kind: Kind
        let name: String
    }

    private static let mutex = PThreadMutex(.plain)
    nonisolated(unsafe) private static var table: [Key: OpaquePointer] = [:]

    /// EVP_CIPHER_fetch(our context, name, NULL), or nil when no provider of ours has it.
    static func cipher(_ name: String) -> OpaquePointer? {
        cached(Key(kind: .cipher, name: name)) { EVP_CIPHER_fetch($0, name, nil) }
    }

    /// EVP_MD_fetch(our context, name, NULL), or nil.
    static func digest(_ name: String) -> OpaquePointer? {
        cached(Key(kind: .digest, name: name)) { EVP_MD_fetch($0, name, nil) }
    }

    /// EVP_MAC_fetch(our context, name, NULL), or nil.
    static func mac(_ name: String) -> OpaquePointer? {
        cached(Key(kind: .mac, name: name)) { EVP_MAC_fetch($0, name, nil) }
    }

    /// EVP_KDF_fetch(our context, name, NULL), or nil.
    static func kdf(_ name: String) -> OpaquePointer? {
        cached(Key(kind: .kdf, name: name)) { EVP_KDF_fetch($0, name, nil) }
    }

    private static func cached(_ key: Key, _ fetch: (OpaquePointer) -> OpaquePointer?) -> OpaquePointer? {
        mutex.lock()
        defer { mutex.unlock() }
        if let kept = table[key] { return kept }
        guard let context = try? OpenSSLContext.get(), let fetched = fetch(context) else {
            OpenSSLErrorQueue.discardOwn()
            return nil
        }
        table[key] = fetched
        return fetched
    }
}

/// The one thing the module does to the host's own OpenSSL set-up.
public enum HostOpenSSL {
    /// Lets OpenSSL load the process's configuration (OPENSSL_CONF) now, while C_Initialize holds
    /// no lock of ours. OpenSSL 3.0 loads it anyway the first time it looks for an ENGINE, which
    /// every EVP_DigestInit_ex, EVP_CipherInit_ex and EVP_PKEY_CTX does whatever its library
    /// context; a configuration that starts pkcs11-provider over this module with
    /// `pkcs11-module-load-behavior = early` then calls our C_Initialize from inside that load,
    /// which waited for the lock our own C_Initialize held (the process hung). Loaded here, the
    /// inner C_Initialize runs to the end first and the outer one finds the module initialised.
    /// Once per process (a call made during the load itself returns at once); a host that asked
    /// for no configuration (OPENSSL_INIT_NO_LOAD_CONFIG) keeps none.
    public static func loadConfiguration() {
        OpenSSLErrorQueue.preserving { _ = OPENSSL_init_crypto(UInt64(OPENSSL_INIT_LOAD_CONFIG), nil) }
    }

    /// Runs `body` — a call into a library that does its OpenSSL work in the default library
    /// context: tpm2-tss 3.2 makes its session HMACs, parameter encryption and ECDH salt keys
    /// there — with our context as this thread's default (OSSL_LIB_CTX_set0_default is per
    /// thread), the previous default put back after. The process's configuration is loaded into
    /// the real default context first: OpenSSL loads it into whatever is the default at its first
    /// use, which must not be ours.
    public static func withModuleContextAsDefault<R, Failure: Error>(_ body: () throws(Failure) -> R) throws(Failure) -> R {
        loadConfiguration()
        guard let ours = try? OpenSSLContext.get() else { return try body() }
        let previous = OSSL_LIB_CTX_set0_default(ours)
        defer { _ = OSSL_LIB_CTX_set0_default(previous) }
        return try body()
    }
}
