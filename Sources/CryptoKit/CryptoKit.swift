// `import CryptoKit`, as Apple code says it: swift-crypto's Crypto module, which is CryptoKit's
// API on Linux (Apple's own re-implementation). Offered so that Apple's "storing CryptoKit keys
// in the keychain" code compiles unchanged next to `import Security`.
//
// Apple's 2025 quantum-secure types (MLDSA65, MLDSA87, MLKEM768, MLKEM1024, XWingMLKEM768X25519
// and HPKE's X-Wing suite) come from swift-crypto with Apple's names and initialisers, so nothing
// is added for them here; Tests/AppleSampleTests/QuantumSecureAPI.swift pins each declaration.
@_exported import Crypto
