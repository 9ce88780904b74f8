import Foundation
@testable import KeychainCrypto

/// A small subset of NIST's ACVP vectors for ML-DSA and ML-KEM, embedded as the JSON it came in
/// (README.md beside this file names the source, its revision and the test cases chosen).
enum ACVPVectors {
    /// An ACVP internalProjection.json cut down to the chosen groups and cases.
    struct File<Test: Decodable>: Decodable {
        let algorithm: String
        let mode: String
        let revision: String
        let testGroups: [Group<Test>]
    }

    struct Group<Test: Decodable>: Decodable {
        let tgId: Int
        let parameterSet: String
        let tests: [Test]

        /// The set the group is for; a set this module does not know fails the test that reads it.
        var set: LatticeParameterSet? { LatticeParameterSet.allCases.first { $0.name == parameterSet } }
    }

    struct MLDSAKeyGen: Decodable {
        let tcId: Int
        let seed: String
        let pk: String
        let sk: String
    }

    struct MLDSASigVer: Decodable {
        let tcId: Int
        let testPassed: Bool
        let pk: String
        let message: String
        let context: String
        let signature: String
        let reason: String
    }

    struct MLKEMKeyGen: Decodable {
        let tcId: Int
        let d: String
        let z: String
        let ek: String
        let dk: String
    }

    struct MLKEMDecapsulation: Decodable {
        let tcId: Int
        let d: String
        let z: String
        let ek: String
        let c: String
        let k: String
        let reason: String
    }

    struct MLKEMEncapsulationKeyCheck: Decodable {
        let tcId: Int
        let testPassed: Bool
        let ek: String
        let reason: String
    }

    static func decode<Test: Decodable>(_ text: String, as _: Test.Type) throws -> File<Test> {
        try JSONDecoder().decode(File<Test>.self, from: Data(text.utf8))
    }

    /// The bytes of an ACVP hex field (upper case, as ACVP writes it); a field that is not hex
    /// fails the test rather than reading as empty.
    static func bytes(_ hex: String) throws -> [UInt8] {
        guard let bytes = Hex.bytes(Array(hex.utf8)) else { throw NotHex(field: String(hex.prefix(16))) }
        return bytes
    }

    struct NotHex: Error { let field: String }
}
