internal import COpenSSL
import Glibc

/// One-shot digests and HMAC over OpenSSL's EVP interface.
public enum Digest {
    public enum Algorithm: Sendable, CaseIterable {
        case sha1, sha224, sha256, sha384, sha512, sha3_224, sha3_256, sha3_384, sha3_512
        /// Legacy (collisions are practical): offered only under the compatible key policy.
        case md5

        /// The EVP_MD fetched from our library context (never the host's default one).
        var md: OpaquePointer {
            get throws {
                guard let index = Self.order.firstIndex(of: self), let md = Self.fetched[index] ?? Fetched.digest(name) else {
                    throw CryptoError.library("no \(name) digest")
                }
                return md
            }
        }

        /// Every digest fetched once, at the first use of any: a legacy `EVP_sha256()` handle
        /// fetched its implementation again, from the host's default context, at each use.
        nonisolated(unsafe) private static let fetched: [OpaquePointer?] = order.map { Fetched.digest($0.name) }
        private static let order = allCases

        public var outputSize: Int {
            switch self {
            case .md5: return 16
            case .sha1: return 20
            case .sha224, .sha3_224: return 28
            case .sha256, .sha3_256: return 32
            case .sha384, .sha3_384: return 48
            case .sha512, .sha3_512: return 64
            }
        }

        /// OpenSSL's name, for EVP_MAC and parameter lists.
        public var name: String {
            switch self {
            case .md5: return "MD5"
            case .sha1: return "SHA1"
            case .sha224: return "SHA2-224"
            case .sha256: return "SHA2-256"
            case .sha384: return "SHA2-384"
            case .sha512: return "SHA2-512"
            case .sha3_224: return "SHA3-224"
            case .sha3_256: return "SHA3-256"
            case .sha3_384: return "SHA3-384"
            case .sha3_512: return "SHA3-512"
            }
        }
    }

    public static func hash(_ algorithm: Algorithm, _ data: UnsafeRawBufferPointer) throws -> [UInt8] {
        if algorithm == .sha1 || algorithm == .sha256 {
            // The direct functions (kc_sha1, kc_sha256): the same hashes without EVP's per-call setup.
            var out = [UInt8](repeating: 0, count: algorithm.outputSize)
            let input = (data.baseAddress ?? UnsafeRawPointer(bitPattern: 1))?.assumingMemoryBound(to: UInt8.self)
            let ok = algorithm == .sha1 ? kc_sha1(input, data.count, &out) : kc_sha256(input, data.count, &out)
            guard ok == 1 else { throw CryptoError.library(algorithm == .sha1 ? "SHA1" : "SHA256") }
            return out
        }
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_Digest(data.baseAddress ?? UnsafeRawPointer(bitPattern: 1), data.count, &out, &length, try algorithm.md, nil) == 1 else {
            throw CryptoError.library("EVP_Digest")
        }
        return Array(out.prefix(Int(length)))
    }

    public static func hash(_ algorithm: Algorithm, _ data: [UInt8]) throws -> [UInt8] {
        try data.withUnsafeBytes { try hash(algorithm, $0) }
    }

    /// SHAKE256(data) with `outputLength` bytes of output (FIPS 202).
    public static func shake256(_ data: [UInt8], outputLength: Int) throws -> [UInt8] {
        guard let md = Fetched.digest("SHAKE256"), let context = EVP_MD_CTX_new() else { throw CryptoError.library("no SHAKE256 digest") }
        defer { EVP_MD_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: outputLength)
        let ok = data.withUnsafeBytes { bytes in
            EVP_DigestInit_ex(context, md, nil) == 1 && EVP_DigestUpdate(context, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), bytes.count) == 1
                && EVP_DigestFinalXOF(context, &out, outputLength) == 1
        }
        guard ok else { throw CryptoError.library("SHAKE256") }
        return out
    }

    /// HMAC(key, data) with the given hash.
    public static func hmac(_ algorithm: Algorithm, key: UnsafeRawBufferPointer, data: UnsafeRawBufferPointer) throws -> [UInt8] {
        if algorithm == .sha256 {
            // Two hash states and four blocks (kc_hmac_sha256): HKDF, which derives every
            // record's key, spent 46 k instructions a record in OpenSSL's HMAC() for its two.
            var states = [UInt8](repeating: 0, count: kc_hmac_sha256_state_size())
            defer { wipe(&states) }
            var out = [UInt8](repeating: 0, count: 32)
            let ok = states.withUnsafeMutableBytes { state in
                kc_hmac_sha256_prepare(state.baseAddress, key.baseAddress?.assumingMemoryBound(to: UInt8.self), key.count) == 1 &&
                    kc_hmac_sha256(state.baseAddress, (data.baseAddress ?? UnsafeRawPointer(bitPattern: 1))?.assumingMemoryBound(to: UInt8.self),
                                   data.count, &out) == 1
            }
            guard ok else { throw CryptoError.library("HMAC-SHA-256") }
            return out
        }
        // EVP_Q_mac in our library context (HMAC() would fetch from the host's default one).
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length = 0
        let context = try OpenSSLContext.get()
        let keyPointer = key.baseAddress ?? UnsafeRawPointer(bitPattern: 1)
        let dataPointer = (data.baseAddress ?? UnsafeRawPointer(bitPattern: 1))?.assumingMemoryBound(to: UInt8.self)
        guard EVP_Q_mac(context, "HMAC", nil, algorithm.name, nil, keyPointer, key.count, dataPointer, data.count, &out, out.count, &length) != nil else {
            throw CryptoError.library("EVP_Q_mac(HMAC)")
        }
        defer { wipe(&out) }
        return Array(out.prefix(length))
    }

    public static func hmac(_ algorithm: Algorithm, key: SecureBytes, data: [UInt8]) throws -> [UInt8] {
        try key.withUnsafeBytes { k in try data.withUnsafeBytes { d in try hmac(algorithm, key: k, data: d) } }
    }
}

/// HMAC with one key for many messages: the key is processed once (and the algorithm fetched
/// once); each message works on a copy of that state. For the blind index, which digests every
/// searchable value of every search and every write.
public final class KeyedMAC: @unchecked Sendable {
    /// HMAC-SHA-256: the inner and outer hash states after the padded key (kc_hmac_sha256), on
    /// secure pages (they stand for the key).
    /// Two optionals, not an enum with two reference payloads: Swift would keep the case in the
    /// reference's spare bits, where LeakSanitizer sees no pointer (see `ReadyKey`).
    private let sha256States: SecureBytes?
    /// Any other hash: OpenSSL's EVP_MAC, a prepared context copied per message.
    private let evpContext: OpaquePointer?
    public let length: Int

    public init(key: SecureBytes, algorithm: Digest.Algorithm) throws {
        if algorithm == .sha256 {
            let states = SecureBytes(count: kc_hmac_sha256_state_size())
            let ok = key.withUnsafeBytes { k in
                states.withUnsafeMutableBytes { kc_hmac_sha256_prepare($0.baseAddress, k.baseAddress?.assumingMemoryBound(to: UInt8.self), k.count) }
            }
            guard ok == 1 else { throw CryptoError.library("SHA256_Init") }
            sha256States = states
            evpContext = nil
            length = 32
            return
        }
        guard let mac = Fetched.mac("HMAC") else { throw CryptoError.library("EVP_MAC_fetch(HMAC)") }
        guard let context = EVP_MAC_CTX_new(mac) else { throw CryptoError.library("EVP_MAC_CTX_new") }
        let ok = algorithm.name.withCString { name -> Bool in
            "digest".withCString { parameterName in
                guard let digestName = strdup(name) else { return false }
                defer { free(digestName) }
                var parameters = [OSSL_PARAM_construct_utf8_string(parameterName, digestName, 0), OSSL_PARAM_construct_end()]
                return key.withUnsafeBytes { k in
                    EVP_MAC_init(context, k.baseAddress?.assumingMemoryBound(to: UInt8.self), k.count, &parameters) == 1
                }
            }
        }
        guard ok else {
            EVP_MAC_CTX_free(context)
            throw CryptoError.library("EVP_MAC_init")
        }
        sha256States = nil
        evpContext = context
        length = EVP_MAC_CTX_get_mac_size(context)
    }

    deinit {
        if let evpContext { EVP_MAC_CTX_free(evpContext) }
    }

    public func mac(_ data: UnsafeRawBufferPointer) throws -> [UInt8] {
        let bytes = (data.baseAddress ?? UnsafeRawPointer(bitPattern: 1))?.assumingMemoryBound(to: UInt8.self)
        if let sha256States {
            var out = [UInt8](repeating: 0, count: 32)
            let ok = sha256States.withUnsafeBytes { kc_hmac_sha256($0.baseAddress, bytes, data.count, &out) }
            guard ok == 1 else { throw CryptoError.library("SHA256_Update") }
            return out
        }
        guard let evpContext, let context = EVP_MAC_CTX_dup(evpContext) else { throw CryptoError.library("EVP_MAC_CTX_dup") }
        defer { EVP_MAC_CTX_free(context) }
        guard EVP_MAC_update(context, bytes, data.count) == 1 else { throw CryptoError.library("EVP_MAC_update") }
        var out = [UInt8](repeating: 0, count: max(length, 1))
        var written = 0
        guard EVP_MAC_final(context, &out, &written, out.count) == 1 else { throw CryptoError.library("EVP_MAC_final") }
        return Array(out.prefix(written))
    }
}
