// swift-tools-version: 6.0
// A program written for Apple platforms, whose file imports only Foundation, built against this
// repository's Security module with the one build setting Docs/keychain-api.md gives under
// "Porting" (Tests/interop/test_porting_package.sh builds and runs it).
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
    ]
)
