import CPKCS11
import Glibc
import XCTest
@testable import PKCS11

/// The protection classes through the C API: CKA_KC_ACCESSIBLE (kSecAttrAccessible) on a
/// creation template, and what a host sees before login, after logout, after C_Finalize, and
/// from a copy of the keychain folder on a machine without the device key.
extension MechanismTests {
    private static let accessible = UInt(0x8000_0000 | 0x4B43_0000) + 0x19
    private static let names = ["whenUnlocked", "afterFirstUnlock", "always", "whenPasscodeSetThisDeviceOnly",
                                "whenUnlockedThisDeviceOnly", "afterFirstUnlockThisDeviceOnly", "alwaysThisDeviceOnly"]

    private func labels(_ session: CK_SESSION_HANDLE) -> Set<String> {
        Set(find(session, [(UInt(CKA_CLASS), Self.dataClass)]).map { String(decoding: value(session, $0, UInt(CKA_LABEL)).1 ?? [], as: UTF8.self) })
    }

    private func restartModule() {
        XCTAssertRV(p11.C_Finalize!(nil), CKR_OK)
        XCTAssertRV(p11.C_Initialize!(nil), CKR_OK)
    }

    private func storeEachClass(_ session: CK_SESSION_HANDLE) {
        for (index, name) in Self.names.enumerated() {
            var handle: CK_OBJECT_HANDLE = 0
            XCTAssertRV(withTemplate([(UInt(CKA_CLASS), Self.dataClass), (UInt(CKA_TOKEN), [1]), (UInt(CKA_LABEL), Array(name.utf8)),
                                      (UInt(CKA_VALUE), Array("secret".utf8)), (Self.accessible, Self.ulong(UInt(index + 1)))]) {
                p11.C_CreateObject!(session, $0, $1, &handle)
            }, CKR_OK, name)
            XCTAssertEqual(value(session, handle, UInt(CKA_PRIVATE)).1, [[0, 3, 4].contains(index) ? 1 : 0], name)
        }
    }

    func test_protection_classes_decide_visibility_before_login_after_logout_and_after_finalize() {
        let (slot, session) = loggedInSession()
        storeEachClass(session)
        XCTAssertEqual(labels(session), Set(Self.names))
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        let usableAfterFirstUnlock: Set<String> = ["afterFirstUnlock", "always", "afterFirstUnlockThisDeviceOnly", "alwaysThisDeviceOnly"]
        XCTAssertEqual(labels(session), usableAfterFirstUnlock, "after C_Logout the AfterFirstUnlock classes stay usable")
        let readable = find(session, [(UInt(CKA_LABEL), Array("afterFirstUnlock".utf8))])
        XCTAssertEqual(readable.count, 1)
        XCTAssertEqual(value(session, readable.first ?? 0).1, Array("secret".utf8))

        restartModule()
        let fresh = openSession(slot, readWrite: true)
        XCTAssertEqual(labels(fresh), ["always", "alwaysThisDeviceOnly"], "before the first login only the Always classes")
        XCTAssertRV(login(fresh), CKR_OK)
        XCTAssertEqual(labels(fresh), Set(Self.names))
        XCTAssertRV(p11.C_Logout!(fresh), CKR_OK)
        XCTAssertEqual(labels(fresh), usableAfterFirstUnlock)
    }

    func test_protection_class_and_cka_private_must_agree() {
        let (_, session) = loggedInSession()
        var handle: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_CLASS), Self.dataClass), (UInt(CKA_TOKEN), [1]), (UInt(CKA_PRIVATE), [0]), (Self.accessible, Self.ulong(1))]) {
            p11.C_CreateObject!(session, $0, $1, &handle)
        }, CKR_TEMPLATE_INCONSISTENT)
        XCTAssertRV(withTemplate([(UInt(CKA_CLASS), Self.dataClass), (UInt(CKA_TOKEN), [1]), (UInt(CKA_PRIVATE), [1]), (Self.accessible, Self.ulong(3))]) {
            p11.C_CreateObject!(session, $0, $1, &handle)
        }, CKR_TEMPLATE_INCONSISTENT)
        XCTAssertRV(withTemplate([(UInt(CKA_CLASS), Self.dataClass), (UInt(CKA_TOKEN), [1]), (Self.accessible, Self.ulong(8))]) {
            p11.C_CreateObject!(session, $0, $1, &handle)
        }, CKR_ATTRIBUTE_VALUE_INVALID)
    }

    /// A private key with CKA_PRIVATE = FALSE is the Always class: it signs without login, and its
    /// record is sealed under the keychain's Always key (device key, or master key), never in clear.
    func test_a_public_private_key_signs_without_login_after_the_keychain_has_been_unlocked_once() {
        let slot = makeToken()
        let anonymous = openSession(slot, readWrite: true)
        // The keychain's Always key exists from its creation (it also authenticates public
        // records), so a public session may make an Always key pair, as PKCS#11 allows.
        _ = generate(anonymous, UInt(CKM_EC_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), Self.p256Parameters), (UInt(CKA_TOKEN), [1])],
                     private: [(UInt(CKA_TOKEN), [1]), (UInt(CKA_PRIVATE), [0]), (UInt(CKA_SIGN), [1]), (UInt(CKA_LABEL), Array("anonymous".utf8))])
        XCTAssertRV(login(anonymous), CKR_OK)
        let (publicKey, privateKey) = generate(anonymous, UInt(CKM_EC_KEY_PAIR_GEN),
                                               public: [(UInt(CKA_EC_PARAMS), Self.p256Parameters), (UInt(CKA_TOKEN), [1]), (UInt(CKA_LABEL), Array("always".utf8))],
                                               private: [(UInt(CKA_TOKEN), [1]), (UInt(CKA_PRIVATE), [0]), (UInt(CKA_SIGN), [1]), (UInt(CKA_LABEL), Array("always".utf8))])
        XCTAssertNotEqual(privateKey, 0)
        XCTAssertEqual(value(anonymous, privateKey, UInt(CKA_PRIVATE)).1, [0])
        XCTAssertNotEqual(publicKey, 0)

        restartModule()
        let session = openSession(slot, readWrite: false)
        XCTAssertEqual(find(session, [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_PRIVATE_KEY)))]).count, 2, "found without login")
        let keys = find(session, [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_PRIVATE_KEY))), (UInt(CKA_LABEL), Array("always".utf8))])
        XCTAssertEqual(keys.count, 1)
        let publicKeys = find(session, [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_PUBLIC_KEY))), (UInt(CKA_LABEL), Array("always".utf8))])
        let data = Array("signed without a login".utf8)
        let (result, signature) = sign(session, UInt(CKM_ECDSA_SHA256), key: keys.first ?? 0, data: data)
        XCTAssertRV(result, CKR_OK)
        XCTAssertRV(verify(session, UInt(CKM_ECDSA_SHA256), key: publicKeys.first ?? 0, data: data, signature: signature), CKR_OK)
        XCTAssertEqual(value(session, keys.first ?? 0, UInt(CKA_VALUE)).0, CK_RV(CKR_ATTRIBUTE_SENSITIVE))
    }

    /// The keychain folder copied to another machine (another device key): ThisDeviceOnly items
    /// are gone from view, every other item is intact (Always items after one login there).
    func test_a_copied_keychain_folder_without_the_device_key() {
        let (slot, session) = loggedInSession()
        storeEachClass(session)
        let label = tokenInfo(slot).label
        XCTAssertRV(p11.C_Finalize!(nil), CKR_OK)
        let elsewhere = directory + "/elsewhere"
        XCTAssertEqual(system("mkdir -p '\(elsewhere)/keychains' && cp '\(directory)'/*.keychain-db* '\(elsewhere)/keychains/'"), 0)
        setenv("KEYCHAIN_PKCS11_DIR", elsewhere + "/keychains", 1)
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY", elsewhere + "/state/device-key", 1)
        XCTAssertRV(p11.C_Initialize!(nil), CKR_OK)
        let copied = slots().first { withUnsafeBytes(of: tokenInfo($0).label) { Array($0) } == withUnsafeBytes(of: label) { Array($0) } }
        let moved = openSession(copied ?? 0, readWrite: true)
        XCTAssertEqual(labels(moved), [], "Always items wait for one login on the new machine; AlwaysThisDeviceOnly never opens")
        XCTAssertRV(login(moved), CKR_OK)
        XCTAssertEqual(labels(moved), ["whenUnlocked", "afterFirstUnlock", "always"])
        XCTAssertRV(p11.C_Logout!(moved), CKR_OK)
        XCTAssertEqual(labels(moved), ["afterFirstUnlock", "always"])
    }

    private static var p256Parameters: [UInt8] { [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07] }
}
