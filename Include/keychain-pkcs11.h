/*
 * keychain-pkcs11.h — definitions for clients of libkeychain-pkcs11.so.
 *
 * The base is the system's PKCS#11 2.40 header from p11-kit. This file adds the
 * PKCS#11 3.0 definitions the module implements that the 2.40 header lacks
 * (interfaces, the 3.0 function list, C_LoginUser, C_SessionCancel, the message
 * functions' prototypes, CKA_UNIQUE_ID), the PKCS#11 3.2 ones (the 3.2 function
 * list, C_EncapsulateKey/C_DecapsulateKey, C_VerifySignature*,
 * C_GetSessionValidationFlags, ML-DSA and ML-KEM) and the module's vendor constants.
 *
 * Vendor namespace: CKA_VENDOR_DEFINED | 0x4B430000 ("KC") for attributes and
 * CKO_VENDOR_DEFINED | 0x4B430000 for object classes. See Docs/vendor-constants.md.
 */
#ifndef KEYCHAIN_PKCS11_H
#define KEYCHAIN_PKCS11_H

#if defined(__has_include)
#  if __has_include(<p11-kit/pkcs11.h>)
#    include <p11-kit/pkcs11.h>
#  else
#    include <p11-kit-1/p11-kit/pkcs11.h>
#  endif
#else
#  include <p11-kit/pkcs11.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- PKCS#11 3.0 additions missing from the 2.40 header ------------------ */

#ifndef CKA_UNIQUE_ID
#define CKA_UNIQUE_ID                 (0x4UL)
#endif
#ifndef CKR_TOKEN_RESOURCE_EXCEEDED
#define CKR_TOKEN_RESOURCE_EXCEEDED   (0x201UL)
#endif
#ifndef CKF_FIND_OBJECTS
/* C_SessionCancel: cancel an object search. */
#define CKF_FIND_OBJECTS              (0x40UL)
#endif
#ifndef CKR_OPERATION_CANCEL_FAILED
#define CKR_OPERATION_CANCEL_FAILED   (0x202UL)
#endif

#ifndef CKF_INTERFACE_FORK_SAFE
#define CKF_INTERFACE_FORK_SAFE       (0x1UL)
#define CKF_END_OF_MESSAGE            (0x1UL)

/* An interface offered by C_GetInterfaceList / C_GetInterface (PKCS#11 3.0 §3.8). */
typedef struct CK_INTERFACE {
    CK_CHAR *pInterfaceName;
    CK_VOID_PTR pFunctionList;
    CK_FLAGS flags;
} CK_INTERFACE;
typedef CK_INTERFACE *CK_INTERFACE_PTR;
typedef CK_INTERFACE_PTR *CK_INTERFACE_PTR_PTR;

#define KC_DECLARE_3_0(name, args)                 \
    typedef CK_RV (*CK_##name) args;               \
    CK_RV name args

KC_DECLARE_3_0(C_GetInterfaceList, (CK_INTERFACE_PTR pInterfacesList, CK_ULONG_PTR pulCount));
KC_DECLARE_3_0(C_GetInterface, (CK_UTF8CHAR_PTR pInterfaceName, CK_VERSION_PTR pVersion,
                                CK_INTERFACE_PTR_PTR ppInterface, CK_FLAGS flags));
KC_DECLARE_3_0(C_LoginUser, (CK_SESSION_HANDLE hSession, CK_USER_TYPE userType,
                             CK_UTF8CHAR_PTR pPin, CK_ULONG ulPinLen,
                             CK_UTF8CHAR_PTR pUsername, CK_ULONG ulUsernameLen));
KC_DECLARE_3_0(C_SessionCancel, (CK_SESSION_HANDLE hSession, CK_FLAGS flags));

/* The message-based functions: present in the 3.0 list, not exported by name. */
typedef CK_RV (*CK_C_MessageEncryptInit)(CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);
typedef CK_RV (*CK_C_EncryptMessage)(CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,
                                     CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);
typedef CK_RV (*CK_C_EncryptMessageBegin)(CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG);
typedef CK_RV (*CK_C_EncryptMessageNext)(CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,
                                         CK_BYTE_PTR, CK_ULONG_PTR, CK_FLAGS);
typedef CK_RV (*CK_C_MessageEncryptFinal)(CK_SESSION_HANDLE);
typedef CK_RV (*CK_C_MessageDecryptInit)(CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);
typedef CK_RV (*CK_C_DecryptMessage)(CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,
                                     CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);
typedef CK_RV (*CK_C_DecryptMessageBegin)(CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG);
typedef CK_RV (*CK_C_DecryptMessageNext)(CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,
                                         CK_BYTE_PTR, CK_ULONG_PTR, CK_FLAGS);
typedef CK_RV (*CK_C_MessageDecryptFinal)(CK_SESSION_HANDLE);
typedef CK_RV (*CK_C_MessageSignInit)(CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);
typedef CK_RV (*CK_C_SignMessage)(CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,
                                  CK_BYTE_PTR, CK_ULONG_PTR);
typedef CK_RV (*CK_C_SignMessageBegin)(CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG);
typedef CK_RV (*CK_C_SignMessageNext)(CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,
                                      CK_BYTE_PTR, CK_ULONG_PTR);
typedef CK_RV (*CK_C_MessageSignFinal)(CK_SESSION_HANDLE);
typedef CK_RV (*CK_C_MessageVerifyInit)(CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE);
typedef CK_RV (*CK_C_VerifyMessage)(CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,
                                    CK_BYTE_PTR, CK_ULONG);
typedef CK_RV (*CK_C_VerifyMessageBegin)(CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG);
typedef CK_RV (*CK_C_VerifyMessageNext)(CK_SESSION_HANDLE, CK_VOID_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,
                                        CK_BYTE_PTR, CK_ULONG);
typedef CK_RV (*CK_C_MessageVerifyFinal)(CK_SESSION_HANDLE);

/* The 3.0 function list: the 2.40 entries in their order, then the 3.0 ones. */
typedef struct CK_FUNCTION_LIST_3_0 {
    CK_VERSION version;
    CK_C_Initialize C_Initialize;
    CK_C_Finalize C_Finalize;
    CK_C_GetInfo C_GetInfo;
    CK_C_GetFunctionList C_GetFunctionList;
    CK_C_GetSlotList C_GetSlotList;
    CK_C_GetSlotInfo C_GetSlotInfo;
    CK_C_GetTokenInfo C_GetTokenInfo;
    CK_C_GetMechanismList C_GetMechanismList;
    CK_C_GetMechanismInfo C_GetMechanismInfo;
    CK_C_InitToken C_InitToken;
    CK_C_InitPIN C_InitPIN;
    CK_C_SetPIN C_SetPIN;
    CK_C_OpenSession C_OpenSession;
    CK_C_CloseSession C_CloseSession;
    CK_C_CloseAllSessions C_CloseAllSessions;
    CK_C_GetSessionInfo C_GetSessionInfo;
    CK_C_GetOperationState C_GetOperationState;
    CK_C_SetOperationState C_SetOperationState;
    CK_C_Login C_Login;
    CK_C_Logout C_Logout;
    CK_C_CreateObject C_CreateObject;
    CK_C_CopyObject C_CopyObject;
    CK_C_DestroyObject C_DestroyObject;
    CK_C_GetObjectSize C_GetObjectSize;
    CK_C_GetAttributeValue C_GetAttributeValue;
    CK_C_SetAttributeValue C_SetAttributeValue;
    CK_C_FindObjectsInit C_FindObjectsInit;
    CK_C_FindObjects C_FindObjects;
    CK_C_FindObjectsFinal C_FindObjectsFinal;
    CK_C_EncryptInit C_EncryptInit;
    CK_C_Encrypt C_Encrypt;
    CK_C_EncryptUpdate C_EncryptUpdate;
    CK_C_EncryptFinal C_EncryptFinal;
    CK_C_DecryptInit C_DecryptInit;
    CK_C_Decrypt C_Decrypt;
    CK_C_DecryptUpdate C_DecryptUpdate;
    CK_C_DecryptFinal C_DecryptFinal;
    CK_C_DigestInit C_DigestInit;
    CK_C_Digest C_Digest;
    CK_C_DigestUpdate C_DigestUpdate;
    CK_C_DigestKey C_DigestKey;
    CK_C_DigestFinal C_DigestFinal;
    CK_C_SignInit C_SignInit;
    CK_C_Sign C_Sign;
    CK_C_SignUpdate C_SignUpdate;
    CK_C_SignFinal C_SignFinal;
    CK_C_SignRecoverInit C_SignRecoverInit;
    CK_C_SignRecover C_SignRecover;
    CK_C_VerifyInit C_VerifyInit;
    CK_C_Verify C_Verify;
    CK_C_VerifyUpdate C_VerifyUpdate;
    CK_C_VerifyFinal C_VerifyFinal;
    CK_C_VerifyRecoverInit C_VerifyRecoverInit;
    CK_C_VerifyRecover C_VerifyRecover;
    CK_C_DigestEncryptUpdate C_DigestEncryptUpdate;
    CK_C_DecryptDigestUpdate C_DecryptDigestUpdate;
    CK_C_SignEncryptUpdate C_SignEncryptUpdate;
    CK_C_DecryptVerifyUpdate C_DecryptVerifyUpdate;
    CK_C_GenerateKey C_GenerateKey;
    CK_C_GenerateKeyPair C_GenerateKeyPair;
    CK_C_WrapKey C_WrapKey;
    CK_C_UnwrapKey C_UnwrapKey;
    CK_C_DeriveKey C_DeriveKey;
    CK_C_SeedRandom C_SeedRandom;
    CK_C_GenerateRandom C_GenerateRandom;
    CK_C_GetFunctionStatus C_GetFunctionStatus;
    CK_C_CancelFunction C_CancelFunction;
    CK_C_WaitForSlotEvent C_WaitForSlotEvent;
    CK_C_GetInterfaceList C_GetInterfaceList;
    CK_C_GetInterface C_GetInterface;
    CK_C_LoginUser C_LoginUser;
    CK_C_SessionCancel C_SessionCancel;
    CK_C_MessageEncryptInit C_MessageEncryptInit;
    CK_C_EncryptMessage C_EncryptMessage;
    CK_C_EncryptMessageBegin C_EncryptMessageBegin;
    CK_C_EncryptMessageNext C_EncryptMessageNext;
    CK_C_MessageEncryptFinal C_MessageEncryptFinal;
    CK_C_MessageDecryptInit C_MessageDecryptInit;
    CK_C_DecryptMessage C_DecryptMessage;
    CK_C_DecryptMessageBegin C_DecryptMessageBegin;
    CK_C_DecryptMessageNext C_DecryptMessageNext;
    CK_C_MessageDecryptFinal C_MessageDecryptFinal;
    CK_C_MessageSignInit C_MessageSignInit;
    CK_C_SignMessage C_SignMessage;
    CK_C_SignMessageBegin C_SignMessageBegin;
    CK_C_SignMessageNext C_SignMessageNext;
    CK_C_MessageSignFinal C_MessageSignFinal;
    CK_C_MessageVerifyInit C_MessageVerifyInit;
    CK_C_VerifyMessage C_VerifyMessage;
    CK_C_VerifyMessageBegin C_VerifyMessageBegin;
    CK_C_VerifyMessageNext C_VerifyMessageNext;
    CK_C_MessageVerifyFinal C_MessageVerifyFinal;
} CK_FUNCTION_LIST_3_0;
typedef CK_FUNCTION_LIST_3_0 *CK_FUNCTION_LIST_3_0_PTR;
typedef CK_FUNCTION_LIST_3_0_PTR *CK_FUNCTION_LIST_3_0_PTR_PTR;

#undef KC_DECLARE_3_0
#endif /* CKF_INTERFACE_FORK_SAFE */

/* ---- PKCS#11 3.x mechanisms and parameter structures ----------------------
 * What the module implements beyond p11-kit's 2.40 header (0.24, Debian 12), written from the
 * PKCS#11 3.0/3.1 specification's text (numbers, structure and field names as it gives them).
 * A system header that already knows PKCS#11 3.0 (it defines CKM_HKDF_DERIVE) provides them
 * itself. The module's Swift code reads these structures as Clang imports them: C's layout, not
 * a copy of it. */

#ifndef CKM_HKDF_DERIVE

#define CKM_SHA3_256_RSA_PKCS             (0x60UL)
#define CKM_SHA3_384_RSA_PKCS             (0x61UL)
#define CKM_SHA3_512_RSA_PKCS             (0x62UL)
#define CKM_SHA3_256_RSA_PKCS_PSS         (0x63UL)
#define CKM_SHA3_384_RSA_PKCS_PSS         (0x64UL)
#define CKM_SHA3_512_RSA_PKCS_PSS         (0x65UL)
#define CKM_SHA3_224_RSA_PKCS             (0x66UL)
#define CKM_SHA3_224_RSA_PKCS_PSS         (0x67UL)
#define CKM_SHA3_256                      (0x2B0UL)
#define CKM_SHA3_256_HMAC                 (0x2B1UL)
#define CKM_SHA3_256_HMAC_GENERAL         (0x2B2UL)
#define CKM_SHA3_224                      (0x2B5UL)
#define CKM_SHA3_224_HMAC                 (0x2B6UL)
#define CKM_SHA3_224_HMAC_GENERAL         (0x2B7UL)
#define CKM_SHA3_384                      (0x2C0UL)
#define CKM_SHA3_384_HMAC                 (0x2C1UL)
#define CKM_SHA3_384_HMAC_GENERAL         (0x2C2UL)
#define CKM_SHA3_512                      (0x2D0UL)
#define CKM_SHA3_512_HMAC                 (0x2D1UL)
#define CKM_SHA3_512_HMAC_GENERAL         (0x2D2UL)
#define CKM_ECDSA_SHA3_224                (0x1047UL)
#define CKM_ECDSA_SHA3_256                (0x1048UL)
#define CKM_ECDSA_SHA3_384                (0x1049UL)
#define CKM_ECDSA_SHA3_512                (0x104AUL)

#define CKM_EC_MONTGOMERY_KEY_PAIR_GEN    (0x1056UL)
/* Key types of PKCS#11 3.0 the module makes and stores. */
#define CKK_CHACHA20                      (0x33UL)
#define CKK_AES_XTS                       (0x35UL)
#define CKK_EC_MONTGOMERY                 (0x41UL)
#define CKK_HKDF                          (0x42UL)

/* CKM_PKCS5_PBKD2's pseudo-random functions and salt source (PKCS#11 2.40 and 3.0). */
#define CKZ_SALT_SPECIFIED                (0x1UL)
#define CKP_PKCS5_PBKD2_HMAC_SHA1         (0x1UL)
#define CKP_PKCS5_PBKD2_HMAC_GOSTR3411    (0x2UL)
#define CKP_PKCS5_PBKD2_HMAC_SHA224       (0x3UL)
#define CKP_PKCS5_PBKD2_HMAC_SHA256       (0x4UL)
#define CKP_PKCS5_PBKD2_HMAC_SHA384       (0x5UL)
#define CKP_PKCS5_PBKD2_HMAC_SHA512       (0x6UL)
#define CKP_PKCS5_PBKD2_HMAC_SHA512_224   (0x7UL)
#define CKP_PKCS5_PBKD2_HMAC_SHA512_256   (0x8UL)

#ifndef CKM_EC_EDWARDS_KEY_PAIR_GEN
#define CKM_EC_EDWARDS_KEY_PAIR_GEN       (0x1055UL)
#endif
#ifndef CKM_EDDSA
#define CKM_EDDSA                         (0x1057UL)
#endif
#define CKM_AES_XTS                       (0x1071UL)
#define CKM_AES_XTS_KEY_GEN               (0x1072UL)

/* CK_EDDSA_PARAMS (3.0 §6.3.15): prehash (Ed25519ph/Ed448ph) and the context string. */
typedef struct CK_EDDSA_PARAMS {
    CK_BBOOL phFlag;
    CK_ULONG ulContextDataLen;
    CK_BYTE_PTR pContextData;
} CK_EDDSA_PARAMS;

#define CKM_CHACHA20_KEY_GEN              (0x1225UL)
#define CKM_CHACHA20                      (0x1226UL)
#define CKM_CHACHA20_POLY1305             (0x4021UL)
/* CK_CHACHA20_PARAMS (3.0 §6.63): the block counter and nonce, their sizes in bits. */
typedef struct CK_CHACHA20_PARAMS {
    CK_BYTE_PTR pBlockCounter;
    CK_ULONG blockCounterBits;
    CK_BYTE_PTR pNonce;
    CK_ULONG ulNonceBits;
} CK_CHACHA20_PARAMS;
/* CK_SALSA20_CHACHA20_POLY1305_PARAMS (3.0 §6.64). */
typedef struct CK_SALSA20_CHACHA20_POLY1305_PARAMS {
    CK_BYTE_PTR pNonce;
    CK_ULONG ulNonceLen;
    CK_BYTE_PTR pAAD;
    CK_ULONG ulAADLen;
} CK_SALSA20_CHACHA20_POLY1305_PARAMS;

#define CKM_HKDF_DERIVE                   (0x402AUL)
#define CKM_HKDF_DATA                     (0x402BUL)
#define CKM_HKDF_KEY_GEN                  (0x402CUL)
#define CKF_HKDF_SALT_NULL                (0x1UL)
#define CKF_HKDF_SALT_DATA                (0x2UL)
#define CKF_HKDF_SALT_KEY                 (0x4UL)
/* CK_HKDF_PARAMS (3.0 §6.65.2). */
typedef struct CK_HKDF_PARAMS {
    CK_BBOOL bExtract;
    CK_BBOOL bExpand;
    CK_MECHANISM_TYPE prfHashMechanism;
    CK_ULONG ulSaltType;
    CK_BYTE_PTR pSalt;
    CK_ULONG ulSaltLen;
    CK_OBJECT_HANDLE hSaltKey;
    CK_BYTE_PTR pInfo;
    CK_ULONG ulInfoLen;
} CK_HKDF_PARAMS;

#define CKM_SP800_108_COUNTER_KDF         (0x3ACUL)
#define CKM_SP800_108_FEEDBACK_KDF        (0x3ADUL)
#define CKM_SP800_108_DOUBLE_PIPELINE_KDF (0x3AEUL)
/* The kinds of CK_PRF_DATA_PARAM (3.0 §6.66.2) and the DKM length methods. */
#define CK_SP800_108_ITERATION_VARIABLE   (0x1UL)
#define CK_SP800_108_OPTIONAL_COUNTER     (0x2UL)
#define CK_SP800_108_DKM_LENGTH           (0x3UL)
#define CK_SP800_108_BYTE_ARRAY           (0x4UL)
#define CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS     (0x1UL)
#define CK_SP800_108_DKM_LENGTH_SUM_OF_SEGMENTS (0x2UL)
typedef struct CK_PRF_DATA_PARAM {
    CK_ULONG type;
    CK_VOID_PTR pValue;
    CK_ULONG ulValueLen;
} CK_PRF_DATA_PARAM;
typedef struct CK_SP800_108_COUNTER_FORMAT {
    CK_BBOOL bLittleEndian;
    CK_ULONG ulWidthInBits;
} CK_SP800_108_COUNTER_FORMAT;
typedef struct CK_SP800_108_DKM_LENGTH_FORMAT {
    CK_ULONG dkmLengthMethod;
    CK_BBOOL bLittleEndian;
    CK_ULONG ulWidthInBits;
} CK_SP800_108_DKM_LENGTH_FORMAT;
typedef struct CK_DERIVED_KEY {
    CK_ATTRIBUTE_PTR pTemplate;
    CK_ULONG ulAttributeCount;
    CK_OBJECT_HANDLE_PTR phKey;
} CK_DERIVED_KEY;
typedef struct CK_SP800_108_KDF_PARAMS {
    CK_MECHANISM_TYPE prfType;
    CK_ULONG ulNumberOfDataParams;
    CK_PRF_DATA_PARAM *pDataParams;
    CK_ULONG ulAdditionalDerivedKeys;
    CK_DERIVED_KEY *pAdditionalDerivedKeys;
} CK_SP800_108_KDF_PARAMS;
typedef struct CK_SP800_108_FEEDBACK_KDF_PARAMS {
    CK_MECHANISM_TYPE prfType;
    CK_ULONG ulNumberOfDataParams;
    CK_PRF_DATA_PARAM *pDataParams;
    CK_ULONG ulIVLen;
    CK_BYTE_PTR pIV;
    CK_ULONG ulAdditionalDerivedKeys;
    CK_DERIVED_KEY *pAdditionalDerivedKeys;
} CK_SP800_108_FEEDBACK_KDF_PARAMS;

/* CK_PKCS5_PBKD2_PARAMS2 (3.0 §6.44.3): as CK_PKCS5_PBKD2_PARAMS, with the password's length
 * itself instead of a pointer to it. */
typedef struct CK_PKCS5_PBKD2_PARAMS2 {
    CK_ULONG saltSource;
    CK_VOID_PTR pSaltSourceData;
    CK_ULONG ulSaltSourceDataLen;
    CK_ULONG iterations;
    CK_ULONG prf;
    CK_VOID_PTR pPrfData;
    CK_ULONG ulPrfDataLen;
    CK_UTF8CHAR_PTR pPassword;
    CK_ULONG ulPasswordLen;
} CK_PKCS5_PBKD2_PARAMS2;

/* CK_CCM_PARAMS and CK_RSA_AES_KEY_WRAP_PARAMS (2.40 specification; p11-kit 0.24's header has
 * their mechanisms but not their structures). */
typedef struct CK_CCM_PARAMS {
    CK_ULONG ulDataLen;
    CK_BYTE_PTR pNonce;
    CK_ULONG ulNonceLen;
    CK_BYTE_PTR pAAD;
    CK_ULONG ulAADLen;
    CK_ULONG ulMACLen;
} CK_CCM_PARAMS;
typedef struct CK_RSA_AES_KEY_WRAP_PARAMS {
    CK_ULONG ulAESKeyBits;
    CK_RSA_PKCS_OAEP_PARAMS_PTR pOAEPParams;
} CK_RSA_AES_KEY_WRAP_PARAMS;
#endif /* CKM_HKDF_DERIVE: PKCS#11 3.0 */

/* CK_GCM_PARAMS as the 2.40 specification's text gives it (no ulIvBits), which Java's
 * SunPKCS11 passes first; the header's CK_GCM_PARAMS has ulIvBits. */
typedef struct KC_GCM_PARAMS_WITHOUT_IV_BITS {
    CK_BYTE_PTR pIv;
    CK_ULONG ulIvLen;
    CK_BYTE_PTR pAAD;
    CK_ULONG ulAADLen;
    CK_ULONG ulTagBits;
} KC_GCM_PARAMS_WITHOUT_IV_BITS;

/* ---- PKCS#11 3.2 additions: ML-DSA, ML-KEM, key encapsulation -------------- */
/* Values from the PKCS#11 3.2 specification (OASIS, pkcs11t.h of 3.2). */

#ifndef CKK_ML_DSA
#define CKK_ML_KEM                        (0x49UL)
#define CKK_ML_DSA                        (0x4AUL)

#define CKA_PARAMETER_SET                 (0x61DUL) /* CK_ULONG: CKP_ML_DSA_* or CKP_ML_KEM_* */
#define CKA_ENCAPSULATE_TEMPLATE          (0x62AUL)
#define CKA_DECAPSULATE_TEMPLATE          (0x62BUL)
#define CKA_ENCAPSULATE                   (0x633UL) /* CK_BBOOL */
#define CKA_DECAPSULATE                   (0x634UL) /* CK_BBOOL */
#define CKA_SEED                          (0x637UL) /* bytes: ML-DSA ξ (32), ML-KEM d‖z (64) */

#define CKM_ML_KEM_KEY_PAIR_GEN           (0x0FUL)
#define CKM_ML_KEM                        (0x17UL)
#define CKM_ML_DSA_KEY_PAIR_GEN           (0x1CUL)
#define CKM_ML_DSA                        (0x1DUL)
#define CKM_HASH_ML_DSA                   (0x1FUL)

#define CKF_ENCAPSULATE                   (0x10000000UL)
#define CKF_DECAPSULATE                   (0x20000000UL)

#define CKR_PARAMETER_SET_NOT_SUPPORTED   (0x209UL)

typedef CK_ULONG CK_ML_DSA_PARAMETER_SET_TYPE;
#define CKP_ML_DSA_44                     (0x1UL)
#define CKP_ML_DSA_65                     (0x2UL)
#define CKP_ML_DSA_87                     (0x3UL)

typedef CK_ULONG CK_ML_KEM_PARAMETER_SET_TYPE;
#define CKP_ML_KEM_512                    (0x1UL)
#define CKP_ML_KEM_768                    (0x2UL)
#define CKP_ML_KEM_1024                   (0x3UL)

/* CKM_ML_DSA's optional parameter: hedged or deterministic signing, and a context. */
typedef CK_ULONG CK_HEDGE_TYPE;
#define CKH_HEDGE_PREFERRED               (0x0UL)
#define CKH_HEDGE_REQUIRED                (0x1UL)
#define CKH_DETERMINISTIC_REQUIRED        (0x2UL)

typedef struct CK_SIGN_ADDITIONAL_CONTEXT {
    CK_HEDGE_TYPE hedgeVariant;
    CK_BYTE_PTR pContext;
    CK_ULONG ulContextLen;
} CK_SIGN_ADDITIONAL_CONTEXT;
typedef CK_SIGN_ADDITIONAL_CONTEXT *CK_SIGN_ADDITIONAL_CONTEXT_PTR;
#endif

/* ---- PKCS#11 3.2 interface: the 3.2 function list and its new functions ------ */
/* Prototypes and structures as the PKCS#11 3.2 specification gives them (CK_FUNCTION_LIST_3_2 and
 * CK_ASYNC_DATA among its function types; §5.6 C_GetSessionValidationFlags, §5.15
 * C_VerifySignature*, §5.18 C_EncapsulateKey/C_DecapsulateKey and C_WrapKeyAuthenticated, the
 * asynchronous function management functions). A system header that already knows PKCS#11 3.2
 * (it defines CKS_LAST_VALIDATION_OK) provides them itself. */

#ifndef CKS_LAST_VALIDATION_OK

/* C_GetSessionValidationFlags: which flags of the session to read. */
typedef CK_ULONG CK_SESSION_VALIDATION_FLAGS_TYPE;
#define CKS_LAST_VALIDATION_OK            (0x1UL)

/* The result of an asynchronous operation (C_AsyncComplete). */
typedef struct CK_ASYNC_DATA {
    CK_ULONG ulVersion;
    CK_BYTE_PTR pValue;
    CK_ULONG ulValue;
    CK_OBJECT_HANDLE hObject;
    CK_OBJECT_HANDLE hAdditionalObject;
} CK_ASYNC_DATA;
typedef CK_ASYNC_DATA *CK_ASYNC_DATA_PTR;

#define KC_DECLARE_3_2(name, args)                 \
    typedef CK_RV (*CK_##name) args;               \
    CK_RV name args

KC_DECLARE_3_2(C_EncapsulateKey, (CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                  CK_OBJECT_HANDLE hPublicKey, CK_ATTRIBUTE_PTR pTemplate,
                                  CK_ULONG ulAttributeCount, CK_BYTE_PTR pCiphertext,
                                  CK_ULONG_PTR pulCiphertextLen, CK_OBJECT_HANDLE_PTR phKey));
KC_DECLARE_3_2(C_DecapsulateKey, (CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                  CK_OBJECT_HANDLE hPrivateKey, CK_ATTRIBUTE_PTR pTemplate,
                                  CK_ULONG ulAttributeCount, CK_BYTE_PTR pCiphertext,
                                  CK_ULONG ulCiphertextLen, CK_OBJECT_HANDLE_PTR phKey));
/* Verification with the signature given first, at C_VerifySignatureInit. */
KC_DECLARE_3_2(C_VerifySignatureInit, (CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                       CK_OBJECT_HANDLE hKey, CK_BYTE_PTR pSignature,
                                       CK_ULONG ulSignatureLen));
KC_DECLARE_3_2(C_VerifySignature, (CK_SESSION_HANDLE hSession, CK_BYTE_PTR pData, CK_ULONG ulDataLen));
KC_DECLARE_3_2(C_VerifySignatureUpdate, (CK_SESSION_HANDLE hSession, CK_BYTE_PTR pPart, CK_ULONG ulPartLen));
KC_DECLARE_3_2(C_VerifySignatureFinal, (CK_SESSION_HANDLE hSession));
KC_DECLARE_3_2(C_GetSessionValidationFlags, (CK_SESSION_HANDLE hSession,
                                             CK_SESSION_VALIDATION_FLAGS_TYPE type, CK_FLAGS *pFlags));

/* Asynchronous operations and authenticated key wrapping: present in the 3.2 list (answering
 * CKR_FUNCTION_NOT_SUPPORTED), not exported by name. */
typedef CK_RV (*CK_C_AsyncComplete)(CK_SESSION_HANDLE, CK_UTF8CHAR_PTR, CK_ASYNC_DATA_PTR);
typedef CK_RV (*CK_C_AsyncGetID)(CK_SESSION_HANDLE, CK_UTF8CHAR_PTR, CK_ULONG_PTR);
typedef CK_RV (*CK_C_AsyncJoin)(CK_SESSION_HANDLE, CK_UTF8CHAR_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG);
typedef CK_RV (*CK_C_WrapKeyAuthenticated)(CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_OBJECT_HANDLE,
                                           CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);
typedef CK_RV (*CK_C_UnwrapKeyAuthenticated)(CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_BYTE_PTR,
                                             CK_ULONG, CK_ATTRIBUTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG,
                                             CK_OBJECT_HANDLE_PTR);

/* The 3.2 function list: the 3.0 entries in their order, then the 3.2 ones. */
typedef struct CK_FUNCTION_LIST_3_2 {
    CK_VERSION version;
    CK_C_Initialize C_Initialize;
    CK_C_Finalize C_Finalize;
    CK_C_GetInfo C_GetInfo;
    CK_C_GetFunctionList C_GetFunctionList;
    CK_C_GetSlotList C_GetSlotList;
    CK_C_GetSlotInfo C_GetSlotInfo;
    CK_C_GetTokenInfo C_GetTokenInfo;
    CK_C_GetMechanismList C_GetMechanismList;
    CK_C_GetMechanismInfo C_GetMechanismInfo;
    CK_C_InitToken C_InitToken;
    CK_C_InitPIN C_InitPIN;
    CK_C_SetPIN C_SetPIN;
    CK_C_OpenSession C_OpenSession;
    CK_C_CloseSession C_CloseSession;
    CK_C_CloseAllSessions C_CloseAllSessions;
    CK_C_GetSessionInfo C_GetSessionInfo;
    CK_C_GetOperationState C_GetOperationState;
    CK_C_SetOperationState C_SetOperationState;
    CK_C_Login C_Login;
    CK_C_Logout C_Logout;
    CK_C_CreateObject C_CreateObject;
    CK_C_CopyObject C_CopyObject;
    CK_C_DestroyObject C_DestroyObject;
    CK_C_GetObjectSize C_GetObjectSize;
    CK_C_GetAttributeValue C_GetAttributeValue;
    CK_C_SetAttributeValue C_SetAttributeValue;
    CK_C_FindObjectsInit C_FindObjectsInit;
    CK_C_FindObjects C_FindObjects;
    CK_C_FindObjectsFinal C_FindObjectsFinal;
    CK_C_EncryptInit C_EncryptInit;
    CK_C_Encrypt C_Encrypt;
    CK_C_EncryptUpdate C_EncryptUpdate;
    CK_C_EncryptFinal C_EncryptFinal;
    CK_C_DecryptInit C_DecryptInit;
    CK_C_Decrypt C_Decrypt;
    CK_C_DecryptUpdate C_DecryptUpdate;
    CK_C_DecryptFinal C_DecryptFinal;
    CK_C_DigestInit C_DigestInit;
    CK_C_Digest C_Digest;
    CK_C_DigestUpdate C_DigestUpdate;
    CK_C_DigestKey C_DigestKey;
    CK_C_DigestFinal C_DigestFinal;
    CK_C_SignInit C_SignInit;
    CK_C_Sign C_Sign;
    CK_C_SignUpdate C_SignUpdate;
    CK_C_SignFinal C_SignFinal;
    CK_C_SignRecoverInit C_SignRecoverInit;
    CK_C_SignRecover C_SignRecover;
    CK_C_VerifyInit C_VerifyInit;
    CK_C_Verify C_Verify;
    CK_C_VerifyUpdate C_VerifyUpdate;
    CK_C_VerifyFinal C_VerifyFinal;
    CK_C_VerifyRecoverInit C_VerifyRecoverInit;
    CK_C_VerifyRecover C_VerifyRecover;
    CK_C_DigestEncryptUpdate C_DigestEncryptUpdate;
    CK_C_DecryptDigestUpdate C_DecryptDigestUpdate;
    CK_C_SignEncryptUpdate C_SignEncryptUpdate;
    CK_C_DecryptVerifyUpdate C_DecryptVerifyUpdate;
    CK_C_GenerateKey C_GenerateKey;
    CK_C_GenerateKeyPair C_GenerateKeyPair;
    CK_C_WrapKey C_WrapKey;
    CK_C_UnwrapKey C_UnwrapKey;
    CK_C_DeriveKey C_DeriveKey;
    CK_C_SeedRandom C_SeedRandom;
    CK_C_GenerateRandom C_GenerateRandom;
    CK_C_GetFunctionStatus C_GetFunctionStatus;
    CK_C_CancelFunction C_CancelFunction;
    CK_C_WaitForSlotEvent C_WaitForSlotEvent;
    CK_C_GetInterfaceList C_GetInterfaceList;
    CK_C_GetInterface C_GetInterface;
    CK_C_LoginUser C_LoginUser;
    CK_C_SessionCancel C_SessionCancel;
    CK_C_MessageEncryptInit C_MessageEncryptInit;
    CK_C_EncryptMessage C_EncryptMessage;
    CK_C_EncryptMessageBegin C_EncryptMessageBegin;
    CK_C_EncryptMessageNext C_EncryptMessageNext;
    CK_C_MessageEncryptFinal C_MessageEncryptFinal;
    CK_C_MessageDecryptInit C_MessageDecryptInit;
    CK_C_DecryptMessage C_DecryptMessage;
    CK_C_DecryptMessageBegin C_DecryptMessageBegin;
    CK_C_DecryptMessageNext C_DecryptMessageNext;
    CK_C_MessageDecryptFinal C_MessageDecryptFinal;
    CK_C_MessageSignInit C_MessageSignInit;
    CK_C_SignMessage C_SignMessage;
    CK_C_SignMessageBegin C_SignMessageBegin;
    CK_C_SignMessageNext C_SignMessageNext;
    CK_C_MessageSignFinal C_MessageSignFinal;
    CK_C_MessageVerifyInit C_MessageVerifyInit;
    CK_C_VerifyMessage C_VerifyMessage;
    CK_C_VerifyMessageBegin C_VerifyMessageBegin;
    CK_C_VerifyMessageNext C_VerifyMessageNext;
    CK_C_MessageVerifyFinal C_MessageVerifyFinal;
    CK_C_EncapsulateKey C_EncapsulateKey;
    CK_C_DecapsulateKey C_DecapsulateKey;
    CK_C_VerifySignatureInit C_VerifySignatureInit;
    CK_C_VerifySignature C_VerifySignature;
    CK_C_VerifySignatureUpdate C_VerifySignatureUpdate;
    CK_C_VerifySignatureFinal C_VerifySignatureFinal;
    CK_C_GetSessionValidationFlags C_GetSessionValidationFlags;
    CK_C_AsyncComplete C_AsyncComplete;
    CK_C_AsyncGetID C_AsyncGetID;
    CK_C_AsyncJoin C_AsyncJoin;
    CK_C_WrapKeyAuthenticated C_WrapKeyAuthenticated;
    CK_C_UnwrapKeyAuthenticated C_UnwrapKeyAuthenticated;
} CK_FUNCTION_LIST_3_2;
typedef CK_FUNCTION_LIST_3_2 *CK_FUNCTION_LIST_3_2_PTR;
typedef CK_FUNCTION_LIST_3_2_PTR *CK_FUNCTION_LIST_3_2_PTR_PTR;

#undef KC_DECLARE_3_2
#endif /* CKS_LAST_VALIDATION_OK: PKCS#11 3.2 */

/* ---- Vendor constants ------------------------------------------------------ */

/* Base of the module's vendor attributes and object classes ("KC"). */
#define CKA_KC_VENDOR_BASE            (CKA_VENDOR_DEFINED | 0x4B430000UL)
#define CKO_KC_VENDOR_BASE            (CKO_VENDOR_DEFINED | 0x4B430000UL)

/* CK_ULONG, read-only: creation time of a token object, seconds since 1970 (UTC). */
#define CKA_KC_CREATION_TIME          (CKA_KC_VENDOR_BASE + 0x02UL)
/* CK_ULONG, read-only: last modification time of a token object, seconds since 1970 (UTC). */
#define CKA_KC_MODIFICATION_TIME      (CKA_KC_VENDOR_BASE + 0x03UL)

/* Keychain items (generic and internet passwords) are CKO_DATA objects with these attributes;
 * CKA_APPLICATION holds the service (generic) or server (internet), CKA_VALUE the secret,
 * CKA_LABEL the label. Absent and empty are equal. See Docs/keychain-api.md. */
#define CKA_KC_ITEM_CLASS             (CKA_KC_VENDOR_BASE + 0x10UL) /* CK_ULONG: 1 generic, 2 internet password */
#define CKA_KC_ACCOUNT                (CKA_KC_VENDOR_BASE + 0x11UL) /* UTF-8: kSecAttrAccount */
#define CKA_KC_GENERIC                (CKA_KC_VENDOR_BASE + 0x12UL) /* bytes: kSecAttrGeneric */
#define CKA_KC_COMMENT                (CKA_KC_VENDOR_BASE + 0x13UL) /* UTF-8: kSecAttrComment */
#define CKA_KC_DESCRIPTION            (CKA_KC_VENDOR_BASE + 0x14UL) /* UTF-8: kSecAttrDescription */
#define CKA_KC_CREATOR                (CKA_KC_VENDOR_BASE + 0x15UL) /* CK_ULONG four-character code */
#define CKA_KC_TYPE                   (CKA_KC_VENDOR_BASE + 0x16UL) /* CK_ULONG four-character code */
#define CKA_KC_ACCESS_GROUP           (CKA_KC_VENDOR_BASE + 0x17UL) /* UTF-8: kSecAttrAccessGroup */
#define CKA_KC_SYNCHRONIZABLE         (CKA_KC_VENDOR_BASE + 0x18UL) /* CK_BBOOL */
#define CKA_KC_ACCESSIBLE             (CKA_KC_VENDOR_BASE + 0x19UL) /* CK_ULONG: 1 WhenUnlocked … 7 AlwaysThisDeviceOnly */
#define CKA_KC_SECURITY_DOMAIN        (CKA_KC_VENDOR_BASE + 0x1AUL) /* UTF-8 */
#define CKA_KC_PROTOCOL               (CKA_KC_VENDOR_BASE + 0x1BUL) /* CK_ULONG four-character code ("http") */
#define CKA_KC_PORT                   (CKA_KC_VENDOR_BASE + 0x1CUL) /* CK_ULONG */
#define CKA_KC_PATH                   (CKA_KC_VENDOR_BASE + 0x1DUL) /* UTF-8 */
#define CKA_KC_AUTHENTICATION_TYPE    (CKA_KC_VENDOR_BASE + 0x1EUL) /* CK_ULONG four-character code */
#define CKA_KC_IS_INVISIBLE           (CKA_KC_VENDOR_BASE + 0x1FUL) /* CK_BBOOL */
#define CKA_KC_IS_NEGATIVE            (CKA_KC_VENDOR_BASE + 0x20UL) /* CK_BBOOL */
/* On keys: kSecAttrApplicationTag (bytes). Keys and certificates also carry CKA_KC_ITEM_CLASS
 * (3 key, 4 certificate when added through SecItem), ACCESS_GROUP, SYNCHRONIZABLE, ACCESSIBLE
 * and CREATOR. */
#define CKA_KC_APPLICATION_TAG        (CKA_KC_VENDOR_BASE + 0x21UL)
/* Per-item access control (Docs/security.md): kSecAttrAccessControl flags (Apple's bits), set
 * at creation; a write-only application password sealing the item's secret (token data objects,
 * and private keys with CKA_ALWAYS_AUTHENTICATE, whose context-specific PIN it then is); and the
 * credential object that presents a password item's credential in one session. */
#define CKA_KC_ACCESS_CONTROL         (CKA_KC_VENDOR_BASE + 0x22UL) /* CK_ULONG */
#define CKA_KC_APPLICATION_PASSWORD   (CKA_KC_VENDOR_BASE + 0x25UL) /* bytes, write-only */
#define CKA_KC_CREDENTIAL_OBJECT      (CKA_KC_VENDOR_BASE + 0x26UL) /* CK_OBJECT_HANDLE */
#define CKO_KC_CREDENTIAL             (CKO_KC_VENDOR_BASE + 0x01UL)
/* The freedesktop Secret Service's view of a password (data objects): its lookup attributes
 * (name/value strings, sorted by name, each as a 4-byte big-endian length and its UTF-8 bytes;
 * one blind-index entry per pair, and a search template's value matches every object holding all
 * its pairs), and the MIME type of its secret. */
#define CKA_KC_LOOKUP_ATTRIBUTES      (CKA_KC_VENDOR_BASE + 0x29UL) /* bytes */
#define CKA_KC_CONTENT_TYPE           (CKA_KC_VENDOR_BASE + 0x2AUL) /* UTF-8 */
/* On private keys: the key was made inside this machine's TPM 2.0 and never leaves it (the
 * keychain keeps only the TPM's wrapped blob, usable with that TPM and the unlocked keychain).
 * CK_BBOOL, default CK_FALSE. CK_TRUE is accepted only in the private-key template of
 * C_GenerateKeyPair (EC P-256, P-384, RSA-2048 where the TPM offers them); there is no TPM, or
 * it cannot make the key: CKR_ATTRIBUTE_VALUE_INVALID. In any other creation template, CK_TRUE is
 * CKR_ATTRIBUTE_VALUE_INVALID; C_SetAttributeValue is CKR_ATTRIBUTE_READ_ONLY. Such keys sign
 * (CKM_ECDSA, CKM_ECDSA_SHA*, CKM_RSA_PKCS, CKM_SHA*_RSA_PKCS) and derive (CKM_ECDH1_DERIVE) in
 * the TPM only; see Docs/vendor-constants.md. */
#define CKA_KC_TPM                    (CKA_KC_VENDOR_BASE + 0x2CUL) /* CK_BBOOL */

/* ---- Cast macros re-exported as constants (Swift does not import casts) ---- */

static const CK_ULONG KC_UNAVAILABLE_INFORMATION = CK_UNAVAILABLE_INFORMATION;
static const CK_ULONG KC_EFFECTIVELY_INFINITE = CK_EFFECTIVELY_INFINITE;
static const CK_ULONG KC_VENDOR_DEFINED = CKA_VENDOR_DEFINED;
static const CK_ULONG KC_VENDOR_ATTRIBUTE_BASE = CKA_KC_VENDOR_BASE;
static const CK_ULONG KC_VENDOR_CLASS_BASE = CKO_KC_VENDOR_BASE;

#ifdef __cplusplus
}
#endif

#endif /* KEYCHAIN_PKCS11_H */
