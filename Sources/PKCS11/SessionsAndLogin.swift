import CPKCS11
import KeychainCore

/// PKCS#11 §5.6 session management, with PINs (§5.5 C_InitPIN, C_SetPIN).
extension ModuleState {
    func openSession(slotID: CK_SLOT_ID, flags: CK_FLAGS) throws(CKError) -> CK_SESSION_HANDLE {
        let slot = try slot(slotID)
        guard flags & CK_FLAGS(CKF_SERIAL_SESSION) != 0 else {
            throw CKError(CK_RV(CKR_SESSION_PARALLEL_NOT_SUPPORTED), "CKF_SERIAL_SESSION must be set")
        }
        guard let token = slot.token else {
            throw CKError(CK_RV(CKR_TOKEN_NOT_RECOGNIZED), "the empty slot has no keychain yet: C_InitToken creates one")
        }
        let readWrite = flags & CK_FLAGS(CKF_RW_SESSION) != 0
        if !readWrite, token.login == .securityOfficer {
            throw CKError(CK_RV(CKR_SESSION_READ_WRITE_SO_EXISTS), "the SO is logged in: only read/write sessions")
        }
        return openSession(slotID: slotID, readWrite: readWrite)
    }

    func closeAllSessions(slotID: CK_SLOT_ID) throws(CKError) {
        _ = try slot(slotID)
        for session in sessions(on: slotID) { closeSession(session) }
    }

    func sessionInfo(_ handle: CK_SESSION_HANDLE) throws(CKError) -> CK_SESSION_INFO {
        try withSession(handle) { session, token throws(CKError) in
            var info = CK_SESSION_INFO()
            info.slotID = session.slotID
            info.state = session.state(login: token.login)
            info.flags = CK_FLAGS(CKF_SERIAL_SESSION) | (session.readWrite ? CK_FLAGS(CKF_RW_SESSION) : 0)
            info.ulDeviceError = 0
            return info
        }
    }

    func login(_ handle: CK_SESSION_HANDLE, userType: CK_USER_TYPE, pin: UnsafeRawBufferPointer) throws(CKError) {
        try withSession(handle) { session, token throws(CKError) in
            let wanted: Token.Login
            switch userType {
            case CK_USER_TYPE(CKU_USER): wanted = .user
            case CK_USER_TYPE(CKU_SO): wanted = .securityOfficer
            case CK_USER_TYPE(CKU_CONTEXT_SPECIFIC):
                try contextLogin(session, token: token, pin: pin)
                return
            default:
                throw CKError(CK_RV(CKR_USER_TYPE_INVALID), "unknown user type \(userType)")
            }
            if token.login == wanted {
                throw CKError(CK_RV(CKR_USER_ALREADY_LOGGED_IN), "already logged in")
            }
            // C_Login: the SO cannot log in while read-only sessions exist, whoever else is
            // logged in.
            if wanted == .securityOfficer, sessions(on: session.slotID).contains(where: { !$0.readWrite }) {
                throw CKError(CK_RV(CKR_SESSION_READ_ONLY_EXISTS), "close read-only sessions before the SO logs in")
            }
            if token.login != .none {
                throw CKError(CK_RV(CKR_USER_ANOTHER_ALREADY_LOGGED_IN), "another user is logged in")
            }
            // The PIN is checked with no module lock held (scrypt), one login of this process at a
            // time per token: a thread that waited finds the token logged in (what it would get a
            // moment later anyway) rather than evaluating its PIN too. The login state is set
            // after, checked again.
            try token.loginGate.withLock { () throws(CKError) in
                if token.login == wanted { throw CKError(CK_RV(CKR_USER_ALREADY_LOGGED_IN), "already logged in") }
                if token.login != .none { throw CKError(CK_RV(CKR_USER_ANOTHER_ALREADY_LOGGED_IN), "another user is logged in") }
                let master = try checkPIN(wanted == .user ? .user : .securityOfficer, pin, of: token)
                try token.logIn(wanted, master: master)
            }
            session.pinJustPresented = wanted == .user
        }
    }

    /// C_Login(CKU_USER) with a NULL PIN while the unlock session (`keychaind`) holds the keychain
    /// unlocked: the session's master key, checked against the keychain, logs the user in at once
    /// (no scrypt). False when the session does not hold it (the prompt program is next).
    func sessionLogin(_ handle: CK_SESSION_HANDLE) throws(CKError) -> Bool {
        try withSession(handle) { session, token throws(CKError) in
            if token.login == .user { throw CKError(CK_RV(CKR_USER_ALREADY_LOGGED_IN), "already logged in") }
            if token.login != .none { throw CKError(CK_RV(CKR_USER_ANOTHER_ALREADY_LOGGED_IN), "another user is logged in") }
            guard let master = UnlockSession.masterKey(for: token.keychain) else { return false }
            try token.logIn(.user, master: master)
            session.pinJustPresented = true
            return true
        }
    }

    /// For C_Login with a NULL PIN: the prompt program and what it should ask, after the checks
    /// that need no PIN (so that nobody is asked for a PIN the call would refuse anyway).
    func promptRequest(_ handle: CK_SESSION_HANDLE, userType: CK_USER_TYPE) throws(CKError) -> (program: String, text: String) {
        try withSession(handle) { session, token throws(CKError) in
            guard let program = configuration.promptProgram else {
                throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "NULL PIN, and no prompt program is configured (prompt_program)")
            }
            let label = try translating { () throws(KeychainError) in try token.keychain.info(countingObjects: false).label }
            switch userType {
            case CK_USER_TYPE(CKU_USER):
                if token.login == .user { throw CKError(CK_RV(CKR_USER_ALREADY_LOGGED_IN), "already logged in") }
                return (program, "Enter the PIN of keychain '\(label)':")
            case CK_USER_TYPE(CKU_SO):
                if token.login == .securityOfficer { throw CKError(CK_RV(CKR_USER_ALREADY_LOGGED_IN), "already logged in") }
                return (program, "Enter the SO PIN of keychain '\(label)':")
            case CK_USER_TYPE(CKU_CONTEXT_SPECIFIC):
                guard token.login == .user else { throw CKError.userNotLoggedIn }
                if [OperationKind.sign, .decrypt].contains(where: { session.operations[$0]?.sealedKey != nil }) {
                    return (program, "A key of keychain '\(label)' is protected by an application password: enter it:")
                }
                return (program, "Confirm the use of a protected key of keychain '\(label)': enter its PIN:")
            default:
                throw CKError(CK_RV(CKR_USER_TYPE_INVALID), "unknown user type \(userType)")
            }
        }
    }

    /// Checks a caller's PIN (counted like every login) and returns the master key; a PIN longer
    /// than any valid one is simply wrong.
    func checkPIN(_ owner: PINOwner, _ pin: UnsafeRawBufferPointer, of token: Token) throws(CKError) -> MasterKey {
        try translating { () throws(KeychainError) in
            guard pin.count <= PINPolicy.maximumLength else { throw KeychainError(.pinIncorrect, "PIN too long") }
            return try token.keychain.unlock(owner, pin: pin)
        }
    }

    func logout(_ handle: CK_SESSION_HANDLE) throws(CKError) {
        try withSession(handle) { _, token throws(CKError) in
            // Every session of the token drops its search, grace and unlocked items at its next
            // call (`Session.catchUp`).
            guard token.logout() else { throw CKError.userNotLoggedIn }
        }
    }

    func initPIN(_ handle: CK_SESSION_HANDLE, pin: UnsafeRawBufferPointer) throws(CKError) {
        try withSession(handle) { session, token throws(CKError) in
            guard session.readWrite, let master = token.securityOfficerMaster else {
                throw CKError(CK_RV(CKR_USER_NOT_LOGGED_IN), "C_InitPIN needs the SO logged in on a read/write session")
            }
            try translating { () throws(KeychainError) in try token.keychain.setUserPIN(pin, master: master, kdf: configuration.kdf) }
        }
    }

    func setPIN(_ handle: CK_SESSION_HANDLE, old: UnsafeRawBufferPointer, new: UnsafeRawBufferPointer) throws(CKError) {
        try withSession(handle) { session, token throws(CKError) in
            guard session.readWrite else { throw CKError.sessionReadOnly }
            let owner: PINOwner = token.login == .securityOfficer ? .securityOfficer : .user
            try translating { () throws(KeychainError) in
                guard old.count <= PINPolicy.maximumLength else { throw KeychainError(.pinIncorrect, "PIN too long") }
                try token.keychain.changePIN(owner, old: old, new: new, kdf: configuration.kdf)
            }
        }
    }

    func cancel(_ handle: CK_SESSION_HANDLE, flags: CK_FLAGS) throws(CKError) {
        let session = try session(handle)
        if flags & CK_FLAGS(CKF_FIND_OBJECTS) != 0 { session.find = nil }
        let kinds: [(UInt, OperationKind)] = [(CKF_DIGEST, .digest), (CKF_SIGN, .sign), (CKF_VERIFY, .verify), (CKF_ENCRYPT, .encrypt), (CKF_DECRYPT, .decrypt)]
        for (flag, kind) in kinds where flags & CK_FLAGS(flag) != 0 { session.operations[kind] = nil }
    }
}
