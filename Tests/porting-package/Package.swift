// swift-tools-version: 6.0
// Programs written for Apple platforms, built against this repository's Apple module names
// (Tests/interop/test_porting_package.sh builds and runs them): PortingCheck, whose file imports
// only Foundation, with the one build setting Docs/keychain-api.md gives under "Porting"; and
// QuantumCheck, which imports CryptoKit and Foundation and uses Apple's 2025 quantum-secure API
// ("Quantum-secure keys"), with no setting at all.
import Foundation
import PackageDescription

/// This repository, two folders up. A path dependency's identity is its folder's name, which
/// differs between checkouts (a user names the package's own: "keychain-pkcs11").
let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardizedFileURL
let identity = repository.lastPathComponent.lowercased()

let package = Package(
    name: "porting-check",
    dependencies: [.package(path: repository.path)],
    targets: [
        .executableTarget(
            name: "PortingCheck",
            dependencies: [.product(name: "Security", package: identity)],
            swiftSettings: [.unsafeFlags(["-Xfrontend", "-import-module", "-Xfrontend", "Security"])]
        ),
        .executableTarget(
            name: "QuantumCheck",
            dependencies: [.product(name: "CryptoKit", package: identity)]
        ),
    ]
)
