// swift-tools-version: 6.0
// Keychain PKCS#11: a software PKCS#11 token whose objects are keychain items.
// Layers (dependencies point down only), see Docs/architecture.md:
//   PKCS11Module -> PKCS11 -> KeychainCore -> KeychainStore -> KeychainCrypto -> C modules
//   KeychainTPM (the TPM through tpm2-tss) sits beside KeychainStore, over KeychainCrypto; KeychainCore uses both
import PackageDescription

/// Absolute path of the package root: the linker runs elsewhere, so the export map needs it.
let packageRoot = String(#filePath.dropLast("Package.swift".count))

/// Keeps the module light: no implicit _Concurrency or _StringProcessing runtime in provider code.
let providerSwiftSettings: [SwiftSetting] = [
    .unsafeFlags([
        "-Xfrontend", "-disable-implicit-concurrency-module-import",
        "-Xfrontend", "-disable-implicit-string-processing-module-import",
    ]),
    // Dynamic exclusivity checks cost more than the cipher on small messages (swift_beginAccess
    // was half of a 1 KiB AES-GCM C_EncryptInit + C_Encrypt under callgrind). Debug builds — the
    // whole test suite and the interop scripts' first pass — keep them, so a violation is still
    // caught there; the release module leaves them out.
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
]

let package = Package(
    name: "keychain-pkcs11",
    products: [
        .library(name: "keychain-pkcs11", type: .dynamic, targets: ["PKCS11Module"]),
        .library(name: "KeychainServices", targets: ["KeychainServices"]),
        // Apple's module names over the same API, so that Apple sources compile with no edit.
        .library(name: "Security", targets: ["Security"]),
        .library(name: "LocalAuthentication", targets: ["LocalAuthentication"]),
        .library(name: "CryptoKit", targets: ["CryptoKit"]),
        .executable(name: "keychainctl", targets: ["keychainctl"]),
        .executable(name: "keychaind", targets: ["keychaind"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // CryptoKit's API on Linux: re-exported as the `CryptoKit` module (Docs/keychain-api.md).
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    ],
    targets: [
        // C headers: p11-kit's pkcs11.h (2.40) plus our 3.0 additions and vendor constants.
        .systemLibrary(name: "CPKCS11", path: "Include"),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto"),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3"),
        // libgcrypt: the EdDSA variants with a context or prehash (RFC 8032 §5.1, §5.2).
        .systemLibrary(name: "CGcrypt", pkgConfig: "libgcrypt"),
        // sd-bus (libsystemd): keychaind listens to logind's sleep and session-lock signals.
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd"),
        // tpm2-tss (libtss2-dev): ESAPI, the TCTI loader, marshalling, Tss2_RC_Decode; the header
        // re-exports the cast macros Swift cannot import.
        .systemLibrary(name: "CTSS2", pkgConfig: "tss2-esys"),

        .target(
            name: "KeychainCrypto",
            // swift-crypto: ML-DSA and ML-KEM (BoringSSL's FIPS 203/204 code, through its public API).
            dependencies: ["COpenSSL", "CGcrypt", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: providerSwiftSettings
        ),
        // The TPM as a key store beside KeychainCrypto: connection, primary key, keys, sealing.
        // tpm2-tss's log lines routed away from the host's stderr (C: ELF relocations, fopencookie).
        .target(name: "CTSS2Log"),
        .target(
            name: "KeychainTPM",
            dependencies: ["CTSS2", "CTSS2Log", "KeychainCrypto"],
            swiftSettings: providerSwiftSettings
        ),
        .target(
            name: "KeychainStore",
            dependencies: ["CSQLite", "KeychainCrypto"],
            swiftSettings: providerSwiftSettings
        ),
        .target(
            name: "KeychainCore",
            dependencies: ["KeychainStore", "KeychainCrypto", "KeychainTPM"],
            swiftSettings: providerSwiftSettings
        ),
        // The SecItem API over KeychainCore, for Swift programs (uses Foundation; not in the module).
        .target(
            name: "KeychainServices",
            dependencies: ["KeychainCore", "KeychainCrypto"]
        ),
        .target(name: "Security", dependencies: ["KeychainServices"]),
        .target(name: "LocalAuthentication", dependencies: ["KeychainServices"]),
        // swift-crypto's API plus SecureEnclave.P256 keys made in the TPM (through KeychainServices).
        .target(name: "CryptoKit", dependencies: [.product(name: "Crypto", package: "swift-crypto"), "KeychainServices"]),
        .target(
            name: "PKCS11",
            dependencies: ["CPKCS11", "KeychainCore", "KeychainTPM", .product(name: "Logging", package: "swift-log")],
            swiftSettings: providerSwiftSettings
        ),
        .target(
            name: "PKCS11Module",
            dependencies: ["PKCS11", "CPKCS11"],
            swiftSettings: providerSwiftSettings,
            linkerSettings: [
                .unsafeFlags([
                    "-Xlinker", "--version-script=\(packageRoot)pkcs11/keychain-pkcs11.map",
                    "-Xlinker", "-z", "-Xlinker", "nodelete",
                    // gold keeps 38 protected Swift symbols in .dynsym (bound LOCAL) despite the
                    // version script; lld, shipped with the toolchain, leaves only the C_* exports.
                    "-use-ld=lld",
                ]),
            ]
        ),
        .executableTarget(
            name: "keychainctl",
            dependencies: [
                "CPKCS11",
                "CSystemd",
                "BusSupport",
                "KeychainCore",
                "KeychainCrypto",
                "KeychainSync",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // Apple's SecItem calls on the command line (the cross-door tests).
        .executableTarget(name: "secitem", dependencies: ["Security"]),
        // SecKeyCreateSignature's signatures per second, an Apple-API program (scripts/tpm-bench.sh).
        .executableTarget(name: "seckey-sign", dependencies: ["Security"], path: "Benchmarks/SecKeySign"),
        // ML-DSA and ML-KEM with swift-crypto called directly: the limit of scripts/pq-bench.sh.
        .executableTarget(name: "pq-limit", dependencies: [.product(name: "Crypto", package: "swift-crypto")], path: "Benchmarks/PQLimit"),

        // The Secret Service's sd-bus object tables (C: Swift cannot build them).
        .target(name: "CSecretService", dependencies: ["CSystemd"]),
        // Reading and writing sd-bus messages from Swift (the Secret Service server, keychainctl's client).
        .target(name: "BusSupport", dependencies: ["CSystemd"]),
        // The freedesktop Secret Service over the keychains (keychaind serves it; tests drive it on a private bus).
        .target(name: "SecretService", dependencies: ["KeychainCore", "KeychainCrypto", "CSystemd", "CSecretService", "BusSupport"]),
        // Sync over git (issue 47, Docs/sync.md): the remote's formats, their checks and the merge rule.
        .target(name: "KeychainSync", dependencies: ["KeychainCore", "KeychainCrypto"]),
        // The unlock session's daemon (Docs/security.md); with --secret-service it also serves SecretService.
        .executableTarget(name: "keychaind", dependencies: ["SecretService", "KeychainCore", "KeychainCrypto", "KeychainSync", "CSystemd"]),

        // Fuzz targets (scripts/fuzz.sh builds them with libFuzzer; a normal build makes
        // replayers of the committed corpora, run by the tests).
        .target(name: "FuzzSupport"),
        .executableTarget(name: "FuzzDecoders", dependencies: ["FuzzSupport", "KeychainCore", "KeychainCrypto", "KeychainStore"]),
        .executableTarget(name: "FuzzModule", dependencies: ["FuzzSupport", "PKCS11", "CPKCS11"]),

        .testTarget(name: "KeychainCryptoTests", dependencies: ["KeychainCrypto"], exclude: ["Vectors/README.md"]),
        // A fresh swtpm per test (Debian's swtpm on 127.0.0.1), for every test target that needs a TPM.
        .target(name: "TPMTestSupport", path: "Tests/TPMTestSupport"),
        .testTarget(name: "KeychainTPMTests", dependencies: ["KeychainTPM", "KeychainCrypto", "TPMTestSupport"]),
        .testTarget(name: "KeychainStoreTests", dependencies: ["KeychainStore", "KeychainCrypto"]),
        .testTarget(name: "KeychainCoreTests", dependencies: ["KeychainCore", "KeychainStore", "TPMTestSupport"]),
        .testTarget(name: "KeychainServicesTests", dependencies: ["KeychainServices", "KeychainCore", "KeychainCrypto", "PKCS11", "CPKCS11", "TPMTestSupport",
                                                                .product(name: "Crypto", package: "swift-crypto")]),
        .testTarget(name: "PKCS11Tests", dependencies: ["PKCS11", "CPKCS11", "KeychainCore", "KeychainCrypto", "KeychainTPM", "TPMTestSupport"]),
        .testTarget(name: "KeychainSyncTests", dependencies: ["KeychainSync", "KeychainCore", "KeychainStore", "KeychainCrypto", "TPMTestSupport"]),
        .testTarget(name: "SecretServiceTests", dependencies: ["SecretService", "KeychainCore", "KeychainCrypto", "CSystemd", "BusSupport"]),
        // Apple's published samples, ported: each sample file imports only Apple's module names.
        .testTarget(name: "AppleSampleTests", dependencies: ["Security", "LocalAuthentication", "CryptoKit", "KeychainCore", "TPMTestSupport"]),
    ]
)
