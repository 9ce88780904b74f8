internal import COpenSSL
import Glibc

/// How a signature is made: padding, and whether the token hashes the data first.
public enum SignatureScheme: Sendable, Hashable {
    /// PKCS#1 v1.5; with a digest the data is hashed and wrapped in DigestInfo, without one the
    /// caller's bytes (a DigestInfo) are padded as they are (CKM_RSA_PKCS).
    case rsaPKCS1(digest: Digest.Algorithm?)
    /// PKCS#1 v1.5 over a hash the caller computed with `digest` (the token adds the DigestInfo).
    case rsaPKCS1Prehashed(Digest.Algorithm)
    /// Raw RSA, no padding (CKM_RSA_X_509): the input is as long as the modulus.
    case rsaRaw
    /// PSS with MGF1; `hashesData` tells whether the token hashes the data (CKM_SHA*_RSA_PKCS_PSS)
    /// or receives the hash (CKM_RSA_PKCS_PSS).
    case rsaPSS(digest: Digest.Algorithm, mgf1: Digest.Algorithm, saltLength: Int, hashesData: Bool)
    /// ECDSA; signatures are r‖s, each as long as the curve order (PKCS#11 form, not DER).
    case ecdsa(digest: Digest.Algorithm?)
    /// Pure EdDSA (Ed25519, Ed448) over the whole message.
    case eddsa
    /// EdDSA with a context or prehash: Ed25519ctx, Ed25519ph, Ed448 with a context, Ed448ph.
    case eddsaVariant(prehash: Bool, context: [UInt8])
    /// DSA; signatures are r‖s, each as long as the subprime q (PKCS#11 form, not DER).
    case dsa(digest: Digest.Algorithm?)
}

/// A signature being made or checked. Hashing schemes stream; the others collect the input.
public final class SignatureOperation {
    private let key: AsymmetricKey
    private let scheme: SignatureScheme
    private let signing: Bool
    private var mdContext: OpaquePointer?
    private var collected: [UInt8] = []

    public init(key: AsymmetricKey, scheme: SignatureScheme, signing: Bool) throws {
        self.key = key
        self.scheme = scheme
        self.signing = signing
        if let digest = streamingDigest {
            // Initialising a context fetches algorithms from OpenSSL's providers, which costs
            // more than an ECDSA signature: each key keeps one initialised context per scheme
            // and every operation starts from a copy of it.
            guard let ctx = EVP_MD_CTX_new() else { throw CryptoError.library("EVP_MD_CTX_new") }
            mdContext = ctx
            let copied = key.contexts.withTemplate(for: ContextKey(scheme: scheme, signing: signing)) { template in
                EVP_MD_CTX_copy_ex(ctx, template) == 1
            }
            if !copied {
                var pctx: OpaquePointer?
                let context = try OpenSSLContext.get()
                let ok = signing ? EVP_DigestSignInit_ex(ctx, &pctx, digest.name, context, nil, key.pkey, nil)
                    : EVP_DigestVerifyInit_ex(ctx, &pctx, digest.name, context, nil, key.pkey, nil)
                guard ok == 1, let pctx else { throw CryptoError.library("EVP_Digest\(signing ? "Sign" : "Verify")Init_ex") }
                try configure(pctx)
                key.contexts.store(copyOf: ctx, for: ContextKey(scheme: scheme, signing: signing))
            }
        }
    }

    deinit {
        if let mdContext { EVP_MD_CTX_free(mdContext) }
        wipe(&collected)
    }

    /// The digest OpenSSL applies while streaming, for schemes where the token hashes.
    private var streamingDigest: Digest.Algorithm? {
        switch scheme {
        case .rsaPKCS1(let digest?): return digest
        case .rsaPSS(let digest, _, _, true): return digest
        case .ecdsa(let digest?): return digest
        case .dsa(let digest?): return digest
        default: return nil
        }
    }

    /// Largest input the non-hashing schemes accept (they buffer it).
    public static let maximumCollectedInput = 1 << 26

    public func update(_ data: UnsafeRawBufferPointer) throws {
        guard data.count > 0 else { return }
        if let mdContext {
            let ok = signing ? EVP_DigestSignUpdate(mdContext, data.baseAddress, data.count) : EVP_DigestVerifyUpdate(mdContext, data.baseAddress, data.count)
            guard ok == 1 else { throw CryptoError.library("digest update") }
        } else {
            guard collected.count + data.count <= Self.maximumCollectedInput else { throw CryptoError(.invalidInput, "input too large") }
            collected += data
        }
    }

    /// The signature (signing) — its length is `signatureLength` at most.
    public func sign() throws -> [UInt8] {
        var signature: [UInt8]
        if let mdContext {
            var length = 0
            guard EVP_DigestSignFinal(mdContext, nil, &length) == 1 else { throw CryptoError.library("EVP_DigestSignFinal") }
            signature = [UInt8](repeating: 0, count: length)
            guard EVP_DigestSignFinal(mdContext, &signature, &length) == 1 else { throw CryptoError.library("EVP_DigestSignFinal") }
            signature = Array(signature.prefix(length))
        } else if case .eddsa = scheme {
            signature = try oneShotEdDSA()
        } else if case .eddsaVariant(let prehash, let context) = scheme {
            signature = try EdDSAVariant.sign(collected, key: key, prehash: prehash, context: context)
        } else {
            try prepareCollectedInput()
            // Sized from the key (EVP_PKEY_get_size is the most any signature takes) rather than
            // by a length query, which costs a second pass through the provider.
            let size = Int(EVP_PKEY_get_size(key.pkey))
            signature = try withInitialisedContext { ctx in
                var length = max(size, 1)
                var out = [UInt8](repeating: 0, count: length)
                guard size > 0, EVP_PKEY_sign(ctx, &out, &length, collected, collected.count) == 1 else { throw signError() }
                return Array(out.prefix(length))
            }
        }
        if let width = rawSignatureWidth { return try Self.derToRaw(signature, width: width) }
        return signature
    }

    /// Whether `signature` is valid; a malformed signature is simply invalid.
    public func verify(_ signature: [UInt8]) throws -> Bool {
        var encoded = signature
        if let width = rawSignatureWidth {
            guard let der = Self.rawToDER(signature, width: width) else { return false }
            encoded = der
        }
        defer { OpenSSLErrorQueue.discardOwn() }
        if let mdContext {
            return EVP_DigestVerifyFinal(mdContext, encoded, encoded.count) == 1
        }
        if case .eddsa = scheme {
            return try withEdDSAContext { ctx in EVP_DigestVerify(ctx, encoded, encoded.count, collected, collected.count) == 1 }
        }
        if case .eddsaVariant(let prehash, let context) = scheme {
            return try EdDSAVariant.verify(encoded, message: collected, key: key, prehash: prehash, context: context)
        }
        try prepareCollectedInput()
        return try withInitialisedContext { ctx in
            EVP_PKEY_verify(ctx, encoded, encoded.count, collected, collected.count) == 1
        }
    }

    /// Checks and shapes the input of the schemes that take it whole: raw DSA takes a hash of
    /// 20, 28, 32, 48 or 64 bytes (`.invalidInput` otherwise); raw RSA (X.509) takes up to a
    /// modulus of bytes, left-padded with zeros to the modulus as PKCS#11 §2.1.8 has it.
    private func prepareCollectedInput() throws {
        switch scheme {
        case .dsa(nil):
            guard [20, 28, 32, 48, 64].contains(collected.count) else {
                throw CryptoError(.invalidInput, "raw DSA takes a hash of 20, 28, 32, 48 or 64 bytes, not \(collected.count)")
            }
        case .rsaRaw:
            let modulusBytes = (key.bits + 7) / 8
            if collected.count < modulusBytes { collected = [UInt8](repeating: 0, count: modulusBytes - collected.count) + collected }
        default:
            break
        }
    }

    /// The length of every signature with this key and scheme (C_Sign's length query).
    public var signatureLength: Int {
        switch key.kind {
        case .rsa: return (key.bits + 7) / 8
        case .ec(let curve): return 2 * curve.coordinateLength
        case .dsa: return 2 * key.subprimeLength
        case .ed25519: return 64
        case .ed448: return 114
        case .x25519, .x448, .dh: return 0
        }
    }

    /// ECDSA and DSA: the width of r and of s in the r‖s form PKCS#11 uses (OpenSSL uses DER).
    private var rawSignatureWidth: Int? {
        switch (scheme, key.kind) {
        case (.ecdsa, .ec(let curve)): return curve.coordinateLength
        case (.dsa, .dsa): return key.subprimeLength
        default: return nil
        }
    }

    private func oneShotEdDSA() throws -> [UInt8] {
        try withEdDSAContext { ctx in
            var length = 0
            guard EVP_DigestSign(ctx, nil, &length, collected, collected.count) == 1 else { throw CryptoError.library("EVP_DigestSign") }
            var out = [UInt8](repeating: 0, count: length)
            guard EVP_DigestSign(ctx, &out, &length, collected, collected.count) == 1 else { throw CryptoError.library("EVP_DigestSign") }
            return Array(out.prefix(length))
        }
    }

    /// A context initialised for one-shot EdDSA with this key and direction, taken from the key's
    /// idle ones (EVP_DigestSign and EVP_DigestVerify may be called again on the same context,
    /// as `openssl speed` does) and given back when `body` succeeds; freed when it fails.
    private func withEdDSAContext<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        let slot = ContextKey(scheme: scheme, signing: signing)
        let ctx: OpaquePointer
        if let idle = key.contexts.takeIdleDigestContext(for: slot) {
            ctx = idle
        } else {
            let context = try OpenSSLContext.get()
            guard let fresh = EVP_MD_CTX_new() else { throw CryptoError.library("EVP_MD_CTX_new") }
            let ok = signing ? EVP_DigestSignInit_ex(fresh, nil, nil, context, nil, key.pkey, nil)
                : EVP_DigestVerifyInit_ex(fresh, nil, nil, context, nil, key.pkey, nil)
            guard ok == 1 else {
                EVP_MD_CTX_free(fresh)
                throw CryptoError.library(signing ? "EVP_DigestSignInit_ex" : "EVP_DigestVerifyInit_ex")
            }
            ctx = fresh
        }
        do {
            let result = try body(ctx)
            key.contexts.putBack(digestContext: ctx, for: slot)
            return result
        } catch {
            EVP_MD_CTX_free(ctx)
            throw error
        }
    }

    private func signError() -> CryptoError {
        OpenSSLErrorQueue.discardOwn()
        return CryptoError(.invalidInput, "the input does not fit this key and mechanism")
    }

    /// A key context initialised for this scheme and direction, taken from the key's idle ones
    /// (EVP_PKEY_sign and EVP_PKEY_verify may be called again on an initialised context, as
    /// `openssl speed` does: no duplicate per operation) and given back when `body` succeeds;
    /// freed when it fails, so no context in an unknown state is reused.
    private func withInitialisedContext<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        let slot = ContextKey(scheme: scheme, signing: signing)
        let ctx: OpaquePointer
        if let idle = key.contexts.takeIdleKeyContext(for: slot) {
            ctx = idle
        } else {
            guard let fresh = EVP_PKEY_CTX_new_from_pkey(try OpenSSLContext.get(), key.pkey, nil) else {
                throw CryptoError.library("EVP_PKEY_CTX_new_from_pkey")
            }
            do {
                guard (signing ? EVP_PKEY_sign_init(fresh) : EVP_PKEY_verify_init(fresh)) == 1 else {
                    throw CryptoError.library("EVP_PKEY_\(signing ? "sign" : "verify")_init")
                }
                try configure(fresh)
            } catch {
                EVP_PKEY_CTX_free(fresh)
                throw error
            }
            ctx = fresh
        }
        do {
            let result = try body(ctx)
            key.contexts.putBack(keyContext: ctx, for: slot)
            return result
        } catch {
            EVP_PKEY_CTX_free(ctx)
            throw error
        }
    }

    /// Padding and PSS parameters on a key context.
    private func configure(_ ctx: OpaquePointer) throws {
        switch scheme {
        case .rsaPKCS1:
            guard EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1 else { throw CryptoError.library("RSA padding") }
        case .rsaRaw:
            guard EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_NO_PADDING) == 1 else { throw CryptoError.library("RSA padding") }
        case .rsaPKCS1Prehashed(let digest):
            let md = try digest.md
            guard EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1, EVP_PKEY_CTX_set_signature_md(ctx, md) == 1 else {
                throw CryptoError.library("RSA padding")
            }
        case .rsaPSS(let digest, let mgf1, let saltLength, let hashesData):
            let md = try digest.md, mgf1MD = try mgf1.md
            guard EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PSS_PADDING) == 1,
                  hashesData || EVP_PKEY_CTX_set_signature_md(ctx, md) == 1,
                  EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, mgf1MD) == 1,
                  EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx, Int32(saltLength)) == 1 else {
                OpenSSLErrorQueue.discardOwn()
                throw CryptoError(.invalidInput, "PSS parameters rejected")
            }
        case .ecdsa, .eddsa, .eddsaVariant, .dsa:
            break
        }
    }

    // MARK: ECDSA signature forms

    /// An ECDSA signature r‖s as DER (X9.62), and back.
    public static func ecdsaDER(fromRaw raw: [UInt8], key: AsymmetricKey) -> [UInt8]? {
        guard case .ec(let curve) = key.kind else { return nil }
        return rawToDER(raw, width: curve.coordinateLength)
    }
    /// r‖s of `coordinateLength` bytes each as DER, for signatures made outside OpenSSL (the TPM's).
    public static func ecdsaDER(fromRaw raw: [UInt8], coordinateLength: Int) -> [UInt8]? {
        rawToDER(raw, width: coordinateLength)
    }
    public static func ecdsaRaw(fromDER der: [UInt8], key: AsymmetricKey) throws -> [UInt8] {
        guard case .ec(let curve) = key.kind else { return der }
        return try derToRaw(der, width: curve.coordinateLength)
    }

    /// SEQUENCE { r INTEGER, s INTEGER } (ECDSA-Sig-Value, Dss-Sig-Value) to r‖s of `width` bytes each.
    static func derToRaw(_ der: [UInt8], width: Int) throws -> [UInt8] {
        if let raw = rawFromDER(der, width: width) { return raw }
        var pointer: UnsafePointer<UInt8>?
        let parsed = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            pointer = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &pointer, buffer.count)
        }
        guard let signature = parsed else { throw CryptoError.library("d2i_ECDSA_SIG") }
        defer { ECDSA_SIG_free(signature) }
        var r = [UInt8](repeating: 0, count: width)
        var s = [UInt8](repeating: 0, count: width)
        guard BN_bn2binpad(ECDSA_SIG_get0_r(signature), &r, Int32(width)) == width,
              BN_bn2binpad(ECDSA_SIG_get0_s(signature), &s, Int32(width)) == width else {
            throw CryptoError.library("BN_bn2binpad")
        }
        return r + s
    }

    /// ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER } read by hand (OpenSSL's own output,
    /// so only DER's short and one-byte long lengths occur); nil sends it to the general parser.
    public static func rawFromDER(_ der: [UInt8], width: Int) -> [UInt8]? {
        var index = 0
        func length() -> Int? {
            guard index < der.count else { return nil }
            let first = Int(der[index])
            index += 1
            if first < 0x80 { return first }
            guard first == 0x81, index < der.count else { return nil }
            index += 1
            return Int(der[index - 1])
        }
        guard der.count >= 8, der[0] == 0x30 else { return nil }
        index = 1
        guard let total = length(), total == der.count - index else { return nil }
        var raw = [UInt8](repeating: 0, count: 2 * width)
        for part in 0..<2 {
            guard index < der.count, der[index] == 0x02 else { return nil }
            index += 1
            guard let count = length(), count > 0, count <= der.count - index else { return nil }
            var start = index
            var significant = count
            while significant > 1, der[start] == 0 { start += 1; significant -= 1 }
            guard significant <= width, der[start] & 0x80 == 0 || start > index else { return nil }
            for offset in 0..<significant { raw[part * width + width - significant + offset] = der[start + offset] }
            index += count
        }
        return index == der.count ? raw : nil
    }

    static func rawToDER(_ raw: [UInt8], width: Int) -> [UInt8]? {
        guard width > 0, raw.count == 2 * width else { return nil }
        guard let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        guard let r = BN_bin2bn(raw, Int32(width), nil) else { return nil }
        let sBytes = Array(raw[width...])
        guard let s = BN_bin2bn(sBytes, Int32(width), nil) else {
            BN_free(r)
            return nil
        }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(signature, &out)
        guard length > 0, let out else { return nil }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}

/// Which initialised context a key keeps: per scheme and direction.
struct ContextKey: Hashable {
    let scheme: SignatureScheme
    let signing: Bool
}

/// Initialised EVP_MD_CTX templates of one key, freed with the key. Guarded by its own lock,
/// since one key may serve several threads.
final class ContextTemplates: @unchecked Sendable {
    private var templates: [ContextKey: OpaquePointer] = [:]
    /// Initialised EVP_PKEY_CTX for the schemes that sign what they are given (no hashing), each
    /// owned by one operation at a time; a few per scheme, so that threads signing with one key
    /// at once each find one (with one kept, every other signature of a second thread made and
    /// freed a context: two threads signing P-256 ran at 1.5–1.65× one thread).
    /// Each remembers the thread that last used it, and a thread takes its own back when it can:
    /// a context handed between threads moves its memory between their caches every signature.
    private var idleKeyContexts: [ContextKey: [(context: OpaquePointer, thread: pthread_t)]] = [:]
    /// Initialised one-shot EVP_MD_CTX (EdDSA), likewise.
    private var idleDigestContexts: [ContextKey: [(context: OpaquePointer, thread: pthread_t)]] = [:]

    /// The context this thread used last if it is idle, else the one used last by any thread.
    private static func take(from idle: inout [(context: OpaquePointer, thread: pthread_t)]) -> OpaquePointer? {
        let me = pthread_self()
        if let index = idle.lastIndex(where: { pthread_equal($0.thread, me) != 0 }) { return idle.remove(at: index).context }
        return idle.popLast()?.context
    }
    /// Idle contexts kept per scheme: more threads than this make their own, as before.
    static let idleLimit = 8
    /// Threads signing with one key take and give back contexts here twice per signature: with a
    /// plain mutex a waiter slept, and two threads fell into taking turns (P-256: 1.5× one thread
    /// in some runs, 1.95× in others); `PThreadMutex` spins first.
    private let mutex = PThreadMutex()

    deinit {
        for template in templates.values { EVP_MD_CTX_free(template) }
        for idle in idleKeyContexts.values.joined() { EVP_PKEY_CTX_free(idle.context) }
        for idle in idleDigestContexts.values.joined() { EVP_MD_CTX_free(idle.context) }
    }

    /// Runs `body` with the template for `key` if there is one; false when there is none.
    func withTemplate(for key: ContextKey, _ body: (OpaquePointer) -> Bool) -> Bool {
        mutex.lock()
        defer { mutex.unlock() }
        guard let template = templates[key] else { return false }
        return body(template)
    }

    /// Takes the idle initialised key context for `key`, if there is one: the caller owns it
    /// until it gives it back.
    func takeIdleKeyContext(for key: ContextKey) -> OpaquePointer? {
        mutex.lock()
        defer { mutex.unlock() }
        return Self.take(from: &idleKeyContexts[key, default: []])
    }

    /// Keeps a key context that finished an operation cleanly (freed when `idleLimit` are kept).
    func putBack(keyContext context: OpaquePointer, for key: ContextKey) {
        mutex.lock()
        defer { mutex.unlock() }
        if idleKeyContexts[key, default: []].count < Self.idleLimit {
            idleKeyContexts[key, default: []].append((context, pthread_self()))
        } else {
            EVP_PKEY_CTX_free(context)
        }
    }

    /// The same for one-shot digest contexts (EdDSA).
    func takeIdleDigestContext(for key: ContextKey) -> OpaquePointer? {
        mutex.lock()
        defer { mutex.unlock() }
        return Self.take(from: &idleDigestContexts[key, default: []])
    }

    func putBack(digestContext context: OpaquePointer, for key: ContextKey) {
        mutex.lock()
        defer { mutex.unlock() }
        if idleDigestContexts[key, default: []].count < Self.idleLimit {
            idleDigestContexts[key, default: []].append((context, pthread_self()))
        } else {
            EVP_MD_CTX_free(context)
        }
    }

    /// Keeps a copy of a freshly initialised context (before any data went in).
    func store(copyOf context: OpaquePointer, for key: ContextKey) {
        guard let copy = EVP_MD_CTX_new() else { return }
        guard EVP_MD_CTX_copy_ex(copy, context) == 1 else {
            EVP_MD_CTX_free(copy)
            OpenSSLErrorQueue.discardOwn()
            return
        }
        mutex.lock()
        defer { mutex.unlock() }
        if let old = templates.updateValue(copy, forKey: key) { EVP_MD_CTX_free(old) }
    }
}
