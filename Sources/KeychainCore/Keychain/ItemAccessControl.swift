import KeychainCrypto
import KeychainStore

/// What an item needs before its secret may be read or used, beyond the protection class.
public enum ItemCredential: Equatable, Sendable {
    /// Nothing: the protection class decides.
    case none
    /// The user PIN, presented for this use (user presence on a password).
    case userPIN
    /// The item's application password (its secret is sealed under it).
    case applicationPassword
}

extension ObjectAttributes {
    public var accessControlFlags: AccessControlFlags {
        AccessControlFlags(rawValue: self[.accessControl].flatMap(AttributeValue.decodeULong) ?? 0)
    }

    /// Whether the item's secret parts are sealed under an application password.
    public var hasSealedSecrets: Bool { self[.sealedSecrets] != nil }

    /// The credential a data object (password) needs before its value is read. Keys ask through
    /// CKA_ALWAYS_AUTHENTICATE instead (the application password, when set, is that PIN).
    public var requiredCredential: ItemCredential {
        if hasSealedSecrets { return .applicationPassword }
        if objectClass == .data, !accessControlFlags.isDisjoint(with: .presence) { return .userPIN }
        return .none
    }

    /// The attributes without internal ones, as callers may see them.
    public var forCallers: ObjectAttributes {
        ObjectAttributes(values.filter { !$0.key.isInternal })
    }
}

/// Sealing an item's secret attributes under its application password: scrypt (at the keychain's
/// PIN cost) of the password, then HKDF bound to the item's unique ID. The seal sits inside the
/// item's record, so reading the secret needs both what opens the record (master key, device
/// key…) and the application password.
enum ApplicationPasswordSeal {
    private static let info = Array("keychain-pkcs11 application password".utf8)

    private static func key(_ password: UnsafeRawBufferPointer, verifier: PINVerifier, uniqueID: [UInt8]) throws -> SecureBytes {
        try KeyDerivation.hkdf(key: try verifier.keyEncryptionKey(pin: password), salt: uniqueID, info: info)
    }

    /// Moves the secret attributes of `object` into the seal; `object` keeps the rest.
    static func seal(_ object: inout ObjectAttributes, password: [UInt8], kdf: ScryptParameters) throws(KeychainError) {
        guard !password.isEmpty, password.count <= PINPolicy.maximumLength else {
            throw KeychainError(.attributeValueInvalid, "an application password has 1 to \(PINPolicy.maximumLength) bytes")
        }
        guard object.isToken else {
            throw KeychainError(.templateInconsistent, "an application password applies to token objects")
        }
        let secretTypes = object.values.keys.filter { AttributeTable.rule($0)?.flags.contains(.sensitive) == true }
        guard !secretTypes.isEmpty, let uniqueID = object[.uniqueID] else {
            throw KeychainError(.templateInconsistent, "an application password needs a secret to protect")
        }
        var plaintext = AttributeRecord.encode(secretTypes.sorted().map { (type: UInt64($0.rawValue), value: object[$0] ?? []) })
        defer { wipe(&plaintext) }
        let sealed = try translatingErrors { () throws -> (verifier: PINVerifier, box: [UInt8]) in
            let verifier = try PINVerifier.new(parameters: kdf)
            let box = try password.withUnsafeBytes { p in
                try AESGCM.seal(SecureBytes(plaintext), key: try key(p, verifier: verifier, uniqueID: uniqueID), associatedData: info + uniqueID)
            }
            return (verifier, box)
        }
        for type in secretTypes { object[type] = nil }
        object[.sealedSecrets] = sealed.box
        object[.applicationPasswordKDF] = sealed.verifier.encoded
        var flags = object.accessControlFlags
        flags.insert(.applicationPassword)
        object[.accessControl] = AttributeValue.ulong(flags.rawValue)
    }

    /// The item with its secret attributes restored; a wrong password is `.pinIncorrect`.
    static func open(_ object: ObjectAttributes, password: UnsafeRawBufferPointer) throws(KeychainError) -> ObjectAttributes {
        guard let box = object[.sealedSecrets], let parameters = object[.applicationPasswordKDF], let uniqueID = object[.uniqueID] else {
            return object
        }
        guard password.count <= PINPolicy.maximumLength else { throw KeychainError(.pinIncorrect, "wrong application password") }
        let verifier = try PINVerifier(encoded: parameters)
        let plaintext: SecureBytes
        do {
            plaintext = try AESGCM.open(box, key: try key(password, verifier: verifier, uniqueID: uniqueID), associatedData: info + uniqueID)
        } catch let error as CryptoError where error.code == .authenticationFailed {
            throw KeychainError(.pinIncorrect, "wrong application password")
        } catch {
            throw KeychainError(error)
        }
        let secrets = try translatingErrors { try plaintext.withUnsafeBytes { try AttributeRecord.decode($0) } }
        var revealed = object
        for (type, value) in secrets { revealed[AttributeType(UInt(truncatingIfNeeded: type))] = value }
        revealed[.sealedSecrets] = nil
        revealed[.applicationPasswordKDF] = nil
        return revealed
    }
}

extension Keychain {
    /// For an item whose access control is user presence `.or` an application password: whether
    /// `password` is that password (counted like `reveal`; wrong: `.pinIncorrect`).
    public func checkAlternative(_ object: ObjectAttributes, applicationPassword password: UnsafeRawBufferPointer) throws(KeychainError) {
        guard let seal = object[.alternativeSeal], let kdf = object[.alternativeSealKDF] else {
            throw KeychainError(.actionProhibited, "the item has no application password")
        }
        var probe = object
        probe[.sealedSecrets] = seal
        probe[.applicationPasswordKDF] = kdf
        var opened = try reveal(probe, applicationPassword: password)
        opened.wipeValues()
    }

    /// `object` with the secret its application password seals, checked against `password`.
    /// Each attempt is counted against the item's failure counter before the password is evaluated
    /// (as PINs are); at the keychain's limit the item's password locks until the SO re-sets the
    /// user PIN.
    public func reveal(_ object: ObjectAttributes, applicationPassword password: UnsafeRawBufferPointer) throws(KeychainError) -> ObjectAttributes {
        guard object[.sealedSecrets] != nil else { return object }
        guard let uniqueID = object[.uniqueID] else { throw KeychainError(.recordCorrupted, "an item with an application password has no unique ID") }
        let counter = Meta.applicationPasswordFailures(uniqueID)
        let attempt = try lock.withLock { () throws(KeychainError) in
            try beginAttempt(counter, locked: "this item's application password is locked (too many wrong entries): the SO unlocks it by re-setting the user PIN")
        }
        // Counted: the password's KDF runs with the lock let go.
        do {
            let revealed = try ApplicationPasswordSeal.open(object, password: password)
            lock.withLock { finishAttempt(attempt, right: true) }
            return revealed
        } catch {
            lock.withLock { finishAttempt(attempt, right: false) }
            throw error
        }
    }
}
