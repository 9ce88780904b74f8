import CPKCS11
import KeychainCore
import KeychainCrypto

/// PKCS#11 §5.4 general-purpose functions.
enum General {
    static let manufacturer = "Keychain PKCS#11"
    static let libraryDescription = "Keychain items over PKCS#11"
    static let libraryVersion = CK_VERSION(major: ProductVersion.major, minor: ProductVersion.minor)

    /// What a caller's CK_C_INITIALIZE_ARGS said (read in ABI/).
    struct InitializeArguments {
        /// How many of the four mutex callbacks were given.
        var mutexCallbacks: Int
        var osLockingOK: Bool
        var reservedGiven: Bool
    }

    /// C_Initialize's rules (§5.4): all or none of the mutex callbacks; application locking
    /// alone cannot be honoured (the module locks with the operating system's primitives);
    /// pReserved must be NULL (NSS puts its LibraryParameters there only for a module configured
    /// with parameters, which this one never needs).
    static func initialize(_ arguments: InitializeArguments?) throws(CKError) {
        if let arguments {
            guard arguments.mutexCallbacks == 0 || arguments.mutexCallbacks == 4 else {
                throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "either all or none of the mutex callbacks must be given")
            }
            if arguments.mutexCallbacks == 4, !arguments.osLockingOK {
                throw CKError(CK_RV(CKR_CANT_LOCK), "application mutexes without CKF_OS_LOCKING_OK are not supported")
            }
            guard !arguments.reservedGiven else { throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "pReserved must be NULL") }
        }
        // Before any lock of ours is taken (HostOpenSSL says why).
        HostOpenSSL.loadConfiguration()
        try Module.shared.initialize(configuration: .current())
    }

    static func finalize(reservedGiven: Bool) throws(CKError) {
        guard !reservedGiven else { throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "pReserved must be NULL") }
        try Module.shared.finalize()
    }

    static func info(version: CK_VERSION) throws(CKError) -> CK_INFO {
        try Module.shared.withState { _ throws(CKError) in
            var result = CK_INFO()
            result.cryptokiVersion = version
            PaddedString.fill(&result.manufacturerID, with: manufacturer)
            result.flags = 0
            PaddedString.fill(&result.libraryDescription, with: libraryDescription)
            result.libraryVersion = libraryVersion
            return result
        }
    }
}
