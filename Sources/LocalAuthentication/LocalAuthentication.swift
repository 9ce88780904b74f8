// `import LocalAuthentication`, as Apple code says it: LAContext, LAPolicy and LAError live in
// KeychainServices (an LAContext is what kSecUseAuthenticationContext takes).
@_exported import KeychainServices
