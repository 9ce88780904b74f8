import CPKCS11
import KeychainCore

/// PKCS#11 §5.5 slot and token management.
extension ModuleState {
    func slotList(tokenPresent: Bool) -> [CK_SLOT_ID] {
        refreshSlots()
        // Every slot holds a token: the empty slot's is an uninitialised one.
        return tables.reading { slots.all.map(\.id) }
    }

    func slot(_ id: CK_SLOT_ID) throws(CKError) -> Slot {
        guard let slot = tables.reading({ slots[id] }) else { throw CKError.slotIDInvalid }
        return slot
    }

    func slotInfo(_ id: CK_SLOT_ID) throws(CKError) -> CK_SLOT_INFO {
        let slot = try slot(id)
        var info = CK_SLOT_INFO()
        let name = slot.path.map { String($0.split(separator: "/").last ?? "") } ?? "empty slot (C_InitToken creates a keychain)"
        PaddedString.fill(&info.slotDescription, with: "Keychain \(name)")
        PaddedString.fill(&info.manufacturerID, with: General.manufacturer)
        info.flags = CK_FLAGS(CKF_TOKEN_PRESENT)
        info.hardwareVersion = General.libraryVersion
        info.firmwareVersion = General.libraryVersion
        return info
    }

    func tokenInfo(_ id: CK_SLOT_ID) throws(CKError) -> CK_TOKEN_INFO {
        let slot = try slot(id)
        var info = CK_TOKEN_INFO()
        PaddedString.fill(&info.manufacturerID, with: General.manufacturer)
        PaddedString.fill(&info.model, with: "Keychain")
        info.ulMaxSessionCount = KC_EFFECTIVELY_INFINITE
        info.ulMaxRwSessionCount = KC_EFFECTIVELY_INFINITE
        info.ulMaxPinLen = CK_ULONG(configuration.pinPolicy.maximumLength)
        info.ulMinPinLen = CK_ULONG(configuration.pinPolicy.minimumLength)
        info.ulTotalPublicMemory = KC_UNAVAILABLE_INFORMATION
        info.ulFreePublicMemory = KC_UNAVAILABLE_INFORMATION
        info.ulTotalPrivateMemory = KC_UNAVAILABLE_INFORMATION
        info.ulFreePrivateMemory = KC_UNAVAILABLE_INFORMATION
        info.hardwareVersion = General.libraryVersion
        info.firmwareVersion = General.libraryVersion
        PaddedString.fill(&info.utcTime, with: "")
        var flags = CK_FLAGS(CKF_RNG | CKF_LOGIN_REQUIRED)
        if configuration.promptProgram != nil { flags |= CK_FLAGS(CKF_PROTECTED_AUTHENTICATION_PATH) }
        guard let token = slot.token else {
            PaddedString.fill(&info.label, with: "")
            PaddedString.fill(&info.serialNumber, with: "")
            info.flags = flags
            return info
        }
        let keychainInfo = try translating { () throws(KeychainError) in try token.keychain.info(countingObjects: false) }
        PaddedString.fill(&info.label, with: keychainInfo.label)
        info.ulMaxPinLen = CK_ULONG(keychainInfo.pinPolicy.maximumLength)
        info.ulMinPinLen = CK_ULONG(keychainInfo.pinPolicy.minimumLength)
        PaddedString.fill(&info.serialNumber, with: keychainInfo.serial)
        flags |= CK_FLAGS(CKF_TOKEN_INITIALIZED)
        if keychainInfo.userPINInitialized { flags |= CK_FLAGS(CKF_USER_PIN_INITIALIZED) }
        if keychainInfo.userPIN.countLow { flags |= CK_FLAGS(CKF_USER_PIN_COUNT_LOW) }
        if keychainInfo.userPIN.finalTry { flags |= CK_FLAGS(CKF_USER_PIN_FINAL_TRY) }
        if keychainInfo.userPIN.locked { flags |= CK_FLAGS(CKF_USER_PIN_LOCKED) }
        if keychainInfo.soPIN.countLow { flags |= CK_FLAGS(CKF_SO_PIN_COUNT_LOW) }
        if keychainInfo.soPIN.finalTry { flags |= CK_FLAGS(CKF_SO_PIN_FINAL_TRY) }
        if keychainInfo.soPIN.locked { flags |= CK_FLAGS(CKF_SO_PIN_LOCKED) }
        // A NULL PIN logs in while the unlock session (keychaind) holds the keychain.
        if UnlockSession.holds(token.keychain.path) { flags |= CK_FLAGS(CKF_PROTECTED_AUTHENTICATION_PATH) }
        info.flags = flags
        let open = sessions(on: id)
        info.ulSessionCount = CK_ULONG(open.count)
        info.ulRwSessionCount = CK_ULONG(open.filter(\.readWrite).count)
        return info
    }

    /// The non-blocking form of C_WaitForSlotEvent: a slot that appeared or went away.
    func nextSlotEvent() throws(CKError) -> CK_SLOT_ID {
        refreshSlots()
        guard let event = tables.writing({ slots.events.isEmpty ? nil : slots.events.removeFirst() }) else {
            throw CKError(CK_RV(CKR_NO_EVENT), "no slot event")
        }
        return event
    }

    /// C_InitToken: creates a keychain in the empty slot, or re-initialises an existing one.
    func initToken(_ id: CK_SLOT_ID, soPIN: UnsafeRawBufferPointer, label: String) throws(CKError) {
        let slot = try slot(id)
        guard sessions(on: id).isEmpty else {
            throw CKError(CK_RV(CKR_SESSION_EXISTS), "close the sessions on this token first")
        }
        if let token = slot.token {
            try translating { () throws(KeychainError) in try token.keychain.reinitialize(soPIN: soPIN, label: label, kdf: configuration.kdf) }
            token.logout()
            tables.writing { handles.removeAll(onSlot: id) }
            return
        }
        let created = try translating { () throws(KeychainError) in
            try directory.createKeychain(slotID: UInt(id), label: label, soPIN: soPIN, userPIN: nil, kdf: configuration.kdf, policy: configuration.pinPolicy)
        }
        tables.writing { slots.adopt(created, slotID: id, directory: directory) }
    }
}
