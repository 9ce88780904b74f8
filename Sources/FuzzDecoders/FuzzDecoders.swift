// Fuzz target for every decoder of stored or imported bytes. The first input byte picks the
// decoder, the second holds its flags, the rest is its input. Built two ways:
//  - `scripts/fuzz.sh` (swift build --sanitize=fuzzer --sanitize=address -Xswiftc -DFUZZING):
//    libFuzzer calls LLVMFuzzerTestOneInput;
//  - a normal build: `FuzzDecoders FILE|DIR...` runs each file once — the committed corpus and
//    crashers as regression inputs (Tests/fuzz/), in CI and under the sanitizers.
import FuzzSupport
import KeychainCore
import KeychainCrypto
import KeychainStore

enum DecoderFuzz {
    /// A fixed key for the sealed-record decoder: the fuzzer cannot forge a tag, so this reaches
    /// the framing and length checks before authentication and the failure path after it.
    static let recordKey = SecureBytes([UInt8](repeating: 0x5A, count: 32))

    /// One input; OpenSSL's error queue is left as it was (the module's entry points do the same).
    static func run(_ input: [UInt8]) {
        OpenSSLErrorQueue.preserving { decode(input) }
    }

    static func decode(_ input: [UInt8]) {
        guard input.count >= 2 else { return }
        let flags = input[1]
        let data = Array(input.dropFirst(2))
        switch input[0] % 11 {
        case 0:
            _ = try? data.withUnsafeBytes { try AttributeRecord.decode($0) }
        case 1:
            if let index = try? IndexCommitment(entries: [IndexEntry(attribute: 3, digest: Array(data.prefix(16)))], primaryKey: nil) {
                _ = try? SealedRecord.open(data, base: recordKey, uid: [1, 2, 3], objectClass: 3, protection: flags & 7, version: UInt32(flags >> 6), index: index)
            }
        case 2:
            _ = try? Certificate(der: data)
        case 3:
            _ = try? AsymmetricKey.fromExternalRepresentation(data, rsa: flags & 1 != 0, isPrivate: flags & 2 != 0)
        case 4:
            _ = try? AsymmetricKey.publicKey(subjectPublicKeyInfo: data)
        case 5:
            for width in [32, 48, 66] { _ = SignatureOperation.rawFromDER(data, width: width) }
        case 6:
            // A stored key record, attributes in the record encoding, made into a usable key: the
            // curve parameters, points, scalars and RSA components of a damaged row.
            guard let entries = try? data.withUnsafeBytes({ try AttributeRecord.decode($0) }) else { return }
            var values: [AttributeType: [UInt8]] = [:]
            for entry in entries { values[AttributeType(UInt(truncatingIfNeeded: entry.type))] = entry.value }
            let object = ObjectAttributes(values)
            _ = try? KeyFactory.key(of: object)
            _ = try? KeyFactory.publicKey(of: object)
        case 7:
            _ = NestedTemplate.decode(data)
        case 9:
            _ = try? Keychain.backupLabel(data)
        case 10:
            // Key and certificate files (PEM, DER, PKCS#12, OpenSSH), with a fixed passphrase for the encrypted ones.
            _ = try? KeyFile.decode(data, passphrase: { SecureBytes([0x61, 0x62]) })
        default:
            _ = DER.content(of: data, tag: 0x04)
            _ = DER.content(of: data, tag: 0x06)
        }
    }
}

#if FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    DecoderFuzz.run(bytes.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? [])
    return 0
}

/// The entry point SwiftPM links an executable target to.
@_cdecl("FuzzDecoders_main")
func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzHarness.runLibFuzzer(argc, argv, fuzzOne)
}
#else
import Glibc

@main
struct ReplayDecoders {
    static func main() {
        let count = FuzzHarness.replay(CommandLine.arguments.dropFirst()) { DecoderFuzz.run($0) }
        print("FuzzDecoders: \(count) inputs replayed, no crash")
    }
}
#endif
