import KeychainCrypto
import KeychainStore
import KeychainTPM

/// What a keychain keeps of a key made inside the TPM — and what CryptoKit's
/// `SecureEnclave.P256…PrivateKey.dataRepresentation` is: the TPM's wrapped key plus what ties
/// its use to one keychain and to the access control it was made with.
///
/// Format, version 2 (written): `"KCSE"` ‖ `02` ‖ length of the keychain's serial (1 byte) ‖ the
/// serial (its 16 hexadecimal digits, as C_GetTokenInfo shows them) ‖ access-control flags
/// (8 bytes, big-endian: `AccessControlFlags`, which are `SecAccessControlCreateFlags`) ‖ salt
/// (32 bytes) ‖ tag (16 bytes) ‖ the TPM blob (`TPMBlob`: only the TPM that made it can load it).
/// Version 1 (still read) has no flags and no tag.
///
/// The key's TPM authorisation is HKDF-SHA-256(the keychain's master key, salt,
/// "keychain-pkcs11 tpm key auth" ‖ the flags): the blob and the TPM sign nothing without the
/// unlocked keychain, the blob of another keychain's key cannot borrow this one's master key
/// (another salt, checked serial), and flags edited in the blob — a presence requirement
/// removed — give another authorisation, which the TPM refuses. The tag, HMAC-SHA-256 under a key
/// HKDF draws from the master key and salt ("keychain-pkcs11 tpm key check"), over every other
/// byte, lets the keychain refuse an edited blob when it is loaded, before the TPM sees it.
public struct EnclaveKeyBlob: Sendable, Equatable {
    static let magic: [UInt8] = Array("KCSE".utf8)
    static let version: UInt8 = 2
    static let saltLength = 32
    static let tagLength = 16
    static let flagsLength = 8

    public let keychainSerial: String
    /// What the key asks at each use (a presence check), bound into its authorisation; empty in
    /// version-1 blobs and for keys whose stored item carries the access control (PKCS#11, SecKey).
    public let accessFlags: AccessControlFlags
    public let salt: [UInt8]
    /// Version 2's check value over the other bytes; nil for a version-1 blob.
    let tag: [UInt8]?
    public let tpmBlob: TPMBlob

    init(keychainSerial: String, accessFlags: AccessControlFlags, salt: [UInt8], tag: [UInt8]?, tpmBlob: TPMBlob) {
        self.keychainSerial = keychainSerial
        self.accessFlags = accessFlags
        self.salt = salt
        self.tag = tag
        self.tpmBlob = tpmBlob
    }

    public var bytes: [UInt8] {
        guard let tag else { return Self.magic + [1] + serialField + salt + tpmBlob.bytes }
        return Self.magic + [Self.version] + serialField + flagsField + salt + tag + tpmBlob.bytes
    }

    /// Every byte of the version-2 form but the tag: what the tag covers.
    var checkedBytes: [UInt8] { Self.magic + [Self.version] + serialField + flagsField + salt + tpmBlob.bytes }

    /// What HKDF's info carries for the TPM authorisation: the label and, from version 2, the flags.
    var authInfo: [UInt8] { Self.authInfo(tag == nil ? nil : accessFlags) }

    /// HKDF's info for a blob with `flags` (nil: version 1, the label alone).
    static func authInfo(_ flags: AccessControlFlags?) -> [UInt8] {
        Array("keychain-pkcs11 tpm key auth".utf8) + (flags.map(flagsField) ?? [])
    }

    private var serialField: [UInt8] { [UInt8(keychainSerial.utf8.count)] + Array(keychainSerial.utf8) }
    private var flagsField: [UInt8] { Self.flagsField(accessFlags) }
    private static func flagsField(_ flags: AccessControlFlags) -> [UInt8] {
        (0..<flagsLength).reversed().map { UInt8(truncatingIfNeeded: UInt64(flags.rawValue) >> ($0 * 8)) }
    }

    /// Reads a blob; anything but a whole one of version 1 or 2 (holding a key) is refused.
    public init(bytes: [UInt8]) throws(KeychainError) {
        let header = Self.magic.count + 2
        guard bytes.count > header, bytes.starts(with: Self.magic) else {
            throw KeychainError(.argumentsBad, "not a TPM key of this keychain (no KCSE header)")
        }
        let version = bytes[Self.magic.count]
        guard version == 1 || version == Self.version else {
            throw KeychainError(.argumentsBad, "TPM key format \(version) is not 1 or \(Self.version)")
        }
        let serialLength = Int(bytes[Self.magic.count + 1])
        let fixed = version == 1 ? Self.saltLength : Self.flagsLength + Self.saltLength + Self.tagLength
        guard serialLength > 0, bytes.count > header + serialLength + fixed else {
            throw KeychainError(.argumentsBad, "the TPM key is cut short")
        }
        let serial = Array(bytes[header..<(header + serialLength)])
        guard serial.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) || (0x41...0x46).contains($0) }) else {
            throw KeychainError(.argumentsBad, "the TPM key names no keychain serial")
        }
        keychainSerial = String(decoding: serial, as: UTF8.self)
        var offset = header + serialLength
        if version == 1 {
            accessFlags = []
        } else {
            let raw = bytes[offset..<(offset + Self.flagsLength)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            guard let value = UInt(exactly: raw) else { throw KeychainError(.argumentsBad, "the TPM key's access-control flags are out of range") }
            accessFlags = AccessControlFlags(rawValue: value)
            offset += Self.flagsLength
        }
        salt = Array(bytes[offset..<(offset + Self.saltLength)])
        offset += Self.saltLength
        if version == 1 {
            tag = nil
        } else {
            tag = Array(bytes[offset..<(offset + Self.tagLength)])
            offset += Self.tagLength
        }
        do {
            tpmBlob = try TPMBlob(bytes: Array(bytes[offset...]))
        } catch {
            throw KeychainError(.argumentsBad, "the TPM key's blob: \(error.reason)")
        }
        guard tpmBlob.kind == .key, tpmBlob.keyType != nil else { throw KeychainError(.argumentsBad, "the TPM blob holds no key") }
    }

    /// The blob a key object keeps (`CKA_KC_TPM` objects), nil for other objects.
    public init?(of object: ObjectAttributes) throws(KeychainError) {
        guard object.bool(.tpm), let bytes = object[.tpmBlob] else { return nil }
        try self.init(bytes: bytes)
    }
}

/// A key loaded in the TPM, ready to sign or agree keys there; its public half in OpenSSL's form.
///
/// A connection closed under it (timeout, TPM restarted) is replaced: the next operation loads the
/// key again into the process's new connection, once.
public final class EnclaveKey: @unchecked Sendable {
    public let blob: EnclaveKeyBlob
    public let type: TPMKeyType
    /// The public key (verification, CKA_EC_POINT, SubjectPublicKeyInfo).
    public let publicKey: AsymmetricKey
    private let authValue: SecureBytes
    private let lock = PThreadMutex(.plain)
    /// The key's object in the TPM; nil after `unload` (another key needed the slot) until the
    /// next use loads it again.
    private var loaded: TPMKey?

    init(blob: EnclaveKeyBlob, authValue: SecureBytes) throws(KeychainError) {
        guard let type = blob.tpmBlob.keyType, let tpmPublic = blob.tpmBlob.publicKey else {
            throw KeychainError(.argumentsBad, "the TPM blob holds no key")
        }
        self.blob = blob
        self.type = type
        self.authValue = authValue
        publicKey = try Self.publicKey(tpmPublic)
        loaded = try load()
    }

    /// Loads the key into the process's connection (making room if the TPM is full).
    private func load() throws(KeychainError) -> TPMKey {
        let connection = try EnclaveTPM.connection()
        let key: TPMKey
        do {
            key = try EnclaveTPM.withRoom(keeping: self) { () throws(TPMError) in try connection.loadKey(blob.tpmBlob, authValue: authValue) }
        } catch {
            throw KeychainError(tpm: error, "cannot load the key into the TPM (a key made by another TPM, or a damaged blob)")
        }
        EnclaveTPM.register(self)
        return key
    }

    /// Lets go of the key's object in the TPM (flushed when the last operation using it ends).
    func unload() {
        let dropped = lock.withLock { () -> TPMKey? in
            let current = loaded
            loaded = nil
            return current
        }
        _ = dropped // flushed here, outside the lock, when this is the last reference
    }

    static func publicKey(_ key: TPMPublicKey) throws(KeychainError) -> AsymmetricKey {
        do {
            switch key {
            case .ec(let type, let point): return try AsymmetricKey.ec(type == .ecP384 ? .p384 : .p256, point: point, scalar: nil)
            case .rsa(let modulus, let exponent): return try AsymmetricKey.rsa(RSAComponents(modulus: modulus, publicExponent: exponent))
            }
        } catch {
            throw KeychainError(.recordCorrupted, "the TPM key's public half is not a valid key: \(error)")
        }
    }

    /// Runs `body` on the loaded key; after a transport failure, loads the key again into a new
    /// connection and runs it once more.
    private func run<R>(_ what: String, _ body: (TPMKey) throws(TPMError) -> R) throws(KeychainError) -> R {
        let key: TPMKey
        if let current = lock.withLock({ loaded }) {
            key = current
        } else {
            key = try load()
            lock.withLock { loaded = key }
        }
        do { return try body(key) } catch where error.code.isTransportFailure || error.code == .connectionClosed {
            let fresh = try load()
            lock.withLock { loaded = fresh }
            do { return try body(fresh) } catch { throw KeychainError(tpm: error, what) }
        } catch {
            throw KeychainError(tpm: error, what)
        }
    }

    /// Signs a digest in the TPM: ECDSA r‖s, or RSASSA-PKCS1-v1_5 over a digest of 20, 32, 48
    /// or 64 bytes (its hash named by its length).
    public func sign(digest: [UInt8]) throws(KeychainError) -> [UInt8] {
        try run("signing in the TPM") { (key: TPMKey) throws(TPMError) in try key.sign(digest: digest) }
    }

    /// ECDSA in the TPM over any value, read as ECDSA reads it (FIPS 186-5 §6.4.1, SEC 1 §4.1.3
    /// step 5): fitted to the order's length — its leftmost bytes, or the shorter value
    /// left-padded with zeros (the same integer) — 32 bytes on P-256, 48 on P-384. r‖s.
    public func signECDSA(_ value: [UInt8]) throws(KeychainError) -> [UInt8] {
        guard case .ec(let curve) = publicKey.kind else { throw KeychainError(.argumentsBad, "ECDSA needs an EC key") }
        let length = curve.coordinateLength // P-256's and P-384's orders are as long as their coordinates
        let fitted = value.count >= length ? Array(value.prefix(length)) : [UInt8](repeating: 0, count: length - value.count) + value
        return try sign(digest: fitted)
    }

    /// ECDH in the TPM: the x-coordinate of the shared point with the peer's X9.62 uncompressed point.
    public func sharedSecret(peerPoint: [UInt8]) throws(KeychainError) -> SecureBytes {
        try run("key agreement in the TPM") { (key: TPMKey) throws(TPMError) in try key.sharedSecret(peerPoint: peerPoint) }
    }
}

extension Keychain {
    /// The keychain's serial number (16 hexadecimal digits), as CK_TOKEN_INFO shows it.
    public func serialNumber() throws(KeychainError) -> String {
        try lock.withLock { () throws(KeychainError) in
            String(decoding: try translatingErrors { try store.metaBlob(Meta.serial) } ?? [], as: UTF8.self)
        }
    }

    /// The TPM authorisation of one of this keychain's TPM keys (its salt, and its flags in version 2).
    static func enclaveAuthValue(for blob: EnclaveKeyBlob, master: MasterKey) throws(KeychainError) -> SecureBytes {
        try enclaveAuthValue(salt: blob.salt, info: blob.authInfo, master: master)
    }

    private static func enclaveAuthValue(salt: [UInt8], info: [UInt8], master: MasterKey) throws(KeychainError) -> SecureBytes {
        do { return try KeyDerivation.hkdf(key: master.key, salt: salt, info: info, length: 32) } catch {
            throw KeychainError(.storageFailure, "cannot derive the TPM key's authorisation: \(error)")
        }
    }

    /// The tag of a version-2 blob (see `EnclaveKeyBlob`).
    static func enclaveTag(for blob: EnclaveKeyBlob, master: MasterKey) throws(KeychainError) -> SecureBytes {
        do {
            let key = try KeyDerivation.hkdf(key: master.key, salt: blob.salt, info: Array("keychain-pkcs11 tpm key check".utf8), length: 32)
            return SecureBytes(try Digest.hmac(.sha256, key: key, data: blob.checkedBytes).prefix(EnclaveKeyBlob.tagLength))
        } catch {
            throw KeychainError(.storageFailure, "cannot compute the TPM key's check value: \(error)")
        }
    }

    /// Makes a key inside the TPM for this keychain (the caller stores it: `KeyGeneration.enclaveObjects`),
    /// `accessFlags` bound into its authorisation (CryptoKit's access control; empty where a stored
    /// item carries it). Needs the unlocked master key; `.tpmUnavailable` without a TPM.
    public func createEnclaveKey(_ type: TPMKeyType, master: MasterKey, accessFlags: AccessControlFlags = []) throws(KeychainError) -> EnclaveKey {
        let serial = try serialNumber()
        let salt: [UInt8]
        do { salt = try Random.bytes(EnclaveKeyBlob.saltLength) } catch { throw KeychainError(.storageFailure, "random generator failed") }
        let authValue = try Self.enclaveAuthValue(salt: salt, info: EnclaveKeyBlob.authInfo(accessFlags), master: master)
        let connection = try EnclaveTPM.connection()
        let tpmBlob: TPMBlob
        do { tpmBlob = try EnclaveTPM.withRoom { () throws(TPMError) in try connection.createKey(type, authValue: authValue) } } catch {
            throw KeychainError(tpm: error, "cannot make the key in the TPM")
        }
        let untagged = EnclaveKeyBlob(keychainSerial: serial, accessFlags: accessFlags, salt: salt, tag: [], tpmBlob: tpmBlob) // version 2, tag to come
        let tag = try Self.enclaveTag(for: untagged, master: master)
        let blob = EnclaveKeyBlob(keychainSerial: serial, accessFlags: accessFlags, salt: salt, tag: tag.bytes, tpmBlob: tpmBlob)
        return try EnclaveKey(blob: blob, authValue: authValue)
    }

    /// Loads one of this keychain's TPM keys (a stored object's blob, or a CryptoKit
    /// `dataRepresentation`). A blob of another keychain is `.objectNotFound`; a version-2 blob
    /// whose tag does not match (edited flags or blob, or another master key) is `.recordCorrupted`;
    /// one made by another TPM, or whose authorisation does not come from this master key, is `.tpmFailure`.
    public func loadEnclaveKey(_ blob: EnclaveKeyBlob, master: MasterKey) throws(KeychainError) -> EnclaveKey {
        guard blob.keychainSerial == (try serialNumber()) else {
            throw KeychainError(.objectNotFound, "the TPM key belongs to another keychain (serial \(blob.keychainSerial))")
        }
        if let tag = blob.tag {
            guard try Self.enclaveTag(for: blob, master: master).constantTimeEquals(SecureBytes(tag)) else {
                throw KeychainError(.recordCorrupted, "the TPM key's data was altered: its access control or its blob is not what this keychain made")
            }
        }
        return try EnclaveKey(blob: blob, authValue: Self.enclaveAuthValue(for: blob, master: master))
    }
}
