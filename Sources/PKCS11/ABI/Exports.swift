import CPKCS11
import KeychainCore
import KeychainCrypto

public typealias BytePointer = UnsafeMutablePointer<CK_BYTE>?
public typealias ULongPointer = UnsafeMutablePointer<CK_ULONG>?
public typealias AttributePointer = UnsafeMutablePointer<CK_ATTRIBUTE>?
public typealias MechanismPointer = UnsafeMutablePointer<CK_MECHANISM>?
public typealias HandlePointer = UnsafeMutablePointer<CK_OBJECT_HANDLE>?

/// The PKCS#11 entry points with their C signatures. Each one validates its pointers, calls one
/// throwing function, and maps the error to CK_RV. PKCS11Module exports them by name; the
/// function lists point at them too.
enum Exports {
    /// Runs one entry point: its error as CK_RV, and the thread's OpenSSL error queue (shared
    /// with the host) left as the host had it.
    @inline(__always)
    static func run(_ function: StaticString, _ body: () throws(CKError) -> Void) -> CK_RV {
        OpenSSLErrorQueue.preserving { () -> CK_RV in
            do throws(CKError) {
                try body()
                return CK_RV(CKR_OK)
            } catch {
                logger.debug("\(function): \(error.description)")
                return error.rv
            }
        }
    }

    @inline(__always)
    static func withState(_ function: StaticString, _ body: (ModuleState) throws(CKError) -> Void) -> CK_RV {
        run(function) { () throws(CKError) in try Module.shared.withState(body) }
    }

    /// A call on one session, holding that session's lock (`ModuleState.inSession`).
    @inline(__always)
    static func inSession(_ function: StaticString, _ session: CK_SESSION_HANDLE, _ body: (ModuleState) throws(CKError) -> Void) -> CK_RV {
        withState(function) { state throws(CKError) in
            try state.inSession(session) { () throws(CKError) in try body(state) }
        }
    }

    /// A data step of an operation (C_Encrypt, C_DigestUpdate, C_SignFinal…): an error in reading
    /// the caller's arguments ends the operation just as an error inside the step does
    /// (`ModuleState.step` has the rules).
    @inline(__always)
    static func operationStep(_ function: StaticString, _ session: CK_SESSION_HANDLE, _ kind: OperationKind,
                              _ body: (ModuleState) throws(CKError) -> Void) -> CK_RV {
        inSession(function, session) { state throws(CKError) in
            do throws(CKError) { try body(state) } catch {
                state.endOperation(session, kind, after: error)
                throw error
            }
        }
    }

    /// The functions the module does not offer: signatures with recovery (C_SignRecover…, no
    /// mechanism here reports CKF_SIGN_RECOVER) and PKCS#11 3.0's message-based functions
    /// (C_MessageEncryptInit … C_MessageVerifyFinal, no mechanism reports CKF_MESSAGE_*; the hosts
    /// it serves use C_Sign and C_Encrypt). After the usual session checks they answer
    /// CKR_FUNCTION_NOT_SUPPORTED, as the specification asks of a function a token lacks.
    static func notOffered(_ function: StaticString, _ session: CK_SESSION_HANDLE) -> CK_RV {
        inSession(function, session) { state throws(CKError) in
            _ = try state.session(session)
            throw CKError.functionNotSupported
        }
    }

}

// MARK: general (§5.4)

public func C_Initialize(_ args: UnsafeMutableRawPointer?) -> CK_RV {
    Exports.run(#function) { () throws(CKError) in
        let arguments = args.map { pointer -> General.InitializeArguments in
            let given = pointer.assumingMemoryBound(to: CK_C_INITIALIZE_ARGS.self).pointee
            let callbacks = [given.CreateMutex != nil, given.DestroyMutex != nil, given.LockMutex != nil, given.UnlockMutex != nil]
            return General.InitializeArguments(mutexCallbacks: callbacks.filter { $0 }.count, osLockingOK: given.flags & CK_FLAGS(CKF_OS_LOCKING_OK) != 0,
                                               reservedGiven: given.pReserved != nil)
        }
        try General.initialize(arguments)
    }
}

public func C_Finalize(_ reserved: UnsafeMutableRawPointer?) -> CK_RV {
    Exports.run(#function) { () throws(CKError) in try General.finalize(reservedGiven: reserved != nil) }
}

public func C_GetInfo(_ info: UnsafeMutablePointer<CK_INFO>?) -> CK_RV {
    Exports.run(#function) { () throws(CKError) in
        guard let info else { throw CKError.argumentsBad }
        info.pointee = try General.info(version: CK_VERSION(2, 40))
    }
}

func C_GetInfo_3_0(_ info: UnsafeMutablePointer<CK_INFO>?) -> CK_RV {
    Exports.run(#function) { () throws(CKError) in
        guard let info else { throw CKError.argumentsBad }
        info.pointee = try General.info(version: CK_VERSION(3, 0))
    }
}

public func C_GetFunctionList(_ list: UnsafeMutablePointer<UnsafeMutablePointer<CK_FUNCTION_LIST>?>?) -> CK_RV {
    guard let list else { return CK_RV(CKR_ARGUMENTS_BAD) }
    list.pointee = FunctionLists.version240
    return CK_RV(CKR_OK)
}

public func C_GetInterfaceList(_ interfaces: UnsafeMutablePointer<CK_INTERFACE>?, _ count: ULongPointer) -> CK_RV {
    Exports.run(#function) { () throws(CKError) in try CallerOutput(interfaces, count).deliver(FunctionLists.interfaces) }
}

public func C_GetInterface(_ name: UnsafeMutablePointer<CK_UTF8CHAR>?, _ version: UnsafeMutablePointer<CK_VERSION>?,
                                  _ interface: UnsafeMutablePointer<UnsafeMutablePointer<CK_INTERFACE>?>?, _ flags: CK_FLAGS) -> CK_RV {
    Exports.run(#function) { () throws(CKError) in
        guard let interface else { throw CKError.argumentsBad }
        interface.pointee = try FunctionLists.interface(named: name, version: version?.pointee, flags: flags)
    }
}

// MARK: slots and tokens (§5.5)

public func C_GetSlotList(_ tokenPresent: CK_BBOOL, _ list: UnsafeMutablePointer<CK_SLOT_ID>?, _ count: ULongPointer) -> CK_RV {
    Exports.withState(#function) { state throws(CKError) in
        guard count != nil else { throw CKError.argumentsBad }
        try CallerOutput(list, count).deliver(state.slotList(tokenPresent: tokenPresent != 0))
    }
}

public func C_GetSlotInfo(_ slot: CK_SLOT_ID, _ info: UnsafeMutablePointer<CK_SLOT_INFO>?) -> CK_RV {
    Exports.withState(#function) { state throws(CKError) in
        guard let info else { throw CKError.argumentsBad }
        info.pointee = try state.slotInfo(slot)
    }
}

public func C_GetTokenInfo(_ slot: CK_SLOT_ID, _ info: UnsafeMutablePointer<CK_TOKEN_INFO>?) -> CK_RV {
    Exports.withState(#function) { state throws(CKError) in
        guard let info else { throw CKError.argumentsBad }
        info.pointee = try state.tokenInfo(slot)
    }
}

public func C_WaitForSlotEvent(_ flags: CK_FLAGS, _ slot: UnsafeMutablePointer<CK_SLOT_ID>?, _ reserved: UnsafeMutableRawPointer?) -> CK_RV {
    Exports.withState(#function) { state throws(CKError) in
        guard let slot, reserved == nil else { throw CKError.argumentsBad }
        // The module may not start threads, so it cannot block waiting for an event.
        guard flags & CK_FLAGS(CKF_DONT_BLOCK) != 0 else { throw CKError.functionNotSupported }
        slot.pointee = try state.nextSlotEvent()
    }
}

public func C_GetMechanismList(_ slot: CK_SLOT_ID, _ list: UnsafeMutablePointer<CK_MECHANISM_TYPE>?, _ count: ULongPointer) -> CK_RV {
    Exports.withState(#function) { state throws(CKError) in
        _ = try state.slot(slot)
        try CallerOutput(list, count).deliver(state.mechanisms.keys.sorted())
    }
}

public func C_GetMechanismInfo(_ slot: CK_SLOT_ID, _ type: CK_MECHANISM_TYPE, _ info: UnsafeMutablePointer<CK_MECHANISM_INFO>?) -> CK_RV {
    Exports.withState(#function) { state throws(CKError) in
        _ = try state.slot(slot)
        guard let info else { throw CKError.argumentsBad }
        info.pointee = try state.mechanism(type).info
    }
}

public func C_InitToken(_ slot: CK_SLOT_ID, _ pin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ pinLength: CK_ULONG,
                               _ label: UnsafeMutablePointer<CK_UTF8CHAR>?) -> CK_RV {
    Exports.withState(#function) { state throws(CKError) in
        guard let label else { throw CKError.argumentsBad }
        let soPIN = try CallerBytes.pin(pin, count: pinLength, tooLong: CallerBytes.pinIncorrect)
        try state.initToken(slot, soPIN: soPIN, label: PaddedString.read(label, count: 32))
    }
}

public func C_InitPIN(_ session: CK_SESSION_HANDLE, _ pin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ pinLength: CK_ULONG) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        try state.initPIN(session, pin: try CallerBytes.pin(pin, count: pinLength, tooLong: CallerBytes.pinLengthRange))
    }
}

public func C_SetPIN(_ session: CK_SESSION_HANDLE, _ old: UnsafeMutablePointer<CK_UTF8CHAR>?, _ oldLength: CK_ULONG,
                            _ new: UnsafeMutablePointer<CK_UTF8CHAR>?, _ newLength: CK_ULONG) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        try state.setPIN(session, old: try CallerBytes.pin(old, count: oldLength, tooLong: CallerBytes.pinIncorrect),
                         new: try CallerBytes.pin(new, count: newLength, tooLong: CallerBytes.pinLengthRange))
    }
}

// MARK: sessions (§5.6)

public func C_OpenSession(_ slot: CK_SLOT_ID, _ flags: CK_FLAGS, _ application: UnsafeMutableRawPointer?, _ notify: CK_NOTIFY?,
                                 _ session: UnsafeMutablePointer<CK_SESSION_HANDLE>?) -> CK_RV {
    Exports.withState(#function) { state throws(CKError) in
        guard let session else { throw CKError.argumentsBad }
        session.pointee = try state.openSession(slotID: slot, flags: flags)
    }
}

public func C_CloseSession(_ session: CK_SESSION_HANDLE) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in state.closeSession(try state.session(session)) }
}

public func C_CloseAllSessions(_ slot: CK_SLOT_ID) -> CK_RV {
    Exports.withState(#function) { state throws(CKError) in try state.closeAllSessions(slotID: slot) }
}

public func C_GetSessionInfo(_ session: CK_SESSION_HANDLE, _ info: UnsafeMutablePointer<CK_SESSION_INFO>?) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        guard let info else { throw CKError.argumentsBad }
        info.pointee = try state.sessionInfo(session)
    }
}

public func C_GetOperationState(_ session: CK_SESSION_HANDLE, _ buffer: BytePointer, _ length: ULongPointer) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        _ = try state.session(session)
        throw CKError.functionNotSupported
    }
}

public func C_SetOperationState(_ session: CK_SESSION_HANDLE, _ buffer: BytePointer, _ length: CK_ULONG,
                                       _ encryptionKey: CK_OBJECT_HANDLE, _ authenticationKey: CK_OBJECT_HANDLE) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        _ = try state.session(session)
        throw CKError.functionNotSupported
    }
}

public func C_Login(_ session: CK_SESSION_HANDLE, _ userType: CK_USER_TYPE, _ pin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ pinLength: CK_ULONG) -> CK_RV {
    if pin == nil {
        // The protected authentication path: the unlock session first (keychaind), then the
        // prompt program, which runs outside the module lock.
        if userType == CK_USER_TYPE(CKU_USER) {
            var loggedIn = false
            let viaSession = Exports.inSession(#function, session) { state throws(CKError) in loggedIn = try state.sessionLogin(session) }
            if viaSession != CK_RV(CKR_OK) || loggedIn { return viaSession }
        }
        var request: (program: String, text: String)?
        let checked = Exports.inSession(#function, session) { state throws(CKError) in request = try state.promptRequest(session, userType: userType) }
        guard checked == CK_RV(CKR_OK), let request else { return checked }
        var entered: SecureBytes?
        let prompted = Exports.run(#function) { () throws(CKError) in entered = try PINPrompt.run(request.program, text: request.text) }
        guard prompted == CK_RV(CKR_OK), let entered else { return prompted }
        return Exports.inSession(#function, session) { state throws(CKError) in
            try entered.withUnsafeBytes { (bytes) throws(CKError) in try state.login(session, userType: userType, pin: bytes) }
        }
    }
    return Exports.inSession(#function, session) { state throws(CKError) in
        try state.login(session, userType: userType, pin: try CallerBytes.pin(pin, count: pinLength, tooLong: CallerBytes.pinIncorrect))
    }
}

/// PKCS#11 3.0: this token has one user per role, so the user name is not used.
public func C_LoginUser(_ session: CK_SESSION_HANDLE, _ userType: CK_USER_TYPE, _ pin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ pinLength: CK_ULONG,
                               _ userName: UnsafeMutablePointer<CK_UTF8CHAR>?, _ userNameLength: CK_ULONG) -> CK_RV {
    C_Login(session, userType, pin, pinLength)
}

public func C_Logout(_ session: CK_SESSION_HANDLE) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in try state.logout(session) }
}

public func C_SessionCancel(_ session: CK_SESSION_HANDLE, _ flags: CK_FLAGS) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in try state.cancel(session, flags: flags) }
}

public func C_GetFunctionStatus(_ session: CK_SESSION_HANDLE) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        _ = try state.session(session)
        throw CKError(CK_RV(CKR_FUNCTION_NOT_PARALLEL), "legacy function")
    }
}

public func C_CancelFunction(_ session: CK_SESSION_HANDLE) -> CK_RV {
    C_GetFunctionStatus(session)
}

// MARK: objects (§5.7)

public func C_CreateObject(_ session: CK_SESSION_HANDLE, _ template: AttributePointer, _ count: CK_ULONG, _ object: HandlePointer) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        guard let object else { throw CKError.argumentsBad }
        var parsed = try CallerTemplate.read(template, count: count)
        defer { wipeValues(&parsed) }
        object.pointee = try state.createObject(session, template: parsed)
    }
}

public func C_CopyObject(_ session: CK_SESSION_HANDLE, _ source: CK_OBJECT_HANDLE, _ template: AttributePointer, _ count: CK_ULONG,
                                _ object: HandlePointer) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        guard let object else { throw CKError.argumentsBad }
        object.pointee = try state.copyObject(session, object: source, template: try CallerTemplate.read(template, count: count))
    }
}

public func C_DestroyObject(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in try state.destroyObject(session, object: object) }
}

public func C_GetObjectSize(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ size: ULongPointer) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        guard let size else { throw CKError.argumentsBad }
        size.pointee = try state.objectSize(session, object: object)
    }
}

public func C_GetAttributeValue(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ template: AttributePointer, _ count: CK_ULONG) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        try state.getAttributeValues(session, object: object, entries: try CallerAttributeArray(template, count: count))
    }
}

public func C_SetAttributeValue(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ template: AttributePointer, _ count: CK_ULONG) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        try state.setAttributeValues(session, object: object, template: try CallerTemplate.read(template, count: count))
    }
}

public func C_FindObjectsInit(_ session: CK_SESSION_HANDLE, _ template: AttributePointer, _ count: CK_ULONG) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        try state.findObjectsInit(session, template: try CallerTemplate.read(template, count: count))
    }
}

public func C_FindObjects(_ session: CK_SESSION_HANDLE, _ objects: HandlePointer, _ maximum: CK_ULONG, _ count: ULongPointer) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        guard let count, objects != nil || maximum == 0 else { throw CKError.argumentsBad }
        let found = try state.findObjects(session, maximum: maximum)
        if let objects {
            for (offset, handle) in found.enumerated() { objects[offset] = handle }
        }
        count.pointee = CK_ULONG(found.count)
    }
}

public func C_FindObjectsFinal(_ session: CK_SESSION_HANDLE) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in try state.findObjectsFinal(session) }
}

// MARK: random numbers (§5.15)

public func C_SeedRandom(_ session: CK_SESSION_HANDLE, _ seed: BytePointer, _ length: CK_ULONG) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        let bytes = try CallerBytes.read(seed, count: length, limit: Int.max, tooLong: CKError.argumentsBad)
        try state.seedRandom(session, seed: bytes)
    }
}

public func C_GenerateRandom(_ session: CK_SESSION_HANDLE, _ buffer: BytePointer, _ length: CK_ULONG) -> CK_RV {
    Exports.inSession(#function, session) { state throws(CKError) in
        try state.generateRandom(session, into: try CallerBytes.output(buffer, count: length))
    }
}
