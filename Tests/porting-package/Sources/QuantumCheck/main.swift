import CryptoKit
import Foundation

// Quantum-secure cryptography as Apple's 2025 CryptoKit writes it (iOS 26, macOS 26): a document
// signed with ML-DSA in a context, a shared secret agreed through ML-KEM, a message sealed with
// HPKE over X-Wing. Written for Apple platforms; it compiles unchanged against this repository's
// CryptoKit module (Tests/interop/test_porting_package.sh builds and runs it).
//
//   QuantumCheck    prints what each step gave; exits 1 at the first check that fails.

func check(_ what: String, _ passed: Bool) {
    print("\(what): \(passed ? "yes" : "NO")")
    if !passed { exit(1) }
}

func fingerprint(_ data: Data) -> String {
    SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
}

do {
    // ML-DSA-65: the signer publishes its public key; a verifier checks the signature in the
    // context the signer used, and nowhere else.
    let signingKey = try MLDSA65.PrivateKey()
    let published = signingKey.publicKey.rawRepresentation
    let report = Data("Quarterly report, final".utf8)
    let context = Data("com.example.reports".utf8)
    let signature = try signingKey.signature(for: report, context: context)
    let verifyingKey = try MLDSA65.PublicKey(rawRepresentation: published)
    print("ML-DSA-65 public key \(published.count) bytes, signature \(signature.count) bytes")
    check("valid in its context", verifyingKey.isValidSignature(signature, for: report, context: context))
    check("invalid in another context", !verifyingKey.isValidSignature(signature, for: report, context: Data("com.example.mail".utf8)))
    check("invalid for a changed document", !verifyingKey.isValidSignature(signature, for: Data("Quarterly report, draft".utf8), context: context))

    // A key kept as its 32-byte seed comes back as the same key.
    let seed = Data(UInt8(0)..<32)
    let fromSeed = try MLDSA65.PrivateKey(seedRepresentation: seed, publicKey: nil)
    print("ML-DSA-65 key of seed 00..1f: \(fingerprint(fromSeed.publicKey.rawRepresentation))")
    let restored = try MLDSA65.PrivateKey(integrityCheckedRepresentation: fromSeed.integrityCheckedRepresentation)
    check("restored from its integrity-checked representation", restored.publicKey.rawRepresentation == fromSeed.publicKey.rawRepresentation)

    let archiveKey = try MLDSA87.PrivateKey()
    let archiveSignature = try archiveKey.signature(for: report, context: context)
    print("ML-DSA-87 signature \(archiveSignature.count) bytes")
    check("ML-DSA-87 valid in its context", archiveKey.publicKey.isValidSignature(archiveSignature, for: report, context: context))

    // ML-KEM-768: the sender encapsulates a secret to the recipient's public key; both derive the
    // same symmetric key from it and use it with AES-GCM.
    let recipientKey = try MLKEM768.PrivateKey()
    let recipientPublicKey = try MLKEM768.PublicKey(rawRepresentation: recipientKey.publicKey.rawRepresentation)
    let encapsulation = try recipientPublicKey.encapsulate()
    let sharedSecret = try recipientKey.decapsulate(encapsulation.encapsulated)
    print("ML-KEM-768 ciphertext \(encapsulation.encapsulated.count) bytes, shared secret \(sharedSecret.bitCount) bits")
    check("both sides hold the same secret", sharedSecret == encapsulation.sharedSecret)
    let salt = Data("com.example.chat".utf8)
    let senderKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: encapsulation.sharedSecret, salt: salt, outputByteCount: 32)
    let receiverKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: sharedSecret, salt: salt, outputByteCount: 32)
    let box = try AES.GCM.seal(Data("meet at noon".utf8), using: senderKey)
    print("AES-GCM with the derived key: \(String(decoding: try AES.GCM.open(box, using: receiverKey), as: UTF8.self))")

    let longTermKey = try MLKEM1024.PrivateKey.generate()
    let longTermEncapsulation = try longTermKey.publicKey.encapsulate()
    print("ML-KEM-1024 ciphertext \(longTermEncapsulation.encapsulated.count) bytes")
    check("ML-KEM-1024 secret recovered", try longTermKey.decapsulate(longTermEncapsulation.encapsulated) == longTermEncapsulation.sharedSecret)

    // HPKE with X-Wing (ML-KEM-768 with X25519): the sender seals to the recipient's public key
    // and sends the encapsulated key with the messages; the recipient opens them in order.
    let ciphersuite = HPKE.Ciphersuite.XWingMLKEM768X25519_SHA256_AES_GCM_256
    let info = Data("com.example.messages v1".utf8)
    let mailboxKey = try XWingMLKEM768X25519.PrivateKey()
    var sender = try HPKE.Sender(recipientKey: mailboxKey.publicKey, ciphersuite: ciphersuite, info: info)
    let header = Data("to: mailbox 7".utf8)
    let first = try sender.seal(Data("first message".utf8), authenticating: header)
    let second = try sender.seal(Data("second message".utf8))
    print("X-Wing public key \(mailboxKey.publicKey.rawRepresentation.count) bytes, encapsulated key \(sender.encapsulatedKey.count) bytes")
    var recipient = try HPKE.Recipient(privateKey: mailboxKey, ciphersuite: ciphersuite, info: info, encapsulatedKey: sender.encapsulatedKey)
    print("opened: \(String(decoding: try recipient.open(first, authenticating: header), as: UTF8.self))")
    print("opened: \(String(decoding: try recipient.open(second), as: UTF8.self))")
    var eavesdropper = try HPKE.Recipient(privateKey: XWingMLKEM768X25519.PrivateKey(), ciphersuite: ciphersuite, info: info,
                                          encapsulatedKey: sender.encapsulatedKey)
    check("another key cannot open it", (try? eavesdropper.open(first, authenticating: header)) == nil)
} catch {
    print("error: \(error)")
    exit(1)
}
