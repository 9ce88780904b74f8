import CPKCS11

/// The function lists and interfaces, built once on the heap (hosts keep the pointers).
/// Each list's version matches its layout: 2.40 for CK_FUNCTION_LIST, 3.0 for CK_FUNCTION_LIST_3_0,
/// 3.2 for CK_FUNCTION_LIST_3_2.
public enum FunctionLists {
    public nonisolated(unsafe) static let version240: UnsafeMutablePointer<CK_FUNCTION_LIST> = {
        let list = UnsafeMutablePointer<CK_FUNCTION_LIST>.allocate(capacity: 1)
        list.initialize(to: CK_FUNCTION_LIST(
            version: CK_VERSION(2, 40),
            C_Initialize: C_Initialize, C_Finalize: C_Finalize, C_GetInfo: C_GetInfo,
            C_GetFunctionList: C_GetFunctionList, C_GetSlotList: C_GetSlotList, C_GetSlotInfo: C_GetSlotInfo,
            C_GetTokenInfo: C_GetTokenInfo, C_GetMechanismList: C_GetMechanismList, C_GetMechanismInfo: C_GetMechanismInfo,
            C_InitToken: C_InitToken, C_InitPIN: C_InitPIN, C_SetPIN: C_SetPIN,
            C_OpenSession: C_OpenSession, C_CloseSession: C_CloseSession, C_CloseAllSessions: C_CloseAllSessions,
            C_GetSessionInfo: C_GetSessionInfo, C_GetOperationState: C_GetOperationState, C_SetOperationState: C_SetOperationState,
            C_Login: C_Login, C_Logout: C_Logout,
            C_CreateObject: C_CreateObject, C_CopyObject: C_CopyObject, C_DestroyObject: C_DestroyObject,
            C_GetObjectSize: C_GetObjectSize, C_GetAttributeValue: C_GetAttributeValue, C_SetAttributeValue: C_SetAttributeValue,
            C_FindObjectsInit: C_FindObjectsInit, C_FindObjects: C_FindObjects, C_FindObjectsFinal: C_FindObjectsFinal,
            C_EncryptInit: C_EncryptInit, C_Encrypt: C_Encrypt, C_EncryptUpdate: C_EncryptUpdate, C_EncryptFinal: C_EncryptFinal,
            C_DecryptInit: C_DecryptInit, C_Decrypt: C_Decrypt, C_DecryptUpdate: C_DecryptUpdate, C_DecryptFinal: C_DecryptFinal,
            C_DigestInit: C_DigestInit, C_Digest: C_Digest, C_DigestUpdate: C_DigestUpdate, C_DigestKey: C_DigestKey,
            C_DigestFinal: C_DigestFinal,
            C_SignInit: C_SignInit, C_Sign: C_Sign, C_SignUpdate: C_SignUpdate, C_SignFinal: C_SignFinal,
            C_SignRecoverInit: C_SignRecoverInit, C_SignRecover: C_SignRecover,
            C_VerifyInit: C_VerifyInit, C_Verify: C_Verify, C_VerifyUpdate: C_VerifyUpdate, C_VerifyFinal: C_VerifyFinal,
            C_VerifyRecoverInit: C_VerifyRecoverInit, C_VerifyRecover: C_VerifyRecover,
            C_DigestEncryptUpdate: C_DigestEncryptUpdate, C_DecryptDigestUpdate: C_DecryptDigestUpdate,
            C_SignEncryptUpdate: C_SignEncryptUpdate, C_DecryptVerifyUpdate: C_DecryptVerifyUpdate,
            C_GenerateKey: C_GenerateKey, C_GenerateKeyPair: C_GenerateKeyPair, C_WrapKey: C_WrapKey,
            C_UnwrapKey: C_UnwrapKey, C_DeriveKey: C_DeriveKey,
            C_SeedRandom: C_SeedRandom, C_GenerateRandom: C_GenerateRandom,
            C_GetFunctionStatus: C_GetFunctionStatus, C_CancelFunction: C_CancelFunction,
            C_WaitForSlotEvent: C_WaitForSlotEvent))
        return list
    }()

    public nonisolated(unsafe) static let version30: UnsafeMutablePointer<CK_FUNCTION_LIST_3_0> = {
        let base = version240.pointee
        let list = UnsafeMutablePointer<CK_FUNCTION_LIST_3_0>.allocate(capacity: 1)
        list.initialize(to: CK_FUNCTION_LIST_3_0(
            version: CK_VERSION(3, 0),
            C_Initialize: base.C_Initialize, C_Finalize: base.C_Finalize, C_GetInfo: C_GetInfo_3_0,
            C_GetFunctionList: base.C_GetFunctionList, C_GetSlotList: base.C_GetSlotList, C_GetSlotInfo: base.C_GetSlotInfo,
            C_GetTokenInfo: base.C_GetTokenInfo, C_GetMechanismList: base.C_GetMechanismList, C_GetMechanismInfo: base.C_GetMechanismInfo,
            C_InitToken: base.C_InitToken, C_InitPIN: base.C_InitPIN, C_SetPIN: base.C_SetPIN,
            C_OpenSession: base.C_OpenSession, C_CloseSession: base.C_CloseSession, C_CloseAllSessions: base.C_CloseAllSessions,
            C_GetSessionInfo: base.C_GetSessionInfo, C_GetOperationState: base.C_GetOperationState, C_SetOperationState: base.C_SetOperationState,
            C_Login: base.C_Login, C_Logout: base.C_Logout,
            C_CreateObject: base.C_CreateObject, C_CopyObject: base.C_CopyObject, C_DestroyObject: base.C_DestroyObject,
            C_GetObjectSize: base.C_GetObjectSize, C_GetAttributeValue: base.C_GetAttributeValue, C_SetAttributeValue: base.C_SetAttributeValue,
            C_FindObjectsInit: base.C_FindObjectsInit, C_FindObjects: base.C_FindObjects, C_FindObjectsFinal: base.C_FindObjectsFinal,
            C_EncryptInit: base.C_EncryptInit, C_Encrypt: base.C_Encrypt, C_EncryptUpdate: base.C_EncryptUpdate, C_EncryptFinal: base.C_EncryptFinal,
            C_DecryptInit: base.C_DecryptInit, C_Decrypt: base.C_Decrypt, C_DecryptUpdate: base.C_DecryptUpdate, C_DecryptFinal: base.C_DecryptFinal,
            C_DigestInit: base.C_DigestInit, C_Digest: base.C_Digest, C_DigestUpdate: base.C_DigestUpdate, C_DigestKey: base.C_DigestKey,
            C_DigestFinal: base.C_DigestFinal,
            C_SignInit: base.C_SignInit, C_Sign: base.C_Sign, C_SignUpdate: base.C_SignUpdate, C_SignFinal: base.C_SignFinal,
            C_SignRecoverInit: base.C_SignRecoverInit, C_SignRecover: base.C_SignRecover,
            C_VerifyInit: base.C_VerifyInit, C_Verify: base.C_Verify, C_VerifyUpdate: base.C_VerifyUpdate, C_VerifyFinal: base.C_VerifyFinal,
            C_VerifyRecoverInit: base.C_VerifyRecoverInit, C_VerifyRecover: base.C_VerifyRecover,
            C_DigestEncryptUpdate: base.C_DigestEncryptUpdate, C_DecryptDigestUpdate: base.C_DecryptDigestUpdate,
            C_SignEncryptUpdate: base.C_SignEncryptUpdate, C_DecryptVerifyUpdate: base.C_DecryptVerifyUpdate,
            C_GenerateKey: base.C_GenerateKey, C_GenerateKeyPair: base.C_GenerateKeyPair, C_WrapKey: base.C_WrapKey,
            C_UnwrapKey: base.C_UnwrapKey, C_DeriveKey: base.C_DeriveKey,
            C_SeedRandom: base.C_SeedRandom, C_GenerateRandom: base.C_GenerateRandom,
            C_GetFunctionStatus: base.C_GetFunctionStatus, C_CancelFunction: base.C_CancelFunction,
            C_WaitForSlotEvent: base.C_WaitForSlotEvent,
            C_GetInterfaceList: C_GetInterfaceList, C_GetInterface: C_GetInterface,
            C_LoginUser: C_LoginUser, C_SessionCancel: C_SessionCancel,
            C_MessageEncryptInit: { s, _, _ in Exports.notOffered("C_MessageEncryptInit", s) },
            C_EncryptMessage: { s, _, _, _, _, _, _, _, _ in Exports.notOffered("C_EncryptMessage", s) },
            C_EncryptMessageBegin: { s, _, _, _, _ in Exports.notOffered("C_EncryptMessageBegin", s) },
            C_EncryptMessageNext: { s, _, _, _, _, _, _, _ in Exports.notOffered("C_EncryptMessageNext", s) },
            C_MessageEncryptFinal: { s in Exports.notOffered("C_MessageEncryptFinal", s) },
            C_MessageDecryptInit: { s, _, _ in Exports.notOffered("C_MessageDecryptInit", s) },
            C_DecryptMessage: { s, _, _, _, _, _, _, _, _ in Exports.notOffered("C_DecryptMessage", s) },
            C_DecryptMessageBegin: { s, _, _, _, _ in Exports.notOffered("C_DecryptMessageBegin", s) },
            C_DecryptMessageNext: { s, _, _, _, _, _, _, _ in Exports.notOffered("C_DecryptMessageNext", s) },
            C_MessageDecryptFinal: { s in Exports.notOffered("C_MessageDecryptFinal", s) },
            C_MessageSignInit: { s, _, _ in Exports.notOffered("C_MessageSignInit", s) },
            C_SignMessage: { s, _, _, _, _, _, _ in Exports.notOffered("C_SignMessage", s) },
            C_SignMessageBegin: { s, _, _ in Exports.notOffered("C_SignMessageBegin", s) },
            C_SignMessageNext: { s, _, _, _, _, _, _ in Exports.notOffered("C_SignMessageNext", s) },
            C_MessageSignFinal: { s in Exports.notOffered("C_MessageSignFinal", s) },
            C_MessageVerifyInit: { s, _, _ in Exports.notOffered("C_MessageVerifyInit", s) },
            C_VerifyMessage: { s, _, _, _, _, _, _ in Exports.notOffered("C_VerifyMessage", s) },
            C_VerifyMessageBegin: { s, _, _ in Exports.notOffered("C_VerifyMessageBegin", s) },
            C_VerifyMessageNext: { s, _, _, _, _, _, _ in Exports.notOffered("C_VerifyMessageNext", s) },
            C_MessageVerifyFinal: { s in Exports.notOffered("C_MessageVerifyFinal", s) }))
        return list
    }()

    /// The 3.2 list: the 3.0 entries (its C_GetInfo reporting 3.2), then key encapsulation,
    /// verification with the signature at init and the session's validation flags; the
    /// asynchronous functions and authenticated key wrapping answer CKR_FUNCTION_NOT_SUPPORTED.
    public nonisolated(unsafe) static let version32: UnsafeMutablePointer<CK_FUNCTION_LIST_3_2> = {
        let base = version30.pointee
        let list = UnsafeMutablePointer<CK_FUNCTION_LIST_3_2>.allocate(capacity: 1)
        list.initialize(to: CK_FUNCTION_LIST_3_2(
            version: CK_VERSION(3, 2),
            C_Initialize: base.C_Initialize, C_Finalize: base.C_Finalize, C_GetInfo: C_GetInfo_3_2,
            C_GetFunctionList: base.C_GetFunctionList, C_GetSlotList: base.C_GetSlotList, C_GetSlotInfo: base.C_GetSlotInfo,
            C_GetTokenInfo: base.C_GetTokenInfo, C_GetMechanismList: base.C_GetMechanismList,
            C_GetMechanismInfo: base.C_GetMechanismInfo, C_InitToken: base.C_InitToken, C_InitPIN: base.C_InitPIN,
            C_SetPIN: base.C_SetPIN, C_OpenSession: base.C_OpenSession, C_CloseSession: base.C_CloseSession,
            C_CloseAllSessions: base.C_CloseAllSessions, C_GetSessionInfo: base.C_GetSessionInfo,
            C_GetOperationState: base.C_GetOperationState, C_SetOperationState: base.C_SetOperationState, C_Login: base.C_Login,
            C_Logout: base.C_Logout, C_CreateObject: base.C_CreateObject, C_CopyObject: base.C_CopyObject,
            C_DestroyObject: base.C_DestroyObject, C_GetObjectSize: base.C_GetObjectSize,
            C_GetAttributeValue: base.C_GetAttributeValue, C_SetAttributeValue: base.C_SetAttributeValue,
            C_FindObjectsInit: base.C_FindObjectsInit, C_FindObjects: base.C_FindObjects, C_FindObjectsFinal: base.C_FindObjectsFinal,
            C_EncryptInit: base.C_EncryptInit, C_Encrypt: base.C_Encrypt, C_EncryptUpdate: base.C_EncryptUpdate,
            C_EncryptFinal: base.C_EncryptFinal, C_DecryptInit: base.C_DecryptInit, C_Decrypt: base.C_Decrypt,
            C_DecryptUpdate: base.C_DecryptUpdate, C_DecryptFinal: base.C_DecryptFinal, C_DigestInit: base.C_DigestInit,
            C_Digest: base.C_Digest, C_DigestUpdate: base.C_DigestUpdate, C_DigestKey: base.C_DigestKey,
            C_DigestFinal: base.C_DigestFinal, C_SignInit: base.C_SignInit, C_Sign: base.C_Sign, C_SignUpdate: base.C_SignUpdate,
            C_SignFinal: base.C_SignFinal, C_SignRecoverInit: base.C_SignRecoverInit, C_SignRecover: base.C_SignRecover,
            C_VerifyInit: base.C_VerifyInit, C_Verify: base.C_Verify, C_VerifyUpdate: base.C_VerifyUpdate,
            C_VerifyFinal: base.C_VerifyFinal, C_VerifyRecoverInit: base.C_VerifyRecoverInit, C_VerifyRecover: base.C_VerifyRecover,
            C_DigestEncryptUpdate: base.C_DigestEncryptUpdate, C_DecryptDigestUpdate: base.C_DecryptDigestUpdate,
            C_SignEncryptUpdate: base.C_SignEncryptUpdate, C_DecryptVerifyUpdate: base.C_DecryptVerifyUpdate,
            C_GenerateKey: base.C_GenerateKey, C_GenerateKeyPair: base.C_GenerateKeyPair, C_WrapKey: base.C_WrapKey,
            C_UnwrapKey: base.C_UnwrapKey, C_DeriveKey: base.C_DeriveKey, C_SeedRandom: base.C_SeedRandom,
            C_GenerateRandom: base.C_GenerateRandom, C_GetFunctionStatus: base.C_GetFunctionStatus,
            C_CancelFunction: base.C_CancelFunction, C_WaitForSlotEvent: base.C_WaitForSlotEvent,
            C_GetInterfaceList: base.C_GetInterfaceList, C_GetInterface: base.C_GetInterface, C_LoginUser: base.C_LoginUser,
            C_SessionCancel: base.C_SessionCancel, C_MessageEncryptInit: base.C_MessageEncryptInit,
            C_EncryptMessage: base.C_EncryptMessage, C_EncryptMessageBegin: base.C_EncryptMessageBegin,
            C_EncryptMessageNext: base.C_EncryptMessageNext, C_MessageEncryptFinal: base.C_MessageEncryptFinal,
            C_MessageDecryptInit: base.C_MessageDecryptInit, C_DecryptMessage: base.C_DecryptMessage,
            C_DecryptMessageBegin: base.C_DecryptMessageBegin, C_DecryptMessageNext: base.C_DecryptMessageNext,
            C_MessageDecryptFinal: base.C_MessageDecryptFinal, C_MessageSignInit: base.C_MessageSignInit,
            C_SignMessage: base.C_SignMessage, C_SignMessageBegin: base.C_SignMessageBegin, C_SignMessageNext: base.C_SignMessageNext,
            C_MessageSignFinal: base.C_MessageSignFinal, C_MessageVerifyInit: base.C_MessageVerifyInit,
            C_VerifyMessage: base.C_VerifyMessage, C_VerifyMessageBegin: base.C_VerifyMessageBegin,
            C_VerifyMessageNext: base.C_VerifyMessageNext, C_MessageVerifyFinal: base.C_MessageVerifyFinal,
            C_EncapsulateKey: C_EncapsulateKey, C_DecapsulateKey: C_DecapsulateKey,
            C_VerifySignatureInit: C_VerifySignatureInit, C_VerifySignature: C_VerifySignature,
            C_VerifySignatureUpdate: C_VerifySignatureUpdate, C_VerifySignatureFinal: C_VerifySignatureFinal,
            C_GetSessionValidationFlags: C_GetSessionValidationFlags,
            C_AsyncComplete: { s, _, _ in Exports.notOffered("C_AsyncComplete", s) },
            C_AsyncGetID: { s, _, _ in Exports.notOffered("C_AsyncGetID", s) },
            C_AsyncJoin: { s, _, _, _, _ in Exports.notOffered("C_AsyncJoin", s) },
            C_WrapKeyAuthenticated: { s, _, _, _, _, _, _, _ in Exports.notOffered("C_WrapKeyAuthenticated", s) },
            C_UnwrapKeyAuthenticated: { s, _, _, _, _, _, _, _, _, _ in Exports.notOffered("C_UnwrapKeyAuthenticated", s) }))
        return list
    }()

    /// "PKCS 11" as a C string that lives as long as the process.
    private nonisolated(unsafe) static let interfaceName: UnsafeMutablePointer<CK_CHAR> = {
        let bytes = Array("PKCS 11".utf8) + [0]
        let name = UnsafeMutablePointer<CK_CHAR>.allocate(capacity: bytes.count)
        name.initialize(from: bytes, count: bytes.count)
        return name
    }()

    /// The interfaces, 3.0 first (the default: a host written for 3.0 that names no version gets
    /// the version it knows), then 3.2 and 2.40; none claims CKF_INTERFACE_FORK_SAFE, since a forked
    /// child must call C_Initialize again.
    private static let interfaceCount = 3
    private nonisolated(unsafe) static let interfaceTable: UnsafeMutablePointer<CK_INTERFACE> = {
        let lists = [UnsafeMutableRawPointer(version30), UnsafeMutableRawPointer(version32), UnsafeMutableRawPointer(version240)]
        let table = UnsafeMutablePointer<CK_INTERFACE>.allocate(capacity: interfaceCount)
        for (index, list) in lists.enumerated() {
            (table + index).initialize(to: CK_INTERFACE(pInterfaceName: interfaceName, pFunctionList: list, flags: 0))
        }
        return table
    }()

    static var interfaces: [CK_INTERFACE] { (0..<interfaceCount).map { interfaceTable[$0] } }

    /// C_GetInterface: by name (NULL means the default), optional version, and required flags.
    static func interface(named name: UnsafeMutablePointer<CK_UTF8CHAR>?, version: CK_VERSION?, flags: CK_FLAGS) throws(CKError) -> UnsafeMutablePointer<CK_INTERFACE> {
        if let name {
            let requested = String(cString: UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self))
            guard requested == "PKCS 11" else { throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "no interface named \(requested)") }
        }
        for index in 0..<interfaceCount {
            let candidate = interfaceTable + index
            let listVersion = candidate.pointee.pFunctionList.assumingMemoryBound(to: CK_VERSION.self).pointee
            if let version, version.major != listVersion.major || version.minor != listVersion.minor { continue }
            if flags & ~candidate.pointee.flags != 0 { continue }
            return candidate
        }
        throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "no interface with that version and flags")
    }
}
