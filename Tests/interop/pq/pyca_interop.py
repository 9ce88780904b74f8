#!/usr/bin/env python3
"""ML-DSA and ML-KEM of a PKCS#11 3.2 module against pyca/cryptography (its wheel's own OpenSSL).

Usage: pyca_interop.py MODULE TOKEN_LABEL USER_PIN [name-filter]

The module is reached through ctypes alone (Tests/interop/modern/p11.py, and the 3.2 function
list from C_GetInterface("PKCS 11", {3, 2}) laid out as OASIS's pkcs11f.h orders it), so no
wrapper library's reading of the specification stands between the two implementations. Both
directions, for each parameter set the module offers: pyca verifies what the token signs and the
token verifies what pyca signs (its public key imported by CKA_VALUE); each side decapsulates
the other's encapsulation to the same secret; public keys are the same in both (raw encoding and
SubjectPublicKeyInfo); a private key moves between them by its seed (CKA_SEED). Return values are
checked exactly. Prints "ok NAME" / "FAIL NAME: reason" per test, then
"pq-pyca: N passed, N failed; ..." with the counts of what was compared; exits 1 on any failure.
"""
import ctypes
import os
import sys
import traceback
from ctypes import POINTER, Structure, byref, c_char_p, c_void_p, cast, create_string_buffer, sizeof

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "modern"))
import p11  # noqa: E402
from p11 import (CK_RV, CK_ULONG, CK_VERSION, CKA_CLASS, CKA_EXTRACTABLE, CKA_KEY_TYPE, CKA_PRIVATE,  # noqa: E402
                 CKA_SENSITIVE, CKA_SIGN, CKA_TOKEN, CKA_VALUE, CKA_VALUE_LEN, CKA_VERIFY, CKF_DECAPSULATE,
                 CKF_ENCAPSULATE, CKF_GENERATE_KEY_PAIR, CKF_SIGN, CKF_VERIFY, CKK_GENERIC_SECRET, CKM_ML_DSA,
                 CKM_ML_DSA_KEY_PAIR_GEN, CKM_ML_KEM, CKM_ML_KEM_KEY_PAIR_GEN, CKO_PRIVATE_KEY, CKO_PUBLIC_KEY,
                 CKO_SECRET_KEY, CKR_SIGNATURE_INVALID, CKR_SIGNATURE_LEN_RANGE,
                 CKR_WRAPPED_KEY_LEN_RANGE, CKRError, Mechanism, Template, rv_name)

from cryptography.exceptions import InvalidSignature  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import mldsa, mlkem  # noqa: E402

# --- PKCS#11 3.2 (the values of Include/keychain-pkcs11.h and OASIS's pkcs11t.h) ---------------
CKK_ML_KEM, CKK_ML_DSA = 0x49, 0x4A
CKA_PUBLIC_KEY_INFO = 0x129
CKA_PARAMETER_SET, CKA_ENCAPSULATE, CKA_DECAPSULATE, CKA_SEED = 0x61D, 0x633, 0x634, 0x637
CKP_ML_DSA_44, CKP_ML_DSA_65, CKP_ML_DSA_87 = 1, 2, 3
CKP_ML_KEM_512, CKP_ML_KEM_768, CKP_ML_KEM_1024 = 1, 2, 3
CKH_HEDGE_PREFERRED, CKH_HEDGE_REQUIRED = 0, 1
CKR_PARAMETER_SET_NOT_SUPPORTED = 0x209
p11.CKR[CKR_PARAMETER_SET_NOT_SUPPORTED] = "CKR_PARAMETER_SET_NOT_SUPPORTED"

DER, SPKI, RAW = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo, serialization.Encoding.Raw


class CK_INTERFACE(Structure):
    _fields_ = [("pInterfaceName", c_char_p), ("pFunctionList", c_void_p), ("flags", CK_ULONG)]


class CK_SIGN_ADDITIONAL_CONTEXT(Structure):
    _fields_ = [("hedgeVariant", CK_ULONG), ("pContext", c_void_p), ("ulContextLen", CK_ULONG)]


# CK_FUNCTION_LIST_3_2: version, then every function of pkcs11f.h in its order (3.0's after the
# 68 of 2.40, then 3.2's).
_FUNCTIONS_3_2 = p11._FUNCTIONS + """C_GetInterfaceList C_GetInterface C_LoginUser C_SessionCancel
C_MessageEncryptInit C_EncryptMessage C_EncryptMessageBegin C_EncryptMessageNext C_MessageEncryptFinal
C_MessageDecryptInit C_DecryptMessage C_DecryptMessageBegin C_DecryptMessageNext C_MessageDecryptFinal
C_MessageSignInit C_SignMessage C_SignMessageBegin C_SignMessageNext C_MessageSignFinal C_MessageVerifyInit
C_VerifyMessage C_VerifyMessageBegin C_VerifyMessageNext C_MessageVerifyFinal C_EncapsulateKey C_DecapsulateKey
C_VerifySignatureInit C_VerifySignature C_VerifySignatureUpdate C_VerifySignatureFinal
C_GetSessionValidationFlags C_AsyncComplete C_AsyncGetID C_AsyncJoin C_WrapKeyAuthenticated
C_UnwrapKeyAuthenticated""".split()


class CK_FUNCTION_LIST_3_2(Structure):
    _fields_ = [("version", CK_VERSION)] + [(name, c_void_p) for name in _FUNCTIONS_3_2]


assert sizeof(CK_INTERFACE) == 24 and sizeof(CK_SIGN_ADDITIONAL_CONTEXT) == 24
assert sizeof(CK_FUNCTION_LIST_3_2) == 8 + 8 * 104, sizeof(CK_FUNCTION_LIST_3_2)

_UL, _P = CK_ULONG, c_void_p
_PROTOTYPES_3_2 = dict(p11._PROTOTYPES, **{
    # (hSession, pMechanism, hPublicKey, pTemplate, ulAttributeCount, pCiphertext, pulCiphertextLen, phKey)
    "C_EncapsulateKey": [_UL, _P, _UL, _P, _UL, _P, _P, _P],
    # (hSession, pMechanism, hPrivateKey, pTemplate, ulAttributeCount, pCiphertext, ulCiphertextLen, phKey)
    "C_DecapsulateKey": [_UL, _P, _UL, _P, _UL, _P, _UL, _P],
})


class Module32(p11.Module):
    """The module through its PKCS#11 3.2 interface (C_GetInterface, not C_GetFunctionList)."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        get_interface = self.lib.C_GetInterface
        get_interface.restype = CK_RV
        get_interface.argtypes = [c_char_p, POINTER(CK_VERSION), POINTER(POINTER(CK_INTERFACE)), CK_ULONG]
        interface = POINTER(CK_INTERFACE)()
        rv = get_interface(b"PKCS 11", byref(CK_VERSION(3, 2)), byref(interface), 0)
        if rv:
            raise CKRError(rv, 'C_GetInterface("PKCS 11", {3, 2})')
        if not interface or not interface.contents.pFunctionList:
            raise RuntimeError("C_GetInterface returned no interface")
        self.interface_name = interface.contents.pInterfaceName
        self.functions = cast(interface.contents.pFunctionList, POINTER(CK_FUNCTION_LIST_3_2)).contents
        self.version = (self.functions.version.major, self.functions.version.minor)
        self.f = {}
        for name, args in _PROTOTYPES_3_2.items():
            address = getattr(self.functions, name)
            if not address:
                raise RuntimeError("%s is NULL in the 3.2 function list" % name)
            self.f[name] = ctypes.CFUNCTYPE(CK_RV, *args)(address)


# --- the harness -----------------------------------------------------------------------------
TESTS = []
COUNTS = {"token signatures verified by pyca": 0, "pyca signatures verified by the token": 0,
          "shared secrets equal": 0, "public keys equal": 0}


def test(function):
    TESTS.append(function)
    return function


class Ctx:
    module = None
    slot = None
    s = None


C = Ctx()


def fail(message):
    raise AssertionError(message)


def eq(actual, expected, what):
    if actual != expected:
        if isinstance(actual, bytes) and isinstance(expected, bytes):
            fail("%s: got %s… (%d bytes), expected %s… (%d bytes)" % (what, actual[:24].hex(), len(actual), expected[:24].hex(), len(expected)))
        fail("%s: got %r, expected %r" % (what, actual, expected))


def expect_rv(rv, what, function, *args):
    """`function(*args)` must raise CKRError with exactly `rv`."""
    try:
        function(*args)
    except CKRError as e:
        if e.rv != rv:
            fail("%s: %s returned %s, expected %s" % (what, e.function, rv_name(e.rv), rv_name(rv)))
        return
    fail("%s: succeeded, expected %s" % (what, rv_name(rv)))


def flip(data, index=0):
    data = bytearray(data)
    data[index] ^= 0x01
    return bytes(data)


# --- the parameter sets ----------------------------------------------------------------------
class DSA:
    def __init__(self, name, ckp, private_class, public_class, signature_length):
        self.name, self.ckp = name, ckp
        self.private_class, self.public_class = private_class, public_class
        self.signature_length = signature_length


class KEM:
    def __init__(self, name, ckp, private_class, public_class, ciphertext_length):
        self.name, self.ckp = name, ckp
        self.private_class, self.public_class = private_class, public_class
        self.ciphertext_length = ciphertext_length


DSAS = [DSA("ML-DSA-65", CKP_ML_DSA_65, mldsa.MLDSA65PrivateKey, mldsa.MLDSA65PublicKey, 3309),
        DSA("ML-DSA-87", CKP_ML_DSA_87, mldsa.MLDSA87PrivateKey, mldsa.MLDSA87PublicKey, 4627)]
KEMS = [KEM("ML-KEM-768", CKP_ML_KEM_768, mlkem.MLKEM768PrivateKey, mlkem.MLKEM768PublicKey, 1088),
        KEM("ML-KEM-1024", CKP_ML_KEM_1024, mlkem.MLKEM1024PrivateKey, mlkem.MLKEM1024PublicKey, 1568)]

# Messages (empty, one byte, odd sizes, more than 64 KiB) and contexts: None is CKM_ML_DSA with
# no parameter; bytes go in CK_SIGN_ADDITIONAL_CONTEXT (hedging preferred, or required for the
# non-empty ones), the empty one included, and a context of the maximum 255 bytes.
MESSAGES = [b"", b"\x00", os.urandom(33), os.urandom(1000), os.urandom(70001)]
CONTEXTS = [None, b"", b"pq-interop context", os.urandom(255)]


def ml_dsa(context):
    if context is None:
        return Mechanism(CKM_ML_DSA)
    buffer = create_string_buffer(context, max(len(context), 1))
    hedge = CKH_HEDGE_PREFERRED if not context else CKH_HEDGE_REQUIRED
    param = CK_SIGN_ADDITIONAL_CONTEXT(hedge, cast(buffer, c_void_p).value, len(context))
    return Mechanism(CKM_ML_DSA, param, keep=[buffer])


def parts_of(message):
    """The message cut into C_SignUpdate/C_VerifyUpdate parts, an empty part among them."""
    third = len(message) // 3
    return [message[:third], b"", message[third:2 * third], message[2 * third:]]


def pyca_verifies(public, signature, message, context):
    try:
        public.verify(signature, message, context)
    except InvalidSignature:
        return False
    return True


# --- token objects ---------------------------------------------------------------------------
def token_pair(key_type, mechanism, ckp, public_usage, private_usage, readable_seed=False):
    public = {CKA_TOKEN: False, CKA_PARAMETER_SET: ckp, public_usage: True}
    private = {CKA_TOKEN: False, CKA_PRIVATE: True, private_usage: True}
    if readable_seed:
        private.update({CKA_SENSITIVE: False, CKA_EXTRACTABLE: True})
    pub, priv = C.s.generate_key_pair(Mechanism(mechanism), public, private)
    eq(C.s.get_ulong(pub, CKA_KEY_TYPE), key_type, "the public key's CKA_KEY_TYPE")
    eq(C.s.get_ulong(pub, CKA_PARAMETER_SET), ckp, "the public key's CKA_PARAMETER_SET")
    eq(C.s.get_ulong(priv, CKA_PARAMETER_SET), ckp, "the private key's CKA_PARAMETER_SET")
    return pub, priv


def import_public(key_type, ckp, raw, usage):
    return C.s.create_object({CKA_CLASS: CKO_PUBLIC_KEY, CKA_KEY_TYPE: key_type, CKA_TOKEN: False,
                              CKA_PARAMETER_SET: ckp, CKA_VALUE: raw, usage: True})


def import_seed(key_type, ckp, seed, usage):
    return C.s.create_object({CKA_CLASS: CKO_PRIVATE_KEY, CKA_KEY_TYPE: key_type, CKA_TOKEN: False, CKA_PRIVATE: True,
                              CKA_PARAMETER_SET: ckp, CKA_SEED: seed, usage: True})


def check_public_key(handle, public, what):
    """The token's key object and pyca's key are the same public key: its CKA_PUBLIC_KEY_INFO
    loads in pyca as that key and equals pyca's SubjectPublicKeyInfo (and a public key object's
    CKA_VALUE pyca's raw encoding)."""
    expected_spki = public.public_bytes(DER, SPKI)
    spki = C.s.get_attribute(handle, CKA_PUBLIC_KEY_INFO)
    eq(spki, expected_spki, "%s: CKA_PUBLIC_KEY_INFO against pyca's public_bytes(DER, SubjectPublicKeyInfo)" % what)
    loaded = serialization.load_der_public_key(spki)
    if not isinstance(loaded, type(public)) or loaded != public:
        fail("%s: pyca's load_der_public_key(CKA_PUBLIC_KEY_INFO) gave %s, not the same %s" % (what, type(loaded).__name__, type(public).__name__))
    if C.s.get_ulong(handle, CKA_CLASS) == CKO_PUBLIC_KEY:
        eq(C.s.get_attribute(handle, CKA_VALUE), public.public_bytes_raw(), "%s: CKA_VALUE against pyca's raw public key" % what)
    COUNTS["public keys equal"] += 1


def secret_template(length=None):
    t = {CKA_CLASS: CKO_SECRET_KEY, CKA_KEY_TYPE: CKK_GENERIC_SECRET, CKA_TOKEN: False,
         CKA_SENSITIVE: False, CKA_EXTRACTABLE: True}
    if length is not None:
        t[CKA_VALUE_LEN] = length
    return t


def encapsulate(public_handle, template):
    """C_EncapsulateKey, length first (no key may be made then): (ciphertext, new key handle)."""
    mechanism = Mechanism(CKM_ML_KEM)
    t = Template(template)
    size = CK_ULONG(0)
    handle = CK_ULONG(0)
    C.s.call("C_EncapsulateKey", mechanism.ref(), public_handle, t.array, len(t), None, byref(size), byref(handle))
    eq(handle.value, 0, "C_EncapsulateKey's length query set phKey")
    out = create_string_buffer(max(size.value, 1))
    C.s.call("C_EncapsulateKey", mechanism.ref(), public_handle, t.array, len(t), out, byref(size), byref(handle))
    return out.raw[:size.value], handle.value


def decapsulate(private_handle, ciphertext, template):
    mechanism = Mechanism(CKM_ML_KEM)
    t = Template(template)
    data = create_string_buffer(ciphertext, max(len(ciphertext), 1))
    handle = CK_ULONG(0)
    C.s.call("C_DecapsulateKey", mechanism.ref(), private_handle, t.array, len(t), data, len(ciphertext), byref(handle))
    return handle.value


def secret_value(handle):
    return C.s.get_attribute(handle, CKA_VALUE)


# --- the interface ---------------------------------------------------------------------------
@test
def interface_3_2_offers_the_mechanisms():
    eq(C.module.version, (3, 2), "the version of the function list from C_GetInterface({3, 2})")
    eq(C.module.interface_name, b"PKCS 11", "the interface's name")
    mechanisms = C.module.mechanisms(C.slot)
    for mechanism, flags in ((CKM_ML_DSA_KEY_PAIR_GEN, CKF_GENERATE_KEY_PAIR), (CKM_ML_DSA, CKF_SIGN | CKF_VERIFY),
                             (CKM_ML_KEM_KEY_PAIR_GEN, CKF_GENERATE_KEY_PAIR), (CKM_ML_KEM, CKF_ENCAPSULATE | CKF_DECAPSULATE)):
        if mechanism not in mechanisms:
            fail("mechanism 0x%X is not in C_GetMechanismList" % mechanism)
        got = C.module.mechanism_info(C.slot, mechanism)[2]
        if got & flags != flags:
            fail("mechanism 0x%X: flags 0x%X lack 0x%X" % (mechanism, got, flags & ~got))


# --- ML-DSA ------------------------------------------------------------------------------------
def token_signs_pyca_verifies(p):
    pub, priv = token_pair(CKK_ML_DSA, CKM_ML_DSA_KEY_PAIR_GEN, p.ckp, CKA_VERIFY, CKA_SIGN)
    public = p.public_class.from_public_bytes(C.s.get_attribute(pub, CKA_VALUE))
    check_public_key(pub, public, "the token's %s public key" % p.name)
    check_public_key(priv, public, "the token's %s private key" % p.name)
    for context in CONTEXTS:
        other = b"another context" if context else b"x"
        for message in MESSAGES:
            what = "%s, %d-byte message, context %s" % (p.name, len(message), "none" if context is None else "%d bytes" % len(context))
            single = C.s.sign(ml_dsa(context), priv, message)
            multi = C.s.sign_parts(ml_dsa(context), priv, parts_of(message))
            for how, signature in (("C_Sign", single), ("C_SignUpdate/C_SignFinal", multi)):
                eq(len(signature), p.signature_length, "%s: %s signature length" % (what, how))
                if not pyca_verifies(public, signature, message, context):
                    fail("%s: pyca rejects the token's %s signature" % (what, how))
                COUNTS["token signatures verified by pyca"] += 1
                if pyca_verifies(public, flip(signature, len(signature) // 2), message, context):
                    fail("%s: pyca accepts the token's %s signature with one bit flipped" % (what, how))
                if pyca_verifies(public, signature, message + b"!", context):
                    fail("%s: pyca accepts the token's %s signature for another message" % (what, how))
                if pyca_verifies(public, signature, message, other):
                    fail("%s: pyca accepts the token's %s signature under another context" % (what, how))
            # Hedged signing (the module never signs deterministically): two signatures differ.
            if single == multi:
                fail("%s: two signatures of one message are equal (not hedged)" % what)


def pyca_signs_token_verifies(p):
    key = p.private_class.generate()
    public = key.public_key()
    handle = import_public(CKK_ML_DSA, p.ckp, public.public_bytes_raw(), CKA_VERIFY)
    check_public_key(handle, public, "pyca's %s public key imported by CKA_VALUE" % p.name)
    for context in CONTEXTS:
        other = ml_dsa(b"another context" if context else b"x")
        for message in MESSAGES:
            what = "%s, %d-byte message, context %s" % (p.name, len(message), "none" if context is None else "%d bytes" % len(context))
            signature = key.sign(message, context)
            C.s.verify(ml_dsa(context), handle, message, signature)
            C.s.verify_parts(ml_dsa(context), handle, parts_of(message), signature)
            COUNTS["pyca signatures verified by the token"] += 2
            expect_rv(CKR_SIGNATURE_INVALID, "%s: C_Verify of pyca's signature with one bit flipped" % what,
                      C.s.verify, ml_dsa(context), handle, message, flip(signature, len(signature) // 2))
            expect_rv(CKR_SIGNATURE_INVALID, "%s: C_VerifyFinal of pyca's signature with one bit flipped" % what,
                      C.s.verify_parts, ml_dsa(context), handle, parts_of(message), flip(signature, 7))
            expect_rv(CKR_SIGNATURE_INVALID, "%s: C_Verify of pyca's signature for another message" % what,
                      C.s.verify, ml_dsa(context), handle, message + b"!", signature)
            expect_rv(CKR_SIGNATURE_INVALID, "%s: C_Verify of pyca's signature under another context" % what,
                      C.s.verify, other, handle, message, signature)
            expect_rv(CKR_SIGNATURE_LEN_RANGE, "%s: C_Verify of pyca's signature one byte short" % what,
                      C.s.verify, ml_dsa(context), handle, message, signature[:-1])


def private_key_by_seed(p):
    """pyca's seed (private_bytes Raw, the 32-byte ξ) as CKA_SEED: the token's key is pyca's key."""
    key = p.private_class.generate()
    seed = key.private_bytes(RAW, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    eq(seed, key.private_bytes_raw(), "pyca's private_bytes(Raw, Raw) against private_bytes_raw()")
    eq(len(seed), 32, "pyca's %s seed length" % p.name)
    priv = import_seed(CKK_ML_DSA, p.ckp, seed, CKA_SIGN)
    check_public_key(priv, key.public_key(), "%s private key imported by pyca's seed" % p.name)
    for context in (None, b"seed"):
        signature = C.s.sign(ml_dsa(context), priv, b"signed with the seed pyca made")
        if not pyca_verifies(key.public_key(), signature, b"signed with the seed pyca made", context):
            fail("%s: pyca rejects what the key imported by its seed signed" % p.name)
        COUNTS["token signatures verified by pyca"] += 1
    # And back: a seed the token made (a non-sensitive key, so CKA_SEED can be read) in pyca.
    pub, priv = token_pair(CKK_ML_DSA, CKM_ML_DSA_KEY_PAIR_GEN, p.ckp, CKA_VERIFY, CKA_SIGN, readable_seed=True)
    twin = p.private_class.from_seed_bytes(C.s.get_attribute(priv, CKA_SEED))
    check_public_key(pub, twin.public_key(), "the token's %s key against pyca's from its CKA_SEED" % p.name)
    C.s.verify(ml_dsa(b"twin"), pub, b"made from the token's seed", twin.sign(b"made from the token's seed", b"twin"))
    COUNTS["pyca signatures verified by the token"] += 1


for _p in DSAS:
    for _name, _body in (("token_signs_pyca_verifies", token_signs_pyca_verifies),
                         ("pyca_signs_token_verifies", pyca_signs_token_verifies),
                         ("private_key_by_seed", private_key_by_seed)):
        def _case(p=_p, body=_body):
            body(p)
        _case.__name__ = "%s_%s" % (_p.name.lower().replace("-", "_"), _name)
        test(_case)


# --- ML-KEM ------------------------------------------------------------------------------------
def pyca_encapsulates_token_decapsulates(p):
    pub, priv = token_pair(CKK_ML_KEM, CKM_ML_KEM_KEY_PAIR_GEN, p.ckp, CKA_ENCAPSULATE, CKA_DECAPSULATE)
    public = p.public_class.from_public_bytes(C.s.get_attribute(pub, CKA_VALUE))
    check_public_key(pub, public, "the token's %s public key" % p.name)
    check_public_key(priv, public, "the token's %s private key" % p.name)
    by_spki = serialization.load_der_public_key(C.s.get_attribute(pub, CKA_PUBLIC_KEY_INFO))
    for round, (encapsulator, length) in enumerate(((public, None), (by_spki, 32), (public, 32))):
        secret, ciphertext = encapsulator.encapsulate()
        eq(len(ciphertext), p.ciphertext_length, "%s: pyca's ciphertext length" % p.name)
        key = decapsulate(priv, ciphertext, secret_template(length))
        eq(secret_value(key), secret, "%s round %d: the token's C_DecapsulateKey secret against pyca's encapsulated one" % (p.name, round))
        COUNTS["shared secrets equal"] += 1
    # An altered ciphertext of the right length: ML-KEM's implicit rejection, another secret.
    secret, ciphertext = public.encapsulate()
    rejected = secret_value(decapsulate(priv, flip(ciphertext, 5), secret_template()))
    eq(len(rejected), 32, "%s: the secret of an altered ciphertext" % p.name)
    if rejected == secret:
        fail("%s: an altered ciphertext decapsulated to pyca's secret" % p.name)
    for wrong in (ciphertext[:-1], ciphertext + b"\0", b""):
        expect_rv(CKR_WRAPPED_KEY_LEN_RANGE, "%s: C_DecapsulateKey of a %d-byte ciphertext" % (p.name, len(wrong)),
                  decapsulate, priv, wrong, secret_template())


def token_encapsulates_pyca_decapsulates(p):
    key = p.private_class.generate()
    handle = import_public(CKK_ML_KEM, p.ckp, key.public_key().public_bytes_raw(), CKA_ENCAPSULATE)
    check_public_key(handle, key.public_key(), "pyca's %s public key imported by CKA_VALUE" % p.name)
    for round, length in enumerate((None, 32, None)):
        ciphertext, secret = encapsulate(handle, secret_template(length))
        eq(len(ciphertext), p.ciphertext_length, "%s: the token's ciphertext length" % p.name)
        eq(key.decapsulate(ciphertext), secret_value(secret),
           "%s round %d: pyca's decapsulated secret against the token's C_EncapsulateKey secret" % (p.name, round))
        COUNTS["shared secrets equal"] += 1


def kem_private_key_by_seed(p):
    """pyca's 64-byte seed (d‖z) as CKA_SEED: the same key, down to implicit rejection (z)."""
    key = p.private_class.generate()
    seed = key.private_bytes(RAW, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    eq(seed, key.private_bytes_raw(), "pyca's private_bytes(Raw, Raw) against private_bytes_raw()")
    eq(len(seed), 64, "pyca's %s seed length" % p.name)
    priv = import_seed(CKK_ML_KEM, p.ckp, seed, CKA_DECAPSULATE)
    check_public_key(priv, key.public_key(), "%s private key imported by pyca's seed" % p.name)
    secret, ciphertext = key.public_key().encapsulate()
    eq(secret_value(decapsulate(priv, ciphertext, secret_template())), secret,
       "%s: the seed-imported key's secret against pyca's encapsulated one" % p.name)
    COUNTS["shared secrets equal"] += 1
    altered = flip(ciphertext, len(ciphertext) - 1)
    eq(secret_value(decapsulate(priv, altered, secret_template())), key.decapsulate(altered),
       "%s: the implicit-rejection secret of an altered ciphertext, token against pyca" % p.name)
    COUNTS["shared secrets equal"] += 1
    # And back: the token's seed (a non-sensitive key) in pyca.
    pub, priv = token_pair(CKK_ML_KEM, CKM_ML_KEM_KEY_PAIR_GEN, p.ckp, CKA_ENCAPSULATE, CKA_DECAPSULATE, readable_seed=True)
    twin = p.private_class.from_seed_bytes(C.s.get_attribute(priv, CKA_SEED))
    check_public_key(pub, twin.public_key(), "the token's %s key against pyca's from its CKA_SEED" % p.name)
    ciphertext, secret = encapsulate(pub, secret_template())
    eq(twin.decapsulate(ciphertext), secret_value(secret), "%s: pyca (the token's seed) decapsulating the token's ciphertext" % p.name)
    COUNTS["shared secrets equal"] += 1


for _p in KEMS:
    for _name, _body in (("pyca_encapsulates_token_decapsulates", pyca_encapsulates_token_decapsulates),
                         ("token_encapsulates_pyca_decapsulates", token_encapsulates_pyca_decapsulates),
                         ("private_key_by_seed", kem_private_key_by_seed)):
        def _case(p=_p, body=_body):
            body(p)
        _case.__name__ = "%s_%s" % (_p.name.lower().replace("-", "_"), _name)
        test(_case)


# --- the parameter sets the module does not offer ----------------------------------------------
@test
def ml_dsa_44_and_ml_kem_512_refused():
    expect_rv(CKR_PARAMETER_SET_NOT_SUPPORTED, "C_GenerateKeyPair ML-DSA-44",
              token_pair, CKK_ML_DSA, CKM_ML_DSA_KEY_PAIR_GEN, CKP_ML_DSA_44, CKA_VERIFY, CKA_SIGN)
    expect_rv(CKR_PARAMETER_SET_NOT_SUPPORTED, "C_GenerateKeyPair ML-KEM-512",
              token_pair, CKK_ML_KEM, CKM_ML_KEM_KEY_PAIR_GEN, CKP_ML_KEM_512, CKA_ENCAPSULATE, CKA_DECAPSULATE)
    key = mldsa.MLDSA44PrivateKey.generate()
    expect_rv(CKR_PARAMETER_SET_NOT_SUPPORTED, "C_CreateObject of pyca's ML-DSA-44 public key",
              import_public, CKK_ML_DSA, CKP_ML_DSA_44, key.public_key().public_bytes_raw(), CKA_VERIFY)
    expect_rv(CKR_PARAMETER_SET_NOT_SUPPORTED, "C_CreateObject of pyca's ML-DSA-44 seed",
              import_seed, CKK_ML_DSA, CKP_ML_DSA_44, key.private_bytes_raw(), CKA_SIGN)


def main():
    if len(sys.argv) < 4:
        print("usage: pyca_interop.py MODULE TOKEN_LABEL USER_PIN [name-filter]", file=sys.stderr)
        return 2
    path, label, pin = sys.argv[1:4]
    only = sys.argv[4] if len(sys.argv) > 4 else ""
    C.module = Module32(path)
    C.module.initialize()
    C.slot = C.module.slot_with_label(label)
    login = C.module.open_session(C.slot)
    login.login(pin)
    passed = failed = 0
    for function in TESTS:
        name = function.__name__
        if only and only not in name:
            continue
        C.s = C.module.open_session(C.slot)
        try:
            function()
            print("ok %s" % name)
            passed += 1
        except AssertionError as e:
            print("FAIL %s: %s" % (name, e))
            failed += 1
        except CKRError as e:
            frames = traceback.extract_tb(e.__traceback__)
            where = next((f for f in reversed(frames) if f.filename == __file__), frames[-1])
            print("FAIL %s: %s (at line %d: %s)" % (name, e, where.lineno, where.line))
            failed += 1
        except Exception as e:  # a harness or library error is a failure too, never a pass
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
            traceback.print_exc(file=sys.stdout)
            failed += 1
        finally:
            try:
                C.s.close()
            except CKRError:
                pass
    login.close()
    C.module.finalize()
    print("pq-pyca: %d passed, %d failed; %s" % (passed, failed, ", ".join("%s: %d" % item for item in COUNTS.items())))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
