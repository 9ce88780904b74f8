import ArgumentParser
import Glibc
import KeychainCore
import KeychainCrypto

/// Key algorithms `generate-key` makes.
enum KeyAlgorithm: String, ExpressibleByArgument, CaseIterable {
    case rsa, ec, ed25519
    case mlDSA44 = "ml-dsa-44", mlDSA65 = "ml-dsa-65", mlDSA87 = "ml-dsa-87"
    case mlKEM512 = "ml-kem-512", mlKEM768 = "ml-kem-768", mlKEM1024 = "ml-kem-1024"

    /// The ML-DSA or ML-KEM parameter set (nil for RSA, EC and Ed25519).
    var parameterSet: LatticeParameterSet? {
        switch self {
        case .rsa, .ec, .ed25519: return nil
        case .mlDSA44: return .mlDSA44
        case .mlDSA65: return .mlDSA65
        case .mlDSA87: return .mlDSA87
        case .mlKEM512: return .mlKEM512
        case .mlKEM768: return .mlKEM768
        case .mlKEM1024: return .mlKEM1024
        }
    }

    /// Help and completions offer what the library makes; ML-DSA-44 and ML-KEM-512 are still
    /// accepted, to be refused with a message that says why.
    static var allValueStrings: [String] { allCases.filter { $0.parameterSet?.isOffered ?? true }.map(\.rawValue) }
    static var defaultCompletionKind: CompletionKind { .list(allValueStrings) }
}

enum CurveChoice: String, ExpressibleByArgument, CaseIterable {
    case p256, p384, p521

    var curve: Curve {
        switch self {
        case .p256: return .p256
        case .p384: return .p384
        case .p521: return .p521
        }
    }
}

/// Storing keys and certificates: the templates `generate-key` and `import` share.
enum KeyStorage {
    /// PKCS#11 key-pair generation mechanisms (CKM_RSA_PKCS_KEY_PAIR_GEN, CKM_EC_KEY_PAIR_GEN, CKM_EC_EDWARDS_KEY_PAIR_GEN).
    static func mechanism(_ kind: AsymmetricKind) -> UInt {
        switch kind {
        case .rsa: return 0x0
        case .ec: return 0x1040
        case .ed25519, .ed448: return 0x1055
        case .x25519, .x448: return 0x1056
        case .dsa: return 0x10
        case .dh: return 0x20
        }
    }

    /// The private-key policy attributes: label, ID, token, never-extractable unless asked, plus
    /// access control and --sync (`inTPM`: a key made in the TPM, which never syncs).
    static func privateTemplate(label: String, id: [UInt8]?, extractable: Bool, access: AccessOptions, inTPM: Bool = false) throws -> Template {
        // A keychain key item (as SecItemAdd makes): Apple's primary key refuses the same key twice.
        var template: Template = [(.token, AttributeValue.bool(true)), (.label, Array(label.utf8)), (.itemClass, AttributeValue.ulong(ItemClass.key.rawValue))]
        if let id { template.append((.id, id)) }
        let controlled = try access.template(defaultClass: .whenUnlocked, item: .privateKey, inTPM: inTPM)
        if !controlled.contains(where: { $0.type == .sensitive }) {
            template += [(.sensitive, AttributeValue.bool(!extractable)), (.extractable, AttributeValue.bool(extractable))]
        } else if extractable {
            throw fail("--extractable cannot be combined with access-control constraints (such keys never leave).", status: ExitStatus.usage)
        }
        return template + controlled
    }

    static func parseID(_ text: String?) throws -> [UInt8]? {
        guard let text else { return nil }
        guard let bytes = Hex.bytes(option: text), !bytes.isEmpty else { throw fail("--id takes hex digits, e.g. --id 01ab.", status: ExitStatus.usage) }
        return bytes
    }

    /// The OpenSSH public key line of a key, when OpenSSH has a format for it.
    static func sshLine(_ key: AsymmetricKey, comment: String) -> String? {
        try? KeyFile.openSSHPublicKey(key, comment: comment)
    }
}

struct GenerateKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate-key",
        abstract: "Generate a key pair in the keychain (RSA, EC P-256/384/521, Ed25519, ML-DSA, ML-KEM).",
        discussion: """
        The private key is never extractable unless --extractable is given. Prints the key's PKCS#11 \
        URI and, for SSH, its authorized_keys line.

        ML-DSA-65 and ML-DSA-87 (FIPS 204 signatures) and ML-KEM-768 and ML-KEM-1024 (FIPS 203 key \
        encapsulation) keys are made from a random seed, which the private key keeps; 'keychainctl sign' \
        and 'verify-signature' try an ML-DSA key, and PKCS#11 3.2 clients use both. ML-DSA-44 and \
        ML-KEM-512 are not offered by the library (swift-crypto): asking for them fails with status 64.

        With --tpm the key is made inside this machine's TPM 2.0 (EC P-256 or P-384, RSA-2048 where \
        the TPM offers them) and never leaves it: the keychain keeps only the TPM's wrapped key, \
        which no other TPM can load, and using it needs the keychain unlocked. Without a TPM \
        (no /dev/tpmrm0, KEYCHAIN_PKCS11_TCTI or tcti = none) the command fails with status 7.

        Examples:
          keychainctl generate-key --type ec --label ssh-laptop
          keychainctl generate-key --type rsa --bits 4096 --label tls-client \\
              --id 01
          keychainctl generate-key --type ed25519 --label signing \\
              --access-control user-presence
          keychainctl generate-key --type ec --tpm --label ssh-this-machine
          keychainctl generate-key --type ml-dsa-65 --label release-signing
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Option(help: "Key type: rsa, ec, ed25519, ML-DSA (signatures) or ML-KEM (key encapsulation) with its parameter set.")
    var type: KeyAlgorithm

    @Option(help: "RSA modulus size: 1024 to 8192 (2048 to 8192 under key_policy = modern); default 3072, and 2048 (the only size) with --tpm.")
    var bits: Int?

    @Option(help: "EC curve: p256, p384 or p521.")
    var curve: CurveChoice = .p256

    @Option(help: "The key's label.")
    var label: String

    @Option(help: ArgumentHelp("CKA_ID in hex (default: SHA-1 of the public key, as Apple's application label).", valueName: "hex"))
    var id: String?

    @Flag(help: "Allow exporting the private key later (encrypted PKCS#8 or PKCS#12).")
    var extractable = false

    @Flag(help: ArgumentHelp("Make the public-key object private too: its label, ID and key are hidden without the PIN (ssh-keygen -D then sees the key only after a login).",
                             visibility: .default))
    var hidePublicKey = false

    @Flag(help: "Make the key inside this machine's TPM 2.0: it never leaves it (EC P-256/P-384, RSA-2048).")
    var tpm = false

    @OptionGroup var access: AccessOptions

    func validate() throws {
        if tpm, extractable { throw ValidationError("--tpm and --extractable exclude each other: a key made in the TPM never leaves it") }
        if tpm, type == .ed25519 { throw ValidationError("--tpm makes EC (p256, p384) and RSA-2048 keys, not Ed25519") }
        if tpm, let set = type.parameterSet { throw ValidationError("--tpm makes EC (p256, p384) and RSA-2048 keys, not \(set.name): a TPM 2.0 has no lattice keys") }
        if tpm, type == .ec, curve == .p521 { throw ValidationError("--tpm makes EC keys on p256 and p384, not p521") }
        if tpm, type == .rsa, let bits, bits != 2048 { throw ValidationError("--tpm makes RSA keys of 2048 bits only") }
    }

    func run() throws {
        if let set = type.parameterSet, !set.isOffered { throw fail(LatticeKeys.notOffered(set), status: ExitStatus.usage) }
        // --sync with options that keep the key on this machine is refused whatever the machine has.
        _ = try access.syncTemplate(access.policy(defaultClass: .whenUnlocked), inTPM: tpm)
        if tpm, EnclaveTPM.configuredTCTI == nil {
            throw fail("--tpm: this machine has no TPM (no /dev/tpmrm0; name one with KEYCHAIN_PKCS11_TCTI or 'tcti =' in the configuration file).",
                       status: ExitStatus.badInput)
        }
        let open = try selection.open()
        let master = try open.unlock()
        let id = try KeyStorage.parseID(self.id)
        let privateTemplate = try KeyStorage.privateTemplate(label: label, id: id, extractable: extractable, access: access, inTPM: tpm)
        // The public-key object is public by default (OpenSSH and TLS clients list keys before a
        // login): its label and CKA_ID are then readable without the PIN (Docs/security.md). It
        // syncs when the private key does.
        var publicTemplate: Template = [(.token, AttributeValue.bool(true)), (.label, Array(label.utf8)), (.isPrivate, AttributeValue.bool(hidePublicKey))]
            + access.companionSyncTemplate
        if let id { publicTemplate.append((.id, id)) }
        let publicUID = try PasswordItems.newUniqueID()
        let privateUID = try PasswordItems.newUniqueID()
        let uniqueIDs = (publicUID.text, privateUID.text)
        let objects: (publicKey: ObjectAttributes, privateKey: ObjectAttributes)
        var sshLine: String?
        if let set = type.parameterSet {
            objects = try LatticeKeys.generate(set, publicTemplate: publicTemplate, privateTemplate: privateTemplate, uniqueIDs: uniqueIDs, in: open)
        } else {
            let key: AsymmetricKey
            (key, objects) = try asymmetricPair(publicTemplate: publicTemplate, privateTemplate: privateTemplate, uniqueIDs: uniqueIDs,
                                                in: open, master: master)
            sshLine = KeyStorage.sshLine(key, comment: label)
        }
        try open.run { () throws(KeychainError) in
            try open.keychain.transaction { () throws(KeychainError) in
                _ = try open.keychain.add(objects.privateKey, uid: privateUID.bytes, master: master)
                _ = try open.keychain.add(objects.publicKey, uid: publicUID.bytes, master: master)
            }
        }
        open.forgetNames()
        let privateKey = try open.describe(objects.privateKey)
        print("Generated \(privateKey.algorithm ?? "key") '\(label)'\(tpm ? " in the TPM" : "")")
        print("Private key: \(privateKey.uri.text)")
        print("Public key:  \(try open.describe(objects.publicKey).uri.text)")
        if let sshLine { print("SSH:         \(sshLine)") }
    }

    /// An RSA, EC or Ed25519 pair, made by OpenSSL or (--tpm) in the TPM, as C_GenerateKeyPair makes it.
    private func asymmetricPair(publicTemplate: Template, privateTemplate: Template, uniqueIDs: (public: [UInt8], private: [UInt8]),
                                in open: OpenKeychain, master: MasterKey) throws -> (AsymmetricKey, (publicKey: ObjectAttributes, privateKey: ObjectAttributes)) {
        let bits = self.bits ?? (tpm ? 2048 : 3072)
        let kind: AsymmetricKind
        switch type {
        case .rsa: kind = .rsa
        case .ec: kind = .ec(curve.curve)
        default: kind = .ed25519  // the one left: ML-DSA and ML-KEM are LatticeKeys.generate's
        }
        var publicTemplate = publicTemplate
        if kind == .rsa { publicTemplate.append((.modulusBits, AttributeValue.ulong(UInt(max(bits, 0))))) } else {
            publicTemplate.append((.ecParams, KeyFactory.curveParameters(of: kind)))
        }
        let request = try open.run { () throws(KeychainError) in
            try KeyGeneration.request(keyType: KeyFactory.keyType(of: kind), publicTemplate: publicTemplate, privateTemplate: privateTemplate,
                                      policy: Configuration.current().keyPolicy)
        }
        if tpm {
            // The same path as C_GenerateKeyPair with CKA_KC_TPM: the TPM makes the key, the
            // keychain keeps its wrapped blob.
            let enclave: EnclaveKey
            do { enclave = try open.keychain.createEnclaveKey(for: request, master: master) } catch {
                // The core's reason names the PKCS#11 attribute; here the option is what was asked for.
                let reason = error.reason.hasPrefix("CKA_KC_TPM: ") ? String(error.reason.dropFirst("CKA_KC_TPM: ".count)) : error.reason
                throw fail("--tpm: \(reason).", status: error.code == .attributeValueInvalid ? ExitStatus.badInput : ExitStatus.failure)
            }
            let objects = try open.run { () throws(KeychainError) in
                try KeyGeneration.enclaveObjects(for: enclave, request: request, mechanism: KeyStorage.mechanism(request.kind), publicTemplate: publicTemplate,
                                                 privateTemplate: privateTemplate, uniqueIDs: uniqueIDs, bySecurityOfficer: false)
            }
            return (enclave.publicKey, objects)
        }
        let key: AsymmetricKey
        do { key = try AsymmetricKey.generate(request.kind, bits: request.bits) } catch {
            throw fail("key generation failed: \(error).", status: ExitStatus.failure)
        }
        let objects = try open.run { () throws(KeychainError) in
            try KeyGeneration.objects(for: key, request: request, mechanism: KeyStorage.mechanism(request.kind), publicTemplate: publicTemplate,
                                      privateTemplate: privateTemplate, uniqueIDs: uniqueIDs, bySecurityOfficer: false)
        }
        return (key, objects)
    }
}

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import certificates, private keys and PKCS#12 bundles.",
        discussion: """
        Reads PEM or DER certificates (and chains), PKCS#8 private keys (encrypted or not), PKCS#1 \
        RSA and SEC1 EC private keys, OpenSSH private keys (passphrase-protected too), public keys (PEM, DER, \
        OpenSSH), and password-protected PKCS#12 bundles, which become identities (the private key \
        and its certificate share one CKA_ID). Passphrases come from a no-echo prompt or \
        --passphrase-file. Everything in the file is stored, or nothing.

        ML-DSA and ML-KEM private keys are read from unencrypted PKCS#8 (PEM or DER) holding their \
        seed, or the seed and the expanded key (checked against each other), as RFC 9881 and RFC 9935 \
        encode them; a key holding only the expanded form is refused (status 7): the keychain makes \
        these keys from their seed. Their public keys are read as SubjectPublicKeyInfo (PEM, DER).

        Examples:
          keychainctl import ~/.ssh/id_ecdsa --label laptop
          keychainctl import client.p12 --passphrase-file p12.pass
          keychainctl import ca.pem --label "Corporate CA"
          keychainctl import ml-dsa-65.pem --label release-signing
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Argument(help: ArgumentHelp("The file ('-' reads standard input).", valueName: "file"))
    var file: String

    @Option(help: "Label of the imported key and certificate (default: the PKCS#12 name, OpenSSH comment, certificate subject, or file name).")
    var label: String?

    @Option(help: ArgumentHelp("CKA_ID in hex (default: SHA-1 of the public key).", valueName: "hex"))
    var id: String?

    @Option(help: ArgumentHelp("Read the file's passphrase from this file ('-' = standard input).", valueName: "file"))
    var passphraseFile: String?

    @Flag(help: "Allow exporting the private key again later.")
    var extractable = false

    @OptionGroup var access: AccessOptions

    func run() throws {
        // --sync with options that keep the item on this device is refused before anything is read.
        _ = try access.syncTemplate(access.policy(defaultClass: .whenUnlocked))
        var data = try readInput(file)
        defer { wipe(&data) }
        if let lattice = try LatticeKeyFile.read(data, file: file) {
            try importLattice(lattice)
            return
        }
        let contents: KeyFileContents
        do {
            contents = try KeyFile.decode(data) {
                // A missing passphrase source reads as passphraseRequired below: one message, not two.
                try SecretInput.read(file: passphraseFile, environment: "KEYCHAIN_PKCS11_PASSPHRASE", prompt: "Passphrase of \(file)", confirm: false)
                    .withBytes { SecureBytes($0) }
            }
        } catch {
            switch error {
            case .passphraseRequired:
                throw fail("\(file) is encrypted: give its passphrase with --passphrase-file, KEYCHAIN_PKCS11_PASSPHRASE or on a terminal.", status: ExitStatus.badInput)
            case .passphraseIncorrect: throw fail("wrong passphrase for \(file); nothing was imported.", status: ExitStatus.badInput)
            case .unsupported(let why): throw fail("cannot import \(file): \(why).", status: ExitStatus.badInput)
            case .malformed(let why): throw fail("\(file) is not a certificate, key or PKCS#12 file this tool reads (\(why)).", status: ExitStatus.badInput)
            }
        }
        let open = try selection.open()
        let master = try open.unlock()
        let id = try KeyStorage.parseID(self.id)
        let baseName = String(file.split(separator: "/").last ?? "imported")
        let certificateNames = contents.certificates.map { (try? Certificate(der: $0))?.subjectSummary }
        let keyLabel = label ?? contents.name ?? certificateNames.first.flatMap { $0 } ?? baseName
        var objects: [(ObjectAttributes, [UInt8])] = []
        if let privateKey = contents.privateKey {
            let material = try open.run { () throws(KeychainError) in try KeyFactory.generatedMaterial(privateKey) }
            var template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.privateKey.rawValue)),
                                      (.keyType, AttributeValue.ulong(KeyFactory.keyType(of: privateKey.kind).rawValue))]
            template += material.privateKey.map { ($0.key, $0.value) }
            template += try KeyStorage.privateTemplate(label: keyLabel, id: id, extractable: extractable, access: access)
            let uid = try PasswordItems.newUniqueID()
            let object = try open.run { () throws(KeychainError) in try ObjectTemplate.create(template, uniqueID: uid.text, policy: Configuration.current().keyPolicy) }
            objects.append((object, uid.bytes))
            let publicUID = try PasswordItems.newUniqueID()
            objects.append((try open.run { () throws(KeychainError) in try KeyFactory.publicObject(for: object, uniqueID: publicUID.text, policy: Configuration.current().keyPolicy) }, publicUID.bytes))
        } else if let publicKey = contents.publicKey {
            let material = try open.run { () throws(KeychainError) in try KeyFactory.generatedMaterial(publicKey) }
            var template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.publicKey.rawValue)),
                                      (.keyType, AttributeValue.ulong(KeyFactory.keyType(of: publicKey.kind).rawValue)),
                                      (.token, AttributeValue.bool(true)), (.isPrivate, AttributeValue.bool(false)), (.label, Array(keyLabel.utf8))]
                + access.companionSyncTemplate
            if let id { template.append((.id, id)) }
            template += material.publicKey.map { ($0.key, $0.value) }
            let uid = try PasswordItems.newUniqueID()
            objects.append((try open.run { () throws(KeychainError) in try ObjectTemplate.create(template, uniqueID: uid.text, policy: Configuration.current().keyPolicy) }, uid.bytes))
        }
        // The key's own certificate (same public key) takes the key's label and CKA_ID; a file of
        // certificates alone gives them to its first. Chain certificates already stored are kept as they are.
        let keyBytes = try? (contents.privateKey ?? contents.publicKey)?.publicKeyBytes()
        let parsed = contents.certificates.map { try? Certificate(der: $0) }
        let leafIndex = keyBytes == nil ? (contents.certificates.isEmpty ? nil : 0)
            : parsed.firstIndex { $0?.publicKeyBytes != nil && $0?.publicKeyBytes == keyBytes }
        var skipped = 0
        for (index, der) in contents.certificates.enumerated() {
            let isLeaf = index == leafIndex
            if !isLeaf, let certificate = parsed[index] {
                let query: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.certificate.rawValue)), (.issuer, certificate.issuer),
                                       (.serialNumber, certificate.serialNumber)]
                if !(try open.run { () throws(KeychainError) in try open.keychain.find(query, master: master) }).isEmpty {
                    skipped += 1
                    continue
                }
            }
            let name = isLeaf ? (label ?? contents.name ?? certificateNames[index] ?? keyLabel) : (certificateNames[index] ?? baseName)
            var template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.certificate.rawValue)),
                                      (.certificateType, AttributeValue.ulong(CertificateType.x509.rawValue)), (.value, der),
                                      (.token, AttributeValue.bool(true)), (.isPrivate, AttributeValue.bool(false)), (.label, Array(name.utf8)),
                                      (.itemClass, AttributeValue.ulong(ItemClass.certificate.rawValue))] + access.companionSyncTemplate
            if isLeaf, let id { template.append((.id, id)) }
            let uid = try PasswordItems.newUniqueID()
            objects.append((try open.run { () throws(KeychainError) in try ObjectTemplate.create(template, uniqueID: uid.text, policy: Configuration.current().keyPolicy) }, uid.bytes))
        }
        guard !objects.isEmpty else { throw fail("\(file) holds nothing to import.", status: ExitStatus.badInput) }
        try open.run { () throws(KeychainError) in
            try open.keychain.transaction { () throws(KeychainError) in
                for (object, uid) in objects { _ = try open.keychain.add(object, uid: uid, master: master) }
            }
        }
        open.forgetNames()
        print("Imported from \(file) (\(contents.format.displayName)):")
        if skipped > 0 { print("  (\(skipped) chain certificate(s) already in the keychain kept as they were)") }
        for (object, _) in objects {
            let item = try open.describe(object)
            print("  \(item.kind.padding(toLength: 12, withPad: " ", startingAt: 0)) \(item.uri.text)")
        }
    }
}

/// Export formats.
enum ExportFormat: String, ExpressibleByArgument, CaseIterable {
    case pem, der, ssh, pkcs8, pkcs12
}

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export a certificate, a public key, or an extractable private key (encrypted).",
        discussion: """
        Certificates: pem (default) or der. Public keys (or a private key's public half): pem \
        (SubjectPublicKeyInfo), der, or ssh (an authorized_keys line). Private keys leave only \
        when they were stored extractable, and only encrypted: pkcs8 (default; encrypted PKCS#8 PEM) \
        or pkcs12 (with the key's certificate when there is one); the passphrase is asked twice.

        ML-DSA and ML-KEM public keys export as pem or der, in the IETF LAMPS encodings (RFC 9881, \
        RFC 9935: the algorithm's OID without parameters, the encoded key as the BIT STRING); their \
        private keys are not exported.

        Examples:
          keychainctl export 'pkcs11:token=login;object=laptop;type=public' \\
              --format ssh >> ~/.ssh/authorized_keys
          keychainctl export --label "Corporate CA" --type certificate -o ca.pem
          keychainctl export --label tls-client --type private-key \\
              --format pkcs12 -o client.p12
          keychainctl export --label release-signing --type public-key \\
              -o release-signing.pub.pem
        """
    )

    @OptionGroup var selection: KeychainOptions
    @OptionGroup var selector: ItemSelector

    @Option(help: "pem, der, ssh, pkcs8 or pkcs12.")
    var format: ExportFormat?

    @Option(name: [.customShort("o"), .long], help: "Write to this file (default: standard output; DER and PKCS#12 need a file).")
    var output: String?

    @Option(help: ArgumentHelp("Read the new file's passphrase from this file ('-' = standard input).", valueName: "file"))
    var passphraseFile: String?

    @Flag(help: "Do not ask for the PIN: only items visible without login (certificates, public keys).")
    var publicOnly = false

    func validate() throws {
        guard !selector.isEmpty else { throw ValidationError("name the item by URI, --label, --id or --type") }
    }

    func run() throws {
        if format == .der || format == .pkcs12, output == nil || output == "-", isatty(STDOUT_FILENO) == 1 {
            throw fail("binary output: give -o FILE.", status: ExitStatus.usage)
        }
        let open = try selector.keychain(selection)
        if !publicOnly { try open.unlock() }
        let item = try selector.single(in: open)
        let object = item.object
        let bytes: [UInt8]
        var secretOutput = false
        switch object.objectClass {
        case .certificate?:
            let der = object[.value] ?? []
            switch format ?? .pem {
            case .pem: bytes = Array(KeyFile.pem("CERTIFICATE", der).utf8)
            case .der: bytes = der
            default: throw fail("a certificate exports as pem or der.", status: ExitStatus.usage)
            }
        case .publicKey?, .privateKey?:
            let wantsPrivate = object.objectClass == .privateKey && (format == nil || format == .pkcs8 || format == .pkcs12)
            if wantsPrivate {
                bytes = try privateExport(item, in: open)
                secretOutput = true
            } else {
                let key: AsymmetricKey?
                let spki: [UInt8]
                if object.keyType?.isLattice == true {
                    // ML-DSA and ML-KEM: the LAMPS SubjectPublicKeyInfo (OID, no parameters; the key as the BIT STRING).
                    key = nil
                    spki = try LatticeKeys.subjectPublicKeyInfo(of: object)
                } else {
                    let asymmetric = try open.run { () throws(KeychainError) in try KeyFactory.publicKey(of: object) }
                    do { spki = try asymmetric.subjectPublicKeyInfo() } catch { throw fail("cannot encode the public key: \(error).", status: ExitStatus.failure) }
                    key = asymmetric
                }
                switch format ?? .pem {
                case .pem: bytes = Array(KeyFile.pem("PUBLIC KEY", spki).utf8)
                case .der: bytes = spki
                case .ssh:
                    guard let key, let line = KeyStorage.sshLine(key, comment: item.label) else {
                        throw fail("OpenSSH has no format for this key type.", status: ExitStatus.usage)
                    }
                    bytes = Array((line + "\n").utf8)
                default: throw fail("a public key exports as pem, der or ssh.", status: ExitStatus.usage)
                }
            }
        default:
            throw fail("a \(item.kind) is not exported; passwords are read with find-generic-password -w.", status: ExitStatus.usage)
        }
        try writeOutput(bytes, to: output, secret: secretOutput)
        if let output, output != "-" { print("Wrote \(item.kind) \(item.uri.text) to \(output)") }
    }

    /// An extractable private key, encrypted under a passphrase asked twice.
    private func privateExport(_ item: ItemDescription, in open: OpenKeychain) throws -> [UInt8] {
        let object = item.object
        guard object.bool(.extractable), !object.bool(.wrapWithTrusted), !object.hasSealedSecrets, !object.bool(.alwaysAuthenticate) else {
            let formats = object.keyType?.isLattice == true ? "pem or der" : "ssh or pem"
            throw fail("the private key '\(item.label)' is not extractable: it never leaves the keychain (export its public key with --format \(formats)).",
                       status: ExitStatus.notPermitted)
        }
        if let set = LatticeKeys.parameterSet(of: object) {
            throw fail("keychainctl does not export \(set.name) private keys (a PKCS#11 client can wrap an extractable one); "
                       + "export the public key with --format pem or der.", status: ExitStatus.usage)
        }
        let key = try open.run { () throws(KeychainError) in try KeyFactory.key(of: object) }
        let passphrase = try readSecret(file: passphraseFile, environment: "KEYCHAIN_PKCS11_EXPORT_PASSPHRASE",
                                        prompt: "Passphrase for the exported key", confirm: true, status: ExitStatus.badInput, nonEmpty: true,
                                        option: "--passphrase-file")
        do {
            if format == .pkcs12 {
                var certificates: [[UInt8]] = []
                if let id = object[.id], !id.isEmpty,
                   let rows = try? open.keychain.find([(.objectClass, AttributeValue.ulong(ObjectClass.certificate.rawValue)), (.id, id)], master: open.master) {
                    certificates = rows.compactMap { try? open.keychain.object(id: $0.id, master: open.master)[.value] }
                }
                return try passphrase.withBytes { try KeyFile.pkcs12(key: key, certificates: certificates, name: item.label, passphrase: $0) }
            }
            return Array(try passphrase.withBytes { try KeyFile.encryptedPKCS8PEM(key, passphrase: $0) }.utf8)
        } catch let error as ExitCode {
            throw error
        } catch {
            throw fail("cannot encode the key: \(error).", status: ExitStatus.failure)
        }
    }
}

extension KeyFileFormat {
    /// How a person calls the format (the import summary's words, not the enum's).
    var displayName: String {
        switch self {
        case .certificatePEM: return "PEM certificate"
        case .certificateDER: return "DER certificate"
        case .pkcs8: return "PKCS#8 private key"
        case .encryptedPKCS8: return "encrypted PKCS#8 private key"
        case .pkcs1: return "PKCS#1 RSA private key"
        case .sec1: return "SEC 1 EC private key"
        case .openSSH: return "OpenSSH private key"
        case .pkcs12: return "PKCS#12 bundle"
        case .publicKeyPEM: return "PEM public key"
        case .publicKeyDER: return "DER public key"
        case .openSSHPublicKey: return "OpenSSH public key"
        }
    }
}
