import CPKCS11
import KeychainCore
import KeychainCrypto

/// How a cipher mechanism processes data, built from its parameter.
enum CipherSpec {
    case symmetric(SymmetricCipher.Mode, iv: [UInt8], associatedData: [UInt8])
    case rsa(RSACipher.Padding)
}

/// How C_DeriveKey makes the new key's value.
enum Derivation {
    /// ECDH with CK_ECDH1_DERIVE_PARAMS.
    case ecdh
    /// PKCS #3 Diffie-Hellman with the other party's public value as the parameter.
    case diffieHellman
    /// The base key encrypts the parameter's data (CKM_AES_ECB_ENCRYPT_DATA, …_CBC_…, and the
    /// triple-DES ones).
    case encryptData(SymmetricCipher.Mode)
}

/// What a mechanism does, as data: C_GetMechanismList/Info and every *Init read this table.
/// A mechanism has one capability per kind of operation it serves; `flags` says which.
struct Mechanism: Sendable {
    typealias SchemeBuilder = @Sendable (MechanismParameter, AsymmetricKey) throws(CKError) -> SignatureScheme
    typealias CipherBuilder = @Sendable (MechanismParameter) throws(CKError) -> CipherSpec

    let type: CK_MECHANISM_TYPE
    let minimumKeySize: CK_ULONG
    let maximumKeySize: CK_ULONG
    let flags: CK_FLAGS
    /// Key types the mechanism takes (empty for digests).
    var keyTypes: Set<KeyType> = []
    var digest: Digest.Algorithm?
    var signature: SchemeBuilder?
    var mac: StreamingMAC.Algorithm?
    /// A _GENERAL MAC: its length comes as CK_MAC_GENERAL_PARAMS.
    var macLengthIsParameter = false
    var cipher: CipherBuilder?
    var generates: KeyType?
    /// C_GenerateKey makes domain parameters (CKO_DOMAIN_PARAMETERS) of `generates`, not a key.
    var generatesDomainParameters = false
    /// AES key wrap (the RSA wrapping mechanisms use their `cipher`).
    var keyWrap: KeyWrap.Mode?
    var derivation: Derivation?
    /// The block cipher of symmetric cipher, MAC and encrypt-data mechanisms.
    var blockCipher: SymmetricCipher.Algorithm = .aes

    /// CKF_HW is set on every mechanism: the operation runs inside the token (the module), with
    /// its keys, never in the calling application — which is what clients test the flag for.
    var info: CK_MECHANISM_INFO {
        CK_MECHANISM_INFO(ulMinKeySize: minimumKeySize, ulMaxKeySize: maximumKeySize, flags: flags | CK_FLAGS(CKF_HW))
    }

    func supports(_ flag: UInt) -> Bool { flags & CK_FLAGS(flag) != 0 }
}

/// The mechanism parameter as the caller passed it (pointer and length, checked when read).
struct MechanismParameter {
    let pointer: UnsafeRawPointer?
    let length: Int
    /// Keeps an owned copy of the bytes alive (see `CallerMechanism.ownedCopy`).
    var owner: OwnedBytes? = nil

    var isEmpty: Bool { pointer == nil || length == 0 }

    /// The parameter as a `T`, which requires exactly `MemoryLayout<T>.size` bytes.
    func read<T>(_ type: T.Type) throws(CKError) -> T {
        guard let pointer, length == MemoryLayout<T>.size else {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "the mechanism parameter must be a \(T.self) (\(MemoryLayout<T>.size) bytes)")
        }
        return pointer.loadUnaligned(as: T.self)
    }

    /// The parameter as raw bytes (an IV).
    var bytes: [UInt8] {
        guard let pointer, length > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: length))
    }

    func requireEmpty() throws(CKError) {
        guard isEmpty else { throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "this mechanism takes no parameter") }
    }
}

/// Bytes a caller's parameter structure points to, bounded like every other caller buffer.
func parameterBytes(_ pointer: UnsafeMutableRawPointer?, _ length: CK_ULONG, what: String) throws(CKError) -> [UInt8] {
    guard length > 0 else { return [] }
    guard let pointer, length <= CallerMechanism.maximumParameterLength else {
        throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "bad \(what)")
    }
    return Array(UnsafeRawBufferPointer(start: pointer, count: Int(length)))
}

/// A heap copy of a caller's bytes, freed with its last reference.
final class OwnedBytes {
    let buffer: UnsafeMutableRawBufferPointer

    init(copying source: UnsafeRawBufferPointer) {
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(source.count, 1), alignment: 16)
        if let base = source.baseAddress { buffer.baseAddress?.copyMemory(from: base, byteCount: source.count) }
    }

    deinit { buffer.deallocate() }
}
