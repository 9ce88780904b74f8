import CryptoKit
import Foundation
import Security
import XCTest

// "Storing CryptoKit Keys in the Keychain" with the quantum-secure keys of Apple's 2025 CryptoKit
// (MLDSA65, MLDSA87, MLKEM768, MLKEM1024, XWingMLKEM768X25519). None has an X9.63 form, so each is
// stored as the article stores Curve25519 keys: as a generic password, through the article's
// GenericPasswordConvertible and GenericPasswordStore (in CryptoKitSample.swift). What is stored is
// the key's integrityCheckedRepresentation, its seed followed by the SHA3-256 hash of its public
// key: an item damaged in the keychain, or read back as another type with the same seed size, is
// refused, where the seed alone would silently become another key.

/// Apple's quantum-secure private keys all have the integrity-checked representation, so one
/// conformance serves them all (as the article's SecKeyConvertible serves the NIST keys).
protocol IntegrityCheckedPrivateKey: GenericPasswordConvertible {
    init<D>(integrityCheckedRepresentation: D) throws where D: DataProtocol
    var integrityCheckedRepresentation: Data { get }
}

extension IntegrityCheckedPrivateKey {
    init<D>(genericKeyRepresentation data: D) throws where D: ContiguousBytes {
        try self.init(integrityCheckedRepresentation: data.withUnsafeBytes { Data($0) })
    }

    var genericKeyRepresentation: SymmetricKey {
        SymmetricKey(data: integrityCheckedRepresentation)
    }
}

extension MLDSA65.PrivateKey: IntegrityCheckedPrivateKey {}
extension MLDSA87.PrivateKey: IntegrityCheckedPrivateKey {}
extension MLKEM768.PrivateKey: IntegrityCheckedPrivateKey {}
extension MLKEM1024.PrivateKey: IntegrityCheckedPrivateKey {}
extension XWingMLKEM768X25519.PrivateKey: IntegrityCheckedPrivateKey {}

/// Keys made from fixed seeds, so that what the keychain holds and gives back is known exactly.
/// The public keys' SHA-256 fingerprints and SHA3-256 hashes were computed by pyca/cryptography
/// 48.0 (ML-DSA, ML-KEM: `from_seed_bytes`); X-Wing's seed and public key are the first test
/// vector of draft-connolly-cfrg-xwing-kem-06.
enum KnownSeed {
    static let mlDSA = Data(UInt8(0)..<32)
    static let mlKEM = Data(UInt8(0)..<64)
    static let xWing = Data(hex: "7f9c2ba4e88f827d616045507605853ed73b8093f6efbc88eb1a6eacfa66ef26")
}

extension Data {
    init(hex: String) {
        var bytes = [UInt8]()
        var digits = hex.makeIterator()
        while let high = digits.next(), let low = digits.next() {
            bytes.append(UInt8(String([high, low]), radix: 16)!)
        }
        self.init(bytes)
    }
}

func hex<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
    bytes.map { String(format: "%02x", $0) }.joined()
}

final class QuantumSecureKeyStorageTests: AppleSampleCase {
    let store = GenericPasswordStore()

    /// The generic password's data, as SecItemCopyMatching returns it.
    func storedData(account: String) throws -> Data {
        var item: CFTypeRef?
        let query = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: account, kSecReturnData: true] as [String: Any]
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &item), errSecSuccess)
        return try XCTUnwrap(item as? Data)
    }

    /// Changes the stored bytes, as a damaged or edited item would hold them.
    func replaceStoredData(account: String, with data: Data) {
        let query = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: account] as [String: Any]
        XCTAssertEqual(SecItemUpdate(query as CFDictionary, [kSecValueData: data] as [String: Any] as CFDictionary), errSecSuccess)
    }

    func test_an_ml_dsa_65_key_round_trips_as_a_generic_password_and_signs_with_a_context() throws {
        let key = try MLDSA65.PrivateKey(seedRepresentation: KnownSeed.mlDSA, publicKey: nil)
        XCTAssertEqual(key.publicKey.rawRepresentation.count, 1952)
        XCTAssertEqual(hex(SHA256.hash(data: key.publicKey.rawRepresentation)), "d666806e11cee19a7c989f7445f90dd419cf4d2d51db8c0fdb4c0f0a542238c9")
        try store.storeKey(key, account: "ml-dsa-65")
        XCTAssertEqual(hex(try storedData(account: "ml-dsa-65")),
                       hex(KnownSeed.mlDSA) + "1800725067e388d837d911fe4f66101cc1961b1bb755030dc574272cfb00013f")

        let readBack: MLDSA65.PrivateKey? = try store.readKey(account: "ml-dsa-65")
        let read = try XCTUnwrap(readBack)
        XCTAssertEqual(read.seedRepresentation, KnownSeed.mlDSA)
        XCTAssertEqual(read.publicKey.rawRepresentation, key.publicKey.rawRepresentation)
        // Signed by the key read back, verified with the original public key, in its context only.
        let message = Data("release 2.4.1".utf8)
        let context = Data("com.example.releases".utf8)
        let signature = try read.signature(for: message, context: context)
        XCTAssertEqual(signature.count, 3309)
        XCTAssertTrue(key.publicKey.isValidSignature(signature, for: message, context: context))
        XCTAssertFalse(key.publicKey.isValidSignature(signature, for: message, context: Data("com.example.builds".utf8)))
        XCTAssertFalse(key.publicKey.isValidSignature(signature, for: message))
        XCTAssertFalse(key.publicKey.isValidSignature(signature, for: Data("release 2.4.2".utf8), context: context))
        let plain = try read.signature(for: message)
        XCTAssertTrue(key.publicKey.isValidSignature(plain, for: message))
        XCTAssertFalse(key.publicKey.isValidSignature(plain, for: message, context: context))
        // FIPS 204 allows a context of up to 255 bytes.
        let longest = Data(repeating: 0x63, count: 255)
        XCTAssertTrue(key.publicKey.isValidSignature(try read.signature(for: message, context: longest), for: message, context: longest))
        XCTAssertThrowsError(try read.signature(for: message, context: longest + [0x63])) { XCTAssertTrue($0 is CryptoKitError) }
    }

    func test_an_ml_dsa_87_key_round_trips_as_a_generic_password_and_signs_with_a_context() throws {
        let key = try MLDSA87.PrivateKey(seedRepresentation: KnownSeed.mlDSA, publicKey: nil)
        XCTAssertEqual(key.publicKey.rawRepresentation.count, 2592)
        XCTAssertEqual(hex(SHA256.hash(data: key.publicKey.rawRepresentation)), "91dc389cfaa01470b7f66eee45a4ae9026d154817c754dfe22298b3fa241ffcd")
        try store.storeKey(key, account: "ml-dsa-87")
        XCTAssertEqual(hex(try storedData(account: "ml-dsa-87")),
                       hex(KnownSeed.mlDSA) + "e6cf50a9c2fa5234f59949ff61f8161db4d629532127f4aefa8bb10811ecfb1e")

        let readBack: MLDSA87.PrivateKey? = try store.readKey(account: "ml-dsa-87")
        let read = try XCTUnwrap(readBack)
        XCTAssertEqual(read.integrityCheckedRepresentation, key.integrityCheckedRepresentation)
        let message = Data("firmware image".utf8)
        let context = Data("com.example.firmware".utf8)
        let signature = try read.signature(for: message, context: context)
        XCTAssertEqual(signature.count, 4627)
        XCTAssertTrue(key.publicKey.isValidSignature(signature, for: message, context: context))
        XCTAssertFalse(key.publicKey.isValidSignature(signature, for: message, context: Data("com.example.releases".utf8)))
        // A random key (Apple's `init()`) round-trips the same way.
        let random = try MLDSA87.PrivateKey()
        try store.storeKey(random, account: "ml-dsa-87 random")
        let randomRead: MLDSA87.PrivateKey? = try store.readKey(account: "ml-dsa-87 random")
        XCTAssertEqual(randomRead?.integrityCheckedRepresentation, random.integrityCheckedRepresentation)
        XCTAssertNotEqual(random.seedRepresentation, KnownSeed.mlDSA)
    }

    func test_an_ml_kem_768_key_round_trips_and_decapsulates_what_was_sent_to_the_original() throws {
        let key = try MLKEM768.PrivateKey(seedRepresentation: KnownSeed.mlKEM, publicKey: nil)
        XCTAssertEqual(key.publicKey.rawRepresentation.count, 1184)
        XCTAssertEqual(hex(SHA256.hash(data: key.publicKey.rawRepresentation)), "0b7934c83125c788995e2ba6bd761e33046b3e40571be53e023309a29f398cc9")
        try store.storeKey(key, account: "ml-kem-768")
        XCTAssertEqual(hex(try storedData(account: "ml-kem-768")),
                       hex(KnownSeed.mlKEM) + "a24e16d8f8f9383a95b77050f4d9fd2f5733eec1d63ef3c23ebf9918173669a7")

        let readBack: MLKEM768.PrivateKey? = try store.readKey(account: "ml-kem-768")
        let read = try XCTUnwrap(readBack)
        XCTAssertEqual(read.seedRepresentation, KnownSeed.mlKEM)
        let sent = try key.publicKey.encapsulate()
        XCTAssertEqual(sent.encapsulated.count, 1088)
        let received = try read.decapsulate(sent.encapsulated)
        XCTAssertEqual(received.bitCount, 256)
        XCTAssertEqual(received, sent.sharedSecret)
        // A changed ciphertext decapsulates to another secret (ML-KEM's implicit rejection), and
        // one of the wrong length is refused.
        var altered = sent.encapsulated
        altered[altered.count / 2] ^= 0x01
        XCTAssertNotEqual(try read.decapsulate(altered), sent.sharedSecret)
        XCTAssertThrowsError(try read.decapsulate(sent.encapsulated.dropLast())) { XCTAssertEqual($0 as? CryptoKitError, .incorrectParameterSize) }
    }

    func test_an_ml_kem_1024_key_round_trips_and_decapsulates_what_was_sent_to_the_original() throws {
        let key = try MLKEM1024.PrivateKey(seedRepresentation: KnownSeed.mlKEM, publicKey: nil)
        XCTAssertEqual(key.publicKey.rawRepresentation.count, 1568)
        XCTAssertEqual(hex(SHA256.hash(data: key.publicKey.rawRepresentation)), "c7b8fa0aa471d5ae18922d6ccad5b31e1d84f92ae723abfd13747018740a8530")
        try store.storeKey(key, account: "ml-kem-1024")
        XCTAssertEqual(hex(try storedData(account: "ml-kem-1024")),
                       hex(KnownSeed.mlKEM) + "61349e5c131a7e116a0463861d7d18663c5627c38c7147ddaadfd48acd7a4535")

        let readBack: MLKEM1024.PrivateKey? = try store.readKey(account: "ml-kem-1024")
        let read = try XCTUnwrap(readBack)
        let sent = try key.publicKey.encapsulate()
        XCTAssertEqual(sent.encapsulated.count, 1568)
        XCTAssertEqual(try read.decapsulate(sent.encapsulated), sent.sharedSecret)
        var altered = sent.encapsulated
        altered[0] ^= 0x80
        XCTAssertNotEqual(try read.decapsulate(altered), sent.sharedSecret)
        // An ML-KEM-768 key from the same seed is another key: a 1024 ciphertext is not one of its own.
        let other = try MLKEM768.PrivateKey(seedRepresentation: KnownSeed.mlKEM, publicKey: nil)
        XCTAssertThrowsError(try other.decapsulate(sent.encapsulated)) { XCTAssertEqual($0 as? CryptoKitError, .incorrectParameterSize) }
    }

    func test_an_x_wing_key_round_trips_and_opens_an_hpke_message_sent_to_the_original() throws {
        let key = try XWingMLKEM768X25519.PrivateKey(seedRepresentation: KnownSeed.xWing, publicKey: nil)
        XCTAssertEqual(key.publicKey.rawRepresentation.count, 1216)
        XCTAssertEqual(hex(SHA256.hash(data: key.publicKey.rawRepresentation)), "2e816deebcd76c5c80d0cd2d174478871658e8e2ff42bc9d4a6e486372e856bb")
        try store.storeKey(key, account: "x-wing")
        XCTAssertEqual(hex(try storedData(account: "x-wing")),
                       hex(KnownSeed.xWing) + "5121745904643ad9dfacca7869292c19a8a69533b53e60666b7db910b4ad6367")
        let readBack: XWingMLKEM768X25519.PrivateKey? = try store.readKey(account: "x-wing")
        let read = try XCTUnwrap(readBack)
        XCTAssertEqual(read.seedRepresentation, KnownSeed.xWing)

        // HPKE: sealed to the original public key, opened by the key read back, in order.
        let suite = HPKE.Ciphersuite.XWingMLKEM768X25519_SHA256_AES_GCM_256
        let info = Data("keychain sample v1".utf8)
        let header = Data("message 1".utf8)
        var sender = try HPKE.Sender(recipientKey: key.publicKey, ciphersuite: suite, info: info)
        let first = try sender.seal(Data("the first secret".utf8), authenticating: header)
        let second = try sender.seal(Data("the second secret".utf8))
        XCTAssertEqual(sender.encapsulatedKey.count, 1120)
        XCTAssertEqual(first.count, "the first secret".utf8.count + 16)
        var recipient = try HPKE.Recipient(privateKey: read, ciphersuite: suite, info: info, encapsulatedKey: sender.encapsulatedKey)
        XCTAssertEqual(try recipient.open(first, authenticating: header), Data("the first secret".utf8))
        XCTAssertEqual(try recipient.open(second), Data("the second secret".utf8))
        // Another info, or another X-Wing key, derives another key: the message does not open. The
        // error is BoringSSL's CIPHER_R_BAD_DECRYPT, as swift-crypto reports any AES-GCM open that
        // fails on Linux, where Apple's CryptoKit throws `.authenticationFailure`.
        let badDecrypt = CryptoKitError.underlyingCoreCryptoError(error: 0x1E00_0065)
        var otherInfo = try HPKE.Recipient(privateKey: read, ciphersuite: suite, info: Data("keychain sample v2".utf8),
                                           encapsulatedKey: sender.encapsulatedKey)
        XCTAssertThrowsError(try otherInfo.open(first, authenticating: header)) { XCTAssertEqual($0 as? CryptoKitError, badDecrypt) }
        var stranger = try HPKE.Recipient(privateKey: XWingMLKEM768X25519.PrivateKey(), ciphersuite: suite, info: info,
                                          encapsulatedKey: sender.encapsulatedKey)
        XCTAssertThrowsError(try stranger.open(first, authenticating: header)) { XCTAssertEqual($0 as? CryptoKitError, badDecrypt) }
        XCTAssertThrowsError(try AES.GCM.open(AES.GCM.seal(header, using: SymmetricKey(size: .bits256)), using: SymmetricKey(size: .bits256))) {
            XCTAssertEqual($0 as? CryptoKitError, badDecrypt)
        }
        // An encapsulated key of another length is refused before any decapsulation.
        XCTAssertThrowsError(try HPKE.Recipient(privateKey: read, ciphersuite: suite, info: info, encapsulatedKey: sender.encapsulatedKey.dropLast())) {
            XCTAssertEqual($0 as? CryptoKitError, .incorrectParameterSize)
        }
        // The suite's KEM is not checked against an X-Wing key (swift-crypto 4.5.2 checks it only
        // for Diffie-Hellman keys): the sender encapsulates with X-Wing under a P-256 suite's name.
        let mixed = try HPKE.Sender(recipientKey: key.publicKey, ciphersuite: .P256_SHA256_AES_GCM_256, info: info)
        XCTAssertEqual(mixed.encapsulatedKey.count, 1120)
        // The KEM alone: a shared secret encapsulated to the original, recovered by the key read back.
        let sent = try key.publicKey.encapsulate()
        XCTAssertEqual(try read.decapsulate(sent.encapsulated), sent.sharedSecret)
    }

    /// The integrity check at work: an item whose bytes changed in the keychain, or that is read
    /// back as another type whose seed has the same size, is refused with CryptoKit's error.
    func test_a_damaged_or_mistyped_item_is_refused_instead_of_becoming_another_key() throws {
        try store.storeKey(try MLDSA65.PrivateKey(seedRepresentation: KnownSeed.mlDSA, publicKey: nil), account: "ml-dsa-65")
        try store.storeKey(try MLKEM768.PrivateKey(seedRepresentation: KnownSeed.mlKEM, publicKey: nil), account: "ml-kem-768")
        try store.storeKey(try XWingMLKEM768X25519.PrivateKey(seedRepresentation: KnownSeed.xWing, publicKey: nil), account: "x-wing")

        // Read back as the wrong type: the seed has the right size, the public key hash does not match.
        XCTAssertThrowsError(try store.readKey(account: "ml-dsa-65") as MLDSA87.PrivateKey?) { XCTAssertEqual($0 as? CryptoKitError, .unwrapFailure) }
        XCTAssertThrowsError(try store.readKey(account: "ml-dsa-65") as XWingMLKEM768X25519.PrivateKey?) {
            XCTAssertEqual($0 as? KEM.Errors, .publicKeyMismatchDuringInitialization)
        }
        XCTAssertThrowsError(try store.readKey(account: "ml-kem-768") as MLKEM1024.PrivateKey?) {
            XCTAssertEqual($0 as? KEM.Errors, .publicKeyMismatchDuringInitialization)
        }
        XCTAssertThrowsError(try store.readKey(account: "x-wing") as MLDSA65.PrivateKey?) { XCTAssertEqual($0 as? CryptoKitError, .unwrapFailure) }
        // ... or with a seed of another size.
        XCTAssertThrowsError(try store.readKey(account: "ml-dsa-65") as MLKEM768.PrivateKey?) { XCTAssertEqual($0 as? KEM.Errors, .invalidSeed) }
        XCTAssertThrowsError(try store.readKey(account: "ml-kem-768") as MLDSA65.PrivateKey?) { XCTAssertEqual($0 as? CryptoKitError, .incorrectParameterSize) }

        // One bit of the stored seed flipped: another seed, whose public key has another hash.
        for account in ["ml-dsa-65", "ml-kem-768", "x-wing"] {
            var damaged = try storedData(account: account)
            damaged[3] ^= 0x01
            replaceStoredData(account: account, with: damaged)
        }
        XCTAssertThrowsError(try store.readKey(account: "ml-dsa-65") as MLDSA65.PrivateKey?) { XCTAssertEqual($0 as? CryptoKitError, .unwrapFailure) }
        XCTAssertThrowsError(try store.readKey(account: "ml-kem-768") as MLKEM768.PrivateKey?) {
            XCTAssertEqual($0 as? KEM.Errors, .publicKeyMismatchDuringInitialization)
        }
        XCTAssertThrowsError(try store.readKey(account: "x-wing") as XWingMLKEM768X25519.PrivateKey?) {
            XCTAssertEqual($0 as? KEM.Errors, .publicKeyMismatchDuringInitialization)
        }
        // A truncated item is refused for its size.
        replaceStoredData(account: "ml-kem-768", with: Data(KnownSeed.mlKEM))
        XCTAssertThrowsError(try store.readKey(account: "ml-kem-768") as MLKEM768.PrivateKey?) { XCTAssertEqual($0 as? KEM.Errors, .invalidSeed) }
        // A second key under the same account is the keychain's duplicate, as for any generic password.
        XCTAssertThrowsError(try store.storeKey(try XWingMLKEM768X25519.PrivateKey(), account: "x-wing")) {
            XCTAssertEqual(($0 as? KeyStoreError)?.message, "Unable to store item: The specified item already exists in the keychain.")
        }
    }
}
