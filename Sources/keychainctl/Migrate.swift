import ArgumentParser
import CPKCS11
import Glibc
import KeychainCore
import KeychainCrypto

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Copy the objects of another PKCS#11 token (SoftHSM, another module) into a keychain.",
        discussion: """
        Loads the other module, logs in to its token with its user PIN (--from-pin-file, \
        KEYCHAIN_PKCS11_SOURCE_PIN or a prompt) and copies every object it shows: certificates, \
        public keys, data objects, and private and secret keys that the token lets go \
        (CKA_EXTRACTABLE true: they travel wrapped under a one-time AES key, never in clear \
        through the other module's API). Keys the token marks non-extractable stay behind and are \
        listed; import them from their original files with 'keychainctl import'. Labels, CKA_IDs \
        and usage flags are kept. Objects already in the keychain (same class, label and ID) are \
        left as they are, so a second run copies only what is new. The source token is not \
        changed.

        Exit status: 0 when every object was copied or was already there, 8 when some stayed \
        behind because the other token refuses to release them, 3 for a wrong PIN of either token.

        Examples:
          keychainctl migrate --from-module /usr/lib/softhsm/libsofthsm2.so \\
              --token old-token
          keychainctl migrate --from-module /usr/lib/softhsm/libsofthsm2.so \\
              --token old-token --dry-run
          keychainctl migrate --from-module /usr/lib/softhsm/libsofthsm2.so \\
              --token old-token -k work --from-pin-file old.pin
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Option(help: ArgumentHelp("The other PKCS#11 module (a .so path).", valueName: "path"))
    var fromModule: String

    @Option(help: ArgumentHelp("The label of the token to copy from.", valueName: "label"))
    var token: String

    @Option(help: ArgumentHelp("Read the other token's user PIN from this file ('-' reads standard input).", valueName: "file"))
    var fromPinFile: String?

    @Flag(help: "List what would be copied and what would stay behind; change nothing.")
    var dryRun = false

    func run() throws {
        let module: ForeignModule
        do { module = try ForeignModule(path: fromModule) } catch {
            throw fail("cannot load \(fromModule): \(error.reason).", status: ExitStatus.badInput)
        }
        let source: SourceToken
        do {
            try module.initialize()
            let tokens = try module.tokens()
            guard let match = tokens.first(where: { $0.label == token }) else {
                let labels = tokens.map { "'\($0.label)'" }.joined(separator: ", ")
                throw fail("\(fromModule) has no token labelled '\(token)'" + (labels.isEmpty ? " (it has no initialised token)." : "; its tokens: \(labels)."),
                           status: ExitStatus.notFound)
            }
            let session = try module.openSession(slot: match.slot)
            source = SourceToken(module: module, session: session, label: match.label)
        } catch let error as ForeignModule.Failure {
            throw fail("\(fromModule): \(error.text).", status: ExitStatus.failure)
        }
        defer { module.closeSession(source.session) }
        let pin = try readSecret(file: fromPinFile, environment: "KEYCHAIN_PKCS11_SOURCE_PIN", prompt: "User PIN of token '\(token)' in \(fromModule)",
                                 confirm: false, option: "--from-pin-file")
        do { try pin.withBytes { bytes throws(ForeignModule.Failure) in try module.login(source.session, pin: bytes) } } catch {
            let status = error.rv == CK_RV(CKR_PIN_INCORRECT) || error.rv == CK_RV(CKR_PIN_LOCKED) ? ExitStatus.pin : ExitStatus.failure
            throw fail("cannot log in to '\(token)': \(error.text).", status: status)
        }
        defer { module.logout(source.session) }

        let open = try selection.open()
        let master = try open.unlock()
        let handles: [CK_OBJECT_HANDLE]
        do { handles = try module.objects(source.session) } catch { throw fail("\(fromModule): \(error.text).", status: ExitStatus.failure) }

        // Public keys whose private key is copied come from the private key itself.
        var planned: [(object: ObjectAttributes, uid: [UInt8], name: String)] = []
        var leftBehind: [String] = []
        var alreadyThere = 0
        // Private keys first: a public key whose private key was copied comes with it (made from
        // the private key); one whose private key stays behind is copied on its own.
        let candidates = handles.compactMap { source.describe($0) }.sorted { ($0.objectClass == CKO_PRIVATE_KEY ? 0 : 1) < ($1.objectClass == CKO_PRIVATE_KEY ? 0 : 1) }
        var copiedPrivateIDs: Set<[UInt8]> = []
        var transport: (handle: CK_OBJECT_HANDLE, key: SecureBytes)?
        defer { if let transport { module.destroy(source.session, transport.handle) } }
        for candidate in candidates {
            if candidate.objectClass == CKO_PUBLIC_KEY, copiedPrivateIDs.contains(candidate.idKey) { continue }
            let objects: [SourceObject.Copy]
            do {
                objects = try candidate.copies(from: source, transport: &transport)
            } catch let error as MigrationSkip {
                leftBehind.append("\(candidate.name): \(error.reason)")
                continue
            }
            if candidate.objectClass == CKO_PRIVATE_KEY { copiedPrivateIDs.insert(candidate.idKey) }
            for copy in objects {
                if try isPresent(copy.object, in: open, master: master) {
                    alreadyThere += 1
                    continue
                }
                planned.append((copy.object, copy.uid, candidate.name))
            }
        }

        print("\(dryRun ? "Would copy" : "Copying") token '\(printable(token))' of \(fromModule) into keychain '\(printable(open.label))':")
        if !dryRun {
            try open.run { () throws(KeychainError) in
                try open.keychain.transaction { () throws(KeychainError) in
                    for entry in planned { _ = try open.keychain.add(entry.object, uid: entry.uid, master: master) }
                }
            }
            open.forgetNames()
        }
        var counts: [String: Int] = [:]
        for entry in planned {
            let item = try open.describe(entry.object)
            counts[item.kind, default: 0] += 1
            print("  \(dryRun ? "would copy" : "copied")  \(item.kind.padding(toLength: 17, withPad: " ", startingAt: 0)) \(item.shortURI.text)")
        }
        for reason in leftBehind { print("  left behind  \(printable(reason))") }
        let summary = counts.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        print("\(dryRun ? "Would copy" : "Copied") \(planned.count) object(s)\(summary.isEmpty ? "" : " (\(summary))"); \(alreadyThere) already in the keychain; \(leftBehind.count) left behind.")
        if !leftBehind.isEmpty {
            throw fail("\(leftBehind.count) object(s) stayed behind (listed above): the other token does not release them.", status: ExitStatus.notPermitted)
        }
    }

    /// Whether the keychain holds an object of the same class, label and CKA_ID (and, for
    /// certificates and data, the same value).
    private func isPresent(_ object: ObjectAttributes, in open: OpenKeychain, master: MasterKey) throws -> Bool {
        var query: Template = []
        for type in [AttributeType.objectClass, .label, .id, .keyType] {
            if let value = object[type] { query.append((type, value)) }
        }
        if object.objectClass == .certificate || object.objectClass == .data, let value = object[.value] { query.append((.value, value)) }
        return !(try open.run { () throws(KeychainError) in try open.keychain.find(query, master: master) }).isEmpty
    }
}

/// Why one object stays behind.
struct MigrationSkip: Error {
    let reason: String
}

/// The other token's open, logged-in session.
struct SourceToken {
    let module: ForeignModule
    let session: CK_SESSION_HANDLE
    let label: String

    func describe(_ handle: CK_OBJECT_HANDLE) -> SourceObject? {
        guard let objectClass = module.ulong(session, handle, CK_ATTRIBUTE_TYPE(CKA_CLASS)) else { return nil }
        return SourceObject(handle: handle, objectClass: objectClass, label: module.attribute(session, handle, CK_ATTRIBUTE_TYPE(CKA_LABEL)) ?? [],
                            id: module.attribute(session, handle, CK_ATTRIBUTE_TYPE(CKA_ID)) ?? [],
                            keyType: module.ulong(session, handle, CK_ATTRIBUTE_TYPE(CKA_KEY_TYPE)))
    }
}

/// One object of the other token, and how it becomes keychain objects.
struct SourceObject {
    let handle: CK_OBJECT_HANDLE
    let objectClass: CK_OBJECT_CLASS
    let label: [UInt8]
    let id: [UInt8]
    let keyType: CK_KEY_TYPE?

    var idKey: [UInt8] { id + [0xFF] + AttributeValue.ulong(UInt(keyType ?? 0)) }

    var name: String {
        let kind: String
        switch Int(objectClass) {
        case Int(CKO_DATA): kind = "data object"
        case Int(CKO_CERTIFICATE): kind = "certificate"
        case Int(CKO_PUBLIC_KEY): kind = "public key"
        case Int(CKO_PRIVATE_KEY): kind = "private key"
        case Int(CKO_SECRET_KEY): kind = "secret key"
        default: kind = "object of class 0x\(String(objectClass, radix: 16))"
        }
        return "\(kind) '\(String(decoding: label, as: UTF8.self))'" + (id.isEmpty ? "" : " (id \(Hex.string(id)))")
    }

    private func read(_ source: SourceToken, _ types: [CK_ULONG]) -> Template {
        types.compactMap { type in source.module.attribute(source.session, handle, CK_ATTRIBUTE_TYPE(type)).map { (AttributeType(UInt(type)), $0) } }
    }

    private func create(_ template: Template) throws -> Copy {
        let uid = try PasswordItems.newUniqueID()
        do { return (try ObjectTemplate.create(template, uniqueID: uid.text, policy: Configuration.current().keyPolicy), uid.bytes) } catch {
            throw MigrationSkip(reason: "the keychain refuses it: \(error.reason)")
        }
    }

    private var common: Template {
        var template: Template = [(.token, AttributeValue.bool(true))]
        if !label.isEmpty { template.append((.label, label)) }
        return template
    }

    /// The keychain objects this one becomes (a private key brings its public key).
    /// A keychain object and the unique ID it is stored under.
    typealias Copy = (object: ObjectAttributes, uid: [UInt8])

    func copies(from source: SourceToken, transport: inout (handle: CK_OBJECT_HANDLE, key: SecureBytes)?) throws -> [Copy] {
        let module = source.module
        switch Int(objectClass) {
        case Int(CKO_DATA):
            guard let value = module.attribute(source.session, handle, CK_ATTRIBUTE_TYPE(CKA_VALUE)) else {
                throw MigrationSkip(reason: "its value cannot be read")
            }
            let isPrivate = module.bool(source.session, handle, CK_ATTRIBUTE_TYPE(CKA_PRIVATE)) ?? true
            return [try create([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.value, value),
                                (.isPrivate, AttributeValue.bool(isPrivate))] + common + read(source, [CK_ULONG(CKA_APPLICATION), CK_ULONG(CKA_OBJECT_ID)]))]
        case Int(CKO_CERTIFICATE):
            guard module.ulong(source.session, handle, CK_ATTRIBUTE_TYPE(CKA_CERTIFICATE_TYPE)) == CK_ULONG(CKC_X_509),
                  let value = module.attribute(source.session, handle, CK_ATTRIBUTE_TYPE(CKA_VALUE)) else {
                throw MigrationSkip(reason: "not an X.509 certificate with a value")
            }
            var template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.certificate.rawValue)),
                                      (.certificateType, AttributeValue.ulong(CertificateType.x509.rawValue)), (.value, value),
                                      (.isPrivate, AttributeValue.bool(false))] + common
            if !id.isEmpty { template.append((.id, id)) }
            return [try create(template)]
        case Int(CKO_PUBLIC_KEY):
            var template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.publicKey.rawValue)), (.isPrivate, AttributeValue.bool(false))] + common
            if !id.isEmpty { template.append((.id, id)) }
            template += read(source, [CK_ULONG(CKA_KEY_TYPE), CK_ULONG(CKA_MODULUS), CK_ULONG(CKA_PUBLIC_EXPONENT), CK_ULONG(CKA_EC_PARAMS),
                                      CK_ULONG(CKA_EC_POINT), CK_ULONG(CKA_VERIFY), CK_ULONG(CKA_ENCRYPT), CK_ULONG(CKA_WRAP), CK_ULONG(CKA_DERIVE)])
            return [try create(template)]
        case Int(CKO_PRIVATE_KEY), Int(CKO_SECRET_KEY):
            let extractable = module.bool(source.session, handle, CK_ATTRIBUTE_TYPE(CKA_EXTRACTABLE)) ?? false
            let sensitive = module.bool(source.session, handle, CK_ATTRIBUTE_TYPE(CKA_SENSITIVE)) ?? true
            guard extractable else {
                throw MigrationSkip(reason: "the source token marks it non-extractable (CKA_EXTRACTABLE false); import it from its original file")
            }
            if transport == nil {
                do {
                    let handle = try module.generateTransportKey(source.session)
                    guard var value = module.attribute(source.session, handle, CK_ATTRIBUTE_TYPE(CKA_VALUE)), value.count == 32 else {
                        module.destroy(source.session, handle)
                        throw MigrationSkip(reason: "the source token's transport key cannot be read back")
                    }
                    transport = (handle, SecureBytes(value))
                    wipe(&value)
                } catch let error as ForeignModule.Failure {
                    throw MigrationSkip(reason: "no transport key on the source token (\(error.text))")
                }
            }
            guard let transport else { throw MigrationSkip(reason: "no transport key") }
            let wrapped: [UInt8]
            do { wrapped = try module.wrap(source.session, key: handle, with: transport.handle) } catch {
                throw MigrationSkip(reason: "the source token would not wrap it with CKM_AES_KEY_WRAP_PAD (\(error.text))")
            }
            let material: SecureBytes
            do { material = try KeyWrap.unwrap(.kwp, key: transport.key, wrapped: wrapped) } catch {
                throw MigrationSkip(reason: "the wrapped key did not unwrap")
            }
            let flags = read(source, [CK_ULONG(CKA_SIGN), CK_ULONG(CKA_DECRYPT), CK_ULONG(CKA_UNWRAP), CK_ULONG(CKA_DERIVE)]
                             + (objectClass == CKO_SECRET_KEY ? [CK_ULONG(CKA_ENCRYPT), CK_ULONG(CKA_VERIFY), CK_ULONG(CKA_WRAP)] : []))
            var template: Template = common + flags + [(.isPrivate, AttributeValue.bool(true)), (.sensitive, AttributeValue.bool(sensitive)),
                                                       (.extractable, AttributeValue.bool(true))]
            if !id.isEmpty { template.append((.id, id)) }
            if objectClass == CKO_SECRET_KEY {
                var value = material.bytes
                defer { wipe(&value) }
                template += [(.objectClass, AttributeValue.ulong(ObjectClass.secretKey.rawValue)), (.value, value)]
                template += read(source, [CK_ULONG(CKA_KEY_TYPE)])
                return [try create(template)]
            }
            let key: AsymmetricKey
            do { key = try AsymmetricKey.privateKey(pkcs8: material) } catch {
                throw MigrationSkip(reason: "its PKCS#8 form is not a key this keychain stores")
            }
            let generated: (publicKey: [AttributeType: [UInt8]], privateKey: [AttributeType: [UInt8]])
            do { generated = try KeyFactory.generatedMaterial(key) } catch { throw MigrationSkip(reason: error.reason) }
            template += [(.objectClass, AttributeValue.ulong(ObjectClass.privateKey.rawValue)),
                         (.keyType, AttributeValue.ulong(KeyFactory.keyType(of: key.kind).rawValue))]
            template += generated.privateKey.map { ($0.key, $0.value) }
            let privateCopy = try create(template)
            let publicUID = try PasswordItems.newUniqueID()
            let publicObject: ObjectAttributes
            do { publicObject = try KeyFactory.publicObject(for: privateCopy.object, uniqueID: publicUID.text, policy: Configuration.current().keyPolicy) } catch {
                throw MigrationSkip(reason: error.reason)
            }
            return [privateCopy, (publicObject, publicUID.bytes)]
        default:
            throw MigrationSkip(reason: "objects of this class are not copied")
        }
    }
}
