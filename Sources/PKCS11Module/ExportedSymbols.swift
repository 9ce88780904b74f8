import CPKCS11
import PKCS11

// The exported PKCS#11 symbols of libkeychain-pkcs11.so. Each forwards to the PKCS11 layer,
// where the function lists point too; pkcs11/keychain-pkcs11.map hides every other symbol.
// The compiler does not check @_cdecl signatures against C, but the function lists built
// from the same PKCS11 functions are type-checked against pkcs11.h.

@_cdecl("C_Initialize") public func C_Initialize(_ args: UnsafeMutableRawPointer?) -> CK_RV { PKCS11.C_Initialize(args) }

@_cdecl("C_Finalize") public func C_Finalize(_ reserved: UnsafeMutableRawPointer?) -> CK_RV { PKCS11.C_Finalize(reserved) }

@_cdecl("C_GetInfo") public func C_GetInfo(_ info: UnsafeMutablePointer<CK_INFO>?) -> CK_RV { PKCS11.C_GetInfo(info) }

@_cdecl("C_GetFunctionList") public func C_GetFunctionList(_ list: UnsafeMutablePointer<UnsafeMutablePointer<CK_FUNCTION_LIST>?>?) -> CK_RV { PKCS11.C_GetFunctionList(list) }

@_cdecl("C_GetInterfaceList") public func C_GetInterfaceList(_ interfaces: UnsafeMutablePointer<CK_INTERFACE>?, _ count: ULongPointer) -> CK_RV { PKCS11.C_GetInterfaceList(interfaces, count) }

@_cdecl("C_GetInterface") public func C_GetInterface(_ name: UnsafeMutablePointer<CK_UTF8CHAR>?, _ version: UnsafeMutablePointer<CK_VERSION>?, _ interface: UnsafeMutablePointer<UnsafeMutablePointer<CK_INTERFACE>?>?, _ flags: CK_FLAGS) -> CK_RV { PKCS11.C_GetInterface(name, version, interface, flags) }

@_cdecl("C_GetSlotList") public func C_GetSlotList(_ tokenPresent: CK_BBOOL, _ list: UnsafeMutablePointer<CK_SLOT_ID>?, _ count: ULongPointer) -> CK_RV { PKCS11.C_GetSlotList(tokenPresent, list, count) }

@_cdecl("C_GetSlotInfo") public func C_GetSlotInfo(_ slot: CK_SLOT_ID, _ info: UnsafeMutablePointer<CK_SLOT_INFO>?) -> CK_RV { PKCS11.C_GetSlotInfo(slot, info) }

@_cdecl("C_GetTokenInfo") public func C_GetTokenInfo(_ slot: CK_SLOT_ID, _ info: UnsafeMutablePointer<CK_TOKEN_INFO>?) -> CK_RV { PKCS11.C_GetTokenInfo(slot, info) }

@_cdecl("C_WaitForSlotEvent") public func C_WaitForSlotEvent(_ flags: CK_FLAGS, _ slot: UnsafeMutablePointer<CK_SLOT_ID>?, _ reserved: UnsafeMutableRawPointer?) -> CK_RV { PKCS11.C_WaitForSlotEvent(flags, slot, reserved) }

@_cdecl("C_GetMechanismList") public func C_GetMechanismList(_ slot: CK_SLOT_ID, _ list: UnsafeMutablePointer<CK_MECHANISM_TYPE>?, _ count: ULongPointer) -> CK_RV { PKCS11.C_GetMechanismList(slot, list, count) }

@_cdecl("C_GetMechanismInfo") public func C_GetMechanismInfo(_ slot: CK_SLOT_ID, _ type: CK_MECHANISM_TYPE, _ info: UnsafeMutablePointer<CK_MECHANISM_INFO>?) -> CK_RV { PKCS11.C_GetMechanismInfo(slot, type, info) }

@_cdecl("C_InitToken") public func C_InitToken(_ slot: CK_SLOT_ID, _ pin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ pinLength: CK_ULONG, _ label: UnsafeMutablePointer<CK_UTF8CHAR>?) -> CK_RV { PKCS11.C_InitToken(slot, pin, pinLength, label) }

@_cdecl("C_InitPIN") public func C_InitPIN(_ session: CK_SESSION_HANDLE, _ pin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ pinLength: CK_ULONG) -> CK_RV { PKCS11.C_InitPIN(session, pin, pinLength) }

@_cdecl("C_SetPIN") public func C_SetPIN(_ session: CK_SESSION_HANDLE, _ old: UnsafeMutablePointer<CK_UTF8CHAR>?, _ oldLength: CK_ULONG, _ new: UnsafeMutablePointer<CK_UTF8CHAR>?, _ newLength: CK_ULONG) -> CK_RV { PKCS11.C_SetPIN(session, old, oldLength, new, newLength) }

@_cdecl("C_OpenSession") public func C_OpenSession(_ slot: CK_SLOT_ID, _ flags: CK_FLAGS, _ application: UnsafeMutableRawPointer?, _ notify: CK_NOTIFY?, _ session: UnsafeMutablePointer<CK_SESSION_HANDLE>?) -> CK_RV { PKCS11.C_OpenSession(slot, flags, application, notify, session) }

@_cdecl("C_CloseSession") public func C_CloseSession(_ session: CK_SESSION_HANDLE) -> CK_RV { PKCS11.C_CloseSession(session) }

@_cdecl("C_CloseAllSessions") public func C_CloseAllSessions(_ slot: CK_SLOT_ID) -> CK_RV { PKCS11.C_CloseAllSessions(slot) }

@_cdecl("C_GetSessionInfo") public func C_GetSessionInfo(_ session: CK_SESSION_HANDLE, _ info: UnsafeMutablePointer<CK_SESSION_INFO>?) -> CK_RV { PKCS11.C_GetSessionInfo(session, info) }

@_cdecl("C_GetOperationState") public func C_GetOperationState(_ session: CK_SESSION_HANDLE, _ buffer: BytePointer, _ length: ULongPointer) -> CK_RV { PKCS11.C_GetOperationState(session, buffer, length) }

@_cdecl("C_SetOperationState") public func C_SetOperationState(_ session: CK_SESSION_HANDLE, _ buffer: BytePointer, _ length: CK_ULONG, _ encryptionKey: CK_OBJECT_HANDLE, _ authenticationKey: CK_OBJECT_HANDLE) -> CK_RV { PKCS11.C_SetOperationState(session, buffer, length, encryptionKey, authenticationKey) }

@_cdecl("C_Login") public func C_Login(_ session: CK_SESSION_HANDLE, _ userType: CK_USER_TYPE, _ pin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ pinLength: CK_ULONG) -> CK_RV { PKCS11.C_Login(session, userType, pin, pinLength) }

@_cdecl("C_LoginUser") public func C_LoginUser(_ session: CK_SESSION_HANDLE, _ userType: CK_USER_TYPE, _ pin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ pinLength: CK_ULONG, _ userName: UnsafeMutablePointer<CK_UTF8CHAR>?, _ userNameLength: CK_ULONG) -> CK_RV { PKCS11.C_LoginUser(session, userType, pin, pinLength, userName, userNameLength) }

@_cdecl("C_Logout") public func C_Logout(_ session: CK_SESSION_HANDLE) -> CK_RV { PKCS11.C_Logout(session) }

@_cdecl("C_SessionCancel") public func C_SessionCancel(_ session: CK_SESSION_HANDLE, _ flags: CK_FLAGS) -> CK_RV { PKCS11.C_SessionCancel(session, flags) }

@_cdecl("C_GetFunctionStatus") public func C_GetFunctionStatus(_ session: CK_SESSION_HANDLE) -> CK_RV { PKCS11.C_GetFunctionStatus(session) }

@_cdecl("C_CancelFunction") public func C_CancelFunction(_ session: CK_SESSION_HANDLE) -> CK_RV { PKCS11.C_CancelFunction(session) }

@_cdecl("C_CreateObject") public func C_CreateObject(_ session: CK_SESSION_HANDLE, _ template: AttributePointer, _ count: CK_ULONG, _ object: HandlePointer) -> CK_RV { PKCS11.C_CreateObject(session, template, count, object) }

@_cdecl("C_CopyObject") public func C_CopyObject(_ session: CK_SESSION_HANDLE, _ source: CK_OBJECT_HANDLE, _ template: AttributePointer, _ count: CK_ULONG, _ object: HandlePointer) -> CK_RV { PKCS11.C_CopyObject(session, source, template, count, object) }

@_cdecl("C_DestroyObject") public func C_DestroyObject(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE) -> CK_RV { PKCS11.C_DestroyObject(session, object) }

@_cdecl("C_GetObjectSize") public func C_GetObjectSize(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ size: ULongPointer) -> CK_RV { PKCS11.C_GetObjectSize(session, object, size) }

@_cdecl("C_GetAttributeValue") public func C_GetAttributeValue(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ template: AttributePointer, _ count: CK_ULONG) -> CK_RV { PKCS11.C_GetAttributeValue(session, object, template, count) }

@_cdecl("C_SetAttributeValue") public func C_SetAttributeValue(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ template: AttributePointer, _ count: CK_ULONG) -> CK_RV { PKCS11.C_SetAttributeValue(session, object, template, count) }

@_cdecl("C_FindObjectsInit") public func C_FindObjectsInit(_ session: CK_SESSION_HANDLE, _ template: AttributePointer, _ count: CK_ULONG) -> CK_RV { PKCS11.C_FindObjectsInit(session, template, count) }

@_cdecl("C_FindObjects") public func C_FindObjects(_ session: CK_SESSION_HANDLE, _ objects: HandlePointer, _ maximum: CK_ULONG, _ count: ULongPointer) -> CK_RV { PKCS11.C_FindObjects(session, objects, maximum, count) }

@_cdecl("C_FindObjectsFinal") public func C_FindObjectsFinal(_ session: CK_SESSION_HANDLE) -> CK_RV { PKCS11.C_FindObjectsFinal(session) }

@_cdecl("C_SeedRandom") public func C_SeedRandom(_ session: CK_SESSION_HANDLE, _ seed: BytePointer, _ length: CK_ULONG) -> CK_RV { PKCS11.C_SeedRandom(session, seed, length) }

@_cdecl("C_GenerateRandom") public func C_GenerateRandom(_ session: CK_SESSION_HANDLE, _ buffer: BytePointer, _ length: CK_ULONG) -> CK_RV { PKCS11.C_GenerateRandom(session, buffer, length) }

@_cdecl("C_EncryptInit") public func C_EncryptInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE) -> CK_RV { PKCS11.C_EncryptInit(s, m, k) }

@_cdecl("C_Encrypt") public func C_Encrypt(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_Encrypt(s, d, dl, o, ol) }

@_cdecl("C_EncryptUpdate") public func C_EncryptUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_EncryptUpdate(s, d, dl, o, ol) }

@_cdecl("C_EncryptFinal") public func C_EncryptFinal(_ s: CK_SESSION_HANDLE, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_EncryptFinal(s, o, ol) }

@_cdecl("C_DecryptInit") public func C_DecryptInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE) -> CK_RV { PKCS11.C_DecryptInit(s, m, k) }

@_cdecl("C_Decrypt") public func C_Decrypt(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_Decrypt(s, d, dl, o, ol) }

@_cdecl("C_DecryptUpdate") public func C_DecryptUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_DecryptUpdate(s, d, dl, o, ol) }

@_cdecl("C_DecryptFinal") public func C_DecryptFinal(_ s: CK_SESSION_HANDLE, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_DecryptFinal(s, o, ol) }

@_cdecl("C_DigestInit") public func C_DigestInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer) -> CK_RV { PKCS11.C_DigestInit(s, m) }

@_cdecl("C_Digest") public func C_Digest(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_Digest(s, d, dl, o, ol) }

@_cdecl("C_DigestUpdate") public func C_DigestUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG) -> CK_RV { PKCS11.C_DigestUpdate(s, d, dl) }

@_cdecl("C_DigestKey") public func C_DigestKey(_ s: CK_SESSION_HANDLE, _ k: CK_OBJECT_HANDLE) -> CK_RV { PKCS11.C_DigestKey(s, k) }

@_cdecl("C_DigestFinal") public func C_DigestFinal(_ s: CK_SESSION_HANDLE, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_DigestFinal(s, o, ol) }

@_cdecl("C_SignInit") public func C_SignInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE) -> CK_RV { PKCS11.C_SignInit(s, m, k) }

@_cdecl("C_Sign") public func C_Sign(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_Sign(s, d, dl, o, ol) }

@_cdecl("C_SignUpdate") public func C_SignUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG) -> CK_RV { PKCS11.C_SignUpdate(s, d, dl) }

@_cdecl("C_SignFinal") public func C_SignFinal(_ s: CK_SESSION_HANDLE, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_SignFinal(s, o, ol) }

@_cdecl("C_SignRecoverInit") public func C_SignRecoverInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE) -> CK_RV { PKCS11.C_SignRecoverInit(s, m, k) }

@_cdecl("C_SignRecover") public func C_SignRecover(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_SignRecover(s, d, dl, o, ol) }

@_cdecl("C_VerifyInit") public func C_VerifyInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE) -> CK_RV { PKCS11.C_VerifyInit(s, m, k) }

@_cdecl("C_Verify") public func C_Verify(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ g: BytePointer, _ gl: CK_ULONG) -> CK_RV { PKCS11.C_Verify(s, d, dl, g, gl) }

@_cdecl("C_VerifyUpdate") public func C_VerifyUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG) -> CK_RV { PKCS11.C_VerifyUpdate(s, d, dl) }

@_cdecl("C_VerifyFinal") public func C_VerifyFinal(_ s: CK_SESSION_HANDLE, _ g: BytePointer, _ gl: CK_ULONG) -> CK_RV { PKCS11.C_VerifyFinal(s, g, gl) }

@_cdecl("C_VerifyRecoverInit") public func C_VerifyRecoverInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE) -> CK_RV { PKCS11.C_VerifyRecoverInit(s, m, k) }

@_cdecl("C_VerifyRecover") public func C_VerifyRecover(_ s: CK_SESSION_HANDLE, _ g: BytePointer, _ gl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_VerifyRecover(s, g, gl, o, ol) }

@_cdecl("C_DigestEncryptUpdate") public func C_DigestEncryptUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_DigestEncryptUpdate(s, d, dl, o, ol) }

@_cdecl("C_DecryptDigestUpdate") public func C_DecryptDigestUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_DecryptDigestUpdate(s, d, dl, o, ol) }

@_cdecl("C_SignEncryptUpdate") public func C_SignEncryptUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_SignEncryptUpdate(s, d, dl, o, ol) }

@_cdecl("C_DecryptVerifyUpdate") public func C_DecryptVerifyUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_DecryptVerifyUpdate(s, d, dl, o, ol) }

@_cdecl("C_GenerateKey") public func C_GenerateKey(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ t: AttributePointer, _ c: CK_ULONG, _ k: HandlePointer) -> CK_RV { PKCS11.C_GenerateKey(s, m, t, c, k) }

@_cdecl("C_GenerateKeyPair") public func C_GenerateKeyPair(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ pt: AttributePointer, _ pc: CK_ULONG, _ vt: AttributePointer, _ vc: CK_ULONG, _ pk: HandlePointer, _ vk: HandlePointer) -> CK_RV { PKCS11.C_GenerateKeyPair(s, m, pt, pc, vt, vc, pk, vk) }

@_cdecl("C_WrapKey") public func C_WrapKey(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ w: CK_OBJECT_HANDLE, _ k: CK_OBJECT_HANDLE, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { PKCS11.C_WrapKey(s, m, w, k, o, ol) }

@_cdecl("C_UnwrapKey") public func C_UnwrapKey(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ u: CK_OBJECT_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ t: AttributePointer, _ c: CK_ULONG, _ k: HandlePointer) -> CK_RV { PKCS11.C_UnwrapKey(s, m, u, d, dl, t, c, k) }

@_cdecl("C_DeriveKey") public func C_DeriveKey(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ b: CK_OBJECT_HANDLE, _ t: AttributePointer, _ c: CK_ULONG, _ k: HandlePointer) -> CK_RV { PKCS11.C_DeriveKey(s, m, b, t, c, k) }

// PKCS#11 3.2 (the 3.2 function list's own functions; its asynchronous and authenticated-wrap
// entries are not offered and not exported by name).

@_cdecl("C_EncapsulateKey") public func C_EncapsulateKey(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE, _ t: AttributePointer, _ c: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer, _ h: HandlePointer) -> CK_RV { PKCS11.C_EncapsulateKey(s, m, k, t, c, o, ol, h) }

@_cdecl("C_DecapsulateKey") public func C_DecapsulateKey(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE, _ t: AttributePointer, _ c: CK_ULONG, _ d: BytePointer, _ dl: CK_ULONG, _ h: HandlePointer) -> CK_RV { PKCS11.C_DecapsulateKey(s, m, k, t, c, d, dl, h) }

@_cdecl("C_VerifySignatureInit") public func C_VerifySignatureInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE, _ g: BytePointer, _ gl: CK_ULONG) -> CK_RV { PKCS11.C_VerifySignatureInit(s, m, k, g, gl) }

@_cdecl("C_VerifySignature") public func C_VerifySignature(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG) -> CK_RV { PKCS11.C_VerifySignature(s, d, dl) }

@_cdecl("C_VerifySignatureUpdate") public func C_VerifySignatureUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG) -> CK_RV { PKCS11.C_VerifySignatureUpdate(s, d, dl) }

@_cdecl("C_VerifySignatureFinal") public func C_VerifySignatureFinal(_ s: CK_SESSION_HANDLE) -> CK_RV { PKCS11.C_VerifySignatureFinal(s) }

@_cdecl("C_GetSessionValidationFlags") public func C_GetSessionValidationFlags(_ s: CK_SESSION_HANDLE, _ type: CK_SESSION_VALIDATION_FLAGS_TYPE, _ flags: UnsafeMutablePointer<CK_FLAGS>?) -> CK_RV { PKCS11.C_GetSessionValidationFlags(s, type, flags) }
