import Glibc
import XCTest
import KeychainCrypto
import KeychainTPM
import TPMTestSupport
@testable import KeychainCore

/// Keys made inside the TPM for a keychain (swtpm, fresh per test): signing and ECDH there, the
/// blob format, the authorisation tied to the keychain's master key, and no TPM.
final class EnclaveKeyTests: KeychainFolderTestCase {
    private var tpm: SoftwareTPM?

    override func setUp() {
        super.setUp()
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY", root + "/state/device-key", 1)
    }

    override func tearDown() {
        tpm?.stop()
        unsetenv("KEYCHAIN_PKCS11_TCTI")
        super.tearDown()
    }

    private func startTPM() throws -> SoftwareTPM {
        let started = try SoftwareTPM()
        tpm = started
        setenv("KEYCHAIN_PKCS11_TCTI", started.tcti, 1)
        return started
    }

    private func unlocked(_ label: String) throws -> (Keychain, MasterKey) {
        let keychain = try create(label)
        return (keychain, try Array("1234".utf8).withUnsafeBytes { try keychain.unlock(.user, pin: $0) })
    }

    private func code(_ body: () throws -> Void) -> KeychainError.Code? {
        do { try body(); return nil } catch { return (error as? KeychainError)?.code }
    }

    private func reason(_ body: () throws -> Void) -> String {
        do { try body(); return "" } catch { return (error as? KeychainError)?.reason ?? "\(error)" }
    }

    func test_a_P256_key_signs_and_agrees_in_the_TPM_and_reloads_from_its_blob() throws {
        _ = try startTPM()
        XCTAssertTrue(EnclaveTPM.isAvailable)
        let (keychain, master) = try unlocked("enclave")
        let key = try keychain.createEnclaveKey(.ecP256, master: master)
        XCTAssertEqual(key.type, .ecP256)
        let digest = try Digest.hash(.sha256, Array("message".utf8))
        let signature = try key.sign(digest: digest)
        XCTAssertEqual(signature.count, 64)
        let verifier = try SignatureOperation(key: key.publicKey, scheme: .ecdsa(digest: nil), signing: false)
        try digest.withUnsafeBytes { try verifier.update($0) }
        XCTAssertTrue(try verifier.verify(signature))

        // ECDH against a software key: both sides reach the same secret.
        let peer = try AsymmetricKey.generate(.ec(.p256))
        let inTPM = try key.sharedSecret(peerPoint: try peer.publicKey().ecPoint())
        let inSoftware = try peer.sharedSecret(with: key.publicKey)
        XCTAssertEqual(inTPM.bytes, inSoftware.bytes)

        // The stored form round-trips and loads again with the same master key.
        let blob = try EnclaveKeyBlob(bytes: key.blob.bytes)
        XCTAssertEqual(blob, key.blob)
        XCTAssertEqual(blob.keychainSerial, try keychain.serialNumber())
        let again = try keychain.loadEnclaveKey(blob, master: master)
        XCTAssertEqual(try again.publicKey.ecPoint(), try key.publicKey.ecPoint())
        XCTAssertEqual(try again.sign(digest: digest).count, 64)
    }

    func test_the_blob_is_useless_to_another_keychain_or_without_the_right_master_key() throws {
        _ = try startTPM()
        let (keychain, master) = try unlocked("first")
        let (other, otherMaster) = try unlocked("second")
        let key = try keychain.createEnclaveKey(.ecP256, master: master)
        XCTAssertEqual(code { _ = try other.loadEnclaveKey(key.blob, master: otherMaster) }, .objectNotFound)
        // The right serial but another master key (as a thief who rewrote the serial would have):
        // the TPM refuses the authorisation.
        let forged = try EnclaveKeyBlob(bytes: key.blob.bytes)
        let loaded = try EnclaveKey(blob: forged, authValue: Keychain.enclaveAuthValue(for: forged, master: otherMaster))
        let digest = [UInt8](repeating: 7, count: 32)
        XCTAssertEqual(code { _ = try loaded.sign(digest: digest) }, .tpmFailure)
    }

    /// The access-control flags ride in the blob bound twice: editing them is caught by the tag
    /// on loading, and a blob whose tag check were skipped derives an authorisation the TPM refuses.
    func test_flags_edited_in_the_blob_are_refused_by_the_keychain_and_by_the_TPM() throws {
        _ = try startTPM()
        let (keychain, master) = try unlocked("flags")
        let presence: AccessControlFlags = [.privateKeyUsage, .userPresence]
        let key = try keychain.createEnclaveKey(.ecP256, master: master, accessFlags: presence)
        let digest = [UInt8](repeating: 9, count: 32)
        XCTAssertEqual(key.blob.bytes[4], 2)
        let stored = try EnclaveKeyBlob(bytes: key.blob.bytes)
        XCTAssertEqual(stored.accessFlags, presence)
        XCTAssertEqual(try keychain.loadEnclaveKey(stored, master: master).sign(digest: digest).count, 64)

        // "KCSE" 02 16 serial(16) then the flags, big-endian: user presence is bit 0 of byte 29.
        var edited = key.blob.bytes
        edited[29] &= ~UInt8(1)
        let tampered = try EnclaveKeyBlob(bytes: edited)
        XCTAssertEqual(tampered.accessFlags, [.privateKeyUsage])
        XCTAssertEqual(code { _ = try keychain.loadEnclaveKey(tampered, master: master) }, .recordCorrupted)
        let unchecked = try EnclaveKey(blob: tampered, authValue: Keychain.enclaveAuthValue(for: tampered, master: master))
        XCTAssertEqual(code { _ = try unchecked.sign(digest: digest) }, .tpmFailure)

        // Any other edited byte (salt, wrapped key) breaks the tag too; so does another master key.
        var salted = key.blob.bytes
        salted[31] ^= 0x01
        XCTAssertEqual(code { _ = try keychain.loadEnclaveKey(try EnclaveKeyBlob(bytes: salted), master: master) }, .recordCorrupted)
        let (_, otherMaster) = try unlocked("flags-other")
        XCTAssertEqual(code { _ = try keychain.loadEnclaveKey(stored, master: otherMaster) }, .recordCorrupted)

        // Rewritten as a version-1 blob (no flags, no tag to check): it loads, but its
        // authorisation is the version-1 one, which the TPM refuses.
        let serial = Array(stored.keychainSerial.utf8)
        let downgraded = try EnclaveKeyBlob(bytes: Array("KCSE".utf8) + [1, UInt8(serial.count)] + serial + stored.salt + stored.tpmBlob.bytes)
        XCTAssertEqual(downgraded.accessFlags, [])
        let loadedOld = try keychain.loadEnclaveKey(downgraded, master: master)
        XCTAssertEqual(code { _ = try loadedOld.sign(digest: digest) }, .tpmFailure)
    }

    /// Keys made before version 2 (no flags, no tag; the authorisation's HKDF info the label
    /// alone) still load and sign.
    func test_a_version_1_blob_still_loads() throws {
        _ = try startTPM()
        let (keychain, master) = try unlocked("v1")
        let salt = [UInt8](repeating: 0x5A, count: 32)
        let authValue = try KeyDerivation.hkdf(key: master.key, salt: salt, info: Array("keychain-pkcs11 tpm key auth".utf8), length: 32)
        let connection = try EnclaveTPM.connection()
        let tpmBlob = try connection.createKey(.ecP256, authValue: authValue)
        let serial = try keychain.serialNumber()
        let bytes = Array("KCSE".utf8) + [1, UInt8(serial.utf8.count)] + Array(serial.utf8) + salt + tpmBlob.bytes
        let blob = try EnclaveKeyBlob(bytes: bytes)
        XCTAssertEqual(blob.accessFlags, [])
        XCTAssertEqual(blob.bytes, bytes)
        let key = try keychain.loadEnclaveKey(blob, master: master)
        let digest = [UInt8](repeating: 4, count: 32)
        let signature = try key.sign(digest: digest)
        let verifier = try SignatureOperation(key: key.publicKey, scheme: .ecdsa(digest: nil), signing: false)
        try digest.withUnsafeBytes { try verifier.update($0) }
        XCTAssertTrue(try verifier.verify(signature))
    }

    func test_a_key_from_another_TPM_does_not_load() throws {
        _ = try startTPM()
        let (keychain, master) = try unlocked("moved")
        let blob = try keychain.createEnclaveKey(.ecP256, master: master).blob
        tpm?.stop()
        _ = try startTPM()
        XCTAssertEqual(code { _ = try keychain.loadEnclaveKey(blob, master: master) }, .tpmFailure)
    }

    func test_more_keys_than_the_TPM_has_slots_take_turns() throws {
        // swtpm, like the reference TPM, holds 3 loaded objects; the primary key takes one.
        _ = try startTPM()
        let (keychain, master) = try unlocked("many")
        let keys = try (0..<5).map { _ in try keychain.createEnclaveKey(.ecP256, master: master) }
        let digest = [UInt8](repeating: 3, count: 32)
        for _ in 0..<2 {
            for key in keys {
                let signature = try key.sign(digest: digest)
                let verifier = try SignatureOperation(key: key.publicKey, scheme: .ecdsa(digest: nil), signing: false)
                try digest.withUnsafeBytes { try verifier.update($0) }
                XCTAssertTrue(try verifier.verify(signature))
            }
        }
    }

    func test_without_a_TPM_nothing_is_made_and_the_error_says_so() throws {
        setenv("KEYCHAIN_PKCS11_TCTI", "none", 1)
        XCTAssertFalse(EnclaveTPM.isAvailable)
        let (keychain, master) = try unlocked("plain")
        XCTAssertEqual(code { _ = try keychain.createEnclaveKey(.ecP256, master: master) }, .tpmUnavailable)
        let noTPM = "this machine has no TPM (set KEYCHAIN_PKCS11_TCTI or `tcti` in the configuration file, or give /dev/tpmrm0)"
        XCTAssertEqual(reason { _ = try keychain.createEnclaveKey(.ecP256, master: master) }, noTPM)
        // A key-pair request with CKA_KC_TPM TRUE: the vendor attribute cannot be honoured.
        let request = KeyGeneration.Request(kind: .ec(.p256), keyType: .ec, bits: 256, publicExponent: nil)
        XCTAssertEqual(code { _ = try keychain.createEnclaveKey(for: request, master: master) }, .attributeValueInvalid)
        XCTAssertEqual(reason { _ = try keychain.createEnclaveKey(for: request, master: master) }, "CKA_KC_TPM: " + noTPM)
    }

    func test_damaged_blobs_are_refused_not_trusted() throws {
        XCTAssertEqual(code { _ = try EnclaveKeyBlob(bytes: []) }, .argumentsBad)
        XCTAssertEqual(code { _ = try EnclaveKeyBlob(bytes: Array("KCSE".utf8) + [3, 16]) }, .argumentsBad)
        XCTAssertEqual(code { _ = try EnclaveKeyBlob(bytes: Array("KCSE".utf8) + [2, 16] + Array("0123456789abcdef".utf8) + [UInt8](repeating: 0, count: 56)) }, .argumentsBad)
        XCTAssertEqual(code { _ = try EnclaveKeyBlob(bytes: Array("KCSE".utf8) + [1, 16] + Array("0123456789abcdef".utf8) + [UInt8](repeating: 0, count: 40)) }, .argumentsBad)
    }
}
