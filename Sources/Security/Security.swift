// `import Security`, as Apple code says it: the Keychain Services API of this package.
@_exported import KeychainServices
