"""A small PKCS#11 client over ctypes, for the modern-mechanism conformance tests.

Linux x86-64 ABI: CK_ULONG is 8 bytes (unsigned long), CK_BBOOL and CK_BYTE are 1 byte, and the
structures have natural C alignment (no packing), as in the OASIS headers on this platform.
Every failing call raises CKRError carrying the exact CK_RV, so tests can assert it.

The mechanism-parameter helpers return a Mechanism that owns its ctypes structure and every
buffer the structure points to, so nothing is freed while the module may read it.
"""
import ctypes
from ctypes import (POINTER, Structure, byref, c_char, c_ubyte, c_ulong, c_void_p, cast,
                    create_string_buffer, sizeof)

CK_ULONG = c_ulong
CK_BBOOL = c_ubyte
CK_RV = c_ulong
CK_ULONG_MAX = (1 << 64) - 1
CK_UNAVAILABLE_INFORMATION = CK_ULONG_MAX

# --- return values -------------------------------------------------------------------------
CKR = {
    0x00: "CKR_OK", 0x05: "CKR_GENERAL_ERROR", 0x06: "CKR_FUNCTION_FAILED", 0x07: "CKR_ARGUMENTS_BAD",
    0x10: "CKR_ATTRIBUTE_READ_ONLY", 0x11: "CKR_ATTRIBUTE_SENSITIVE", 0x12: "CKR_ATTRIBUTE_TYPE_INVALID",
    0x13: "CKR_ATTRIBUTE_VALUE_INVALID", 0x1B: "CKR_ACTION_PROHIBITED",
    0x20: "CKR_DATA_INVALID", 0x21: "CKR_DATA_LEN_RANGE", 0x30: "CKR_DEVICE_ERROR",
    0x40: "CKR_ENCRYPTED_DATA_INVALID", 0x41: "CKR_ENCRYPTED_DATA_LEN_RANGE",
    0x35: "CKR_AEAD_DECRYPT_FAILED", 0x54: "CKR_FUNCTION_NOT_SUPPORTED",
    0x60: "CKR_KEY_HANDLE_INVALID", 0x62: "CKR_KEY_SIZE_RANGE", 0x63: "CKR_KEY_TYPE_INCONSISTENT",
    0x64: "CKR_KEY_NOT_NEEDED", 0x65: "CKR_KEY_CHANGED", 0x66: "CKR_KEY_NEEDED", 0x67: "CKR_KEY_INDIGESTIBLE",
    0x68: "CKR_KEY_FUNCTION_NOT_PERMITTED", 0x69: "CKR_KEY_NOT_WRAPPABLE", 0x6A: "CKR_KEY_UNEXTRACTABLE",
    0x70: "CKR_MECHANISM_INVALID", 0x71: "CKR_MECHANISM_PARAM_INVALID",
    0x82: "CKR_OBJECT_HANDLE_INVALID", 0x90: "CKR_OPERATION_ACTIVE", 0x91: "CKR_OPERATION_NOT_INITIALIZED",
    0xA0: "CKR_PIN_INCORRECT", 0xB0: "CKR_SESSION_CLOSED", 0xB3: "CKR_SESSION_HANDLE_INVALID",
    0xC0: "CKR_SIGNATURE_INVALID", 0xC1: "CKR_SIGNATURE_LEN_RANGE",
    0xD0: "CKR_TEMPLATE_INCOMPLETE", 0xD1: "CKR_TEMPLATE_INCONSISTENT",
    0xF0: "CKR_UNWRAPPING_KEY_HANDLE_INVALID", 0xF1: "CKR_UNWRAPPING_KEY_SIZE_RANGE",
    0xF2: "CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT", 0x100: "CKR_USER_ALREADY_LOGGED_IN",
    0x101: "CKR_USER_NOT_LOGGED_IN", 0x110: "CKR_WRAPPED_KEY_INVALID", 0x112: "CKR_WRAPPED_KEY_LEN_RANGE",
    0x113: "CKR_WRAPPING_KEY_HANDLE_INVALID", 0x114: "CKR_WRAPPING_KEY_SIZE_RANGE",
    0x115: "CKR_WRAPPING_KEY_TYPE_INCONSISTENT", 0x130: "CKR_DOMAIN_PARAMS_INVALID",
    0x140: "CKR_CURVE_NOT_SUPPORTED", 0x150: "CKR_BUFFER_TOO_SMALL", 0x190: "CKR_CRYPTOKI_NOT_INITIALIZED",
    0x191: "CKR_CRYPTOKI_ALREADY_INITIALIZED", 0x1B0: "CKR_PUBLIC_KEY_INVALID",
    0x201: "CKR_TOKEN_RESOURCE_EXCEEDED",
}
globals().update({name: value for value, name in CKR.items()})


def rv_name(rv):
    return "%s (0x%X)" % (CKR.get(rv, "CKR_?"), rv)


class CKRError(Exception):
    """A PKCS#11 call returned something other than CKR_OK; `rv` is the exact CK_RV."""

    def __init__(self, rv, function=""):
        self.rv = rv
        self.function = function
        super().__init__("%s returned %s" % (function, rv_name(rv)))


# --- constants -----------------------------------------------------------------------------
CKU_SO, CKU_USER = 0, 1
CKF_RW_SESSION, CKF_SERIAL_SESSION = 0x2, 0x4
CKF_TOKEN_PRESENT = 0x1

CKO_DATA, CKO_CERTIFICATE, CKO_PUBLIC_KEY, CKO_PRIVATE_KEY, CKO_SECRET_KEY = 0, 1, 2, 3, 4

CKK_RSA, CKK_EC = 0x0, 0x3
CKK_GENERIC_SECRET, CKK_DES3, CKK_AES = 0x10, 0x15, 0x1F
CKK_SHA256_HMAC, CKK_CHACHA20, CKK_AES_XTS = 0x2B, 0x33, 0x35
CKK_EC_EDWARDS, CKK_EC_MONTGOMERY, CKK_HKDF = 0x40, 0x41, 0x42

CKA_CLASS, CKA_TOKEN, CKA_PRIVATE, CKA_LABEL, CKA_APPLICATION, CKA_VALUE = 0x0, 0x1, 0x2, 0x3, 0x10, 0x11
CKA_KEY_TYPE, CKA_ID, CKA_SENSITIVE = 0x100, 0x102, 0x103
CKA_ENCRYPT, CKA_DECRYPT, CKA_WRAP, CKA_UNWRAP = 0x104, 0x105, 0x106, 0x107
CKA_SIGN, CKA_SIGN_RECOVER, CKA_VERIFY, CKA_VERIFY_RECOVER, CKA_DERIVE = 0x108, 0x109, 0x10A, 0x10B, 0x10C
CKA_MODULUS, CKA_MODULUS_BITS, CKA_PUBLIC_EXPONENT, CKA_PRIVATE_EXPONENT = 0x120, 0x121, 0x122, 0x123
CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT = 0x124, 0x125, 0x126, 0x127, 0x128
CKA_VALUE_LEN, CKA_EXTRACTABLE, CKA_LOCAL = 0x161, 0x162, 0x163
CKA_NEVER_EXTRACTABLE, CKA_ALWAYS_SENSITIVE, CKA_KEY_GEN_MECHANISM = 0x164, 0x165, 0x166
CKA_MODIFIABLE = 0x170
CKA_EC_PARAMS, CKA_EC_POINT = 0x180, 0x181

CKF_HW = 0x1
CKF_MESSAGE_ENCRYPT, CKF_MESSAGE_DECRYPT, CKF_MESSAGE_SIGN, CKF_MESSAGE_VERIFY = 0x2, 0x4, 0x8, 0x10
CKF_MULTI_MESSAGE, CKF_FIND_OBJECTS = 0x20, 0x40
CKF_ENCRYPT, CKF_DECRYPT, CKF_DIGEST, CKF_SIGN = 0x100, 0x200, 0x400, 0x800
CKF_SIGN_RECOVER, CKF_VERIFY, CKF_VERIFY_RECOVER = 0x1000, 0x2000, 0x4000
CKF_GENERATE, CKF_GENERATE_KEY_PAIR, CKF_WRAP, CKF_UNWRAP, CKF_DERIVE = 0x8000, 0x10000, 0x20000, 0x40000, 0x80000
CKF_EC_F_P, CKF_EC_F_2M, CKF_EC_ECPARAMETERS, CKF_EC_OID = 0x100000, 0x200000, 0x400000, 0x800000
CKF_EC_UNCOMPRESS, CKF_EC_COMPRESS, CKF_EC_CURVENAME = 0x1000000, 0x2000000, 0x4000000
CKF_ENCAPSULATE, CKF_DECAPSULATE = 0x10000000, 0x20000000
CKF_EXTENSION = 0x80000000
FLAG_NAMES = {v: k for k, v in globals().items() if k.startswith("CKF_") and isinstance(v, int)
              and k not in ("CKF_RW_SESSION", "CKF_SERIAL_SESSION", "CKF_TOKEN_PRESENT")}


def flag_names(flags):
    names = [name for bit, name in sorted(FLAG_NAMES.items()) if flags & bit]
    rest = flags & ~sum(FLAG_NAMES)
    return "|".join(names + (["0x%X" % rest] if rest else [])) or "0"


# Mechanisms (PKCS#11 3.0/3.1 values).
CKM_RSA_PKCS_KEY_PAIR_GEN, CKM_RSA_PKCS, CKM_RSA_X_509 = 0x0, 0x1, 0x3
CKM_RSA_PKCS_OAEP, CKM_RSA_PKCS_PSS = 0x9, 0xD
CKM_SHA256_RSA_PKCS_PSS = 0x43
CKM_SHA3_256_RSA_PKCS, CKM_SHA3_384_RSA_PKCS, CKM_SHA3_512_RSA_PKCS = 0x60, 0x61, 0x62
CKM_SHA3_256_RSA_PKCS_PSS, CKM_SHA3_384_RSA_PKCS_PSS, CKM_SHA3_512_RSA_PKCS_PSS = 0x63, 0x64, 0x65
CKM_SHA3_224_RSA_PKCS, CKM_SHA3_224_RSA_PKCS_PSS = 0x66, 0x67
CKM_ML_KEM_KEY_PAIR_GEN, CKM_ML_KEM, CKM_ML_DSA_KEY_PAIR_GEN, CKM_ML_DSA = 0xF, 0x17, 0x1C, 0x1D
CKM_SHA_1, CKM_SHA_1_HMAC, CKM_SHA_1_HMAC_GENERAL = 0x220, 0x221, 0x222
CKM_SHA256, CKM_SHA256_HMAC, CKM_SHA256_HMAC_GENERAL = 0x250, 0x251, 0x252
CKM_SHA224, CKM_SHA224_HMAC, CKM_SHA224_HMAC_GENERAL = 0x255, 0x256, 0x257
CKM_SHA384, CKM_SHA384_HMAC, CKM_SHA384_HMAC_GENERAL = 0x260, 0x261, 0x262
CKM_SHA512, CKM_SHA512_HMAC, CKM_SHA512_HMAC_GENERAL = 0x270, 0x271, 0x272
CKM_SHA3_256, CKM_SHA3_256_HMAC, CKM_SHA3_256_HMAC_GENERAL = 0x2B0, 0x2B1, 0x2B2
CKM_SHA3_224, CKM_SHA3_224_HMAC, CKM_SHA3_224_HMAC_GENERAL = 0x2B5, 0x2B6, 0x2B7
CKM_SHA3_384, CKM_SHA3_384_HMAC, CKM_SHA3_384_HMAC_GENERAL = 0x2C0, 0x2C1, 0x2C2
CKM_SHA3_512, CKM_SHA3_512_HMAC, CKM_SHA3_512_HMAC_GENERAL = 0x2D0, 0x2D1, 0x2D2
CKM_GENERIC_SECRET_KEY_GEN = 0x350
CKM_SP800_108_COUNTER_KDF, CKM_SP800_108_FEEDBACK_KDF, CKM_SP800_108_DOUBLE_PIPELINE_KDF = 0x3AC, 0x3AD, 0x3AE
CKM_PKCS5_PBKD2 = 0x3B0
CKM_EC_KEY_PAIR_GEN, CKM_ECDSA = 0x1040, 0x1041
CKM_ECDSA_SHA256 = 0x1044
CKM_ECDSA_SHA3_224, CKM_ECDSA_SHA3_256, CKM_ECDSA_SHA3_384, CKM_ECDSA_SHA3_512 = 0x1047, 0x1048, 0x1049, 0x104A
CKM_ECDH1_DERIVE, CKM_ECDH1_COFACTOR_DERIVE = 0x1050, 0x1051
CKM_RSA_AES_KEY_WRAP = 0x1054
CKM_EC_EDWARDS_KEY_PAIR_GEN, CKM_EC_MONTGOMERY_KEY_PAIR_GEN, CKM_EDDSA = 0x1055, 0x1056, 0x1057
CKM_AES_XTS, CKM_AES_XTS_KEY_GEN = 0x1071, 0x1072
CKM_AES_KEY_GEN, CKM_AES_ECB, CKM_AES_CBC, CKM_AES_MAC, CKM_AES_MAC_GENERAL = 0x1080, 0x1081, 0x1082, 0x1083, 0x1084
CKM_AES_CBC_PAD, CKM_AES_CTR, CKM_AES_GCM, CKM_AES_CCM, CKM_AES_CTS = 0x1085, 0x1086, 0x1087, 0x1088, 0x1089
CKM_AES_CMAC, CKM_AES_CMAC_GENERAL = 0x108A, 0x108B
CKM_CHACHA20_KEY_GEN, CKM_CHACHA20 = 0x1225, 0x1226
CKM_AES_OFB, CKM_AES_CFB64, CKM_AES_CFB8, CKM_AES_CFB128 = 0x2104, 0x2105, 0x2106, 0x2107
CKM_AES_KEY_WRAP, CKM_AES_KEY_WRAP_PAD = 0x2109, 0x210A
CKM_CHACHA20_POLY1305 = 0x4021
CKM_HKDF_DERIVE, CKM_HKDF_DATA, CKM_HKDF_KEY_GEN = 0x402A, 0x402B, 0x402C

CKG_MGF1_SHA1, CKG_MGF1_SHA256, CKG_MGF1_SHA384, CKG_MGF1_SHA512, CKG_MGF1_SHA224 = 1, 2, 3, 4, 5
CKG_MGF1_SHA3_224, CKG_MGF1_SHA3_256, CKG_MGF1_SHA3_384, CKG_MGF1_SHA3_512 = 6, 7, 8, 9
CKZ_DATA_SPECIFIED = 1
CKZ_SALT_SPECIFIED = 1
CKP_PKCS5_PBKD2_HMAC_SHA1, CKP_PKCS5_PBKD2_HMAC_SHA224 = 1, 3
CKP_PKCS5_PBKD2_HMAC_SHA256, CKP_PKCS5_PBKD2_HMAC_SHA384, CKP_PKCS5_PBKD2_HMAC_SHA512 = 4, 5, 6
CKD_NULL, CKD_SHA1_KDF, CKD_SHA224_KDF, CKD_SHA256_KDF, CKD_SHA384_KDF, CKD_SHA512_KDF = 1, 2, 5, 6, 7, 8
CKD_SHA3_224_KDF, CKD_SHA3_256_KDF, CKD_SHA3_384_KDF, CKD_SHA3_512_KDF = 0xA, 0xB, 0xC, 0xD
CKF_HKDF_SALT_NULL, CKF_HKDF_SALT_DATA, CKF_HKDF_SALT_KEY = 1, 2, 4
CK_SP800_108_ITERATION_VARIABLE, CK_SP800_108_OPTIONAL_COUNTER = 1, 2
CK_SP800_108_DKM_LENGTH, CK_SP800_108_BYTE_ARRAY = 3, 4
CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS, CK_SP800_108_DKM_LENGTH_SUM_OF_SEGMENTS = 1, 2

# --- structures ----------------------------------------------------------------------------
class CK_VERSION(Structure):
    _fields_ = [("major", c_ubyte), ("minor", c_ubyte)]


class CK_MECHANISM(Structure):
    _fields_ = [("mechanism", CK_ULONG), ("pParameter", c_void_p), ("ulParameterLen", CK_ULONG)]


class CK_MECHANISM_INFO(Structure):
    _fields_ = [("ulMinKeySize", CK_ULONG), ("ulMaxKeySize", CK_ULONG), ("flags", CK_ULONG)]


class CK_ATTRIBUTE(Structure):
    _fields_ = [("type", CK_ULONG), ("pValue", c_void_p), ("ulValueLen", CK_ULONG)]


class CK_GCM_PARAMS(Structure):
    _fields_ = [("pIv", c_void_p), ("ulIvLen", CK_ULONG), ("ulIvBits", CK_ULONG), ("pAAD", c_void_p),
                ("ulAADLen", CK_ULONG), ("ulTagBits", CK_ULONG)]


class CK_CCM_PARAMS(Structure):
    _fields_ = [("ulDataLen", CK_ULONG), ("pNonce", c_void_p), ("ulNonceLen", CK_ULONG), ("pAAD", c_void_p),
                ("ulAADLen", CK_ULONG), ("ulMACLen", CK_ULONG)]


class CK_CHACHA20_PARAMS(Structure):
    _fields_ = [("pBlockCounter", c_void_p), ("blockCounterBits", CK_ULONG), ("pNonce", c_void_p),
                ("ulNonceBits", CK_ULONG)]


class CK_SALSA20_CHACHA20_POLY1305_PARAMS(Structure):
    _fields_ = [("pNonce", c_void_p), ("ulNonceLen", CK_ULONG), ("pAAD", c_void_p), ("ulAADLen", CK_ULONG)]


class CK_RSA_PKCS_PSS_PARAMS(Structure):
    _fields_ = [("hashAlg", CK_ULONG), ("mgf", CK_ULONG), ("sLen", CK_ULONG)]


class CK_RSA_PKCS_OAEP_PARAMS(Structure):
    _fields_ = [("hashAlg", CK_ULONG), ("mgf", CK_ULONG), ("source", CK_ULONG), ("pSourceData", c_void_p),
                ("ulSourceDataLen", CK_ULONG)]


class CK_RSA_AES_KEY_WRAP_PARAMS(Structure):
    _fields_ = [("ulAESKeyBits", CK_ULONG), ("pOAEPParams", c_void_p)]


class CK_EDDSA_PARAMS(Structure):
    _fields_ = [("phFlag", CK_BBOOL), ("ulContextDataLen", CK_ULONG), ("pContextData", c_void_p)]


class CK_ECDH1_DERIVE_PARAMS(Structure):
    _fields_ = [("kdf", CK_ULONG), ("ulSharedDataLen", CK_ULONG), ("pSharedData", c_void_p),
                ("ulPublicDataLen", CK_ULONG), ("pPublicData", c_void_p)]


class CK_HKDF_PARAMS(Structure):
    _fields_ = [("bExtract", CK_BBOOL), ("bExpand", CK_BBOOL), ("prfHashMechanism", CK_ULONG),
                ("ulSaltType", CK_ULONG), ("pSalt", c_void_p), ("ulSaltLen", CK_ULONG), ("hSaltKey", CK_ULONG),
                ("pInfo", c_void_p), ("ulInfoLen", CK_ULONG)]


class CK_PKCS5_PBKD2_PARAMS2(Structure):
    _fields_ = [("saltSource", CK_ULONG), ("pSaltSourceData", c_void_p), ("ulSaltSourceDataLen", CK_ULONG),
                ("iterations", CK_ULONG), ("prf", CK_ULONG), ("pPrfData", c_void_p), ("ulPrfDataLen", CK_ULONG),
                ("pPassword", c_void_p), ("ulPasswordLen", CK_ULONG)]


class CK_PRF_DATA_PARAM(Structure):
    _fields_ = [("type", CK_ULONG), ("pValue", c_void_p), ("ulValueLen", CK_ULONG)]


class CK_SP800_108_COUNTER_FORMAT(Structure):
    _fields_ = [("bLittleEndian", CK_BBOOL), ("ulWidthInBits", CK_ULONG)]


class CK_SP800_108_DKM_LENGTH_FORMAT(Structure):
    _fields_ = [("dkmLengthMethod", CK_ULONG), ("bLittleEndian", CK_BBOOL), ("ulWidthInBits", CK_ULONG)]


class CK_DERIVED_KEY(Structure):
    _fields_ = [("pTemplate", c_void_p), ("ulAttributeCount", CK_ULONG), ("phKey", c_void_p)]


class CK_SP800_108_KDF_PARAMS(Structure):
    _fields_ = [("prfType", CK_ULONG), ("ulNumberOfDataParams", CK_ULONG), ("pDataParams", c_void_p),
                ("ulAdditionalDerivedKeys", CK_ULONG), ("pAdditionalDerivedKeys", c_void_p)]


class CK_SP800_108_FEEDBACK_KDF_PARAMS(Structure):
    _fields_ = [("prfType", CK_ULONG), ("ulNumberOfDataParams", CK_ULONG), ("pDataParams", c_void_p),
                ("ulIVLen", CK_ULONG), ("pIV", c_void_p),
                ("ulAdditionalDerivedKeys", CK_ULONG), ("pAdditionalDerivedKeys", c_void_p)]


# The layouts the tests rely on, checked once (a wrong layout would make every test meaningless).
for _struct, _size in ((CK_MECHANISM, 24), (CK_ATTRIBUTE, 24), (CK_MECHANISM_INFO, 24), (CK_GCM_PARAMS, 48),
                       (CK_CCM_PARAMS, 48), (CK_CHACHA20_PARAMS, 32), (CK_SALSA20_CHACHA20_POLY1305_PARAMS, 32),
                       (CK_RSA_PKCS_PSS_PARAMS, 24), (CK_RSA_PKCS_OAEP_PARAMS, 40), (CK_RSA_AES_KEY_WRAP_PARAMS, 16),
                       (CK_EDDSA_PARAMS, 24), (CK_ECDH1_DERIVE_PARAMS, 40), (CK_HKDF_PARAMS, 64),
                       (CK_PKCS5_PBKD2_PARAMS2, 72), (CK_PRF_DATA_PARAM, 24), (CK_SP800_108_COUNTER_FORMAT, 16),
                       (CK_SP800_108_DKM_LENGTH_FORMAT, 24), (CK_DERIVED_KEY, 24), (CK_SP800_108_KDF_PARAMS, 40),
                       (CK_SP800_108_FEEDBACK_KDF_PARAMS, 56)):
    assert sizeof(_struct) == _size, "%s is %d bytes, expected %d" % (_struct.__name__, sizeof(_struct), _size)


# --- mechanisms with parameters --------------------------------------------------------------
class Mechanism:
    """A CK_MECHANISM and everything its parameter points to, kept alive together.

    `param` is None (no parameter), bytes (a flat parameter, e.g. an IV) or a ctypes object.
    `length` overrides ulParameterLen (to test a wrong structure size)."""

    def __init__(self, mechanism, param=None, keep=(), length=None):
        self.mechanism = mechanism
        self.keep = list(keep)
        if param is None:
            pointer, size = None, 0
        elif isinstance(param, (bytes, bytearray)):
            buffer = create_string_buffer(bytes(param), max(len(param), 1))
            self.keep.append(buffer)
            pointer, size = cast(buffer, c_void_p).value, len(param)
        else:
            self.keep.append(param)
            pointer, size = ctypes.addressof(param), sizeof(param)
        self.param = param
        self.struct = CK_MECHANISM(mechanism, pointer, size if length is None else length)

    def with_length(self, length):
        """The same parameter with another ulParameterLen (a wrong structure size)."""
        copy = Mechanism(self.mechanism)
        copy.keep = self.keep + [self]
        copy.struct = CK_MECHANISM(self.mechanism, self.struct.pParameter, length)
        return copy

    def ref(self):
        return byref(self.struct)


def buf(data, keep):
    """A C copy of `data` (None for empty/None) appended to `keep`; returns (pointer, length)."""
    if data is None:
        return None, 0
    data = bytes(data)
    b = create_string_buffer(data, max(len(data), 1))
    keep.append(b)
    return cast(b, c_void_p).value, len(data)


def mech(mechanism, param=None):
    return Mechanism(mechanism, param)


def gcm_params(iv, aad=b"", tag_bits=128, mechanism=CKM_AES_GCM):
    keep = []
    piv, niv = buf(iv, keep)
    paad, naad = buf(aad if aad else None, keep)
    p = CK_GCM_PARAMS(piv, niv, niv * 8, paad, naad, tag_bits)
    return Mechanism(mechanism, p, keep)


def ccm_params(data_len, nonce, aad=b"", mac_len=16):
    keep = []
    pn, nn = buf(nonce, keep)
    pa, na = buf(aad if aad else None, keep)
    return Mechanism(CKM_AES_CCM, CK_CCM_PARAMS(data_len, pn, nn, pa, na, mac_len), keep)


def chacha20_params(counter_bytes, nonce, counter_bits=None, nonce_bits=None):
    keep = []
    pc, nc = buf(counter_bytes, keep)
    pn, nn = buf(nonce, keep)
    p = CK_CHACHA20_PARAMS(pc, nc * 8 if counter_bits is None else counter_bits, pn,
                           nn * 8 if nonce_bits is None else nonce_bits)
    return Mechanism(CKM_CHACHA20, p, keep)


def chacha20_poly1305_params(nonce, aad=b"", nonce_len=None):
    keep = []
    pn, nn = buf(nonce, keep)
    pa, na = buf(aad if aad else None, keep)
    p = CK_SALSA20_CHACHA20_POLY1305_PARAMS(pn, nn if nonce_len is None else nonce_len, pa, na)
    return Mechanism(CKM_CHACHA20_POLY1305, p, keep)


def pss_params(mechanism, hash_alg, mgf, salt_len):
    return Mechanism(mechanism, CK_RSA_PKCS_PSS_PARAMS(hash_alg, mgf, salt_len))


def oaep_struct(hash_alg, mgf, label=b"", keep=None):
    keep = [] if keep is None else keep
    pl, nl = buf(label if label else None, keep)
    return CK_RSA_PKCS_OAEP_PARAMS(hash_alg, mgf, CKZ_DATA_SPECIFIED, pl, nl)


def oaep_params(hash_alg, mgf, label=b""):
    keep = []
    return Mechanism(CKM_RSA_PKCS_OAEP, oaep_struct(hash_alg, mgf, label, keep), keep)


def rsa_aes_key_wrap_params(aes_bits, hash_alg, mgf, label=b""):
    keep = []
    oaep = oaep_struct(hash_alg, mgf, label, keep)
    keep.append(oaep)
    return Mechanism(CKM_RSA_AES_KEY_WRAP, CK_RSA_AES_KEY_WRAP_PARAMS(aes_bits, ctypes.addressof(oaep)), keep)


def eddsa_params(prehash, context=b""):
    keep = []
    pc, nc = buf(context if context else None, keep)
    return Mechanism(CKM_EDDSA, CK_EDDSA_PARAMS(1 if prehash else 0, nc, pc), keep)


def ecdh_params(kdf, public, shared=b"", mechanism=CKM_ECDH1_DERIVE):
    keep = []
    ps, ns = buf(shared if shared else None, keep)
    pp, np_ = buf(public, keep)
    return Mechanism(mechanism, CK_ECDH1_DERIVE_PARAMS(kdf, ns, ps, np_, pp), keep)


def hkdf_params(extract, expand, prf, salt_type=CKF_HKDF_SALT_NULL, salt=None, salt_key=0, info=b"",
                mechanism=CKM_HKDF_DERIVE):
    keep = []
    ps, ns = buf(salt, keep)
    pi, ni = buf(info if info else None, keep)
    p = CK_HKDF_PARAMS(1 if extract else 0, 1 if expand else 0, prf, salt_type, ps, ns, salt_key, pi, ni)
    return Mechanism(mechanism, p, keep)


def pbkdf2_params(password, salt, iterations, prf, salt_source=CKZ_SALT_SPECIFIED, prf_data=None):
    keep = []
    ps, ns = buf(salt, keep)
    pp, np_ = buf(password, keep)
    pd, nd = buf(prf_data, keep)
    p = CK_PKCS5_PBKD2_PARAMS2(salt_source, ps, ns, iterations, prf, pd, nd, pp, np_)
    return Mechanism(CKM_PKCS5_PBKD2, p, keep)


# SP 800-108 data parameters: ("iter", width, little) / ("iter",) for feedback and pipeline /
# ("counter", width, little) / ("dkm", method, width, little) / ("bytes", data).
def prf_data_params(items, keep):
    array = (CK_PRF_DATA_PARAM * max(len(items), 1))()
    for i, item in enumerate(items):
        kind = item[0]
        if kind == "iter" and len(item) == 1:
            array[i] = CK_PRF_DATA_PARAM(CK_SP800_108_ITERATION_VARIABLE, None, 0)
        elif kind in ("iter", "counter"):
            fmt = CK_SP800_108_COUNTER_FORMAT(1 if item[2] else 0, item[1])
            keep.append(fmt)
            typ = CK_SP800_108_ITERATION_VARIABLE if kind == "iter" else CK_SP800_108_OPTIONAL_COUNTER
            array[i] = CK_PRF_DATA_PARAM(typ, ctypes.addressof(fmt), sizeof(fmt))
        elif kind == "dkm":
            fmt = CK_SP800_108_DKM_LENGTH_FORMAT(item[1], 1 if item[3] else 0, item[2])
            keep.append(fmt)
            array[i] = CK_PRF_DATA_PARAM(CK_SP800_108_DKM_LENGTH, ctypes.addressof(fmt), sizeof(fmt))
        elif kind == "bytes":
            p, n = buf(item[1], keep)
            array[i] = CK_PRF_DATA_PARAM(CK_SP800_108_BYTE_ARRAY, p, n)
        elif kind == "raw":  # (raw, type, pointer-or-None, length): malformed entries for negative tests
            array[i] = CK_PRF_DATA_PARAM(item[1], item[2], item[3])
        else:
            raise ValueError(kind)
    keep.append(array)
    return ctypes.addressof(array), len(items)


class DerivedKeys:
    """CK_DERIVED_KEY array for additional SP 800-108 keys; `handles()` reads what the module set."""

    def __init__(self, templates, keep):
        self.count = len(templates)
        self.array = (CK_DERIVED_KEY * max(self.count, 1))()
        self.handle_slots = (CK_ULONG * max(self.count, 1))()
        for i, t in enumerate(templates):
            tpl = Template(t)
            keep.append(tpl)
            self.array[i] = CK_DERIVED_KEY(ctypes.addressof(tpl.array), len(tpl), ctypes.addressof(self.handle_slots) + 8 * i)
        keep.extend([self.array, self.handle_slots])

    def handles(self):
        return [self.handle_slots[i] for i in range(self.count)]


def sp800_108_params(mechanism, prf, items, additional=(), iv=None):
    keep = []
    pdata, ndata = prf_data_params(items, keep)
    extra = DerivedKeys(list(additional), keep) if additional else None
    pextra, nextra = (ctypes.addressof(extra.array), extra.count) if extra else (None, 0)
    if mechanism == CKM_SP800_108_FEEDBACK_KDF:
        piv, niv = buf(iv, keep)
        p = CK_SP800_108_FEEDBACK_KDF_PARAMS(prf, ndata, pdata, niv, piv, nextra, pextra)
    else:
        p = CK_SP800_108_KDF_PARAMS(prf, ndata, pdata, nextra, pextra)
    m = Mechanism(mechanism, p, keep)
    m.additional = extra
    return m


# --- templates -----------------------------------------------------------------------------
class Template:
    """A CK_ATTRIBUTE array from [(type, value)]: bool → CK_BBOOL, int → CK_ULONG, bytes/str → bytes."""

    def __init__(self, attributes):
        attributes = list(attributes.items()) if isinstance(attributes, dict) else list(attributes)
        self.array = (CK_ATTRIBUTE * max(len(attributes), 1))()
        self.keep = []
        for i, (atype, value) in enumerate(attributes):
            if isinstance(value, bool):
                b = CK_BBOOL(1 if value else 0)
            elif isinstance(value, int):
                b = CK_ULONG(value)
            else:
                data = value.encode() if isinstance(value, str) else bytes(value)
                b = create_string_buffer(data, max(len(data), 1))
                self.keep.append(b)
                self.array[i] = CK_ATTRIBUTE(atype, cast(b, c_void_p).value, len(data))
                continue
            self.keep.append(b)
            self.array[i] = CK_ATTRIBUTE(atype, ctypes.addressof(b), sizeof(b))
        self.count = len(attributes)

    def __len__(self):
        return self.count


# --- the module ------------------------------------------------------------------------------
_FUNCTIONS = """C_Initialize C_Finalize C_GetInfo C_GetFunctionList C_GetSlotList C_GetSlotInfo C_GetTokenInfo
C_GetMechanismList C_GetMechanismInfo C_InitToken C_InitPIN C_SetPIN C_OpenSession C_CloseSession
C_CloseAllSessions C_GetSessionInfo C_GetOperationState C_SetOperationState C_Login C_Logout C_CreateObject
C_CopyObject C_DestroyObject C_GetObjectSize C_GetAttributeValue C_SetAttributeValue C_FindObjectsInit
C_FindObjects C_FindObjectsFinal C_EncryptInit C_Encrypt C_EncryptUpdate C_EncryptFinal C_DecryptInit C_Decrypt
C_DecryptUpdate C_DecryptFinal C_DigestInit C_Digest C_DigestUpdate C_DigestKey C_DigestFinal C_SignInit C_Sign
C_SignUpdate C_SignFinal C_SignRecoverInit C_SignRecover C_VerifyInit C_Verify C_VerifyUpdate C_VerifyFinal
C_VerifyRecoverInit C_VerifyRecover C_DigestEncryptUpdate C_DecryptDigestUpdate C_SignEncryptUpdate
C_DecryptVerifyUpdate C_GenerateKey C_GenerateKeyPair C_WrapKey C_UnwrapKey C_DeriveKey C_SeedRandom
C_GenerateRandom C_GetFunctionStatus C_CancelFunction C_WaitForSlotEvent""".split()


class CK_FUNCTION_LIST(Structure):
    _fields_ = [("version", CK_VERSION)] + [(name, c_void_p) for name in _FUNCTIONS]


_UL, _P = CK_ULONG, c_void_p
_PROTOTYPES = {
    "C_Initialize": [_P], "C_Finalize": [_P],
    "C_GetSlotList": [c_ubyte, _P, _P], "C_GetTokenInfo": [_UL, _P],
    "C_GetMechanismList": [_UL, _P, _P], "C_GetMechanismInfo": [_UL, _UL, _P],
    "C_OpenSession": [_UL, _UL, _P, _P, _P], "C_CloseSession": [_UL],
    "C_Login": [_UL, _UL, _P, _UL], "C_Logout": [_UL],
    "C_CreateObject": [_UL, _P, _UL, _P], "C_DestroyObject": [_UL, _UL],
    "C_GetAttributeValue": [_UL, _UL, _P, _UL],
    "C_EncryptInit": [_UL, _P, _UL], "C_Encrypt": [_UL, _P, _UL, _P, _P],
    "C_EncryptUpdate": [_UL, _P, _UL, _P, _P], "C_EncryptFinal": [_UL, _P, _P],
    "C_DecryptInit": [_UL, _P, _UL], "C_Decrypt": [_UL, _P, _UL, _P, _P],
    "C_DecryptUpdate": [_UL, _P, _UL, _P, _P], "C_DecryptFinal": [_UL, _P, _P],
    "C_SignInit": [_UL, _P, _UL], "C_Sign": [_UL, _P, _UL, _P, _P],
    "C_SignUpdate": [_UL, _P, _UL], "C_SignFinal": [_UL, _P, _P],
    "C_VerifyInit": [_UL, _P, _UL], "C_Verify": [_UL, _P, _UL, _P, _UL],
    "C_VerifyUpdate": [_UL, _P, _UL], "C_VerifyFinal": [_UL, _P, _UL],
    "C_GenerateKey": [_UL, _P, _P, _UL, _P],
    "C_GenerateKeyPair": [_UL, _P, _P, _UL, _P, _UL, _P, _P],
    "C_WrapKey": [_UL, _P, _UL, _UL, _P, _P],
    "C_UnwrapKey": [_UL, _P, _UL, _P, _UL, _P, _UL, _P],
    "C_DeriveKey": [_UL, _P, _UL, _P, _UL, _P],
}


def _data(data):
    """(pointer, length, keepalive) for input bytes."""
    data = bytes(data)
    b = create_string_buffer(data, max(len(data), 1))
    return cast(b, c_void_p).value, len(data), b


class Module:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        get_list = self.lib.C_GetFunctionList
        get_list.restype = CK_RV
        get_list.argtypes = [POINTER(POINTER(CK_FUNCTION_LIST))]
        plist = POINTER(CK_FUNCTION_LIST)()
        rv = get_list(byref(plist))
        if rv:
            raise CKRError(rv, "C_GetFunctionList")
        self.functions = plist.contents
        self.f = {}
        for name, args in _PROTOTYPES.items():
            address = getattr(self.functions, name)
            if not address:
                raise RuntimeError("%s is NULL in the function list" % name)
            self.f[name] = ctypes.CFUNCTYPE(CK_RV, *args)(address)

    def call(self, name, *args):
        rv = self.f[name](*args)
        if rv != CKR_OK:
            raise CKRError(rv, name)

    def initialize(self):
        self.call("C_Initialize", None)

    def finalize(self):
        self.call("C_Finalize", None)

    def slots(self, token_present=True):
        count = CK_ULONG(0)
        self.call("C_GetSlotList", 1 if token_present else 0, None, byref(count))
        array = (CK_ULONG * max(count.value, 1))()
        self.call("C_GetSlotList", 1 if token_present else 0, array, byref(count))
        return [array[i] for i in range(count.value)]

    def token_label(self, slot):
        info = (c_ubyte * 1024)()  # larger than CK_TOKEN_INFO: the label is its first 32 bytes
        self.call("C_GetTokenInfo", slot, info)
        return bytes(info[:32]).decode("utf-8", "replace").rstrip(" \0")

    def slot_with_label(self, label):
        for slot in self.slots():
            if self.token_label(slot) == label:
                return slot
        raise RuntimeError("no token labelled %r" % label)

    def mechanisms(self, slot):
        count = CK_ULONG(0)
        self.call("C_GetMechanismList", slot, None, byref(count))
        array = (CK_ULONG * max(count.value, 1))()
        self.call("C_GetMechanismList", slot, array, byref(count))
        return [array[i] for i in range(count.value)]

    def mechanism_info(self, slot, mechanism):
        info = CK_MECHANISM_INFO()
        self.call("C_GetMechanismInfo", slot, mechanism, byref(info))
        return info.ulMinKeySize, info.ulMaxKeySize, info.flags

    def open_session(self, slot, rw=True):
        handle = CK_ULONG(0)
        self.call("C_OpenSession", slot, CKF_SERIAL_SESSION | (CKF_RW_SESSION if rw else 0), None, None, byref(handle))
        return Session(self, handle.value)


class Session:
    def __init__(self, module, handle):
        self.m = module
        self.h = handle

    def call(self, name, *args):
        self.m.call(name, self.h, *args)

    def close(self):
        self.call("C_CloseSession")

    def login(self, pin, user=CKU_USER):
        p, n, k = _data(pin.encode() if isinstance(pin, str) else pin)
        self.call("C_Login", user, p, n)

    def logout(self):
        self.call("C_Logout")

    # objects
    def create_object(self, attributes):
        t = Template(attributes)
        handle = CK_ULONG(0)
        self.call("C_CreateObject", t.array, len(t), byref(handle))
        return handle.value

    def destroy(self, handle):
        self.call("C_DestroyObject", handle)

    def get_attribute(self, handle, atype):
        a = CK_ATTRIBUTE(atype, None, 0)
        self.call("C_GetAttributeValue", handle, byref(a), 1)
        if a.ulValueLen == CK_UNAVAILABLE_INFORMATION:
            raise CKRError(CKR_ATTRIBUTE_TYPE_INVALID, "C_GetAttributeValue")
        b = create_string_buffer(max(a.ulValueLen, 1))
        a.pValue = cast(b, c_void_p).value
        self.call("C_GetAttributeValue", handle, byref(a), 1)
        return b.raw[:a.ulValueLen]

    def get_ulong(self, handle, atype):
        return int.from_bytes(self.get_attribute(handle, atype), "little")

    def get_bool(self, handle, atype):
        return self.get_attribute(handle, atype) != b"\0"

    def generate_key(self, mechanism, attributes):
        t = Template(attributes)
        handle = CK_ULONG(0)
        self.call("C_GenerateKey", mechanism.ref(), t.array, len(t), byref(handle))
        return handle.value

    def generate_key_pair(self, mechanism, public, private):
        tp, tv = Template(public), Template(private)
        hp, hv = CK_ULONG(0), CK_ULONG(0)
        self.call("C_GenerateKeyPair", mechanism.ref(), tp.array, len(tp), tv.array, len(tv), byref(hp), byref(hv))
        return hp.value, hv.value

    def derive_key(self, mechanism, base, attributes):
        t = Template(attributes)
        handle = CK_ULONG(0)
        self.call("C_DeriveKey", mechanism.ref(), base, t.array, len(t), byref(handle))
        return handle.value

    def wrap_key(self, mechanism, wrapping_key, key):
        n = CK_ULONG(0)
        self.call("C_WrapKey", mechanism.ref(), wrapping_key, key, None, byref(n))
        out = create_string_buffer(max(n.value, 1))
        self.call("C_WrapKey", mechanism.ref(), wrapping_key, key, out, byref(n))
        return out.raw[:n.value]

    def unwrap_key(self, mechanism, unwrapping_key, wrapped, attributes):
        t = Template(attributes)
        p, n, k = _data(wrapped)
        handle = CK_ULONG(0)
        self.call("C_UnwrapKey", mechanism.ref(), unwrapping_key, p, n, t.array, len(t), byref(handle))
        return handle.value

    # single-part helpers: the output length is asked first with a NULL buffer (PKCS#11 §5.2)
    def _single(self, function, data):
        p, n, k = _data(data)
        size = CK_ULONG(0)
        self.call(function, p, n, None, byref(size))
        out = create_string_buffer(max(size.value, 1))
        self.call(function, p, n, out, byref(size))
        return out.raw[:size.value]

    def _update(self, function, data):
        p, n, k = _data(data)
        size = CK_ULONG(len(data) + 4096)
        out = create_string_buffer(size.value)
        self.call(function, p, n, out, byref(size))
        return out.raw[:size.value]

    def _final(self, function):
        size = CK_ULONG(4096)
        out = create_string_buffer(size.value)
        self.call(function, out, byref(size))
        return out.raw[:size.value]

    def encrypt_init(self, mechanism, key):
        self.call("C_EncryptInit", mechanism.ref(), key)

    def encrypt(self, mechanism, key, data):
        self.encrypt_init(mechanism, key)
        return self._single("C_Encrypt", data)

    def encrypt_update(self, data):
        return self._update("C_EncryptUpdate", data)

    def encrypt_final(self):
        return self._final("C_EncryptFinal")

    def encrypt_parts(self, mechanism, key, parts):
        self.encrypt_init(mechanism, key)
        out = b"".join(self.encrypt_update(p) for p in parts)
        return out + self.encrypt_final()

    def decrypt_init(self, mechanism, key):
        self.call("C_DecryptInit", mechanism.ref(), key)

    def decrypt(self, mechanism, key, data):
        self.decrypt_init(mechanism, key)
        return self._single("C_Decrypt", data)

    def decrypt_update(self, data):
        return self._update("C_DecryptUpdate", data)

    def decrypt_final(self):
        return self._final("C_DecryptFinal")

    def decrypt_parts(self, mechanism, key, parts):
        self.decrypt_init(mechanism, key)
        out = b"".join(self.decrypt_update(p) for p in parts)
        return out + self.decrypt_final()

    def sign_init(self, mechanism, key):
        self.call("C_SignInit", mechanism.ref(), key)

    def sign(self, mechanism, key, data):
        self.sign_init(mechanism, key)
        return self._single("C_Sign", data)

    def sign_update(self, data):
        p, n, k = _data(data)
        self.call("C_SignUpdate", p, n)

    def sign_final(self):
        size = CK_ULONG(0)
        self.call("C_SignFinal", None, byref(size))
        out = create_string_buffer(max(size.value, 1))
        self.call("C_SignFinal", out, byref(size))
        return out.raw[:size.value]

    def sign_parts(self, mechanism, key, parts):
        self.sign_init(mechanism, key)
        for part in parts:
            self.sign_update(part)
        return self.sign_final()

    def verify_init(self, mechanism, key):
        self.call("C_VerifyInit", mechanism.ref(), key)

    def verify(self, mechanism, key, data, signature):
        """Returns nothing when the signature verifies; raises CKRError otherwise."""
        self.verify_init(mechanism, key)
        p, n, k = _data(data)
        s, ns, k2 = _data(signature)
        self.call("C_Verify", p, n, s, ns)

    def verify_parts(self, mechanism, key, parts, signature):
        self.verify_init(mechanism, key)
        for part in parts:
            p, n, k = _data(part)
            self.call("C_VerifyUpdate", p, n)
        s, ns, k2 = _data(signature)
        self.call("C_VerifyFinal", s, ns)
