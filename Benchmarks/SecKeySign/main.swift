import Foundation
import Security

// seckey-sign: ECDSA P-256 signatures per second through Apple's SecKeyCreateSignature (this
// package's Security module), written as an app for Apple platforms writes it — the Swift row of
// the TPM benchmark (scripts/tpm-bench.sh).
//
//   seckey-sign COUNT [--enclave]
//
// Finds the permanent private key tagged "tpm-bench.enclave" (with --enclave) or
// "tpm-bench.software" in the default keychain, or makes it with SecKeyCreateRandomKey (P-256,
// kSecAttrIsPermanent, kSecAttrAccessControl with .privateKeyUsage, and with --enclave
// kSecAttrTokenID: kSecAttrTokenIDSecureEnclave: the key is made and kept in the TPM); checks one
// signature with SecKeyVerifySignature; then times COUNT SecKeyCreateSignature calls
// (.ecdsaSignatureDigestX962SHA256 over a 32-byte digest). The keychain is locked at the start, as
// an app finds it: the first call that needs it runs the prompt program (KEYCHAIN_PKCS11_PROMPT).
//
// Prints "keygen.ecdsa.p256 <ms> ms" when it made the key, then "sign.ecdsa.p256 <rate> op/s".
// Exit status: 0; 3 when key creation answers errSecUnimplemented (no Secure Enclave: no TPM
// here, or this build has no enclave keys yet); 1 on any other failure.

func fail(_ what: String, _ error: Unmanaged<CFError>?, code: Int32 = 1) -> Never {
    let reason = error.map { "\(CFErrorGetCode($0.takeRetainedValue()))" } ?? "no error"
    FileHandle.standardError.write(Data("seckey-sign: \(what): \(reason)\n".utf8))
    exit(code)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let count = arguments.first.flatMap({ Int($0) }), count > 0,
      arguments.count == 1 || (arguments.count == 2 && arguments[1] == "--enclave") else {
    FileHandle.standardError.write(Data("usage: seckey-sign COUNT [--enclave]\n".utf8))
    exit(64)
}
let enclave = arguments.count == 2
let tag = Data((enclave ? "tpm-bench.enclave" : "tpm-bench.software").utf8)

func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

var found: CFTypeRef?
let query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                            kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecReturnRef as String: true]
let key: SecKey
if SecItemCopyMatching(query as CFDictionary, &found) == errSecSuccess, let existing = found as? SecKey {
    key = existing
} else {
    var error: Unmanaged<CFError>?
    guard let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .privateKeyUsage, &error) else {
        fail("SecAccessControlCreateWithFlags", error)
    }
    var parameters: [String: Any] = [
        kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
        kSecAttrKeySizeInBits as String: 256,
        kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: tag,
                                        kSecAttrAccessControl as String: access] as [String: Any],
    ]
    if enclave { parameters[kSecAttrTokenID as String] = kSecAttrTokenIDSecureEnclave }
    let start = now()
    guard let made = SecKeyCreateRandomKey(parameters as CFDictionary, &error) else {
        let code = error.map { CFErrorGetCode($0.takeUnretainedValue()) } ?? 0
        fail("SecKeyCreateRandomKey", error, code: code == Int(errSecUnimplemented) ? 3 : 1)
    }
    print(String(format: "keygen.ecdsa.p256 %.1f ms", (now() - start) * 1e3))
    key = made
}

var digest = [UInt8](repeating: 0, count: 32)
guard SecRandomCopyBytes(kSecRandomDefault, digest.count, &digest) == errSecSuccess else { fail("SecRandomCopyBytes", nil) }
var error: Unmanaged<CFError>?
guard let publicKey = SecKeyCopyPublicKey(key) else { fail("SecKeyCopyPublicKey", nil) }
guard let first = SecKeyCreateSignature(key, .ecdsaSignatureDigestX962SHA256, Data(digest) as CFData, &error) else {
    fail("SecKeyCreateSignature", error)
}
guard SecKeyVerifySignature(publicKey, .ecdsaSignatureDigestX962SHA256, Data(digest) as CFData, first, &error) else {
    fail("SecKeyVerifySignature", error)
}
let start = now()
for i in 0..<count {
    digest[i % 32] ^= UInt8(truncatingIfNeeded: i + 1) // a different digest each time
    guard SecKeyCreateSignature(key, .ecdsaSignatureDigestX962SHA256, Data(digest) as CFData, &error) != nil else {
        fail("SecKeyCreateSignature", error)
    }
}
print(String(format: "sign.ecdsa.p256 %.1f op/s", Double(count) / (now() - start)))
