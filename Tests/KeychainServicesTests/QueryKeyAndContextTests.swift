import Foundation
import XCTest
import KeychainCore
@testable import KeychainServices

/// The SecItem.h keys beyond the basic ones, and LAContext, each against Apple's documented
/// results.
final class QueryKeyAndContextTests: XCTestCase {
    private var root = ""

    override func setUpWithError() throws {
        root = try makeTemporaryLoginKeychain("querykeys").root
        unsetenv("KEYCHAIN_PKCS11_PROMPT")
    }

    override func tearDown() {
        unsetenv("KEYCHAIN_PKCS11_PROMPT")
        removeTemporaryKeychain(root)
    }

    /// A self-signed certificate made by the openssl command, valid from now (to the second) for `days`.
    private func certificate(subject: String, days: Int, email: String? = nil) throws -> Data {
        let base = root + "/cert-\(UUID().uuidString)"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        var arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", base + ".key",
                         "-out", base + ".der", "-outform", "DER", "-days", String(days), "-subj", subject]
        if let email { arguments += ["-addext", "subjectAltName=email:\(email)"] }
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        return try Data(contentsOf: URL(fileURLWithPath: base + ".der"))
    }

    private func count(_ query: [String: Any]) -> (OSStatus, Int) {
        var query = query
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        query[kSecReturnRef as String] = true
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        return (status, (result as? [Any])?.count ?? 0)
    }

    func test_certificate_match_keys() throws {
        let alice = try certificate(subject: "/CN=Alice Example/O=Example Org", days: 30, email: "alice@example.com")
        let bob = try certificate(subject: "/CN=Bob Builder/O=Other Org", days: 30)
        for der in [alice, bob] {
            XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassCertificate, kSecValueData as String: der] as CFDictionary, nil), errSecSuccess)
        }
        let certificates: [String: Any] = [kSecClass as String: kSecClassCertificate]
        func matching(_ extra: [String: Any]) -> (OSStatus, Int) { count(certificates.merging(extra) { $1 }) }
        XCTAssertEqual(matching([:]).1, 2)
        XCTAssertEqual(matching([kSecMatchSubjectContains as String: "Example"]).1, 1)
        XCTAssertEqual(matching([kSecMatchSubjectContains as String: "example"]).0, errSecItemNotFound, "case matters unless asked")
        XCTAssertEqual(matching([kSecMatchSubjectContains as String: "example", kSecMatchCaseInsensitive as String: true]).1, 1)
        XCTAssertEqual(matching([kSecMatchSubjectStartsWith as String: "Bob"]).1, 1)
        XCTAssertEqual(matching([kSecMatchSubjectEndsWith as String: "Org"]).1, 2)
        XCTAssertEqual(matching([kSecMatchSubjectWholeString as String: "Bob Builder"]).1, 1)
        XCTAssertEqual(matching([kSecMatchSubjectWholeString as String: "Bob"]).0, errSecItemNotFound)
        // An e-mail address must match where the certificate has one.
        XCTAssertEqual(matching([kSecMatchEmailAddressIfPresent as String: "ALICE@example.com"]).1, 2)
        XCTAssertEqual(matching([kSecMatchEmailAddressIfPresent as String: "carol@example.com"]).1, 1)
        // Validity: now, in 60 days, and kCFNull for now.
        XCTAssertEqual(matching([kSecMatchValidOnDate as String: Date()]).1, 2)
        XCTAssertEqual(matching([kSecMatchValidOnDate as String: Date(timeIntervalSinceNow: 60 * 86_400)]).0, errSecItemNotFound)
        XCTAssertEqual(matching([kSecMatchValidOnDate as String: kCFNull!]).1, 2)
        // Issuers: a self-signed certificate's issuer is its subject.
        var item: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassCertificate, kSecMatchSubjectStartsWith as String: "Alice",
                                            kSecReturnAttributes as String: true, kSecReturnRef as String: true] as CFDictionary, &item), errSecSuccess)
        let attributes = try XCTUnwrap(item as? [String: Any])
        let issuer = try XCTUnwrap(attributes[kSecAttrIssuer as String] as? Data)
        XCTAssertEqual(matching([kSecMatchIssuers as String: [issuer]]).1, 1)
        // Item lists: a reference or a persistent reference limits the results to that item.
        let reference = try XCTUnwrap(attributes[kSecValueRef as String] as? SecCertificate)
        XCTAssertEqual(matching([kSecMatchItemList as String: [reference]]).1, 1)
        let persistent = try XCTUnwrap(attributes[kSecAttrPersistentReference as String] as? Data)
        XCTAssertEqual(matching([kSecMatchItemList as String: [persistent]]).1, 1)
        XCTAssertEqual(matching([kSecAttrPersistentReference as String: persistent]).1, 1)
        // What has no meaning here says so.
        XCTAssertEqual(matching([kSecMatchTrustedOnly as String: true]).0, errSecUnimplemented)
        XCTAssertEqual(matching([kSecMatchTrustedOnly as String: false]).1, 2)
        XCTAssertEqual(matching([kSecMatchPolicy as String: "policy"]).0, errSecParam)
        // No certificate lives in the Secure Enclave (the TPM).
        XCTAssertEqual(matching([kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave]).0, errSecItemNotFound)
        XCTAssertEqual(matching([kSecAttrTokenID as String: "com.example.token"]).0, errSecParam)
        // Match keys are refused when adding.
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassCertificate, kSecValueData as String: alice,
                                   kSecMatchSubjectContains as String: "Alice"] as CFDictionary, nil), errSecParam)
    }

    func test_certificate_and_key_functions_of_the_headers() throws {
        let der = try certificate(subject: "/CN=Alice Example/O=Example Org", days: 30, email: "alice@example.com")
        let certificate = try XCTUnwrap(SecCertificateCreateWithData(nil, der as CFData))
        XCTAssertEqual(CFGetTypeID(certificate), SecCertificateGetTypeID())
        var name: CFString?
        XCTAssertEqual(SecCertificateCopyCommonName(certificate, &name), errSecSuccess)
        XCTAssertEqual(name as String?, "Alice Example")
        var emails: CFArray?
        XCTAssertEqual(SecCertificateCopyEmailAddresses(certificate, &emails), errSecSuccess)
        XCTAssertEqual(emails as? [String], ["alice@example.com"])
        XCTAssertNotNil(SecCertificateCopySerialNumberData(certificate, nil))
        XCTAssertNotNil(SecCertificateCopyNormalizedSubjectSequence(certificate))
        var error: Unmanaged<CFError>?
        let ec = try XCTUnwrap(SecKeyCreateRandomKey([kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256] as CFDictionary, &error))
        XCTAssertEqual(SecKeyGetBlockSize(ec), 32)
        let rsa = try XCTUnwrap(SecKeyCreateRandomKey([kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: 2048] as CFDictionary, &error))
        XCTAssertEqual(SecKeyGetBlockSize(rsa), 256)
        XCTAssertEqual(CFGetTypeID(rsa), SecKeyGetTypeID())
        XCTAssertNotEqual(CFGetTypeID(rsa), SecCertificateGetTypeID())
        XCTAssertTrue(SecKeyIsAlgorithmSupported(rsa, .sign, .rsaSignatureMessagePSSSHA224))
        XCTAssertFalse(SecKeyIsAlgorithmSupported(rsa, .sign, .rsaSignatureRaw))
        // ECDH with a key's own public half: the x-coordinate of d·Q, 32 bytes on P-256.
        XCTAssertEqual((SecKeyCopyKeyExchangeResult(ec, .ecdhKeyExchangeStandard, ec, [:] as CFDictionary, &error) as Data?)?.count, 32)
        XCTAssertNil(SecKeyCopyKeyExchangeResult(rsa, .ecdhKeyExchangeStandard, ec, [:] as CFDictionary, &error))
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecParam))
        XCTAssertEqual(noErr, errSecSuccess)
        XCTAssertEqual(SecCopyErrorMessageString(errSecWrPerm, nil) as String?, "Write permissions error.")
        XCTAssertEqual(kSecAttrProtocolHTTPS as String, "htps")
        XCTAssertEqual(kSecAttrAuthenticationTypeHTMLForm as String, "form")
    }

    func test_a_key_under_user_presence_or_an_application_password() throws {
        var error: Unmanaged<CFError>?
        let control = try XCTUnwrap(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.userPresence, .applicationPassword, .or], &error))
        let creator = LAContext()
        creator.setCredential(Data("app secret".utf8), type: .applicationPassword)
        let tag = Data("or-key".utf8)
        let parameters: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                                         kSecUseAuthenticationContext as String: creator,
                                         kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: tag,
                                                                         kSecAttrAccessControl as String: control]]
        XCTAssertNotNil(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
        func sign(_ context: LAContext?) throws -> OSStatus {
            var query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag, kSecReturnRef as String: true]
            if let context { query[kSecUseAuthenticationContext as String] = context }
            var item: CFTypeRef?
            let found = SecItemCopyMatching(query as CFDictionary, &item)
            guard found == errSecSuccess else { return found }
            var error: Unmanaged<CFError>?
            let signature = SecKeyCreateSignature(item as! SecKey, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, &error)
            return signature != nil ? errSecSuccess : OSStatus(error?.takeRetainedValue().code ?? -1)
        }
        let application = LAContext()
        application.setCredential(Data("app secret".utf8), type: .applicationPassword)
        XCTAssertEqual(try sign(application), errSecSuccess, "the application password")
        XCTAssertEqual(try sign(LAContext(password: "1234")), errSecSuccess, "the keychain password")
        XCTAssertEqual(try sign(nil), errSecInteractionNotAllowed, "neither, and nothing can ask")
        let wrong = LAContext()
        wrong.setCredential(Data("nope".utf8), type: .applicationPassword)
        XCTAssertEqual(try sign(wrong), errSecAuthFailed)
    }

    func test_string_attributes_fold_case_diacritics_and_data() throws {
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "Café",
                                   kSecAttrAccount as String: Data("Account".utf8), kSecValueData as String: Data("s".utf8)] as CFDictionary, nil), errSecSuccess)
        let base: [String: Any] = [kSecClass as String: kSecClassGenericPassword]
        func find(_ extra: [String: Any]) -> OSStatus {
            var result: CFTypeRef?
            return SecItemCopyMatching(base.merging(extra) { $1 } as CFDictionary, &result)
        }
        XCTAssertEqual(find([kSecAttrAccount as String: "Account"]), errSecSuccess, "an account given as data is its UTF-8 text")
        XCTAssertEqual(find([kSecAttrAccount as String: "account"]), errSecItemNotFound)
        XCTAssertEqual(find([kSecAttrAccount as String: "account", kSecMatchCaseInsensitive as String: true]), errSecSuccess)
        XCTAssertEqual(find([kSecAttrService as String: "cafe", kSecMatchCaseInsensitive as String: true]), errSecItemNotFound)
        XCTAssertEqual(find([kSecAttrService as String: "cafe", kSecMatchCaseInsensitive as String: true,
                             kSecMatchDiacriticInsensitive as String: true]), errSecSuccess)
    }

    func test_authentication_ui_values() throws {
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "ui",
                                   kSecValueData as String: Data("s".utf8)] as CFDictionary, nil), errSecSuccess)
        KeychainServices.lockAll()
        func read(_ ui: CFString?) -> OSStatus {
            var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "ui", kSecReturnData as String: true]
            if let ui { query[kSecUseAuthenticationUI as String] = ui }
            var result: CFTypeRef?
            return SecItemCopyMatching(query as CFDictionary, &result)
        }
        XCTAssertEqual(read(nil), errSecInteractionNotAllowed, "no prompt program: nothing can ask")
        XCTAssertEqual(read(kSecUseAuthenticationUIFail), errSecInteractionNotAllowed)
        XCTAssertEqual(read(kSecUseAuthenticationUISkip), errSecItemNotFound)
        XCTAssertEqual(read("bogus" as CFString), errSecParam)
        let script = root + "/prompt.sh"
        try "#!/bin/sh\necho 1234\n".write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o700)
        setenv("KEYCHAIN_PKCS11_PROMPT", script, 1)
        XCTAssertEqual(read(kSecUseAuthenticationUIFail), errSecInteractionNotAllowed, "Fail never asks")
        XCTAssertEqual(read(kSecUseAuthenticationUIAllow), errSecSuccess)
        var legacy: CFTypeRef?
        KeychainServices.lockAll()
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "ui", kSecReturnData as String: true,
                                            kSecUseNoAuthenticationUI as String: true] as CFDictionary, &legacy), errSecInteractionNotAllowed)
    }

    func test_la_context() throws {
        let context = LAContext()
        var error: NSError?
        XCTAssertFalse(context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error), "no prompt program")
        XCTAssertEqual(error?.code, LAError.Code.notInteractive.rawValue)
        XCTAssertFalse(context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        XCTAssertEqual(error?.code, LAError.biometryNotAvailable.rawValue)
        XCTAssertEqual(error?.domain, LAErrorDomain)
        XCTAssertEqual(LAError.Code.touchIDNotAvailable, .biometryNotAvailable)
        XCTAssertEqual(context.biometryType, .none)
        context.touchIDAuthenticationAllowableReuseDuration = 1_000
        XCTAssertEqual(context.touchIDAuthenticationAllowableReuseDuration, LATouchIDAuthenticationMaximumAllowableReuseDuration)

        func evaluate(_ context: LAContext, _ policy: LAPolicy = .deviceOwnerAuthentication) -> (Bool, LAError.Code?) {
            let done = expectation(description: "reply")
            nonisolated(unsafe) var outcome: (Bool, LAError.Code?) = (false, nil)
            context.evaluatePolicy(policy, localizedReason: "test") { success, error in
                outcome = (success, (error as? LAError)?.code)
                done.fulfill()
            }
            wait(for: [done], timeout: 30)
            return outcome
        }
        XCTAssertEqual(evaluate(context).1, .notInteractive)
        let script = root + "/prompt.sh"
        try "#!/bin/sh\necho 1234\n".write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o700)
        setenv("KEYCHAIN_PKCS11_PROMPT", script, 1)
        XCTAssertTrue(context.canEvaluatePolicy(.deviceOwnerAuthentication, error: nil))
        XCTAssertTrue(evaluate(context).0)
        XCTAssertEqual(evaluate(context, .deviceOwnerAuthenticationWithBiometrics).1, .biometryNotAvailable)
        try "#!/bin/sh\necho 4321\n".write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o700)
        XCTAssertEqual(evaluate(LAContext()).1, .authenticationFailed)
        try "#!/bin/sh\nexit 1\n".write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o700)
        XCTAssertEqual(evaluate(LAContext()).1, .userCancel)
        let quiet = LAContext()
        quiet.interactionNotAllowed = true
        XCTAssertEqual(evaluate(quiet).1, .notInteractive)

        // Credentials, and the end of a context.
        XCTAssertFalse(context.isCredentialSet(.applicationPassword))
        XCTAssertTrue(context.setCredential(Data("pw".utf8), type: .applicationPassword))
        XCTAssertTrue(context.isCredentialSet(.applicationPassword))
        XCTAssertTrue(context.setCredential(nil, type: .applicationPassword))
        XCTAssertFalse(context.isCredentialSet(.applicationPassword))
        context.invalidate()
        XCTAssertEqual(evaluate(context).1, .invalidContext)
        XCTAssertFalse(context.setCredential(Data("pw".utf8), type: .applicationPassword))
    }
}
