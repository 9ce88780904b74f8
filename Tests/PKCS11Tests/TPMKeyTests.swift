import CPKCS11
import Foundation
import Glibc
import XCTest
import KeychainCore
import KeychainCrypto
import KeychainTPM
import TPMTestSupport
@testable import PKCS11

/// Keys made in the TPM through PKCS#11 (CKA_KC_TPM), against a fresh swtpm per test: generation,
/// their attributes, signatures and ECDH made there (checked by OpenSSL over the caller's input),
/// what they refuse, no TPM, a TPM that dies or stops answering, and the key kept across
/// C_Finalize with the TPM connection let go.
final class TPMKeyTests: ModuleTestCase {
    private var tpm: SoftwareTPM?

    /// CKA_KC_TPM (the header's macro is a cast Swift does not import: its base is re-exported).
    static let tpmAttribute = UInt(KC_VENDOR_ATTRIBUTE_BASE) + 0x2C
    /// The internal attribute holding the TPM's blob, which no caller may see or search by.
    static let tpmBlobAttribute = UInt(KC_VENDOR_ATTRIBUTE_BASE) + 0x2D
    static let p256: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
    static let p384: [UInt8] = [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x22]
    static let yes: [UInt8] = [1], no: [UInt8] = [0]
    /// DigestInfo's DER prefix for SHA-256 (RFC 8017 §9.2 note 1).
    static let sha256DigestInfo: [UInt8] = [0x30, 0x31, 0x30, 0x0D, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20]

    override func setUp() {
        super.setUp()
        // The device key stays a clear file here: these tests swap and silence the TPM under a
        // keychain, which a sealed device key would also feel (DeviceKeyTPMTests cover that).
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY_TPM", "no", 1)
        do {
            let started = try SoftwareTPM()
            tpm = started
            setenv("KEYCHAIN_PKCS11_TCTI", started.tcti, 1)
        } catch {
            // XCTSkip when swtpm is missing: the test methods skip through `requireTPM`.
            tpm = nil
        }
    }

    override func tearDown() {
        super.tearDown()  // C_Finalize: the loaded keys, and with them the TPM connection, go first.
        tpm?.stop()
        unsetenv("KEYCHAIN_PKCS11_TCTI")
        unsetenv("KEYCHAIN_PKCS11_DEVICE_KEY_TPM")
    }

    private func requireTPM() throws -> SoftwareTPM {
        guard let tpm else { throw XCTSkip("swtpm is missing (scripts/install-deps.sh installs it)") }
        return tpm
    }

    // MARK: helpers

    /// A key pair from C_GenerateKeyPair; the private template asks for the TPM unless `inTPM` is false.
    func generate(_ session: CK_SESSION_HANDLE, _ type: UInt = UInt(CKM_EC_KEY_PAIR_GEN), public publicAttributes: [(UInt, [UInt8])],
                  private privateAttributes: [(UInt, [UInt8])] = [], inTPM: Bool = true, expect: UInt = CKR_OK,
                  file: StaticString = #filePath, line: UInt = #line) -> (publicKey: CK_OBJECT_HANDLE, privateKey: CK_OBJECT_HANDLE) {
        var publicKey: CK_OBJECT_HANDLE = 0, privateKey: CK_OBJECT_HANDLE = 0
        let privateTemplate = (inTPM ? [(Self.tpmAttribute, Self.yes)] : []) + privateAttributes
        let result = withTemplate(publicAttributes) { pt, pc in
            withTemplate(privateTemplate) { vt, vc in
                mechanism(type) { p11.C_GenerateKeyPair!(session, $0, pt, pc, vt, vc, &publicKey, &privateKey) }
            }
        }
        XCTAssertRV(result, expect, "C_GenerateKeyPair", file: file, line: line)
        return (publicKey, privateKey)
    }

    func ecPair(_ session: CK_SESSION_HANDLE, curve: [UInt8] = p256, label: String = "tpm-key", token: Bool = true,
                file: StaticString = #filePath, line: UInt = #line) -> (publicKey: CK_OBJECT_HANDLE, privateKey: CK_OBJECT_HANDLE) {
        generate(session, public: [(UInt(CKA_EC_PARAMS), curve), (UInt(CKA_TOKEN), token ? Self.yes : Self.no), (UInt(CKA_LABEL), Array(label.utf8))],
                 private: [(UInt(CKA_TOKEN), token ? Self.yes : Self.no), (UInt(CKA_LABEL), Array(label.utf8)), (UInt(CKA_SIGN), Self.yes),
                           (UInt(CKA_DERIVE), Self.yes)], file: file, line: line)
    }

    /// C_Sign in one part (with the length query first).
    func sign(_ session: CK_SESSION_HANDLE, _ type: UInt, key: CK_OBJECT_HANDLE, data: [UInt8]) -> (CK_RV, [UInt8]) {
        var data = data
        let initResult = mechanism(type) { p11.C_SignInit!(session, $0, key) }
        guard initResult == CK_RV(CKR_OK) else { return (initResult, []) }
        var length: CK_ULONG = 0
        let query = p11.C_Sign!(session, &data, CK_ULONG(data.count), nil, &length)
        guard query == CK_RV(CKR_OK) else { return (query, []) }
        var signature = [UInt8](repeating: 0, count: Int(length))
        let result = p11.C_Sign!(session, &data, CK_ULONG(data.count), &signature, &length)
        return (result, Array(signature.prefix(Int(length))))
    }

    /// C_SignUpdate for each part, then C_SignFinal.
    func signInParts(_ session: CK_SESSION_HANDLE, _ type: UInt, key: CK_OBJECT_HANDLE, parts: [[UInt8]]) -> (CK_RV, [UInt8]) {
        let initResult = mechanism(type) { p11.C_SignInit!(session, $0, key) }
        guard initResult == CK_RV(CKR_OK) else { return (initResult, []) }
        for part in parts {
            var part = part
            let result = p11.C_SignUpdate!(session, &part, CK_ULONG(part.count))
            guard result == CK_RV(CKR_OK) else { return (result, []) }
        }
        var length: CK_ULONG = 0
        XCTAssertRV(p11.C_SignFinal!(session, nil, &length), CKR_OK)
        var signature = [UInt8](repeating: 0, count: Int(length))
        let result = p11.C_SignFinal!(session, &signature, &length)
        return (result, Array(signature.prefix(Int(length))))
    }

    /// The public key as OpenSSL has it, from the public-key object's CKA_PUBLIC_KEY_INFO.
    func publicKey(_ session: CK_SESSION_HANDLE, _ handle: CK_OBJECT_HANDLE) throws -> AsymmetricKey {
        let (result, info) = value(session, handle, UInt(CKA_PUBLIC_KEY_INFO))
        XCTAssertRV(result, CKR_OK)
        return try AsymmetricKey.publicKey(subjectPublicKeyInfo: info ?? [])
    }

    /// Whether OpenSSL finds `signature` valid over `input` (not through the module).
    func opensslVerifies(_ key: AsymmetricKey, _ scheme: SignatureScheme, input: [UInt8], signature: [UInt8]) throws -> Bool {
        let verifier = try SignatureOperation(key: key, scheme: scheme, signing: false)
        try input.withUnsafeBytes { try verifier.update($0) }
        return try verifier.verify(signature)
    }

    private func loggedIn(_ slot: CK_SLOT_ID) -> CK_SESSION_HANDLE {
        let session = openSession(slot, readWrite: true)
        XCTAssertRV(login(session), CKR_OK)
        return session
    }

    /// The objects loaded in the TPM (transient handles), as tpm2-tools' tpm2_getcap lists them;
    /// nil without tpm2-tools. A key the module holds is one; the connection's primary key another.
    static func loadedObjects(_ tpm: SoftwareTPM) -> Int? {
        let program = "/usr/bin/tpm2_getcap"
        guard access(program, X_OK) == 0 else { return nil }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = ["-T", tpm.tcti, "handles-transient"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix("- 0x80") }.count
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) * 1000 + Double(time.tv_nsec) / 1_000_000
    }

    // MARK: generation and attributes

    func test_the_vendor_attribute_is_the_one_the_module_reads() {
        XCTAssertEqual(Self.tpmAttribute, UInt(KC_VENDOR_DEFINED) | 0x4B43_002C)
        XCTAssertEqual(Self.tpmAttribute, UInt(AttributeType.tpm.rawValue))
        XCTAssertEqual(Self.tpmBlobAttribute, UInt(AttributeType.tpmBlob.rawValue))
    }

    func test_a_P256_key_made_in_the_TPM_has_the_attributes_of_a_key_that_never_leaves() throws {
        _ = try requireTPM()
        let session = userSession()
        let pair = ecPair(session)
        let key = pair.privateKey
        for (type, expected) in [(CKA_EXTRACTABLE, Self.no), (CKA_NEVER_EXTRACTABLE, Self.yes), (CKA_ALWAYS_SENSITIVE, Self.yes), (CKA_LOCAL, Self.yes),
                                 (CKA_SENSITIVE, Self.yes), (CKA_SIGN, Self.yes), (Self.tpmAttribute, Self.yes), (CKA_TOKEN, Self.yes), (CKA_PRIVATE, Self.yes)] {
            let (result, bytes) = value(session, key, UInt(type))
            XCTAssertRV(result, CKR_OK, "attribute 0x\(String(type, radix: 16))")
            XCTAssertEqual(bytes, expected, "attribute 0x\(String(type, radix: 16))")
        }
        XCTAssertEqual(value(session, key, UInt(CKA_KEY_GEN_MECHANISM)).1, Self.ulong(UInt(CKM_EC_KEY_PAIR_GEN)))
        XCTAssertEqual(value(session, key, UInt(CKA_EC_PARAMS)).1, Self.p256)
        // The secret part is sensitive; the TPM's blob is no attribute at all.
        XCTAssertRV(value(session, key, UInt(CKA_VALUE)).0, CKR_ATTRIBUTE_SENSITIVE)
        XCTAssertRV(value(session, key, Self.tpmBlobAttribute).0, CKR_ATTRIBUTE_TYPE_INVALID)
        XCTAssertRV(value(session, key, UInt(CKA_PRIME_1)).0, CKR_ATTRIBUTE_TYPE_INVALID, "an EC key has no RSA parts")
        // The public key is an ordinary one; both halves name the same key.
        XCTAssertEqual(value(session, pair.publicKey, Self.tpmAttribute).0, CK_RV(CKR_ATTRIBUTE_TYPE_INVALID))
        XCTAssertEqual(value(session, key, UInt(CKA_PUBLIC_KEY_INFO)).1, value(session, pair.publicKey, UInt(CKA_PUBLIC_KEY_INFO)).1)
        XCTAssertEqual(value(session, key, UInt(CKA_ID)).1, value(session, pair.publicKey, UInt(CKA_ID)).1)
        // A search finds it by the vendor attribute, and never by the blob.
        XCTAssertEqual(find(session, [(Self.tpmAttribute, Self.yes)]), [key])
        XCTAssertEqual(find(session, [(Self.tpmBlobAttribute, [])]), [])
        XCTAssertEqual(find(session, [(UInt(CKA_VALUE), [UInt8](repeating: 0, count: 32)), (UInt(CKA_CLASS), Self.ulong(UInt(CKO_PRIVATE_KEY)))]), [])
        // What the keychain stores for it (read through KeychainCore, decrypted): no private value,
        // only the TPM's wrapped key in the KCSE format.
        let files = KeychainDirectory(path: directory).keychainFiles()
        XCTAssertEqual(files.count, 1)
        let keychain = try Keychain.open(at: files.first ?? "")
        let master = try userPIN.withUnsafeBytes { try keychain.unlock(.user, pin: $0) }
        let stored = try keychain.find([(.tpm, AttributeValue.bool(true))], master: master)
        XCTAssertEqual(stored.count, 1)
        let record = try keychain.object(id: stored.first?.id ?? 0, master: master)
        XCTAssertNil(record[.value])
        XCTAssertEqual(Array(record[.tpmBlob]?.prefix(4) ?? []), Array("KCSE".utf8))
        XCTAssertEqual(try EnclaveKeyBlob(of: record)?.keychainSerial.count, 16)
    }

    func test_only_C_GenerateKeyPair_makes_a_TPM_key_and_the_attribute_never_changes() throws {
        _ = try requireTPM()
        let session = userSession()
        let (_, key) = ecPair(session)
        // C_CreateObject of a private key claiming to be in the TPM.
        let software = AsymmetricKeyMaterial.p256Scalar
        var handle: CK_OBJECT_HANDLE = 0
        let create: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_PRIVATE_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_EC))),
                                         (UInt(CKA_EC_PARAMS), Self.p256), (UInt(CKA_VALUE), software), (Self.tpmAttribute, Self.yes)]
        XCTAssertRV(withTemplate(create) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_ATTRIBUTE_VALUE_INVALID)
        XCTAssertRV(withTemplate(Array(create.dropLast()) + [(Self.tpmAttribute, Self.no)]) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_OK,
                    "CKA_KC_TPM FALSE is the default, and may be said")
        // C_UnwrapKey of a key wrapped elsewhere, claiming to be in the TPM.
        var wrappingKey: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_VALUE_LEN), Self.ulong(32)), (UInt(CKA_WRAP), Self.yes), (UInt(CKA_UNWRAP), Self.yes)]) { t, c in
            mechanism(UInt(CKM_AES_KEY_GEN)) { p11.C_GenerateKey!(session, $0, t, c, &wrappingKey) }
        }, CKR_OK)
        let plain = generate(session, public: [(UInt(CKA_EC_PARAMS), Self.p256)],
                             private: [(UInt(CKA_EXTRACTABLE), Self.yes), (UInt(CKA_SENSITIVE), Self.no)], inTPM: false)
        var wrapped = [UInt8](repeating: 0, count: 512)
        var length = CK_ULONG(wrapped.count)
        XCTAssertRV(mechanism(UInt(CKM_AES_KEY_WRAP_PAD)) { p11.C_WrapKey!(session, $0, wrappingKey, plain.privateKey, &wrapped, &length) }, CKR_OK)
        wrapped = Array(wrapped.prefix(Int(length)))
        let unwrapTemplate: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_PRIVATE_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_EC)))]
        for (tpmValue, expected) in [(Self.yes, CKR_ATTRIBUTE_VALUE_INVALID), (Self.no, CKR_OK)] {
            var blob = wrapped
            XCTAssertRV(withTemplate(unwrapTemplate + [(Self.tpmAttribute, tpmValue)]) { t, c in
                mechanism(UInt(CKM_AES_KEY_WRAP_PAD)) { p11.C_UnwrapKey!(session, $0, wrappingKey, &blob, CK_ULONG(blob.count), t, c, &handle) }
            }, expected, "C_UnwrapKey with CKA_KC_TPM \(tpmValue)")
        }
        // The TPM key never leaves: not wrapped, not turned into a software key or back.
        length = CK_ULONG(wrapped.count)
        var out = [UInt8](repeating: 0, count: 512)
        XCTAssertRV(mechanism(UInt(CKM_AES_KEY_WRAP_PAD)) { p11.C_WrapKey!(session, $0, wrappingKey, key, &out, &length) }, CKR_KEY_UNEXTRACTABLE)
        for tpmValue in [Self.no, Self.yes] {
            XCTAssertRV(withTemplate([(Self.tpmAttribute, tpmValue)]) { p11.C_SetAttributeValue!(session, key, $0, $1) }, CKR_ATTRIBUTE_READ_ONLY)
            XCTAssertRV(withTemplate([(Self.tpmAttribute, tpmValue)]) { p11.C_SetAttributeValue!(session, plain.privateKey, $0, $1) }, CKR_ATTRIBUTE_READ_ONLY)
        }
        XCTAssertRV(withTemplate([(UInt(CKA_EXTRACTABLE), Self.yes)]) { p11.C_SetAttributeValue!(session, key, $0, $1) }, CKR_ATTRIBUTE_READ_ONLY)
        XCTAssertRV(withTemplate([(Self.tpmAttribute, Self.no)]) { p11.C_CopyObject!(session, key, $0, $1, &handle) }, CKR_ATTRIBUTE_READ_ONLY)
        // A copy (a session object here) is the same TPM key under another handle: it signs.
        var copy: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_TOKEN), Self.no), (UInt(CKA_LABEL), Array("copy".utf8))]) { p11.C_CopyObject!(session, key, $0, $1, &copy) }, CKR_OK)
        XCTAssertEqual(value(session, copy, Self.tpmAttribute).1, Self.yes)
        XCTAssertRV(value(session, copy, UInt(CKA_VALUE)).0, CKR_ATTRIBUTE_SENSITIVE)
        XCTAssertRV(sign(session, UInt(CKM_ECDSA), key: copy, data: [UInt8](repeating: 9, count: 32)).0, CKR_OK)
        // The vendor attribute belongs to the private key's template.
        _ = generate(session, public: [(UInt(CKA_EC_PARAMS), Self.p256), (Self.tpmAttribute, Self.yes)], expect: CKR_TEMPLATE_INCONSISTENT)
        _ = generate(session, public: [(UInt(CKA_EC_PARAMS), Self.p256)], private: [(UInt(CKA_EXTRACTABLE), Self.yes)], expect: CKR_TEMPLATE_INCONSISTENT)
        _ = generate(session, public: [(UInt(CKA_EC_PARAMS), Self.p256)], private: [(Self.tpmAttribute, [1, 0])], inTPM: false,
                     expect: CKR_ATTRIBUTE_VALUE_INVALID)
    }

    func test_TPM_keys_need_the_user_login_and_fit_the_TPM() throws {
        _ = try requireTPM()
        let slot = makeToken()
        let session = openSession(slot, readWrite: true)
        // Not logged in (a session key would be allowed otherwise): the TPM authorisation needs the master key.
        _ = generate(session, public: [(UInt(CKA_EC_PARAMS), Self.p256), (UInt(CKA_TOKEN), Self.no)],
                     private: [(UInt(CKA_TOKEN), Self.no), (UInt(CKA_PRIVATE), Self.no)], expect: CKR_USER_NOT_LOGGED_IN)
        XCTAssertRV(login(session), CKR_OK)
        // Curves and sizes the TPM does not make.
        let p521: [UInt8] = [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x23]
        _ = generate(session, public: [(UInt(CKA_EC_PARAMS), p521)], expect: CKR_ATTRIBUTE_VALUE_INVALID)
        _ = generate(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), public: [(UInt(CKA_MODULUS_BITS), Self.ulong(3072))], expect: CKR_ATTRIBUTE_VALUE_INVALID)
        _ = generate(session, UInt(CKM_EC_EDWARDS_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), [0x06, 0x03, 0x2B, 0x65, 0x70])],
                     expect: CKR_ATTRIBUTE_VALUE_INVALID)
        // A session object may be a TPM key too; it signs, and goes with its session.
        let pair = ecPair(session, token: false)
        XCTAssertEqual(value(session, pair.privateKey, UInt(CKA_TOKEN)).1, Self.no)
        let digest = [UInt8](repeating: 0x42, count: 32)
        let (result, signature) = sign(session, UInt(CKM_ECDSA), key: pair.privateKey, data: digest)
        XCTAssertRV(result, CKR_OK)
        XCTAssertTrue(try opensslVerifies(try publicKey(session, pair.publicKey), .ecdsa(digest: nil), input: digest, signature: signature))
    }

    // MARK: signing

    func test_ECDSA_signatures_made_in_the_TPM_verify_over_the_callers_input() throws {
        _ = try requireTPM()
        let session = userSession()
        let pair = ecPair(session)
        let verifier = try publicKey(session, pair.publicKey)
        // CKM_ECDSA: digests of every usual size, and inputs longer or shorter than the order.
        for length in [32, 20, 28, 48, 64, 1, 33, 100] {
            let input = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let (result, signature) = sign(session, UInt(CKM_ECDSA), key: pair.privateKey, data: input)
            XCTAssertRV(result, CKR_OK, "CKM_ECDSA over \(length) bytes")
            XCTAssertEqual(signature.count, 64)
            XCTAssertTrue(try opensslVerifies(verifier, .ecdsa(digest: nil), input: input, signature: signature), "CKM_ECDSA over \(length) bytes")
            var data = input, signed = signature
            XCTAssertRV(mechanism(UInt(CKM_ECDSA)) { p11.C_VerifyInit!(session, $0, pair.publicKey) }, CKR_OK)
            XCTAssertRV(p11.C_Verify!(session, &data, CK_ULONG(data.count), &signed, CK_ULONG(signed.count)), CKR_OK, "C_Verify, \(length) bytes")
        }
        // The hashing mechanisms, one part and several.
        let message = Array("a message the TPM never sees whole".utf8)
        let hashing: [(UInt, Digest.Algorithm)] = [(UInt(CKM_ECDSA_SHA256), .sha256), (UInt(CKM_ECDSA_SHA1), .sha1), (UInt(CKM_ECDSA_SHA224), .sha224),
                                                   (UInt(CKM_ECDSA_SHA384), .sha384), (UInt(CKM_ECDSA_SHA512), .sha512), (UInt(CKM_ECDSA_SHA3_256), .sha3_256)]
        for (type, digest) in hashing {
            let (result, signature) = sign(session, type, key: pair.privateKey, data: message)
            XCTAssertRV(result, CKR_OK, "mechanism 0x\(String(type, radix: 16))")
            XCTAssertTrue(try opensslVerifies(verifier, .ecdsa(digest: digest), input: message, signature: signature), "\(digest), one part")
            let (partsResult, partsSignature) = signInParts(session, type, key: pair.privateKey, parts: [Array(message.prefix(5)), [], Array(message.dropFirst(5))])
            XCTAssertRV(partsResult, CKR_OK)
            XCTAssertTrue(try opensslVerifies(verifier, .ecdsa(digest: digest), input: message, signature: partsSignature), "\(digest), in parts")
        }
        // A wrong check fails (the checks above can fail).
        let (_, signature) = sign(session, UInt(CKM_ECDSA_SHA256), key: pair.privateKey, data: message)
        XCTAssertFalse(try opensslVerifies(verifier, .ecdsa(digest: .sha256), input: message + [0], signature: signature))
        // The usual key checks hold.
        XCTAssertRV(mechanism(UInt(CKM_ECDSA)) { p11.C_SignInit!(session, $0, pair.publicKey) }, CKR_KEY_TYPE_INCONSISTENT)
        let noSign = generate(session, public: [(UInt(CKA_EC_PARAMS), Self.p256)], private: [(UInt(CKA_SIGN), Self.no)])
        XCTAssertRV(mechanism(UInt(CKM_ECDSA)) { p11.C_SignInit!(session, $0, noSign.privateKey) }, CKR_KEY_FUNCTION_NOT_PERMITTED)
    }

    func test_a_P384_key_signs_in_the_TPM() throws {
        _ = try requireTPM()
        let session = userSession()
        let pair = ecPair(session, curve: Self.p384)
        let verifier = try publicKey(session, pair.publicKey)
        for length in [48, 32, 64, 20] {
            let input = (0..<length).map { UInt8(truncatingIfNeeded: 200 &- $0) }
            let (result, signature) = sign(session, UInt(CKM_ECDSA), key: pair.privateKey, data: input)
            XCTAssertRV(result, CKR_OK)
            XCTAssertEqual(signature.count, 96)
            XCTAssertTrue(try opensslVerifies(verifier, .ecdsa(digest: nil), input: input, signature: signature), "P-384 over \(length) bytes")
        }
        let (result, signature) = signInParts(session, UInt(CKM_ECDSA_SHA384), key: pair.privateKey, parts: [Array("p384".utf8), Array(" parts".utf8)])
        XCTAssertRV(result, CKR_OK)
        XCTAssertTrue(try opensslVerifies(verifier, .ecdsa(digest: .sha384), input: Array("p384 parts".utf8), signature: signature))
    }

    func test_an_RSA_2048_key_signs_DigestInfos_and_hashes_in_the_TPM() throws {
        _ = try requireTPM()
        let session = userSession()
        // The TPM's key signs only: a template asking it to decrypt is inconsistent, and the role is FALSE by default.
        _ = generate(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), public: [(UInt(CKA_MODULUS_BITS), Self.ulong(2048))],
                     private: [(UInt(CKA_DECRYPT), Self.yes)], expect: CKR_TEMPLATE_INCONSISTENT)
        let pair = generate(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), public: [(UInt(CKA_MODULUS_BITS), Self.ulong(2048))],
                            private: [(UInt(CKA_SIGN), Self.yes)])
        XCTAssertEqual([CKA_SIGN, CKA_DECRYPT, CKA_UNWRAP, CKA_SIGN_RECOVER].map { value(session, pair.privateKey, UInt($0)).1 ?? [] },
                       [Self.yes, Self.no, Self.no, Self.no])
        XCTAssertEqual(value(session, pair.privateKey, UInt(CKA_PUBLIC_EXPONENT)).1, [0x01, 0x00, 0x01])
        XCTAssertRV(value(session, pair.privateKey, UInt(CKA_PRIVATE_EXPONENT)).0, CKR_ATTRIBUTE_SENSITIVE)
        XCTAssertRV(value(session, pair.privateKey, UInt(CKA_PRIME_1)).0, CKR_ATTRIBUTE_SENSITIVE)
        let verifier = try publicKey(session, pair.publicKey)
        let message = Array("signed by OpenSSH's way: a DigestInfo".utf8)
        // CKM_RSA_PKCS over a DigestInfo, as OpenSSH and TLS sign.
        let digestInfo = Self.sha256DigestInfo + (try Digest.hash(.sha256, message))
        let (result, signature) = sign(session, UInt(CKM_RSA_PKCS), key: pair.privateKey, data: digestInfo)
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(signature.count, 256)
        XCTAssertTrue(try opensslVerifies(verifier, .rsaPKCS1(digest: .sha256), input: message, signature: signature))
        XCTAssertTrue(try opensslVerifies(verifier, .rsaPKCS1(digest: nil), input: digestInfo, signature: signature))
        // The hashing mechanisms the TPM's RSASSA has, one part and several.
        for (type, digest) in [(UInt(CKM_SHA256_RSA_PKCS), Digest.Algorithm.sha256), (UInt(CKM_SHA1_RSA_PKCS), .sha1),
                               (UInt(CKM_SHA384_RSA_PKCS), .sha384), (UInt(CKM_SHA512_RSA_PKCS), .sha512)] {
            let (oneResult, one) = sign(session, type, key: pair.privateKey, data: message)
            XCTAssertRV(oneResult, CKR_OK, "\(digest)")
            XCTAssertTrue(try opensslVerifies(verifier, .rsaPKCS1(digest: digest), input: message, signature: one), "\(digest)")
            let (partsResult, parts) = signInParts(session, type, key: pair.privateKey, parts: [Array(message.prefix(3)), Array(message.dropFirst(3))])
            XCTAssertRV(partsResult, CKR_OK)
            XCTAssertEqual(parts, one, "RSASSA-PKCS1-v1_5 is deterministic: \(digest)")
        }
        // Input that is no DigestInfo the TPM can pad; schemes the TPM does not have here.
        XCTAssertRV(sign(session, UInt(CKM_RSA_PKCS), key: pair.privateKey, data: Array(repeating: 7, count: 36)).0, CKR_DATA_INVALID)
        XCTAssertRV(sign(session, UInt(CKM_RSA_PKCS), key: pair.privateKey, data: Array(digestInfo.dropLast())).0, CKR_DATA_INVALID)
        for type in [CKM_RSA_X_509, CKM_SHA224_RSA_PKCS, CKM_SHA3_256_RSA_PKCS] {
            XCTAssertRV(mechanism(UInt(type)) { p11.C_SignInit!(session, $0, pair.privateKey) }, CKR_MECHANISM_INVALID, "mechanism 0x\(String(type, radix: 16))")
        }
        let pss = CK_RSA_PKCS_PSS_PARAMS(hashAlg: CK_MECHANISM_TYPE(CKM_SHA256), mgf: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA256), sLen: 32)
        XCTAssertRV(mechanism(UInt(CKM_SHA256_RSA_PKCS_PSS), parameter: pss) { p11.C_SignInit!(session, $0, pair.privateKey) }, CKR_MECHANISM_INVALID)
        // Decryption would need the private key here: refused even once the role is set afterwards.
        XCTAssertRV(mechanism(UInt(CKM_RSA_PKCS)) { p11.C_DecryptInit!(session, $0, pair.privateKey) }, CKR_KEY_FUNCTION_NOT_PERMITTED)
        XCTAssertRV(withTemplate([(UInt(CKA_DECRYPT), Self.yes)]) { p11.C_SetAttributeValue!(session, pair.privateKey, $0, $1) }, CKR_OK)
        XCTAssertRV(mechanism(UInt(CKM_RSA_PKCS)) { p11.C_DecryptInit!(session, $0, pair.privateKey) }, CKR_KEY_FUNCTION_NOT_PERMITTED)
    }

    // MARK: key agreement

    func test_ECDH_in_the_TPM_agrees_with_software_ECDH() throws {
        _ = try requireTPM()
        let session = userSession()
        let inTPM = ecPair(session)
        let software = generate(session, public: [(UInt(CKA_EC_PARAMS), Self.p256)], private: [(UInt(CKA_DERIVE), Self.yes)], inTPM: false)
        for (kdf, length) in [(UInt(CKD_NULL), nil as UInt?), (UInt(CKD_NULL), 16), (UInt(CKD_SHA256_KDF), 32), (UInt(CKD_SHA1_KDF), 24)] {
            let (tpmResult, tpmSide) = agreedSecret(session, mine: inTPM.privateKey, theirs: software.publicKey, kdf: kdf, length: length)
            let (softResult, softSide) = agreedSecret(session, mine: software.privateKey, theirs: inTPM.publicKey, kdf: kdf, length: length)
            XCTAssertRV(tpmResult, CKR_OK, "kdf \(kdf)")
            XCTAssertRV(softResult, CKR_OK)
            XCTAssertEqual(tpmSide.count, Int(length ?? 32))
            XCTAssertEqual(tpmSide, softSide, "kdf \(kdf), length \(String(describing: length))")
        }
        // A point that is not on the curve is refused before the TPM sees it.
        var bad = [0x04] + [UInt8](repeating: 1, count: 64)
        var derived: CK_OBJECT_HANDLE = 0
        let result = bad.withUnsafeMutableBufferPointer { buffer in
            let params = CK_ECDH1_DERIVE_PARAMS(kdf: CK_ULONG(CKD_NULL), ulSharedDataLen: 0, pSharedData: nil,
                                                ulPublicDataLen: CK_ULONG(buffer.count), pPublicData: buffer.baseAddress)
            return withTemplate([(UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_GENERIC_SECRET)))]) { t, c in
                mechanism(UInt(CKM_ECDH1_DERIVE), parameter: params) { p11.C_DeriveKey!(session, $0, inTPM.privateKey, t, c, &derived) }
            }
        }
        XCTAssertRV(result, CKR_MECHANISM_PARAM_INVALID)
    }

    // MARK: no TPM, a TPM that dies or stops answering

    func test_without_a_TPM_the_vendor_attribute_is_refused_and_the_rest_works() throws {
        let running = try requireTPM()
        let session = userSession()
        setenv("KEYCHAIN_PKCS11_TCTI", "none", 1)
        _ = generate(session, public: [(UInt(CKA_EC_PARAMS), Self.p256)], expect: CKR_ATTRIBUTE_VALUE_INVALID)
        // A TPM configured but not there (nothing listens) is refused alike.
        setenv("KEYCHAIN_PKCS11_TCTI", running.tcti, 1)
        running.stop()
        _ = generate(session, public: [(UInt(CKA_EC_PARAMS), Self.p256)], expect: CKR_ATTRIBUTE_VALUE_INVALID)
        // Everything else works as before.
        let software = generate(session, public: [(UInt(CKA_EC_PARAMS), Self.p256)], private: [(UInt(CKA_SIGN), Self.yes)], inTPM: false)
        XCTAssertRV(sign(session, UInt(CKM_ECDSA_SHA256), key: software.privateKey, data: [1, 2, 3]).0, CKR_OK)
        XCTAssertEqual(value(session, software.privateKey, Self.tpmAttribute).1, Self.no)
    }

    func test_a_TPM_that_dies_mid_session_is_a_device_error_at_once() throws {
        let running = try requireTPM()
        let slot = makeToken()
        let session = loggedIn(slot)
        let pair = ecPair(session)
        let digest = [UInt8](repeating: 3, count: 32)
        XCTAssertRV(sign(session, UInt(CKM_ECDSA), key: pair.privateKey, data: digest).0, CKR_OK)
        running.kill9()
        let start = Self.now()
        XCTAssertRV(sign(session, UInt(CKM_ECDSA), key: pair.privateKey, data: digest).0, CKR_DEVICE_ERROR, "the loaded key, the TPM gone")
        XCTAssertRV(sign(session, UInt(CKM_ECDSA_SHA256), key: pair.privateKey, data: digest).0, CKR_DEVICE_ERROR)
        XCTAssertRV(agreedSecret(session, mine: pair.privateKey, theirs: pair.publicKey, kdf: UInt(CKD_NULL), length: nil).0, CKR_DEVICE_ERROR)
        // After a logout the key is loaded again at C_SignInit, which fails there.
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        XCTAssertRV(login(session), CKR_OK)
        XCTAssertRV(mechanism(UInt(CKM_ECDSA)) { p11.C_SignInit!(session, $0, pair.privateKey) }, CKR_DEVICE_ERROR)
        XCTAssertLessThan(Self.now() - start, 5_000, "no wait for a TPM that is gone")
        // The token itself still works.
        XCTAssertEqual(find(session, [(Self.tpmAttribute, Self.yes)]), [pair.privateKey])
    }

    func test_a_TPM_that_stops_answering_is_a_device_error_within_the_command_timeout() throws {
        _ = try requireTPM()
        let slot = makeToken()
        var session = loggedIn(slot)
        _ = ecPair(session, label: "silent")
        XCTAssertRV(p11.C_Finalize!(nil), CKR_OK)
        let silent = try SilentTPM()
        setenv("KEYCHAIN_PKCS11_TCTI", silent.tcti, 1)
        XCTAssertRV(p11.C_Initialize!(nil), CKR_OK)
        session = loggedIn(slot)
        let keys = find(session, [(UInt(CKA_LABEL), Array("silent".utf8)), (UInt(CKA_CLASS), Self.ulong(UInt(CKO_PRIVATE_KEY)))])
        XCTAssertEqual(keys.count, 1)
        let start = Self.now()
        EnclaveTPM.withTimeouts(TPMConnection.Timeouts(commandMilliseconds: 1_000, keyGenerationMilliseconds: 1_000)) {
            XCTAssertRV(mechanism(UInt(CKM_ECDSA)) { p11.C_SignInit!(session, $0, keys.first ?? 0) }, CKR_DEVICE_ERROR)
        }
        let elapsed = Self.now() - start
        XCTAssertGreaterThanOrEqual(elapsed, 1_000)
        XCTAssertLessThan(elapsed, 4_000)
    }

    // MARK: across logins and processes

    func test_the_key_survives_C_Finalize_and_the_TPM_is_let_go_at_logout() throws {
        let running = try requireTPM()
        let slot = makeToken()
        var session = loggedIn(slot)
        let first = ecPair(session, label: "kept")
        let digest = [UInt8](repeating: 0x5A, count: 32)
        XCTAssertRV(sign(session, UInt(CKM_ECDSA), key: first.privateKey, data: digest).0, CKR_OK)
        // While logged in the key stays loaded in the TPM (with the connection's primary key);
        // logout flushes it and closes the connection, which flushes the primary key.
        let loaded = Self.loadedObjects(running)
        if let loaded { XCTAssertEqual(loaded, 2, "the key and its primary while logged in") }
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        if loaded != nil { XCTAssertEqual(Self.loadedObjects(running), 0, "nothing left in the TPM after C_Logout") }
        // A new process: C_Finalize, C_Initialize, login, find, sign.
        XCTAssertRV(p11.C_Finalize!(nil), CKR_OK)
        XCTAssertRV(p11.C_Initialize!(nil), CKR_OK)
        session = loggedIn(slot)
        let found = find(session, [(UInt(CKA_LABEL), Array("kept".utf8)), (UInt(CKA_CLASS), Self.ulong(UInt(CKO_PRIVATE_KEY)))])
        XCTAssertEqual(found.count, 1)
        let publicKeys = find(session, [(UInt(CKA_LABEL), Array("kept".utf8)), (UInt(CKA_CLASS), Self.ulong(UInt(CKO_PUBLIC_KEY)))])
        let (result, signature) = sign(session, UInt(CKM_ECDSA), key: found.first ?? 0, data: digest)
        XCTAssertRV(result, CKR_OK)
        XCTAssertTrue(try opensslVerifies(try publicKey(session, publicKeys.first ?? 0), .ecdsa(digest: nil), input: digest, signature: signature))
        // C_Finalize lets the TPM go too.
        if loaded != nil { XCTAssertEqual(Self.loadedObjects(running), 2) }
        XCTAssertRV(p11.C_Finalize!(nil), CKR_OK)
        if loaded != nil { XCTAssertEqual(Self.loadedObjects(running), 0, "nothing left in the TPM after C_Finalize") }
        XCTAssertRV(p11.C_Initialize!(nil), CKR_OK)
    }

    func test_another_TPM_cannot_use_the_key() throws {
        let first = try requireTPM()
        let slot = makeToken()
        let session = loggedIn(slot)
        let pair = ecPair(session, label: "moved")
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        first.stop()
        // "Another machine": a second swtpm with its own seeds.
        let second = try SoftwareTPM()
        tpm = second
        setenv("KEYCHAIN_PKCS11_TCTI", second.tcti, 1)
        XCTAssertRV(login(session), CKR_OK)
        XCTAssertRV(mechanism(UInt(CKM_ECDSA)) { p11.C_SignInit!(session, $0, pair.privateKey) }, CKR_DEVICE_ERROR)
    }
}

/// A fixed P-256 private scalar for import tests (any value below the order will do).
enum AsymmetricKeyMaterial {
    static let p256Scalar: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
}
