import CPKCS11
import Glibc
import XCTest
@testable import PKCS11

/// Many threads of one host at once, as servers call the module (run under ThreadSanitizer in
/// CI): each thread with its own session signs with one shared token key, finds objects, creates
/// and destroys objects, or logs in and out of one of two other keychains; two more threads share
/// one session, as a misbehaving host would. Results are collected per thread and checked
/// exactly afterwards (XCTest's assertions are not for other threads).
final class ThreadTests: ModuleTestCase {
    /// What one thread saw: calls that returned something unexpected, and rounds done.
    final class Recorder: @unchecked Sendable {
        var problems: [String] = []
        var rounds = 0
        var results: Set<CK_RV> = []

        func expect(_ result: CK_RV, _ allowed: Set<CK_RV> = [CK_RV(CKR_OK)], _ what: String) {
            results.insert(result)
            if !allowed.contains(result) { problems.append("\(what): \(rv(result))") }
        }
    }

    private final class Body: @unchecked Sendable {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    /// Runs `body(0)` … `body(count - 1)` on as many threads at once and waits for them all.
    func runThreads(_ count: Int, _ body: @escaping (Int) -> Void) {
        var threads: [pthread_t] = []
        for index in 0..<count {
            let context = Unmanaged.passRetained(Body { body(index) }).toOpaque()
            var thread = pthread_t()
            let created = pthread_create(&thread, nil, { raw in
                guard let raw else { return nil }
                Unmanaged<Body>.fromOpaque(raw).takeRetainedValue().run()
                return nil
            }, context)
            XCTAssertEqual(created, 0)
            threads.append(thread)
        }
        for thread in threads { pthread_join(thread, nil) }
    }

    private static let okOrBusy: Set<CK_RV> = [CK_RV(CKR_OK), CK_RV(CKR_OPERATION_ACTIVE), CK_RV(CKR_OPERATION_NOT_INITIALIZED)]

    func test_threads_sign_find_create_and_log_in_at_once() {
        let signing = makeToken(label: "signing")
        let loginA = makeToken(label: "login-a")
        let loginB = makeToken(label: "login-b")
        let setup = openSession(signing, readWrite: true)
        XCTAssertRV(login(setup), CKR_OK)
        var generatedPublic: CK_OBJECT_HANDLE = 0, generatedPrivate: CK_OBJECT_HANDLE = 0
        let curve: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
        let generated = withTemplate([(UInt(CKA_EC_PARAMS), curve), (UInt(CKA_TOKEN), [1]), (UInt(CKA_VERIFY), [1])]) { pt, pc in
            withTemplate([(UInt(CKA_TOKEN), [1]), (UInt(CKA_PRIVATE), [1]), (UInt(CKA_SIGN), [1]), (UInt(CKA_LABEL), Array("shared".utf8))]) { vt, vc in
                mechanism(UInt(CKM_EC_KEY_PAIR_GEN)) { p11.C_GenerateKeyPair!(setup, $0, pt, pc, vt, vc, &generatedPublic, &generatedPrivate) }
            }
        }
        XCTAssertRV(generated, CKR_OK)
        let shared = openSession(signing, readWrite: false)

        let workers = 8
        let rounds = 60
        let recorders = (0..<workers).map { _ in Recorder() }
        let (privateKey, publicKey) = (generatedPrivate, generatedPublic)
        runThreads(workers) { [self] worker in
            let record = recorders[worker]
            var session: CK_SESSION_HANDLE = 0
            let slot = worker == 4 ? loginA : worker == 5 ? loginB : signing
            if worker < 6 {
                record.expect(p11.C_OpenSession!(slot, CK_FLAGS(CKF_SERIAL_SESSION | CKF_RW_SESSION), nil, nil, &session), [CK_RV(CKR_OK)], "C_OpenSession")
            }
            for round in 0..<rounds {
                switch worker {
                case 0, 1:
                    // Sign with the shared key, verify with its public half.
                    var data = [UInt8](repeating: UInt8(round), count: 32)
                    var signature = [UInt8](repeating: 0, count: 64)
                    var length = CK_ULONG(signature.count)
                    record.expect(mechanism(UInt(CKM_ECDSA)) { p11.C_SignInit!(session, $0, privateKey) }, [CK_RV(CKR_OK)], "C_SignInit")
                    record.expect(p11.C_Sign!(session, &data, CK_ULONG(data.count), &signature, &length), [CK_RV(CKR_OK)], "C_Sign")
                    record.expect(mechanism(UInt(CKM_ECDSA)) { p11.C_VerifyInit!(session, $0, publicKey) }, [CK_RV(CKR_OK)], "C_VerifyInit")
                    record.expect(p11.C_Verify!(session, &data, CK_ULONG(data.count), &signature, length), [CK_RV(CKR_OK)], "C_Verify")
                case 2:
                    // Find the shared key by its label: exactly one.
                    var found = [CK_OBJECT_HANDLE](repeating: 0, count: 4)
                    var count: CK_ULONG = 0
                    record.expect(withTemplate([(UInt(CKA_LABEL), Array("shared".utf8))]) { p11.C_FindObjectsInit!(session, $0, $1) }, [CK_RV(CKR_OK)], "C_FindObjectsInit")
                    record.expect(p11.C_FindObjects!(session, &found, 4, &count), [CK_RV(CKR_OK)], "C_FindObjects")
                    record.expect(p11.C_FindObjectsFinal!(session), [CK_RV(CKR_OK)], "C_FindObjectsFinal")
                    if count != 1 || found[0] != privateKey { record.problems.append("found \(count) objects") }
                case 3:
                    // Create a private token object, read it back, destroy it.
                    var handle: CK_OBJECT_HANDLE = 0
                    let value = [UInt8](repeating: UInt8(round), count: 16)
                    record.expect(withTemplate([(UInt(CKA_CLASS), Self.dataClass), (UInt(CKA_TOKEN), [1]), (UInt(CKA_PRIVATE), [1]),
                                                (UInt(CKA_LABEL), Array("churn".utf8)), (UInt(CKA_VALUE), value)]) { p11.C_CreateObject!(session, $0, $1, &handle) },
                                  [CK_RV(CKR_OK)], "C_CreateObject")
                    var back = [UInt8](repeating: 0, count: 16)
                    var attribute = CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_VALUE), pValue: nil, ulValueLen: 16)
                    let read = back.withUnsafeMutableBytes { buffer -> CK_RV in
                        attribute.pValue = buffer.baseAddress
                        return p11.C_GetAttributeValue!(session, handle, &attribute, 1)
                    }
                    record.expect(read, [CK_RV(CKR_OK)], "C_GetAttributeValue")
                    if back != value { record.problems.append("value read back differs") }
                    record.expect(p11.C_DestroyObject!(session, handle), [CK_RV(CKR_OK)], "C_DestroyObject")
                case 4, 5:
                    // Log in and out of another keychain.
                    var pin = userPIN
                    record.expect(p11.C_Login!(session, CK_USER_TYPE(CKU_USER), &pin, CK_ULONG(pin.count)), [CK_RV(CKR_OK)], "C_Login")
                    record.expect(p11.C_Logout!(session), [CK_RV(CKR_OK)], "C_Logout")
                default:
                    // Two threads on one session: each call whole, answers as the state says.
                    var data = [UInt8](repeating: 7, count: 32)
                    var signature = [UInt8](repeating: 0, count: 64)
                    var length = CK_ULONG(signature.count)
                    record.expect(mechanism(UInt(CKM_ECDSA)) { p11.C_SignInit!(shared, $0, privateKey) }, Self.okOrBusy, "shared C_SignInit")
                    record.expect(p11.C_Sign!(shared, &data, CK_ULONG(data.count), &signature, &length), Self.okOrBusy, "shared C_Sign")
                }
                record.rounds += 1
            }
            if worker < 6 { record.expect(p11.C_CloseSession!(session), [CK_RV(CKR_OK)], "C_CloseSession") }
        }
        for worker in 0..<workers {
            XCTAssertEqual(recorders[worker].problems, [], "worker \(worker)")
            XCTAssertEqual(recorders[worker].rounds, rounds, "worker \(worker)")
        }
        // Nothing was left behind by the churn, and the token still holds its key pair.
        XCTAssertEqual(find(setup, [(UInt(CKA_LABEL), Array("churn".utf8))]), [])
        XCTAssertEqual(find(setup, [(UInt(CKA_LABEL), Array("shared".utf8))]), [generatedPrivate])
        // The other keychains end logged out; the signing one is still logged in.
        var info = CK_SESSION_INFO()
        XCTAssertRV(p11.C_GetSessionInfo!(setup, &info), CKR_OK)
        XCTAssertEqual(info.state, CK_STATE(CKS_RW_USER_FUNCTIONS))
    }

    /// C_Finalize while other threads are in calls: they finish or fail cleanly, and calls after
    /// it get CKR_CRYPTOKI_NOT_INITIALIZED.
    func test_finalize_while_threads_sign() {
        let session = userSession()
        var publicKey: CK_OBJECT_HANDLE = 0, privateKey: CK_OBJECT_HANDLE = 0
        let curve: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
        let generated = withTemplate([(UInt(CKA_EC_PARAMS), curve)]) { pt, pc in
            withTemplate([(UInt(CKA_SIGN), [1])]) { vt, vc in
                mechanism(UInt(CKM_EC_KEY_PAIR_GEN)) { p11.C_GenerateKeyPair!(session, $0, pt, pc, vt, vc, &publicKey, &privateKey) }
            }
        }
        XCTAssertRV(generated, CKR_OK)
        // Both threads sign on one session: one may find the other's operation active.
        let allowed: Set<CK_RV> = [CK_RV(CKR_OK), CK_RV(CKR_CRYPTOKI_NOT_INITIALIZED), CK_RV(CKR_SESSION_HANDLE_INVALID), CK_RV(CKR_OPERATION_ACTIVE),
                                   CK_RV(CKR_OPERATION_NOT_INITIALIZED), CK_RV(CKR_KEY_HANDLE_INVALID), CK_RV(CKR_USER_NOT_LOGGED_IN)]
        let recorders = (0..<3).map { _ in Recorder() }
        let key = privateKey
        runThreads(3) { [self] worker in
            let record = recorders[worker]
            if worker == 2 {
                usleep(20_000)
                record.expect(p11.C_Finalize!(nil), [CK_RV(CKR_OK)], "C_Finalize")
                return
            }
            // Until the module is finalized under this thread (or a generous bound).
            for _ in 0..<200_000 where !record.results.contains(CK_RV(CKR_CRYPTOKI_NOT_INITIALIZED)) {
                var data = [UInt8](repeating: 1, count: 32)
                var signature = [UInt8](repeating: 0, count: 64)
                var length = CK_ULONG(signature.count)
                record.expect(mechanism(UInt(CKM_ECDSA)) { p11.C_SignInit!(session, $0, key) }, allowed, "C_SignInit")
                record.expect(p11.C_Sign!(session, &data, 32, &signature, &length), allowed, "C_Sign")
            }
        }
        XCTAssertEqual(recorders[2].problems, [])
        for worker in 0..<2 {
            XCTAssertEqual(recorders[worker].problems, [], "worker \(worker)")
            XCTAssertTrue(recorders[worker].results.contains(CK_RV(CKR_CRYPTOKI_NOT_INITIALIZED)), "worker \(worker) ran past C_Finalize")
        }
        XCTAssertRV(p11.C_Initialize!(nil), CKR_OK)
    }
}
