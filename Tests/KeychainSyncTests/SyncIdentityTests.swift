import Glibc
@testable import KeychainCore
import KeychainStore
import KeychainCrypto
import TPMTestSupport
import XCTest
@testable import KeychainSync

/// A device's identity key in the TPM (swtpm, fresh per test), or in software where there is none
/// (Docs/sync.md, "Identities and keys"): the circle works the same, and the sealed sync state
/// holds a TPM blob instead of a private key.
final class SyncIdentityTests: SyncTestCase {
    private var tpm: SoftwareTPM?

    override func tearDownWithError() throws {
        tpm?.stop()
        unsetenv("KEYCHAIN_PKCS11_TCTI")
        try super.tearDownWithError()
    }

    private func startTPM() throws {
        let started = try SoftwareTPM()
        tpm = started
        setenv("KEYCHAIN_PKCS11_TCTI", started.tcti, 1)
    }

    /// A TCTI that reaches nothing: a port bound for a moment and let go, where nothing listens.
    private func pointAtNoTPM() throws {
        let bound = try XCTUnwrap(SoftwareTPM.bindPort(0))
        close(bound.socket)
        setenv("KEYCHAIN_PKCS11_TCTI", "swtpm:host=127.0.0.1,port=\(bound.port)", 1)
    }

    private func kind(_ error: Error) -> SyncError.Kind? { (error as? SyncError)?.kind }

    func test_a_TPM_identity_signs_what_DeviceSignature_accepts_and_agrees_with_a_software_key() throws {
        try startTPM()
        let a = try device("a")
        let identity = try a.engine.makeIdentity(.tpm)
        XCTAssertTrue(identity is TPMDeviceIdentity)
        let message = Array("a manifest's header and box".utf8)
        let signature = try identity.sign(message)
        XCTAssertEqual(signature.count, 64)  // r‖s, as the software key's
        XCTAssertEqual(try SoftwareDeviceIdentity.generate().sign(message).count, 64)
        XCTAssertTrue(DeviceSignature.verify(signature, of: message, publicKeyInfo: identity.publicKeyInfo))
        XCTAssertFalse(DeviceSignature.verify(signature, of: message + [0], publicKeyInfo: identity.publicKeyInfo))
        let peer = try SoftwareDeviceIdentity.generate()
        XCTAssertEqual(try identity.sharedSecret(with: peer.publicKeyInfo).bytes, try peer.sharedSecret(with: identity.publicKeyInfo).bytes)
    }

    // A software founder, a device whose key is in the TPM, and a third (software) device it
    // approves: items cross both ways, and after a removal the new generation's key, wrapped to
    // the TPM device, is unwrapped there (ECDH in the TPM).
    func test_a_circle_with_a_TPM_device_syncs_both_ways_approves_and_takes_a_rotated_key() throws {
        try startTPM()
        let a = try device("a"), b = try device("b"), c = try device("c")
        try addPassword(a, account: "from-a", secret: "1")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop", identityKey: .software)
        let code = try b.engine.requestJoin(remote: remote, deviceName: "desktop", identityKey: .tpm)
        _ = try a.engine.approve(code: code)
        XCTAssertEqual(try a.engine.identityKind(), .software)
        XCTAssertEqual(try b.engine.identityKind(), .tpm)
        XCTAssertEqual(try b.engine.status().identityKey, .tpm)

        XCTAssertEqual(try b.engine.sync().received, 1)
        XCTAssertEqual(try secrets(b), ["from-a": "1"])
        try addPassword(b, account: "from-b", secret: "2")
        XCTAssertEqual(try b.engine.sync().sent, 1)  // a manifest signed in the TPM
        XCTAssertEqual(try a.engine.sync().received, 1)
        XCTAssertEqual(try secrets(a), ["from-a": "1", "from-b": "2"])

        // The TPM device approves: its add event and its wrapped key are signed in the TPM.
        let codeC = try c.engine.requestJoin(remote: remote, deviceName: "server", identityKey: .software)
        _ = try b.engine.approve(code: codeC)
        _ = try c.engine.sync()
        XCTAssertEqual(try secrets(c), ["from-a": "1", "from-b": "2"])

        _ = try a.engine.removeDevice("server")
        try addPassword(a, account: "after", secret: "3")
        _ = try a.engine.sync()
        XCTAssertEqual(try b.engine.sync().received, 1)
        XCTAssertEqual(try secrets(b), ["from-a": "1", "from-b": "2", "after": "3"])
        XCTAssertNotNil(try b.engine.secret("key.2"))
        XCTAssertEqual(Set(try b.engine.devices().compactMap(\.name)), ["laptop", "desktop"])
    }

    func test_the_sync_state_of_a_TPM_identity_holds_its_blob_and_no_private_key() throws {
        try startTPM()
        let a = try device("a")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")  // auto: the TPM answers
        XCTAssertEqual(try a.engine.identityKind(), .tpm)
        XCTAssertEqual(try a.engine.value("identity.kind"), Array("tpm".utf8))
        let stored = try XCTUnwrap(try a.engine.secret("identity"))
        let blob = try EnclaveKeyBlob(bytes: stored.bytes)
        XCTAssertEqual(blob.keychainSerial, try a.keychain.serialNumber())
        XCTAssertThrowsError(try AsymmetricKey.privateKey(pkcs8: stored), "no PKCS#8 key in the sealed state")
        // The key the circle knows is the TPM key's.
        let loaded = try a.keychain.loadEnclaveKey(blob, master: a.master)
        let genesis = try XCTUnwrap(CircleEvent.parse(try XCTUnwrap(WorkTreeFiles.read(root + "/a-sync/circle/log/0"))))
        XCTAssertEqual(genesis.event.subjectKey, try loaded.publicKey.subjectPublicKeyInfo())
    }

    func test_without_a_TPM_auto_makes_a_software_identity_and_stays_quiet() throws {
        try pointAtNoTPM()
        let a = try device("a")
        try addPassword(a, account: "alice", secret: "s3cret")
        let (report, written) = try capturingStandardError { try a.engine.setup(remote: remote, deviceName: "laptop") }
        XCTAssertEqual(report.sent, 1)
        XCTAssertEqual(written, "")
        XCTAssertEqual(try a.engine.identityKind(), .software)
        XCTAssertNotNil(try AsymmetricKey.privateKey(pkcs8: try XCTUnwrap(try a.engine.secret("identity"))))
        XCTAssertEqual(try a.engine.sync().sent, 0)
    }

    func test_asking_for_the_TPM_without_one_fails_before_anything_is_written() throws {
        let a = try device("a"), b = try device("b")
        unsetenv("KEYCHAIN_PKCS11_TCTI")
        if EnclaveTPM.configuredTCTI == nil {
            XCTAssertThrowsError(try a.engine.setup(remote: remote, deviceName: "laptop", identityKey: .tpm)) {
                XCTAssertEqual(kind($0), .identityUnavailable, "\($0)")
            }
        }
        try pointAtNoTPM()
        XCTAssertThrowsError(try a.engine.setup(remote: remote, deviceName: "laptop", identityKey: .tpm)) { XCTAssertEqual(kind($0), .identityUnavailable, "\($0)") }
        XCTAssertNil(try a.engine.deviceID())
        XCTAssertNil(try a.engine.identityKind())
        XCTAssertNil(try a.keychain.syncValue("identity"))
        unsetenv("KEYCHAIN_PKCS11_TCTI")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop", identityKey: .software)
        try pointAtNoTPM()
        XCTAssertThrowsError(try b.engine.requestJoin(remote: remote, deviceName: "desktop", identityKey: .tpm)) {
            XCTAssertEqual(kind($0), .identityUnavailable, "\($0)")
        }
        XCTAssertNil(try b.engine.deviceID())
        XCTAssertEqual(try Subprocess.run(["git", "--git-dir", root + "/remote.git", "ls-tree", "-r", "--name-only", "main", "circle/requests"]).outputText, "")
    }

    func test_a_TPM_identity_whose_TPM_is_gone_says_so_and_leave_local_still_works() throws {
        try startTPM()
        let a = try device("a")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop", identityKey: .tpm)
        tpm?.kill9()
        try pointAtNoTPM()
        // A sync with nothing to do signs nothing (the quick path): a change here needs the key.
        XCTAssertEqual(try a.engine.sync().sent, 0)
        try addPassword(a, account: "alice", secret: "s3cret")
        XCTAssertThrowsError(try a.engine.sync()) { error in
            XCTAssertEqual(kind(error), .identityUnavailable, "\(error)")
            let reason = (error as? SyncError)?.reason ?? ""
            XCTAssertTrue(reason.contains("identity key is in this machine's TPM"), reason)
            XCTAssertTrue(reason.contains("sync leave --local"), reason)
        }
        unsetenv("KEYCHAIN_PKCS11_TCTI")
        XCTAssertThrowsError(try a.engine.sync()) { XCTAssertEqual(kind($0), .identityUnavailable, "\($0)") }
        // The status still reads (no TPM needed), and leaving here forgets the circle.
        XCTAssertEqual(try a.engine.status().identityKey, .tpm)
        try a.engine.leave(local: true)
        XCTAssertNil(try a.engine.deviceID())
        XCTAssertNil(try a.engine.identityKind())
    }

    // A keychain that joined before identities had a kind: its PKCS#8 key, no `identity.kind`.
    func test_a_sync_state_without_a_kind_holds_a_software_key() throws {
        let a = try device("a")
        try addPassword(a, account: "alice", secret: "s3cret")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop", identityKey: .software)
        try a.engine.setValue("identity.kind", nil)
        XCTAssertEqual(try a.engine.identityKind(), .software)
        try addPassword(a, account: "bob", secret: "2")
        XCTAssertEqual(try a.engine.sync().sent, 1)
    }
}
