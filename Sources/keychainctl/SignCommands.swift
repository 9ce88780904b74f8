import ArgumentParser
import Glibc
import KeychainCore
import KeychainCrypto

// `sign` and `verify-signature`: ML-DSA signatures (FIPS 204) of a file with a keychain key, so
// that a person can try a post-quantum key without a PKCS#11 3.2 program. The key is held to the
// module's rules for CKM_ML_DSA: its class and type, CKA_SIGN or CKA_VERIFY, CKA_ALLOWED_MECHANISMS.
// (`verify` is taken: it checks a keychain file.)

struct Sign: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Sign a file with an ML-DSA private key of the keychain.",
        discussion: """
        Writes the FIPS 204 signature (hedged, so each run gives another one; 3309 bytes for ML-DSA-65, \
        4627 for ML-DSA-87) to the -o file. --context binds the signature to a context string of up to \
        255 bytes: it verifies only with the same context. The file is read whole (16 MiB at most).

        The key is named as for 'show' (a private key unless --type or the URI says otherwise). RSA, \
        EC and Ed25519 keys sign through the module (pkcs11-tool --sign, OpenSSL's pkcs11 provider), \
        and so do keys that ask for the PIN at each use (--access-control).

        Examples:
          keychainctl sign --label release-signing -i release.tar.gz \\
              -o release.tar.gz.sig
          keychainctl sign 'pkcs11:object=release-signing;type=private' \\
              --context v1 -o message.sig < message.txt
        """
    )

    @OptionGroup var selection: KeychainOptions
    @OptionGroup var selector: ItemSelector

    @Option(name: [.customShort("i"), .long], help: ArgumentHelp("The file to sign (default: standard input).", valueName: "file"))
    var input: String?

    @Option(name: [.customShort("o"), .long], help: ArgumentHelp("Write the signature to this file (default: standard output, when it is not a terminal).", valueName: "file"))
    var output: String?

    @Option(help: ArgumentHelp("The ML-DSA context string, 0 to 255 bytes (default: empty).", valueName: "text"))
    var context: String?

    func validate() throws {
        guard !selector.isEmpty else { throw ValidationError("name the key by URI, --label, --id or --type") }
        try SignatureKey.validate(context: context)
    }

    func run() throws {
        if output == nil || output == "-", isatty(STDOUT_FILENO) == 1 { throw fail("binary output: give -o FILE.", status: ExitStatus.usage) }
        let input = input ?? "-"
        if input == "-", selection.pinFile == "-" {
            throw fail("standard input cannot carry both the PIN and the data to sign: give the data with -i FILE.", status: ExitStatus.usage)
        }
        var message = try readInput(input)
        defer { wipe(&message) }
        let open = try selector.keychain(selection)
        try open.unlock()
        let item = try SignatureKey.select(selector, defaultKind: .privateKey, in: open)
        let set = try SignatureKey.check(item, usage: .sign)
        if item.object.bool(.alwaysAuthenticate) {
            throw fail("the key '\(item.label)' asks for the PIN at each use (access control): sign with it through the module "
                       + "(pkcs11-tool --sign), which asks for it.", status: ExitStatus.notPermitted)
        }
        let key = try open.run { () throws(KeychainError) in try KeyFactory.latticeKey(of: item.object) }
        let signature: [UInt8]
        do {
            signature = try message.withUnsafeBytes { bytes in try key.sign(bytes, context: Array((context ?? "").utf8)) }
        } catch let error as CryptoError {
            throw fail("signing failed: \(error.reason).", status: ExitStatus.failure)
        }
        try writeOutput(signature, to: output, secret: false)
        if let output, output != "-" {
            print("Signed \(printable(SignatureKey.name(input))) with \(set.name) key '\(printable(item.label))': "
                  + "\(signature.count)-byte signature in \(printable(output)).")
        }
    }
}

struct VerifySignature: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-signature",
        abstract: "Check an ML-DSA signature of a file with a key of the keychain.",
        discussion: """
        Exit status 0 and "Good signature: …" when the signature is the key's over the file (with the \
        same --context it was made with), 1 and "bad signature: …" otherwise. The key is named as \
        for 'show' (a public key unless --type or the URI says otherwise; a private key's public \
        half serves too); the PIN is asked only when no item visible without it matches.

        Examples:
          keychainctl verify-signature --label release-signing \\
              -i release.tar.gz --signature release.tar.gz.sig
        """
    )

    @OptionGroup var selection: KeychainOptions
    @OptionGroup var selector: ItemSelector

    @Option(name: [.customShort("i"), .long], help: ArgumentHelp("The signed file (default: standard input).", valueName: "file"))
    var input: String?

    @Option(help: ArgumentHelp("The signature, as 'sign' wrote it.", valueName: "file"))
    var signature: String

    @Option(help: ArgumentHelp("The ML-DSA context string the signature was made with (default: empty).", valueName: "text"))
    var context: String?

    func validate() throws {
        guard !selector.isEmpty else { throw ValidationError("name the key by URI, --label, --id or --type") }
        try SignatureKey.validate(context: context)
    }

    func run() throws {
        let input = input ?? "-"
        if input == "-", signature == "-" {
            throw fail("standard input cannot carry both the data and the signature: give one of them as a file.", status: ExitStatus.usage)
        }
        let message = try readInput(input)
        let signatureBytes = try readInput(signature)
        let open = try selector.keychain(selection)
        if try SignatureKey.items(selector, defaultKind: .publicKey, in: open).isEmpty { try open.unlock() }
        let item = try SignatureKey.select(selector, defaultKind: .publicKey, in: open)
        let set = try SignatureKey.check(item, usage: .verify)
        let key: LatticeKey
        if item.object.objectClass == .privateKey {
            guard let info = item.object[.publicKeyInfo], let half = try? LatticeKey.publicKey(subjectPublicKeyInfo: info) else {
                throw fail("the key '\(item.label)' has no readable public key (CKA_PUBLIC_KEY_INFO).", status: ExitStatus.storage)
            }
            key = half
        } else {
            key = try open.run { () throws(KeychainError) in try KeyFactory.latticeKey(of: item.object) }
        }
        let valid: Bool
        do {
            valid = try message.withUnsafeBytes { bytes in try key.verify(signatureBytes, message: bytes, context: Array((context ?? "").utf8)) }
        } catch let error as CryptoError {
            throw fail("cannot verify: \(error.reason).", status: ExitStatus.failure)
        }
        let what = "\(set.name) key '\(item.label)'"
        guard valid else {
            let context = self.context.map { "context '\($0)'" } ?? "empty context"
            throw fail("bad signature: \(signature) does not sign \(SignatureKey.name(input)) (\(what), \(context)).", status: ExitStatus.failure)
        }
        let note = context.map { ", context '\(printable($0))'" } ?? ""
        print("Good signature: \(printable(signature)) signs \(printable(SignatureKey.name(input))) (\(set.name) key '\(printable(item.label))'\(note)).")
    }
}

/// Finding and checking the key `sign` and `verify-signature` use.
enum SignatureKey {
    static func validate(context: String?) throws {
        if let context, context.utf8.count > 255 {
            throw ValidationError("--context takes at most 255 bytes (FIPS 204), not \(context.utf8.count)")
        }
    }

    /// "standard input" for '-', else the file name.
    static func name(_ input: String) -> String { input == "-" ? "standard input" : input }

    /// The selector, of `defaultKind` unless --type or the URI's type= names a kind.
    private static func narrowed(_ selector: ItemSelector, defaultKind: ItemKind) throws -> ItemSelector {
        var narrowed = selector
        if selector.type == nil, try selector.parsedURI()?.string("type") == nil { narrowed.type = defaultKind }
        return narrowed
    }

    static func items(_ selector: ItemSelector, defaultKind: ItemKind, in open: OpenKeychain) throws -> [ItemDescription] {
        try narrowed(selector, defaultKind: defaultKind).items(in: open)
    }

    /// The one key the selection names, or a message saying none or several match.
    static func select(_ selector: ItemSelector, defaultKind: ItemKind, in open: OpenKeychain) throws -> ItemDescription {
        try narrowed(selector, defaultKind: defaultKind).single(in: open)
    }

    /// The key's parameter set, when it is an ML-DSA key of the right class that allows `usage`
    /// (CKA_SIGN on a private key, CKA_VERIFY on a public one) and CKM_ML_DSA.
    static func check(_ item: ItemDescription, usage: AttributeType) throws -> LatticeParameterSet {
        let object = item.object
        let signing = usage == .sign
        guard object.objectClass == .privateKey || (!signing && object.objectClass == .publicKey) else {
            throw fail("'\(item.label)' is a \(item.kind): \(signing ? "signing needs a private key" : "verifying needs a public or private key").",
                       status: ExitStatus.usage)
        }
        guard object.keyType == .mlDSA, let set = LatticeKeys.parameterSet(of: object) else {
            if object.keyType == .mlKEM {
                throw fail("'\(item.label)' is an \(item.algorithm ?? "ML-KEM") key: it encapsulates keys, it does not sign.", status: ExitStatus.usage)
            }
            throw fail("'\(item.label)' is \(item.algorithm.map { "an \($0)" } ?? "not an ML-DSA") key: keychainctl \(signing ? "signs" : "verifies") "
                       + "with ML-DSA keys; use the module for others (pkcs11-tool, OpenSSL's pkcs11 provider).", status: ExitStatus.usage)
        }
        if object.objectClass == usage.keyClass, !object.bool(usage) {
            throw fail("the key '\(item.label)' may not \(signing ? "sign" : "verify") (\(signing ? "CKA_SIGN" : "CKA_VERIFY") is false).", status: ExitStatus.notPermitted)
        }
        if let allowed = object[.allowedMechanisms], !allowed.isEmpty {
            let mechanisms = stride(from: 0, to: allowed.count, by: AttributeValue.ulongSize).compactMap {
                AttributeValue.decodeULong(Array(allowed[$0..<min($0 + AttributeValue.ulongSize, allowed.count)]))
            }
            guard mechanisms.contains(LatticeKeys.signatureMechanism) else {
                throw fail("the key '\(item.label)' does not allow CKM_ML_DSA (CKA_ALLOWED_MECHANISMS).", status: ExitStatus.notPermitted)
            }
        }
        return set
    }
}

private extension AttributeType {
    /// The key class whose usage flag this is: CKA_SIGN on private keys, CKA_VERIFY on public ones.
    var keyClass: ObjectClass { self == .sign ? .privateKey : .publicKey }
}
