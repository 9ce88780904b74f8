import Glibc
import KeychainCore
import KeychainCrypto

/// ML-DSA (FIPS 204) and ML-KEM (FIPS 203) keys in keychainctl. They are not OpenSSL keys (the
/// OpenSSL here has none): they are `LatticeKey`s, made from a seed that the private key keeps
/// (CKA_SEED), and their files are read here rather than by `KeyFile`: PKCS#8 in the seed form
/// and SubjectPublicKeyInfo, in the IETF LAMPS encodings (RFC 9881 for ML-DSA, RFC 9935 for ML-KEM).
enum LatticeKeys {
    static func keyType(_ set: LatticeParameterSet) -> KeyType { set.isSignature ? .mlDSA : .mlKEM }

    /// CKM_ML_DSA_KEY_PAIR_GEN and CKM_ML_KEM_KEY_PAIR_GEN (PKCS#11 3.2).
    static func mechanism(_ set: LatticeParameterSet) -> UInt { set.isSignature ? 0x1C : 0x0F }

    /// CKM_ML_DSA (PKCS#11 3.2), the mechanism a key's CKA_ALLOWED_MECHANISMS must list for `sign`.
    static let signatureMechanism: UInt = 0x1D

    /// The refusal of a set the library lacks, naming the sets it has.
    static func notOffered(_ set: LatticeParameterSet) -> String {
        let offered = LatticeParameterSet.allCases.filter { $0.isOffered && $0.isSignature == set.isSignature }
        return "\(set.name) is not offered: the library (swift-crypto) has no \(set.name); use "
            + offered.map { $0.name.lowercased() }.joined(separator: " or ") + "."
    }

    /// The parameter set a key object names (nil for other keys, or a value naming no set).
    static func parameterSet(of object: ObjectAttributes) -> LatticeParameterSet? {
        guard let keyType = object.keyType, keyType.isLattice else { return nil }
        return object[.parameterSet].flatMap(AttributeValue.decodeULong).flatMap(keyType.latticeParameterSet)
    }

    /// The two objects of a new key pair of `set`: the templates are generate-key's, the parameter
    /// set added as C_GenerateKeyPair takes it, so that the same checks apply.
    static func generate(_ set: LatticeParameterSet, publicTemplate: Template, privateTemplate: Template,
                         uniqueIDs: (public: [UInt8], private: [UInt8]), in open: OpenKeychain) throws -> (publicKey: ObjectAttributes, privateKey: ObjectAttributes) {
        let keyType = keyType(set)
        let publicTemplate = publicTemplate + [(.parameterSet, AttributeValue.ulong(set.pkcs11Value))]
        _ = try open.run { () throws(KeychainError) in
            try KeyGeneration.latticeRequest(keyType: keyType, publicTemplate: publicTemplate, privateTemplate: privateTemplate)
        }
        let key: LatticeKey
        do throws(CryptoError) { key = try LatticeKey.generate(set) } catch {
            throw fail("key generation failed: \(error.reason).", status: ExitStatus.failure)
        }
        return try open.run { () throws(KeychainError) in
            try KeyGeneration.latticeObjects(for: key, keyType: keyType, mechanism: mechanism(set), publicTemplate: publicTemplate,
                                             privateTemplate: privateTemplate, uniqueIDs: uniqueIDs, bySecurityOfficer: false)
        }
    }

    /// The public-key object of `key` (CKA_VALUE, the FIPS 204/203 encoding), public as other
    /// imported public keys are.
    static func publicObject(_ key: LatticeKey, label: String, id: [UInt8]?, uniqueID: [UInt8], extra: Template = [],
                             in open: OpenKeychain) throws -> ObjectAttributes {
        var template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.publicKey.rawValue)),
                                  (.keyType, AttributeValue.ulong(keyType(key.parameterSet).rawValue)),
                                  (.parameterSet, AttributeValue.ulong(key.parameterSet.pkcs11Value)), (.value, key.publicKey),
                                  (.token, AttributeValue.bool(true)), (.isPrivate, AttributeValue.bool(false)), (.label, Array(label.utf8))] + extra
        if let id { template.append((.id, id)) }
        return try open.run { () throws(KeychainError) in
            try ObjectTemplate.create(template, uniqueID: uniqueID, policy: Configuration.current().keyPolicy)
        }
    }

    /// The private-key object of `key`: its seed (sensitive) beside generate-key's and import's
    /// private-key policy attributes.
    static func privateObject(_ key: LatticeKey, policy: Template, uniqueID: [UInt8], in open: OpenKeychain) throws -> ObjectAttributes {
        guard var seed = key.seedBytes()?.bytes else { throw fail("the key has no seed.", status: ExitStatus.failure) }
        defer { wipe(&seed) }
        var template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.privateKey.rawValue)),
                                  (.keyType, AttributeValue.ulong(keyType(key.parameterSet).rawValue)),
                                  (.parameterSet, AttributeValue.ulong(key.parameterSet.pkcs11Value)), (.seed, seed)]
        defer { wipeValues(&template) }
        template += policy
        return try open.run { () throws(KeychainError) in
            try ObjectTemplate.create(template, uniqueID: uniqueID, policy: Configuration.current().keyPolicy)
        }
    }

    /// The SubjectPublicKeyInfo of an ML-DSA or ML-KEM key object, public or private: the key's
    /// CKA_PUBLIC_KEY_INFO, read back as a key first so that only a well-formed one leaves.
    static func subjectPublicKeyInfo(of object: ObjectAttributes) throws -> [UInt8] {
        guard let info = object[.publicKeyInfo], !info.isEmpty else { throw fail("the key has no CKA_PUBLIC_KEY_INFO.", status: ExitStatus.storage) }
        do throws(CryptoError) {
            return try LatticeKey.publicKey(subjectPublicKeyInfo: info).subjectPublicKeyInfo()
        } catch {
            throw fail("the key's CKA_PUBLIC_KEY_INFO does not parse: \(error.reason).", status: ExitStatus.storage)
        }
    }
}

extension Import {
    /// An ML-DSA or ML-KEM key: the private key (by its seed) and its public key, or a public key alone.
    func importLattice(_ file: LatticeKeyFile) throws {
        let open = try selection.open()
        let master = try open.unlock()
        let id = try KeyStorage.parseID(self.id)
        let keyLabel = label ?? String(self.file.split(separator: "/").last ?? "imported")
        var objects: [(ObjectAttributes, [UInt8])] = []
        if file.key.isPrivate {
            let uid = try PasswordItems.newUniqueID()
            let policy = try KeyStorage.privateTemplate(label: keyLabel, id: id, extractable: extractable, access: access)
            let object = try LatticeKeys.privateObject(file.key, policy: policy, uniqueID: uid.text, in: open)
            objects.append((object, uid.bytes))
            // The public key gets the private key's CKA_ID (given, or SHA-1 of the public key).
            let publicUID = try PasswordItems.newUniqueID()
            objects.append((try LatticeKeys.publicObject(file.key, label: keyLabel, id: object[.id], uniqueID: publicUID.text, extra: access.companionSyncTemplate,
                                                         in: open), publicUID.bytes))
        } else {
            let uid = try PasswordItems.newUniqueID()
            objects.append((try LatticeKeys.publicObject(file.key, label: keyLabel, id: id, uniqueID: uid.text, extra: access.companionSyncTemplate, in: open),
                            uid.bytes))
        }
        try open.run { () throws(KeychainError) in
            try open.keychain.transaction { () throws(KeychainError) in
                for (object, uid) in objects { _ = try open.keychain.add(object, uid: uid, master: master) }
            }
        }
        open.forgetNames()
        print("Imported from \(self.file) (\(file.format.displayName), \(file.key.parameterSet.name)):")
        for (object, _) in objects {
            let item = try open.describe(object)
            print("  \(item.kind.padding(toLength: 12, withPad: " ", startingAt: 0)) \(item.uri.text)")
        }
    }
}

/// An ML-DSA or ML-KEM key file: a PKCS#8 private key (seed form, or seed and expanded key) or a
/// SubjectPublicKeyInfo, as DER or in a PEM block labelled PRIVATE KEY or PUBLIC KEY.
struct LatticeKeyFile {
    let key: LatticeKey
    let format: KeyFileFormat

    /// The lattice key `data` holds; nil when it holds no ML-DSA or ML-KEM key (`KeyFile` reads
    /// it then). A lattice key that cannot be imported ends the command with a message.
    static func read(_ data: [UInt8], file: String) throws -> LatticeKeyFile? {
        var der: [UInt8]
        let pem: Bool
        if var blocks = PEMText.blocks(in: data) {
            defer { for index in blocks.indices { wipe(&blocks[index].body) } }
            guard let index = blocks.firstIndex(where: { $0.label == "PRIVATE KEY" || $0.label == "PUBLIC KEY" }),
                  algorithm(of: blocks[index].body) != nil else { return nil }
            guard blocks.count == 1 else {
                throw fail("cannot import \(file): an ML-DSA or ML-KEM key is imported from a file of its own (one PEM block; this one has \(blocks.count)).",
                           status: ExitStatus.badInput)
            }
            der = blocks[index].body
            pem = true
        } else {
            der = data
            pem = false
        }
        defer { wipe(&der) }
        guard let (set, isPrivate) = algorithm(of: der) else { return nil }
        guard set.isOffered else {
            throw fail("cannot import \(file): \(set.name) is not offered: the library (swift-crypto) has no \(set.name).", status: ExitStatus.badInput)
        }
        if isPrivate, privateKeyIsExpandedOnly(der) {
            throw fail("cannot import \(file): this \(set.name) private key holds only the expanded key, without its seed; a key with its seed is needed "
                       + "(PKCS#8 with the seed, or with the seed and the expanded key).", status: ExitStatus.badInput)
        }
        do {
            if isPrivate {
                let key = try der.withUnsafeBytes { bytes in try LatticeKey.privateKey(privateKeyInfo: bytes) }
                return LatticeKeyFile(key: key, format: .pkcs8)
            }
            return LatticeKeyFile(key: try LatticeKey.publicKey(subjectPublicKeyInfo: der), format: pem ? .publicKeyPEM : .publicKeyDER)
        } catch let error as CryptoError {
            throw fail("cannot import \(file): \(error.reason).", status: ExitStatus.badInput)
        }
    }

    /// The parameter set of a PKCS#8 (`isPrivate`) or SubjectPublicKeyInfo structure whose
    /// AlgorithmIdentifier is an ML-DSA or ML-KEM OID (which take no parameters):
    /// SEQUENCE { [INTEGER 0|1,] SEQUENCE { OID }, … }.
    static func algorithm(of der: [UInt8]) -> (set: LatticeParameterSet, isPrivate: Bool)? {
        guard var content = DER.content(of: der, tag: 0x30) else { return nil }
        defer { wipe(&content) }
        var rest = content[...]
        let isPrivate = rest.starts(with: [0x02, 0x01, 0x00]) || rest.starts(with: [0x02, 0x01, 0x01])
        if isPrivate { rest = rest.dropFirst(3) }
        // SEQUENCE (11 bytes) { OID (9 bytes) }.
        guard rest.starts(with: [0x30, 0x0B]) else { return nil }
        guard let set = LatticeParameterSet.withObjectIdentifier(Array(rest.dropFirst(2).prefix(11))) else { return nil }
        return (set, isPrivate)
    }

    /// Whether a lattice PKCS#8 key's privateKey OCTET STRING holds the expanded key alone (an
    /// OCTET STRING) rather than `[0] seed` or SEQUENCE { seed, expanded key }.
    private static func privateKeyIsExpandedOnly(_ der: [UInt8]) -> Bool {
        guard var content = DER.content(of: der, tag: 0x30) else { return false }
        defer { wipe(&content) }
        // INTEGER version (3 bytes), AlgorithmIdentifier (13 bytes), then the OCTET STRING.
        let field = content.dropFirst(16)
        guard field.first == 0x04, field.count >= 2 else { return false }
        let lengthByte = field[field.startIndex + 1]
        let header = lengthByte < 0x80 ? 2 : 2 + Int(lengthByte & 0x7F)
        guard field.count > header else { return false }
        return field[field.startIndex + header] == 0x04
    }
}

/// The blocks of a PEM text (RFC 7468): label and decoded body. A key's body is secret: the
/// caller wipes it.
enum PEMText {
    struct Block {
        let label: String
        var body: [UInt8]
    }

    private static let begin = Array("-----BEGIN ".utf8), end = Array("-----END ".utf8), dashes = Array("-----".utf8)

    /// The blocks of `data`, or nil when it is not PEM (no BEGIN line, or a block that does not decode).
    static func blocks(in data: [UInt8]) -> [Block]? {
        var blocks: [Block] = []
        var label: [UInt8]?
        var base64: [UInt8] = []
        defer { wipe(&base64) }
        for rawLine in data.split(separator: 0x0A, omittingEmptySubsequences: false) {
            var line = rawLine
            while let last = line.last, last == 0x0D || last == 0x20 || last == 0x09 { line = line.dropLast() }
            if label == nil {
                if line.starts(with: begin), line.count > begin.count + dashes.count, line.suffix(dashes.count).elementsEqual(dashes) {
                    label = Array(line.dropFirst(begin.count).dropLast(dashes.count))
                }
            } else if line.starts(with: end) {
                guard let current = label, line.elementsEqual(end + current + dashes), let body = Base64Text.decode(base64) else { return nil }
                blocks.append(Block(label: String(decoding: current, as: UTF8.self), body: body))
                wipe(&base64)
                base64 = []
                label = nil
            } else if !line.contains(0x3A) {
                // RFC 1421 header lines (Proc-Type: …) carry a colon; base64 never does.
                base64 += line
            }
        }
        return blocks.isEmpty || label != nil ? nil : blocks
    }
}

/// Base64 (RFC 4648) of a PEM body, spaces ignored.
enum Base64Text {
    static func decode(_ text: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        var padding = 0
        for byte in text {
            let value: UInt32
            switch byte {
            case 0x41...0x5A: value = UInt32(byte - 0x41)
            case 0x61...0x7A: value = UInt32(byte - 0x61 + 26)
            case 0x30...0x39: value = UInt32(byte - 0x30 + 52)
            case 0x2B: value = 62
            case 0x2F: value = 63
            case 0x3D:
                padding += 1
                continue
            case 0x20, 0x09, 0x0D: continue
            default: return nil
            }
            guard padding == 0 else { return nil }
            accumulator = accumulator << 6 | value
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        guard padding <= 2, (bits == 0 && padding == 0) || (bits == 4 && padding == 2) || (bits == 2 && padding == 1) else {
            wipe(&out)
            return nil
        }
        return out
    }
}
