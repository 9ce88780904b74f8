import CPKCS11
import Glibc
import KeychainCore
import KeychainCrypto

/// PKCS#11 §5.7 object management.
extension ModuleState {
    /// A handle's entry if the session may see it: same token, and private objects only while
    /// the user is logged in (PKCS#11 §4.1.2).
    private func visibleEntry(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token) throws(CKError) -> ObjectEntry {
        guard let entry = entry(handle), entry.slotID == session.slotID, !entry.isPrivate || token.login == .user else {
            throw CKError.objectHandleInvalid
        }
        return entry
    }

    /// The object's attributes; a token object deleted by another process loses its handle.
    private func attributes(of entry: ObjectEntry, handle: CK_OBJECT_HANDLE, token: Token) throws(CKError) -> ObjectAttributes {
        switch entry.location {
        case .session(let object):
            return object.attributes
        case .token(let rowID):
            do {
                return try token.keychain.object(id: rowID, master: token.userMaster)
            } catch where error.code == .objectNotFound {
                tables.writing { handles.remove(handle) }
                throw CKError.objectHandleInvalid
            } catch {
                throw CKError(error)
            }
        }
    }

    /// Write rules shared by create, copy, set and destroy.
    func checkWritable(token isToken: Bool, private isPrivate: Bool, session: Session, login: Token.Login) throws(CKError) {
        if isToken, !session.readWrite { throw CKError.sessionReadOnly }
        if isPrivate, login != .user { throw CKError.userNotLoggedIn }
    }

    /// An object the session may change: visible, and a token object only in a R/W session.
    private func objectForWriting(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token) throws(CKError) -> (ObjectEntry, ObjectAttributes) {
        let entry = try visibleEntry(handle, session: session, token: token)
        try checkWritable(token: entry.isTokenObject, private: false, session: session, login: token.login)
        return (entry, try attributes(of: entry, handle: handle, token: token))
    }

    static func newUniqueID() throws(CKError) -> UniqueID {
        guard let id = try? UniqueID.random() else { throw CKError(CK_RV(CKR_DEVICE_ERROR), "random generator failed") }
        return id
    }

    /// Stores `object` as a token or session object and returns its new handle.
    /// A session object keeps `object`'s buffers: a caller that passes its last use of `object`
    /// has it stamped in place (a copy of the attributes otherwise). Refused, `object` is wiped.
    func store(_ object: consuming ObjectAttributes, uid: [UInt8], session: Session, token: Token) throws(CKError) -> CK_OBJECT_HANDLE {
        var object = object
        do throws(CKError) {
            try checkWritable(token: object.isToken, private: object.isPrivate, session: session, login: token.login)
            if object[.applicationPassword] != nil, !object.isToken {
                throw CKError(CK_RV(CKR_TEMPLATE_INCONSISTENT), "CKA_KC_APPLICATION_PASSWORD applies to token objects")
            }
            // Every way an object is made passes here (create, copy, generate, unwrap, derive).
            if let refusal = object.syncRefusal { throw Self.syncRefused(refusal) }
        } catch {
            object.wipeValues()
            throw error
        }
        session.pinJustPresented = false
        if object.isToken {
            // The SO may store public objects only (checked above); the first one of the Always
            // class keeps its key under the master key, which the SO's login holds too.
            let master = object.isPrivate ? token.userMaster : token.writingMaster
            let rowID = try translating { () throws(KeychainError) in try token.keychain.add(object, uid: uid, master: master) }
            return tables.writing { handles.handle(forTokenObject: rowID, slotID: session.slotID, isPrivate: object.isPrivate) }
        }
        let now = AttributeValue.ulong(UInt(time(nil)))
        object[.creationTime] = now
        object[.modificationTime] = now
        let sessionObject = SessionObject(attributes: object, owner: session.handle)
        return tables.writing { handles.add(sessionObject, slotID: session.slotID) }
    }

    func createObject(_ handle: CK_SESSION_HANDLE, template: Template) throws(CKError) -> CK_OBJECT_HANDLE {
        try withSession(handle) { session, token throws(CKError) in
            if template.contains(where: { $0.type == .objectClass && AttributeValue.decodeULong($0.value) == ObjectClass.credential.rawValue }) {
                return try presentCredential(template, session: session, token: token)
            }
            // PKCS#11, X.509 certificate objects: CKA_SUBJECT "must be specified when the
            // object is created" (SoftHSM and pkcs11-check hold to it); the other names and the
            // serial may be left to the DER. The Swift API and keychainctl derive it.
            if Self.value(of: .objectClass, in: template) == ObjectClass.certificate.rawValue,
               Self.value(of: .certificateType, in: template) == UInt(CKC_X_509), !template.contains(where: { $0.type == .subject }) {
                throw CKError(CK_RV(CKR_TEMPLATE_INCOMPLETE), "an X.509 certificate object needs CKA_SUBJECT")
            }
            let id = try Self.newUniqueID()
            let bySO = token.login == .securityOfficer
            let object = try translating { () throws(KeychainError) in try ObjectTemplate.create(template, uniqueID: id.text, bySecurityOfficer: bySO, policy: configuration.keyPolicy) }
            // Only the object asked for: a private key's public parts are its own attributes
            // (CKA_PUBLIC_KEY_INFO, modulus and exponent); clients that want a public-key object
            // write one (DESIGN §4).
            return try store(object, uid: id.bytes, session: session, token: token)
        }
    }

    /// CKA_KC_SYNCHRONIZABLE = CK_TRUE on an object that cannot sync (`SyncRule`): a value that
    /// conflicts with the object's others, CKR_TEMPLATE_INCONSISTENT (PKCS#11 3.x §4.1.1, and
    /// C_SetAttributeValue: "incompatible with other existing attributes of the object").
    static func syncRefused(_ refusal: SyncRule.Refusal) -> CKError {
        CKError(CK_RV(CKR_TEMPLATE_INCONSISTENT), "CKA_KC_SYNCHRONIZABLE: \(refusal.reason)")
    }

    private static func value(of type: AttributeType, in template: Template) -> UInt? {
        template.first { $0.type == type }.flatMap { AttributeValue.decodeULong($0.value) }
    }

    func copyObject(_ handle: CK_SESSION_HANDLE, object source: CK_OBJECT_HANDLE, template: Template) throws(CKError) -> CK_OBJECT_HANDLE {
        try withSession(handle) { session, token throws(CKError) in
            let entry = try visibleEntry(source, session: session, token: token)
            let original = try attributes(of: entry, handle: source, token: token)
            guard !original.hasSealedSecrets, original.objectClass != .credential else {
                throw CKError(CK_RV(CKR_ACTION_PROHIBITED), "an item sealed by its application password, or a credential, cannot be copied")
            }
            let id = try Self.newUniqueID()
            let bySO = token.login == .securityOfficer
            let copy = try translating { () throws(KeychainError) in try ObjectTemplate.copy(original, with: template, uniqueID: id.text, bySecurityOfficer: bySO) }
            return try store(copy, uid: id.bytes, session: session, token: token)
        }
    }

    func destroyObject(_ handle: CK_SESSION_HANDLE, object: CK_OBJECT_HANDLE) throws(CKError) {
        try withSession(handle) { session, token throws(CKError) in
            let (entry, current) = try objectForWriting(object, session: session, token: token)
            guard current.isDestroyable else { throw CKError(CK_RV(CKR_ACTION_PROHIBITED), "the object is not destroyable") }
            if case .token(let rowID) = entry.location {
                try translating { () throws(KeychainError) in try token.keychain.remove(id: rowID, master: token.writingMaster) }
            }
            tables.writing { handles.remove(object) }
            token.forgetKey(object)
            // A destroyed credential locks its item again, a destroyed item drops its unlock: in
            // every session, each of which sees it when it next looks (`unlocked`).
            session.unlockedItems[object] = nil
        }
    }

    func objectSize(_ handle: CK_SESSION_HANDLE, object: CK_OBJECT_HANDLE) throws(CKError) -> CK_ULONG {
        try withSession(handle) { session, token throws(CKError) in
            let entry = try visibleEntry(object, session: session, token: token)
            switch entry.location {
            case .session(let sessionObject): return CK_ULONG(sessionObject.attributes.size)
            case .token(let rowID): return CK_ULONG(try translating { () throws(KeychainError) in try token.keychain.storedSize(id: rowID) })
            }
        }
    }

    /// C_GetAttributeValue over the caller's array: every entry gets a length or
    /// CK_UNAVAILABLE_INFORMATION; the return value reports one of the per-attribute problems.
    func getAttributeValues(_ handle: CK_SESSION_HANDLE, object: CK_OBJECT_HANDLE, entries: CallerAttributeArray) throws(CKError) {
        try withSession(handle) { session, token throws(CKError) in
            let entry = try visibleEntry(object, session: session, token: token)
            var current = try attributes(of: entry, handle: object, token: token)
            defer { current.wipeValues() }
            // A password with per-item authentication shows its secret only in a session that
            // presented the item's credential (a CKO_KC_CREDENTIAL object).
            var gated = false
            if current.requiredCredential != .none {
                if let unlocked = unlocked(object, in: session) {
                    for (type, value) in unlocked.secrets.values { current[type] = value }
                    current[.sealedSecrets] = nil
                } else {
                    gated = true
                }
            }
            var problem: CKError?
            for index in entries.indices {
                let type = entries.type(at: index)
                if gated, AttributeTable.rule(type)?.flags.contains(.sensitive) == true, current[type] != nil || current.hasSealedSecrets {
                    entries.markUnavailable(at: index)
                    problem = problem ?? CKError(CK_RV(CKR_ATTRIBUTE_SENSITIVE), "present the item's credential (a CKO_KC_CREDENTIAL object) to read attribute \(type)")
                    continue
                }
                guard !type.isInternal, let value = current[type] else {
                    entries.markUnavailable(at: index)
                    // A key in the TPM has its secret parts there: they are sensitive, not absent.
                    if current.bool(.tpm), current.isHidden(type), let objectClass = current.objectClass,
                       AttributeTable.isValid(type, for: objectClass, keyType: current.keyType) {
                        problem = problem ?? CKError(CK_RV(CKR_ATTRIBUTE_SENSITIVE), "attribute \(type) of a key in the TPM never leaves it")
                    } else {
                        problem = problem ?? CKError(CK_RV(CKR_ATTRIBUTE_TYPE_INVALID), "object has no attribute \(type)")
                    }
                    continue
                }
                if current.isHidden(type) {
                    entries.markUnavailable(at: index)
                    problem = problem ?? CKError(CK_RV(CKR_ATTRIBUTE_SENSITIVE), "attribute \(type) is sensitive")
                    continue
                }
                let failure = type.isTemplate ? entries.writeTemplate(value, at: index) : entries.write(value, at: index)
                if let failure { problem = problem ?? failure }
            }
            if let problem { throw problem }
        }
    }

    func setAttributeValues(_ handle: CK_SESSION_HANDLE, object: CK_OBJECT_HANDLE, template: Template) throws(CKError) {
        try withSession(handle) { session, token throws(CKError) in
            let (entry, current) = try objectForWriting(object, session: session, token: token)
            let bySO = token.login == .securityOfficer
            let updated = try translating { () throws(KeychainError) in try ObjectTemplate.set(template, on: current, bySecurityOfficer: bySO) }
            if let refusal = updated.syncRefusal(changing: current) { throw Self.syncRefused(refusal) }
            switch entry.location {
            case .session(let sessionObject):
                var stamped = updated
                stamped[.modificationTime] = AttributeValue.ulong(UInt(time(nil)))
                sessionObject.attributes = stamped
                token.attributesChanged(object)
            case .token(let rowID):
                try translating { () throws(KeychainError) in try token.keychain.replace(id: rowID, with: updated, master: updated.isPrivate ? token.userMaster : token.writingMaster) }
            }
        }
    }

    func findObjectsInit(_ handle: CK_SESSION_HANDLE, template: Template) throws(CKError) {
        try withSession(handle) { session, token throws(CKError) in
            guard session.find == nil else { throw CKError(CK_RV(CKR_OPERATION_ACTIVE), "a search is already active") }
            // Internal attributes (a TPM key's blob, sealed secrets) are no object's: nothing
            // matches them, so a search cannot confirm a guess of one.
            if template.contains(where: { $0.type.isInternal }) {
                session.find = FindOperation(remaining: [])
                return
            }
            var found: [CK_OBJECT_HANDLE] = []
            let master = token.userMaster
            let rows = try translating { () throws(KeychainError) in try token.keychain.find(template, master: master) }
            let sessionObjects = tables.writing { () -> [(handle: CK_OBJECT_HANDLE, object: SessionObject)] in
                for row in rows {
                    found.append(handles.handle(forTokenObject: row.id, slotID: session.slotID, isPrivate: row.isPrivate))
                }
                return handles.sessionObjects(onSlot: session.slotID)
            }
            for (objectHandle, object) in sessionObjects {
                if object.attributes.isPrivate, token.login != .user { continue }
                if object.attributes.matches(template) { found.append(objectHandle) }
            }
            // Searching by a secret value must not tell what a hidden secret is.
            let secretTypes = template.map(\.type).filter { AttributeTable.rule($0)?.flags.contains(.sensitive) == true }
            if !secretTypes.isEmpty {
                found = found.filter { objectHandle in
                    guard let entry = entry(objectHandle), let attributes = try? self.attributes(of: entry, handle: objectHandle, token: token) else { return false }
                    let locked = attributes.requiredCredential != .none && unlocked(objectHandle, in: session) == nil
                    return !locked && !secretTypes.contains(where: attributes.isHidden)
                }
            }
            session.find = FindOperation(remaining: found[...])
        }
    }

    /// The next handles of the search, at most `maximum` of them.
    func findObjects(_ handle: CK_SESSION_HANDLE, maximum: CK_ULONG) throws(CKError) -> ArraySlice<CK_OBJECT_HANDLE> {
        let session = try session(handle)
        guard var find = session.find else { throw CKError(CK_RV(CKR_OPERATION_NOT_INITIALIZED), "C_FindObjectsInit first") }
        let count = Int(min(CK_ULONG(find.remaining.count), maximum))
        let handles = find.remaining.prefix(count)
        find.remaining = find.remaining.dropFirst(count)
        session.find = find
        return handles
    }

    func findObjectsFinal(_ handle: CK_SESSION_HANDLE) throws(CKError) {
        let session = try session(handle)
        guard session.find != nil else { throw CKError(CK_RV(CKR_OPERATION_NOT_INITIALIZED), "no active search") }
        session.find = nil
    }

    // MARK: per-item credentials (vendor)

    /// C_CreateObject of a CKO_KC_CREDENTIAL session object: CKA_KC_CREDENTIAL_OBJECT names a
    /// password item, CKA_VALUE is its application password (or, for user presence, the user PIN,
    /// counted like a login). On success the item's secret is readable in this session until the
    /// credential object is destroyed, the session closes or the user logs out.
    func presentCredential(_ template: Template, session: Session, token: Token) throws(CKError) -> CK_OBJECT_HANDLE {
        var target: CK_OBJECT_HANDLE?
        var secret: [UInt8]?
        var label: [UInt8] = []
        var seen = Set<AttributeType>()
        for (type, value) in template {
            guard seen.insert(type).inserted else { throw CKError(CK_RV(CKR_TEMPLATE_INCONSISTENT), "attribute \(type) appears twice") }
            switch type {
            case .objectClass: continue
            case .token:
                guard AttributeValue.decodeBool(value) == false else { throw CKError(CK_RV(CKR_TEMPLATE_INCONSISTENT), "a credential is a session object") }
            case .label: label = value
            case .value: secret = value
            case .credentialObject:
                guard let raw = AttributeValue.decodeULong(value) else { throw CKError(CK_RV(CKR_ATTRIBUTE_VALUE_INVALID), "CKA_KC_CREDENTIAL_OBJECT is a CK_OBJECT_HANDLE") }
                target = CK_OBJECT_HANDLE(raw)
            default:
                throw CKError(CK_RV(CKR_ATTRIBUTE_TYPE_INVALID), "attribute \(type) is not valid for a credential")
            }
        }
        guard let target, let secret else {
            throw CKError(CK_RV(CKR_TEMPLATE_INCOMPLETE), "a credential needs CKA_KC_CREDENTIAL_OBJECT and CKA_VALUE")
        }
        let item: ObjectAttributes
        do throws(CKError) {
            let entry = try visibleEntry(target, session: session, token: token)
            item = try attributes(of: entry, handle: target, token: token)
        } catch where error.rv == CK_RV(CKR_OBJECT_HANDLE_INVALID) {
            throw CKError(CK_RV(CKR_ATTRIBUTE_VALUE_INVALID), "CKA_KC_CREDENTIAL_OBJECT names no object this session sees")
        }
        guard item.objectClass == .data else {
            throw CKError(CK_RV(CKR_ATTRIBUTE_VALUE_INVALID), "credential objects unlock password items; a key takes its application password with C_Login(CKU_CONTEXT_SPECIFIC)")
        }
        let secrets: ObjectAttributes
        switch item.requiredCredential {
        case .none:
            throw CKError(CK_RV(CKR_ATTRIBUTE_VALUE_INVALID), "the item needs no credential")
        case .userPIN:
            _ = try SecureBytes(secret).withUnsafeBytes { (pin: UnsafeRawBufferPointer) throws(CKError) in try checkPIN(.user, pin, of: token) }
            secrets = ObjectAttributes()
        case .applicationPassword:
            let revealed = try SecureBytes(secret).withUnsafeBytes { (password: UnsafeRawBufferPointer) throws(CKError) in
                try translating { () throws(KeychainError) in try token.keychain.reveal(item, applicationPassword: password) }
            }
            // Only what the seal held: everything else is read fresh at each C_GetAttributeValue.
            secrets = ObjectAttributes(revealed.values.filter { item[$0.key] == nil })
        }
        var credential = ObjectAttributes()
        credential[.objectClass] = AttributeValue.ulong(ObjectClass.credential.rawValue)
        credential[.token] = AttributeValue.bool(false)
        credential[.isPrivate] = AttributeValue.bool(false)
        credential[.label] = label
        credential[.credentialObject] = AttributeValue.ulong(UInt(target))
        credential[.destroyable] = AttributeValue.bool(true)
        credential[.modifiable] = AttributeValue.bool(false)
        credential[.copyable] = AttributeValue.bool(false)
        let handle = tables.writing { handles.add(SessionObject(attributes: credential, owner: session.handle), slotID: session.slotID) }
        session.unlockedItems[target] = (secrets, handle)
        return handle
    }

    /// What the session's credential unlocked for `item`, while both the item and the
    /// credential object still exist (another session may have destroyed either).
    func unlocked(_ item: CK_OBJECT_HANDLE, in session: Session) -> (secrets: ObjectAttributes, credential: CK_OBJECT_HANDLE)? {
        guard let unlocked = session.unlockedItems[item] else { return nil }
        guard tables.reading({ handles[item] != nil && handles[unlocked.credential] != nil }) else {
            session.unlockedItems[item] = nil
            return nil
        }
        return unlocked
    }

    // MARK: random numbers (§5.15)

    func generateRandom(_ handle: CK_SESSION_HANDLE, into buffer: UnsafeMutableRawBufferPointer) throws(CKError) {
        _ = try session(handle)
        do { try Random.fill(buffer) } catch { throw CKError(CK_RV(CKR_DEVICE_ERROR), "random generator failed") }
    }

    func seedRandom(_ handle: CK_SESSION_HANDLE, seed: UnsafeRawBufferPointer) throws(CKError) {
        _ = try session(handle)
        Random.addSeed(seed)
    }
}
