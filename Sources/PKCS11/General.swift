import CPKCS11
import KeychainCore

/// PKCS#11 §5.4 general-purpose functions.
enum General {
    static let manufacturer = "Keychain PKCS#11"
    static let libraryDescription = "Keychain items over PKCS#11"
    static let libraryVersion = CK_VERSION(0, 1)

    static func initialize(_ arguments: UnsafeMutableRawPointer?) throws(CKError) {
        if let arguments {
            let args = arguments.assumingMemoryBound(to: CK_C_INITIALIZE_ARGS.self).pointee
            let callbacks = [args.CreateMutex != nil, args.DestroyMutex != nil, args.LockMutex != nil, args.UnlockMutex != nil]
            let supplied = callbacks.filter { $0 }.count
            guard supplied == 0 || supplied == callbacks.count else {
                throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "either all or none of the mutex callbacks must be given")
            }
            // The module locks with the operating system's primitives only.
            if supplied == callbacks.count, args.flags & CK_FLAGS(CKF_OS_LOCKING_OK) == 0 {
                throw CKError(CK_RV(CKR_CANT_LOCK), "application mutexes without CKF_OS_LOCKING_OK are not supported")
            }
            // PKCS#11 §5.4: pReserved must be NULL. (NSS puts its LibraryParameters there only
            // for a module configured with parameters, which this one never needs.)
            guard args.pReserved == nil else { throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "pReserved must be NULL") }
        }
        try Module.shared.initialize(configuration: .current())
    }

    static func finalize(_ reserved: UnsafeMutableRawPointer?) throws(CKError) {
        guard reserved == nil else { throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "pReserved must be NULL") }
        try Module.shared.finalize()
    }

    static func info(_ info: UnsafeMutablePointer<CK_INFO>?, version: CK_VERSION) throws(CKError) {
        guard let info else { throw CKError.argumentsBad }
        try Module.shared.withState { _ throws(CKError) in
            var result = CK_INFO()
            result.cryptokiVersion = version
            PaddedString.fill(&result.manufacturerID, with: manufacturer)
            result.flags = 0
            PaddedString.fill(&result.libraryDescription, with: libraryDescription)
            result.libraryVersion = libraryVersion
            info.pointee = result
        }
    }
}
