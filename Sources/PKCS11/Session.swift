import CPKCS11
import KeychainCrypto
import KeychainCore

/// One PKCS#11 session. Login state lives on the token (shared by the application's sessions).
///
/// Its mutable state is used only by the thread holding `lock` (`ModuleState.inSession`): no
/// other session's call touches it. What other sessions' calls change for it — a logout — it
/// picks up itself at the start of its next call (`catchUp`).
final class Session: @unchecked Sendable {
    let handle: CK_SESSION_HANDLE
    let slotID: CK_SLOT_ID
    let readWrite: Bool
    let lock = PThreadMutex(.recursive)
    /// The token's logout count this session has caught up with.
    private var logoutsSeen: UInt64 = 0
    /// The active C_FindObjects operation: handles not yet returned.
    var find: FindOperation?
    /// Active operations, one of each kind.
    var operations = ActiveOperations()
    /// The user PIN was just presented in this session (C_Login(CKU_USER)) and since then the
    /// session has only searched and read attributes (no operation started, no object made): the
    /// next sign or decrypt counts as authenticated even for a CKA_ALWAYS_AUTHENTICATE key.
    /// OpenSSH relies on this: it skips the context-specific login for the signature that
    /// immediately follows its own user login (after finding the key).
    var pinJustPresented = false
    /// Items whose credential was presented in this session (a CKO_KC_CREDENTIAL object), by item
    /// handle: the secret attributes an application password opened (none for user presence,
    /// whose secret is in the record), and the credential object that unlocked each.
    var unlockedItems: [CK_OBJECT_HANDLE: (secrets: ObjectAttributes, credential: CK_OBJECT_HANDLE)] = [:]
    /// A key opened with its application password, for the moment its operation is built.
    var revealedKeys: [CK_OBJECT_HANDLE: ReadyKey] = [:]

    init(handle: CK_SESSION_HANDLE, slotID: CK_SLOT_ID, readWrite: Bool, logoutsSeen: UInt64 = 0) {
        self.handle = handle
        self.slotID = slotID
        self.readWrite = readWrite
        self.logoutsSeen = logoutsSeen
    }

    /// After a logout through any session of the token: the search, the PIN's grace and the
    /// items unlocked by credentials end (operations under way finish with the keys they hold).
    func catchUp(with token: Token) {
        let logouts = token.logouts
        guard logouts != logoutsSeen else { return }
        logoutsSeen = logouts
        find = nil
        pinJustPresented = false
        unlockedItems.removeAll()
        revealedKeys.removeAll()
    }

    /// C_CloseSession, C_CloseAllSessions, C_Finalize: everything the session holds goes.
    func close() {
        find = nil
        operations = ActiveOperations()
        unlockedItems.removeAll()
        revealedKeys.removeAll()
        pinJustPresented = false
    }

    /// CKS_* for C_GetSessionInfo (PKCS#11 §5.6 session states).
    func state(login: Token.Login) -> CK_STATE {
        switch (login, readWrite) {
        case (.user, false): return CK_STATE(CKS_RO_USER_FUNCTIONS)
        case (.user, true): return CK_STATE(CKS_RW_USER_FUNCTIONS)
        case (.securityOfficer, _): return CK_STATE(CKS_RW_SO_FUNCTIONS)
        case (.none, false): return CK_STATE(CKS_RO_PUBLIC_SESSION)
        case (.none, true): return CK_STATE(CKS_RW_PUBLIC_SESSION)
        }
    }
}

/// The results of C_FindObjectsInit, handed out by C_FindObjects.
struct FindOperation {
    var remaining: ArraySlice<CK_OBJECT_HANDLE>
}

/// A session's active operations by kind: five slots, no hashing on the per-call path.
struct ActiveOperations {
    private var slots: [ActiveOperation?] = Array(repeating: nil, count: OperationKind.allCases.count)

    subscript(kind: OperationKind) -> ActiveOperation? {
        get { slots[kind.rawValue] }
        set { slots[kind.rawValue] = newValue }
    }
}
