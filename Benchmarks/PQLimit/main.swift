import Crypto

#if canImport(Glibc)
import Glibc
#endif

// pq-limit: the limit for scripts/pq-bench.sh — the work the module's ML-DSA and ML-KEM calls do,
// with swift-crypto (the library the module wraps, the same build of it) called directly and
// nothing around it. For ML-DSA-65, ML-DSA-87, ML-KEM-768 and ML-KEM-1024, SECONDS each, one line
// per measure in Benchmarks/pq_bench.c's names and units ("<measure>.<set> <value> op/s"):
//
//   keygen   PrivateKey() and its public key's rawRepresentation (what a pair's CKA_VALUE needs)
//   sign     signature(for:) of the same fixed 1 KiB message, one key kept for the run
//   verify   isValidSignature(_:for:) of that message and a valid signature
//   encaps   encapsulate() on the public key
//   decaps   decapsulate(_:) of one ciphertext
//
// Each operation is timed alone, as pq_bench times each of the module's; the rate is operations
// / the sum of their times. Before the timing one signature is verified and one encapsulation
// decapsulated to the same secret, as pq_bench checks the module.
//
//   pq-limit SECONDS [MEASURE]       (with MEASURE, keygen.mlkem768 say, only that one: for perf)

func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

func report(_ measure: String, _ set: String, _ rate: Double) {
    print("\(measure).\(set) \((rate * 1000).rounded() / 1000) op/s")
}

/// A line on standard error (Swift 6 refuses C's `stderr`, a shared mutable global).
func complain(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
}

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count == 1 || arguments.count == 2, let budget = Double(arguments.first!), budget > 0 else {
    complain("usage: pq-limit SECONDS [MEASURE]")
    exit(64)
}
let only = arguments.dropFirst().first
let message: [UInt8] = (0..<1024).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) }

/// OPERATION.SET: operations per second of timed time, repeated for the budget. `operation`
/// does one operation and returns its time: what it made is dropped after its clock stops, as
/// pq_bench destroys the module's new objects untimed.
func measure(_ name: String, _ set: String, _ operation: () throws -> Double) rethrows {
    if let only, only != "\(name).\(set)" { return }
    var spent = 0.0
    var count = 0
    let start = now()
    repeat {
        spent += try operation()
        count += 1
    } while now() - start < budget
    report(name, set, Double(count) / spent)
}

/// The time of `body`, what it returns kept alive until the clock has stopped.
func timed<T>(_ body: () throws -> T) rethrows -> Double {
    let t0 = now()
    let made = try body()
    let spent = now() - t0
    withExtendedLifetime(made) {}
    return spent
}

func signatureSet<Key, Public>(_ set: String, generate: () throws -> Key, publicKey: (Key) -> Public, raw: (Public) -> [UInt8],
                               sign: (Key, [UInt8]) throws -> [UInt8], verify: (Public, [UInt8], [UInt8]) -> Bool) throws {
    try measure("keygen", set) { try timed { () throws -> (Key, [UInt8]) in let key = try generate(); return (key, raw(publicKey(key))) } }
    let key = try generate()
    let pub = publicKey(key)
    var signature = try sign(key, message)
    guard verify(pub, signature, message) else { throw Failure(description: "\(set): the first signature does not verify") }
    try measure("sign", set) { try timed { signature = try sign(key, message) } }
    try measure("verify", set) {
        var valid = false
        let spent = timed { valid = verify(pub, signature, message) }
        guard valid else { throw Failure(description: "\(set): a signature does not verify") }
        return spent
    }
}

func encapsulationSet<Key, Public>(_ set: String, generate: () throws -> Key, publicKey: (Key) -> Public, raw: (Public) -> [UInt8],
                                   encapsulate: (Public) throws -> KEM.EncapsulationResult,
                                   decapsulate: (Key, [UInt8]) throws -> SymmetricKey) throws {
    try measure("keygen", set) { try timed { () throws -> (Key, [UInt8]) in let key = try generate(); return (key, raw(publicKey(key))) } }
    let key = try generate()
    let pub = publicKey(key)
    let first = try encapsulate(pub)
    let ciphertext = Array(first.encapsulated)
    guard try decapsulate(key, ciphertext) == first.sharedSecret else {
        throw Failure(description: "\(set): the decapsulated secret differs from the encapsulated one")
    }
    try measure("encaps", set) { try timed { try encapsulate(pub) } }
    try measure("decaps", set) { try timed { try decapsulate(key, ciphertext) } }
}

do {
    try signatureSet("mldsa65", generate: { try MLDSA65.PrivateKey() }, publicKey: { $0.publicKey }, raw: { Array($0.rawRepresentation) },
                     sign: { Array(try $0.signature(for: $1)) }, verify: { $0.isValidSignature($1, for: $2) })
    try signatureSet("mldsa87", generate: { try MLDSA87.PrivateKey() }, publicKey: { $0.publicKey }, raw: { Array($0.rawRepresentation) },
                     sign: { Array(try $0.signature(for: $1)) }, verify: { $0.isValidSignature($1, for: $2) })
    try encapsulationSet("mlkem768", generate: { try MLKEM768.PrivateKey() }, publicKey: { $0.publicKey }, raw: { Array($0.rawRepresentation) },
                         encapsulate: { try $0.encapsulate() }, decapsulate: { try $0.decapsulate($1) })
    try encapsulationSet("mlkem1024", generate: { try MLKEM1024.PrivateKey() }, publicKey: { $0.publicKey }, raw: { Array($0.rawRepresentation) },
                         encapsulate: { try $0.encapsulate() }, decapsulate: { try $0.decapsulate($1) })
} catch {
    complain("pq-limit: \(error)")
    exit(1)
}
