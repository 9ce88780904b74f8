// `import CryptoKit`, as Apple code says it: swift-crypto's Crypto module, which is CryptoKit's
// API on Linux (Apple's own re-implementation). Offered so that Apple's "storing CryptoKit keys
// in the keychain" code compiles unchanged next to `import Security`.
@_exported import Crypto
