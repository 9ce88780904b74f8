#!/usr/bin/env python3
"""Conformance and cross-check tests of the PKCS#11 3.x mechanisms of a module.

Usage: test_modern.py MODULE TOKEN_LABEL USER_PIN [name-filter]

Every result is checked against an implementation that is not the module: pycryptodome (its own
C code), `cryptography` (OpenSSL from its wheel), or published vectors (RFC/NIST) written here.
Return values are checked exactly (CKRError.rv). Each test runs in its own R/W session, so the
session objects it makes disappear with it and an operation a failure left active cannot leak
into the next test. Prints "ok NAME" / "FAIL NAME: reason" / "skip NAME: reason" per test and
"modern: N passed, N failed" last; exits 1 on any failure.
"""
import hashlib
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from p11 import *  # noqa: E402,F403

from Crypto.Cipher import AES, ChaCha20, ChaCha20_Poly1305, PKCS1_OAEP  # noqa: E402
from Crypto.Hash import (CMAC, HMAC, SHA1, SHA224, SHA256, SHA384, SHA512, SHA3_224, SHA3_256,  # noqa: E402
                         SHA3_384, SHA3_512, SHAKE256)
from Crypto.Protocol.KDF import HKDF as CryptoHKDF, PBKDF2  # noqa: E402
from Crypto.PublicKey import ECC, RSA  # noqa: E402
from Crypto.Signature import DSS, eddsa, pkcs1_15, pss  # noqa: E402
from Crypto.Signature.pss import MGF1  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, rsa, x25519  # noqa: E402
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes  # noqa: E402
from cryptography.hazmat.primitives.kdf.kbkdf import CounterLocation, KBKDFCMAC, KBKDFHMAC, Mode  # noqa: E402
from cryptography.hazmat.primitives.kdf.x963kdf import X963KDF  # noqa: E402
from cryptography.hazmat.primitives.keywrap import (aes_key_unwrap_with_padding, aes_key_wrap,  # noqa: E402
                                                    aes_key_wrap_with_padding)

h = bytes.fromhex

# --- the harness -----------------------------------------------------------------------------
TESTS = []


def test(function):
    TESTS.append(function)
    return function


class Skip(Exception):
    pass


class Ctx:
    """What a test uses: the module, its slot, and a fresh logged-in R/W session `s`."""
    module = None
    slot = None
    mechanism_list = None
    s = None


C = Ctx()


def fail(message):
    raise AssertionError(message)


def eq(actual, expected, what):
    if actual != expected:
        if isinstance(actual, bytes) and isinstance(expected, bytes):
            fail("%s: got %s (%d bytes), expected %s (%d bytes)" % (what, actual.hex(), len(actual), expected.hex(), len(expected)))
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


# Flags each family of mechanisms may carry besides its required ones (spec "Mechanisms vs.
# Functions" tables, plus the message-based and EC capability flags).
CIPHER_FLAGS = CKF_ENCRYPT | CKF_DECRYPT | CKF_WRAP | CKF_UNWRAP | CKF_MESSAGE_ENCRYPT | CKF_MESSAGE_DECRYPT | CKF_MULTI_MESSAGE
MAC_FLAGS = CKF_SIGN | CKF_VERIFY | CKF_MESSAGE_SIGN | CKF_MESSAGE_VERIFY | CKF_MULTI_MESSAGE
SIGN_FLAGS = CKF_SIGN | CKF_VERIFY | CKF_MESSAGE_SIGN | CKF_MESSAGE_VERIFY | CKF_MULTI_MESSAGE
EC_CAPS = CKF_EC_F_P | CKF_EC_F_2M | CKF_EC_ECPARAMETERS | CKF_EC_OID | CKF_EC_UNCOMPRESS | CKF_EC_COMPRESS | CKF_EC_CURVENAME
ALWAYS_ALLOWED = CKF_HW | CKF_EXTENSION


def check_mech(mechanism, required, allowed=0, sizes=None):
    """The mechanism is listed, C_GetMechanismInfo has every `required` flag and none outside
    `required | allowed`, and (when given) its key sizes are one of `sizes` or satisfy it."""
    if mechanism not in C.mechanism_list:
        fail("mechanism 0x%X is not in C_GetMechanismList" % mechanism)
    lo, hi, flags = C.module.mechanism_info(C.slot, mechanism)
    if flags & required != required:
        fail("mechanism 0x%X flags %s lack %s" % (mechanism, flag_names(flags), flag_names(required & ~flags)))
    extra = flags & ~(required | allowed | ALWAYS_ALLOWED)
    if extra:
        fail("mechanism 0x%X flags %s include %s, which the specification does not give it" % (mechanism, flag_names(flags), flag_names(extra)))
    if sizes is not None:
        if callable(sizes):
            if not sizes(lo, hi):
                fail("mechanism 0x%X key sizes %d..%d out of the expected range" % (mechanism, lo, hi))
        elif (lo, hi) not in sizes:
            fail("mechanism 0x%X key sizes %d..%d, expected one of %s" % (mechanism, lo, hi, sizes))
    return flags


def contains(value):
    return lambda lo, hi: lo <= value <= hi


# --- object helpers --------------------------------------------------------------------------
def secret(key_type, value, *usages):
    """A session secret key of known value, readable (CKA_SENSITIVE FALSE, CKA_EXTRACTABLE TRUE)."""
    attrs = {CKA_CLASS: CKO_SECRET_KEY, CKA_KEY_TYPE: key_type, CKA_TOKEN: False, CKA_VALUE: value,
             CKA_SENSITIVE: False, CKA_EXTRACTABLE: True}
    for usage in usages:
        attrs[usage] = True
    return C.s.create_object(attrs)


def derived_template(key_type=CKK_GENERIC_SECRET, length=None, *usages):
    """A readable secret key's template (CKA_SENSITIVE FALSE, CKA_EXTRACTABLE TRUE)."""
    t = {CKA_CLASS: CKO_SECRET_KEY, CKA_KEY_TYPE: key_type, CKA_TOKEN: False, CKA_SENSITIVE: False, CKA_EXTRACTABLE: True}
    if length is not None:
        t[CKA_VALUE_LEN] = length
    for usage in usages:
        t[usage] = True
    return t


def value_of(handle):
    return C.s.get_attribute(handle, CKA_VALUE)


def der_octet_string(data):
    n = len(data)
    if n < 128:
        return bytes([0x04, n]) + data
    if n < 256:
        return bytes([0x04, 0x81, n]) + data
    return bytes([0x04, 0x82, n >> 8, n & 0xFF]) + data


def strip_octet_string(data):
    """CKA_EC_POINT is a DER OCTET STRING; returns its content."""
    if len(data) >= 2 and data[0] == 0x04:
        if data[1] < 128 and data[1] == len(data) - 2:
            return data[2:]
        if data[1] == 0x81 and data[2] == len(data) - 3:
            return data[3:]
    fail("CKA_EC_POINT is not a DER OCTET STRING: %s" % data.hex())


OID_P256 = h("06082a8648ce3d030107")
OID_P384 = h("06052b81040022")
OID_X25519 = h("06032b656e")
OID_ED25519 = h("06032b6570")
OID_ED448 = h("06032b6571")
NAME_ED25519 = b"\x13\x0cedwards25519"  # PrintableString curve names (PKCS#11 3.0 CKA_EC_PARAMS for Edwards keys)
NAME_ED448 = b"\x13\x0aedwards448"


def b2i(data):
    return int.from_bytes(data, "big")


def i2b(value, length):
    return value.to_bytes(length, "big")


_RSA = {}


def rsa_key(bits=2048):
    """A `cryptography` RSA key (made once per run) and its pycryptodome twin."""
    if bits not in _RSA:
        key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
        n = key.private_numbers()
        twin = RSA.construct((n.public_numbers.n, n.public_numbers.e, n.d, n.p, n.q))
        _RSA[bits] = (key, twin)
    return _RSA[bits]


def import_rsa(bits=2048, private_usages=(CKA_SIGN,), public_usages=(CKA_VERIFY,), extractable=False):
    key, twin = rsa_key(bits)
    n = key.private_numbers()
    k = (bits + 7) // 8
    def enc(v):
        return v.to_bytes((v.bit_length() + 7) // 8 or 1, "big")
    priv = {CKA_CLASS: CKO_PRIVATE_KEY, CKA_KEY_TYPE: CKK_RSA, CKA_TOKEN: False, CKA_PRIVATE: True,
            CKA_MODULUS: enc(n.public_numbers.n), CKA_PUBLIC_EXPONENT: enc(n.public_numbers.e),
            CKA_PRIVATE_EXPONENT: enc(n.d), CKA_PRIME_1: enc(n.p), CKA_PRIME_2: enc(n.q),
            CKA_EXPONENT_1: enc(n.dmp1), CKA_EXPONENT_2: enc(n.dmq1), CKA_COEFFICIENT: enc(n.iqmp)}
    if extractable:
        priv[CKA_EXTRACTABLE] = True
        priv[CKA_SENSITIVE] = False
    for u in private_usages:
        priv[u] = True
    pub = {CKA_CLASS: CKO_PUBLIC_KEY, CKA_KEY_TYPE: CKK_RSA, CKA_TOKEN: False,
           CKA_MODULUS: enc(n.public_numbers.n), CKA_PUBLIC_EXPONENT: enc(n.public_numbers.e)}
    for u in public_usages:
        pub[u] = True
    return C.s.create_object(pub), C.s.create_object(priv), twin, k


def import_ec(curve_oid, scalar, point, private_usages=(CKA_SIGN,), public_usages=(CKA_VERIFY,), key_type=CKK_EC,
              extractable=False):
    """An EC (or Edwards/Montgomery) private key from its scalar/seed, and, when `point` is
    given, its public key (CKA_EC_POINT as DER OCTET STRING)."""
    priv = {CKA_CLASS: CKO_PRIVATE_KEY, CKA_KEY_TYPE: key_type, CKA_TOKEN: False, CKA_PRIVATE: True,
            CKA_EC_PARAMS: curve_oid, CKA_VALUE: scalar}
    if extractable:
        priv[CKA_EXTRACTABLE] = True
        priv[CKA_SENSITIVE] = False
    for u in private_usages:
        priv[u] = True
    hpriv = C.s.create_object(priv)
    hpub = None
    if point is not None:
        pub = {CKA_CLASS: CKO_PUBLIC_KEY, CKA_KEY_TYPE: key_type, CKA_TOKEN: False, CKA_EC_PARAMS: curve_oid,
               CKA_EC_POINT: der_octet_string(point)}
        for u in public_usages:
            pub[u] = True
        hpub = C.s.create_object(pub)
    return hpub, hpriv


def new_p256(**kw):
    key = ec.generate_private_key(ec.SECP256R1())
    scalar = i2b(key.private_numbers().private_value, 32)
    point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    hpub, hpriv = import_ec(OID_P256, scalar, point, **kw)
    return key, hpub, hpriv


def flip(data, index=-1):
    b = bytearray(data)
    b[index] ^= 0x01
    return bytes(b)


# --- independent reference computations --------------------------------------------------------
def cbc_cs1_encrypt(key, iv, plain):
    """AES-CBC-CS1 (NIST SP 800-38A addendum): CBC over the zero-padded message, the
    penultimate block cut to the last block's length, the order kept."""
    n = len(plain)
    d = n % 16 or 16
    padded = plain + bytes(16 - d) if d < 16 else plain
    c = AES.new(key, AES.MODE_CBC, iv=iv).encrypt(padded)
    if d == 16:
        return c
    return c[:-32] + c[-32:-16][:d] + c[-16:]


def cbc_mac(key, data, length):
    """FIPS 113 data authentication: CBC with a zero IV over the zero-padded data."""
    pad = (-len(data)) % 16
    c = AES.new(key, AES.MODE_CBC, iv=bytes(16)).encrypt(data + bytes(pad))
    return c[-16:][:length]


def aes_kw(kek, data, iv=h("a6a6a6a6a6a6a6a6")):
    """RFC 3394 §2.2.1 key wrap with an explicit initial value, from AES-ECB."""
    ecb = AES.new(kek, AES.MODE_ECB)
    a = iv
    r = [data[i:i + 8] for i in range(0, len(data), 8)]
    n = len(r)
    for j in range(6):
        for i in range(n):
            b = ecb.encrypt(a + r[i])
            t = n * j + i + 1
            a = (b2i(b[:8]) ^ t).to_bytes(8, "big")
            r[i] = b[8:]
    return a + b"".join(r)


def x963_kdf(hash_name, z, shared, length):
    """ANSI X9.63 KDF: Hash(Z || counter32 || SharedInfo), counter from 1."""
    out = b""
    counter = 1
    while len(out) < length:
        out += hashlib.new(hash_name, z + counter.to_bytes(4, "big") + shared).digest()
        counter += 1
    return out[:length]


HMAC_HASH = {  # PRF mechanism → pycryptodome hash module
    CKM_SHA_1_HMAC: SHA1, CKM_SHA224_HMAC: SHA224, CKM_SHA256_HMAC: SHA256, CKM_SHA384_HMAC: SHA384,
    CKM_SHA512_HMAC: SHA512, CKM_SHA3_224_HMAC: SHA3_224, CKM_SHA3_256_HMAC: SHA3_256,
    CKM_SHA3_384_HMAC: SHA3_384, CKM_SHA3_512_HMAC: SHA3_512,
}


def prf(prf_type, key, data):
    if prf_type == CKM_AES_CMAC:
        return CMAC.new(key, msg=data, ciphermod=AES).digest()
    return HMAC.new(key, data, digestmod=HMAC_HASH[prf_type]).digest()


def prf_len(prf_type):
    return 16 if prf_type == CKM_AES_CMAC else HMAC_HASH[prf_type].digest_size


def enc_int(value, width, little):
    return value.to_bytes(width // 8, "little" if little else "big")


def sp800_108(mode, prf_type, key, items, lengths, iv=b"", contiguous=False):
    """NIST SP 800-108 KDF in counter / feedback / double-pipeline mode with the PRF input laid
    out by `items` (p11.prf_data_params notation) and PKCS#11's key allocation: each key takes
    whole segments (ceil(len/h)), in order; returns the key values. `contiguous` is the wrong
    allocation (keys cut from one stream), only to explain a failure."""
    hlen = prf_len(prf_type)
    segments = [-(-n // hlen) for n in lengths]
    if contiguous:
        segments = [-(-sum(lengths) // hlen)] + [0] * (len(lengths) - 1)
    total = sum(segments)
    def dkm(method):
        return 8 * sum(lengths) if method == CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS else 8 * hlen * total
    def build(i, iteration, with_iteration=True):
        out = b""
        for item in items:
            kind = item[0]
            if kind == "iter":
                if with_iteration:
                    out += enc_int(i, item[1], item[2]) if mode == "counter" else iteration
            elif kind == "counter":
                if with_iteration:
                    out += enc_int(i, item[1], item[2])
            elif kind == "dkm":
                out += enc_int(dkm(item[1]), item[2], item[3])
            elif kind == "bytes":
                out += item[1]
        return out
    stream = []
    if mode == "counter":
        for i in range(1, total + 1):
            stream.append(prf(prf_type, key, build(i, None)))
    elif mode == "feedback":
        k = iv
        for i in range(1, total + 1):
            k = prf(prf_type, key, build(i, k))
            stream.append(k)
    else:  # double pipeline: A(0) is the input without iteration variable and counter
        a = build(0, None, with_iteration=False)
        for i in range(1, total + 1):
            a = prf(prf_type, key, a)
            stream.append(prf(prf_type, key, build(i, a)))
    keys, at = [], 0
    if contiguous:
        whole = b"".join(stream)
        return [whole[sum(lengths[:i]):sum(lengths[:i + 1])] for i in range(len(lengths))]
    for n, count in zip(lengths, segments):
        keys.append(b"".join(stream[at:at + count])[:n])
        at += count
    return keys


# =============================================================================================
# AEAD and ciphers
# =============================================================================================
GCM_K = h("feffe9928665731c6d6a8f9467308308")
GCM_IV = h("cafebabefacedbaddecaf888")
GCM_P = h("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
GCM_A = h("feedfacedeadbeeffeedfacedeadbeefabaddad2")
GCM_C = h("42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091")
GCM_T = h("5bc94fbc3221a5db94fae95ae7121a47")


@test
def aes_gcm():
    """CKM_AES_GCM (existing): the GCM spec's test case 4, a 256-bit key against pycryptodome,
    multi-part, a bad tag, a bad tag length."""
    check_mech(CKM_AES_GCM, CKF_ENCRYPT | CKF_DECRYPT, CIPHER_FLAGS, [(16, 32)])
    s = C.s
    key = secret(CKK_AES, GCM_K, CKA_ENCRYPT, CKA_DECRYPT)
    m = gcm_params(GCM_IV, GCM_A, 128)
    eq(s.encrypt(m, key, GCM_P), GCM_C + GCM_T, "GCM test case 4")
    eq(s.decrypt(m, key, GCM_C + GCM_T), GCM_P, "GCM test case 4 decrypted")
    eq(s.encrypt_parts(m, key, [GCM_P[:7], GCM_P[7:40], GCM_P[40:]]), GCM_C + GCM_T, "multi-part GCM")
    eq(s.decrypt_parts(m, key, [(GCM_C + GCM_T)[:10], (GCM_C + GCM_T)[10:]]), GCM_P, "multi-part GCM decryption")
    k2, iv2, aad2, p2 = os.urandom(32), os.urandom(12), os.urandom(17), os.urandom(100)
    ref = AES.new(k2, AES.MODE_GCM, nonce=iv2, mac_len=12)
    ref.update(aad2)
    c2, t2 = ref.encrypt_and_digest(p2)
    key2 = secret(CKK_AES, k2, CKA_ENCRYPT, CKA_DECRYPT)
    eq(s.encrypt(gcm_params(iv2, aad2, 96), key2, p2), c2 + t2, "AES-256-GCM, 96-bit tag")
    expect_rv(CKR_ENCRYPTED_DATA_INVALID, "GCM with a modified tag", s.decrypt, m, key, flip(GCM_C + GCM_T))
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "GCM with ulTagBits 129", s.encrypt_init, gcm_params(GCM_IV, b"", 129), key)


RFC3610_K = h("c0c1c2c3c4c5c6c7c8c9cacbcccdcecf")
RFC3610_N = h("00000003020100a0a1a2a3a4a5")
RFC3610_A = h("0001020304050607")
RFC3610_P = bytes(range(0x08, 0x1F))
RFC3610_C = h("588c979a61c663d2f066d0c2c0f989806d5f6b61dac38417e8d12cfdf926e0")


@test
def aes_ccm():
    """CKM_AES_CCM with CK_CCM_PARAMS: RFC 3610 packet vector #1 (M=8), AES-256 with a 12-byte
    nonce against pycryptodome, multi-part both ways; for decryption ulDataLen is the plaintext
    length (the MAC excluded)."""
    check_mech(CKM_AES_CCM, CKF_ENCRYPT | CKF_DECRYPT, CIPHER_FLAGS, [(16, 32)])
    s = C.s
    key = secret(CKK_AES, RFC3610_K, CKA_ENCRYPT, CKA_DECRYPT)
    m = ccm_params(len(RFC3610_P), RFC3610_N, RFC3610_A, 8)
    eq(s.encrypt(m, key, RFC3610_P), RFC3610_C, "RFC 3610 packet vector #1")
    eq(s.decrypt(m, key, RFC3610_C), RFC3610_P, "RFC 3610 packet vector #1 decrypted (ulDataLen = plaintext length)")
    k2, n2, a2, p2 = os.urandom(32), os.urandom(12), os.urandom(20), os.urandom(100)
    ref = AES.new(k2, AES.MODE_CCM, nonce=n2, mac_len=16)
    ref.update(a2)
    c2, t2 = ref.encrypt_and_digest(p2)
    key2 = secret(CKK_AES, k2, CKA_ENCRYPT, CKA_DECRYPT)
    m2 = ccm_params(100, n2, a2, 16)
    eq(s.encrypt(m2, key2, p2), c2 + t2, "AES-256-CCM against pycryptodome")
    eq(s.encrypt_parts(m2, key2, [p2[:33], p2[33:34], p2[34:]]), c2 + t2, "multi-part CCM encryption")
    eq(s.decrypt_parts(m2, key2, [(c2 + t2)[:50], (c2 + t2)[50:]]), p2, "multi-part CCM decryption")
    expect_rv(CKR_ENCRYPTED_DATA_INVALID, "CCM with a modified MAC", s.decrypt, m2, key2, flip(c2 + t2))
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "CCM with ulMACLen 5", s.encrypt_init, ccm_params(100, n2, a2, 5), key2)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "CCM with a 6-byte nonce", s.encrypt_init, ccm_params(100, n2[:6], a2, 16), key2)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "CCM with a 14-byte nonce", s.encrypt_init, ccm_params(100, os.urandom(14), a2, 16), key2)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "CCM parameter of 40 bytes", s.encrypt_init, m2.with_length(40), key2)
    expect_rv(CKR_DATA_LEN_RANGE, "CCM encryption of 99 bytes with ulDataLen 100", s.encrypt, m2, key2, p2[:99])
    expect_rv(CKR_ENCRYPTED_DATA_LEN_RANGE, "CCM decryption of ulDataLen+ulMACLen-1 bytes", s.decrypt, m2, key2, (c2 + t2)[:-1])
    des3 = secret(CKK_DES3, h("0123456789abcdeffedcba987654321089abcdef01234567"), CKA_ENCRYPT, CKA_DECRYPT)
    expect_rv(CKR_KEY_TYPE_INCONSISTENT, "CCM with a DES3 key", s.encrypt_init, m2, des3)


RFC3962_K = h("636869636b656e207465726979616b69")
RFC3962 = [  # (plaintext, CBC-CS3 output) from RFC 3962 Appendix B, AES-128, IV 0
    ("4920776f756c64206c696b652074686520", "c6353568f2bf8cb4d8a580362da7ff7f97"),
    ("4920776f756c64206c696b65207468652047656e6572616c20476175277320",
     "fc00783e0efdb2c1d445d4c8eff7ed2297687268d6ecccc0c07b25e25ecfe5"),
    ("4920776f756c64206c696b65207468652047656e6572616c2047617527732043",
     "39312523a78662d5be7fcbcc98ebf5a897687268d6ecccc0c07b25e25ecfe584"),
]


def cs3_to_cs1(c, n):
    """CS3 always swaps the last two blocks; CS1 never does (and equals CBC on whole blocks)."""
    d = n % 16 or 16
    head, last, penult = c[:-(16 + d)], c[-(16 + d):-d], c[-d:]
    return head + penult + last


@test
def aes_cts():
    """CKM_AES_CTS, CBC-CS1 of NIST SP 800-38A's addendum (the spec cites [NIST AES CTS]; CS1 is
    OpenSSL's and Kryoptic's default): RFC 3962's vectors put in CS1 order, random lengths against
    CS1 built from AES-CBC, inputs under one block refused."""
    check_mech(CKM_AES_CTS, CKF_ENCRYPT | CKF_DECRYPT, CIPHER_FLAGS, [(16, 32)])
    s = C.s
    key = secret(CKK_AES, RFC3962_K, CKA_ENCRYPT, CKA_DECRYPT)
    iv = bytes(16)
    for pt, cs3 in RFC3962:
        p = h(pt)
        expected = cs3_to_cs1(h(cs3), len(p))
        eq(cbc_cs1_encrypt(RFC3962_K, iv, p), expected, "reference CS1 on RFC 3962 (harness self-check)")
        got = s.encrypt(mech(CKM_AES_CTS, iv), key, p)
        if got != expected and got == h(cs3):
            fail("CTS of %d bytes is CBC-CS3 (RFC 3962/Kerberos order: last two blocks swapped); expected CBC-CS1, "
                 "the NIST addendum's variant that NSS, OpenSSL and Kryoptic give CKM_AES_CTS" % len(p))
        eq(got, expected, "CTS of %d bytes (RFC 3962 in CS1 order)" % len(p))
        eq(s.decrypt(mech(CKM_AES_CTS, iv), key, expected), p, "CTS decryption of %d bytes" % len(p))
    k2 = os.urandom(32)
    key2 = secret(CKK_AES, k2, CKA_ENCRYPT, CKA_DECRYPT)
    for n in (16, 17, 31, 33, 47, 64, 100):
        iv2, p = os.urandom(16), os.urandom(n)
        expected = cbc_cs1_encrypt(k2, iv2, p)
        eq(s.encrypt(mech(CKM_AES_CTS, iv2), key2, p), expected, "AES-256-CTS of %d bytes" % n)
        eq(s.decrypt(mech(CKM_AES_CTS, iv2), key2, expected), p, "AES-256-CTS decryption of %d bytes" % n)
    expect_rv(CKR_DATA_LEN_RANGE, "CTS of 15 bytes", s.encrypt, mech(CKM_AES_CTS, iv), key2, os.urandom(15))
    expect_rv(CKR_ENCRYPTED_DATA_LEN_RANGE, "CTS decryption of 15 bytes", s.decrypt, mech(CKM_AES_CTS, iv), key2, os.urandom(15))
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "CTS with an 8-byte IV", s.encrypt_init, mech(CKM_AES_CTS, bytes(8)), key2)


@test
def aes_cts_multipart():
    """CKM_AES_CTS through C_EncryptUpdate/C_DecryptUpdate gives what one C_Encrypt gives."""
    s = C.s
    k, iv, p = os.urandom(16), os.urandom(16), os.urandom(75)
    key = secret(CKK_AES, k, CKA_ENCRYPT, CKA_DECRYPT)
    expected = cbc_cs1_encrypt(k, iv, p)
    eq(s.encrypt_parts(mech(CKM_AES_CTS, iv), key, [p[:5], p[5:40], p[40:]]), expected, "multi-part CTS encryption")
    eq(s.decrypt_parts(mech(CKM_AES_CTS, iv), key, [expected[:20], expected[20:70], expected[70:]]), p, "multi-part CTS decryption")


def stream_mode_test(mechanism, make_ref):
    check_mech(mechanism, CKF_ENCRYPT | CKF_DECRYPT, CIPHER_FLAGS, [(16, 32)])
    s = C.s
    for klen in (16, 24, 32):
        k, iv = os.urandom(klen), os.urandom(16)
        key = secret(CKK_AES, k, CKA_ENCRYPT, CKA_DECRYPT)
        for n in (37, 64):
            p = os.urandom(n)
            expected = make_ref(k, iv).encrypt(p)
            eq(s.encrypt(mech(mechanism, iv), key, p), expected, "AES-%d, %d bytes" % (klen * 8, n))
            eq(s.decrypt(mech(mechanism, iv), key, expected), p, "AES-%d decryption, %d bytes" % (klen * 8, n))
        p = os.urandom(50)
        expected = make_ref(k, iv).encrypt(p)
        eq(s.encrypt_parts(mech(mechanism, iv), key, [p[:5], p[5:25], p[25:37], p[37:]]), expected, "multi-part encryption")
        eq(s.decrypt_parts(mech(mechanism, iv), key, [expected[:1], expected[1:17], expected[17:]]), p, "multi-part decryption")
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "an 8-byte IV", s.encrypt_init, mech(mechanism, bytes(8)), key)
    return key


NIST_K = h("2b7e151628aed2a6abf7158809cf4f3c")
NIST_IV = h("000102030405060708090a0b0c0d0e0f")
NIST_P = h("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51")


@test
def aes_ofb():
    """CKM_AES_OFB against pycryptodome and SP 800-38A F.4.1."""
    stream_mode_test(CKM_AES_OFB, lambda k, iv: AES.new(k, AES.MODE_OFB, iv=iv))
    key = secret(CKK_AES, NIST_K, CKA_ENCRYPT, CKA_DECRYPT)
    eq(C.s.encrypt(mech(CKM_AES_OFB, NIST_IV), key, NIST_P),
       h("3b3fd92eb72dad20333449f8e83cfb4a7789508d16918f03f53c52dac54ed825"), "SP 800-38A F.4.1 OFB-AES128")


@test
def aes_cfb8():
    """CKM_AES_CFB8 against pycryptodome and SP 800-38A F.3.7."""
    stream_mode_test(CKM_AES_CFB8, lambda k, iv: AES.new(k, AES.MODE_CFB, iv=iv, segment_size=8))
    key = secret(CKK_AES, NIST_K, CKA_ENCRYPT, CKA_DECRYPT)
    eq(C.s.encrypt(mech(CKM_AES_CFB8, NIST_IV), key, NIST_P[:18]), h("3b79424c9c0dd436bace9e0ed4586a4f32b9"),
       "SP 800-38A F.3.7 CFB8-AES128")


@test
def aes_cfb128():
    """CKM_AES_CFB128 against pycryptodome and SP 800-38A F.3.13."""
    stream_mode_test(CKM_AES_CFB128, lambda k, iv: AES.new(k, AES.MODE_CFB, iv=iv, segment_size=128))
    key = secret(CKK_AES, NIST_K, CKA_ENCRYPT, CKA_DECRYPT)
    eq(C.s.encrypt(mech(CKM_AES_CFB128, NIST_IV), key, NIST_P),
       h("3b3fd92eb72dad20333449f8e83cfb4ac8a64537a0b3a93fcde3cdad9f1ce58b"), "SP 800-38A F.3.13 CFB128-AES128")


def xts_reference(key, tweak, data, encrypt=True):
    c = Cipher(algorithms.AES(key), modes.XTS(tweak))
    op = c.encryptor() if encrypt else c.decryptor()
    return op.update(data) + op.finalize()


def xts_key():
    while True:
        k = os.urandom(64)
        if k[:32] != k[32:]:
            return k


@test
def aes_xts():
    """CKM_AES_XTS (flat 16-byte tweak) with CKK_AES_XTS keys of 32 and 64 bytes against
    `cryptography`'s XTS, ciphertext stealing included; CKM_AES_XTS_KEY_GEN."""
    check_mech(CKM_AES_XTS, CKF_ENCRYPT | CKF_DECRYPT, CIPHER_FLAGS, [(32, 64)])
    check_mech(CKM_AES_XTS_KEY_GEN, CKF_GENERATE, 0, [(32, 64)])
    s = C.s
    for klen, sizes in ((32, (16, 512, 37)), (64, (16, 100, 4096))):
        k = xts_key() if klen == 64 else xts_key()[16:48]
        key = secret(CKK_AES_XTS, k, CKA_ENCRYPT, CKA_DECRYPT)
        for n in sizes:
            tweak, p = os.urandom(16), os.urandom(n)
            expected = xts_reference(k, tweak, p)
            eq(s.encrypt(mech(CKM_AES_XTS, tweak), key, p), expected, "XTS-AES-%d of %d bytes" % (klen * 4, n))
            eq(s.decrypt(mech(CKM_AES_XTS, tweak), key, expected), p, "XTS-AES-%d decryption of %d bytes" % (klen * 4, n))
    for klen in (32, 64):
        g = s.generate_key(mech(CKM_AES_XTS_KEY_GEN), {CKA_TOKEN: False, CKA_VALUE_LEN: klen, CKA_ENCRYPT: True,
                                                       CKA_DECRYPT: True, CKA_SENSITIVE: False, CKA_EXTRACTABLE: True})
        eq(s.get_ulong(g, CKA_KEY_TYPE), CKK_AES_XTS, "generated key type")
        eq(s.get_ulong(g, CKA_CLASS), CKO_SECRET_KEY, "generated key class")
        k = value_of(g)
        eq(len(k), klen, "generated XTS key length")
        tweak, p = os.urandom(16), os.urandom(48)
        eq(s.encrypt(mech(CKM_AES_XTS, tweak), g, p), xts_reference(k, tweak, p), "XTS with a generated %d-byte key" % klen)
    expect_rv(CKR_DATA_LEN_RANGE, "XTS of 15 bytes", s.encrypt, mech(CKM_AES_XTS, bytes(16)), key, os.urandom(15))
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "XTS with an 8-byte tweak", s.encrypt_init, mech(CKM_AES_XTS, bytes(8)), key)
    aes = secret(CKK_AES, os.urandom(32), CKA_ENCRYPT, CKA_DECRYPT)
    expect_rv(CKR_KEY_TYPE_INCONSISTENT, "XTS with a CKK_AES key", s.encrypt_init, mech(CKM_AES_XTS, bytes(16)), aes)


@test
def aes_xts_multipart():
    """CKM_AES_XTS ("single- and multiple-part"): parts of whole blocks, then a last part with
    stealing, give the single-part result of the one data unit."""
    s = C.s
    k, tweak, p = xts_key(), os.urandom(16), os.urandom(32 * 3 + 9)
    key = secret(CKK_AES_XTS, k, CKA_ENCRYPT, CKA_DECRYPT)
    expected = xts_reference(k, tweak, p)
    eq(s.encrypt_parts(mech(CKM_AES_XTS, tweak), key, [p[:32], p[32:64], p[64:]]), expected, "multi-part XTS encryption")
    eq(s.decrypt_parts(mech(CKM_AES_XTS, tweak), key, [expected[:48], expected[48:]]), p, "multi-part XTS decryption")


RFC8439_SUNSCREEN = (b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, "
                     b"sunscreen would be it.")
RFC8439_CHACHA_C = h("6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0bf91b65c5524733ab8f593dabcd62b357"
                     "1639d624e65152ab8f530c359f0861d807ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab77937365af90bbf74a35be6b40b8eedf2785e42874d")
CHACHA_SIZES = [(32, 32), (256, 256)]  # key gen says bytes, CKM_CHACHA20 says bits (see the report)


@test
def chacha20():
    """CKM_CHACHA20 with CK_CHACHA20_PARAMS: RFC 8439 §2.4.2 (32-bit counter 1, 96-bit nonce;
    pBlockCounter holds the counter word as the ChaCha state does, little-endian), the original
    64-bit-counter/64-bit-nonce variant against pycryptodome (a counter crossing 2^32 too),
    multi-part, CKM_CHACHA20_KEY_GEN, bad parameters and key type."""
    check_mech(CKM_CHACHA20, CKF_ENCRYPT | CKF_DECRYPT, CIPHER_FLAGS, CHACHA_SIZES)
    check_mech(CKM_CHACHA20_KEY_GEN, CKF_GENERATE, 0, [(32, 32)])
    s = C.s
    key = secret(CKK_CHACHA20, bytes(range(32)), CKA_ENCRYPT, CKA_DECRYPT)
    nonce = h("000000000000004a00000000")
    m = chacha20_params((1).to_bytes(4, "little"), nonce)
    eq(s.encrypt(m, key, RFC8439_SUNSCREEN), RFC8439_CHACHA_C, "RFC 8439 §2.4.2")
    eq(s.decrypt(m, key, RFC8439_CHACHA_C), RFC8439_SUNSCREEN, "RFC 8439 §2.4.2 decrypted")
    parts = [RFC8439_SUNSCREEN[:7], RFC8439_SUNSCREEN[7:71], RFC8439_SUNSCREEN[71:]]
    eq(s.encrypt_parts(m, key, parts), RFC8439_CHACHA_C, "multi-part ChaCha20")
    eq(s.decrypt_parts(m, key, [RFC8439_CHACHA_C[:60], RFC8439_CHACHA_C[60:]]), RFC8439_SUNSCREEN, "multi-part ChaCha20 decryption")
    k2 = os.urandom(32)
    key2 = secret(CKK_CHACHA20, k2, CKA_ENCRYPT, CKA_DECRYPT)
    for counter in (0, 1, 0xFFFFFFFF):
        n8, p = os.urandom(8), os.urandom(200)
        ref = ChaCha20.new(key=k2, nonce=n8)
        ref.seek(counter * 64)
        eq(s.encrypt(chacha20_params(counter.to_bytes(8, "little"), n8), key2, p), ref.encrypt(p),
           "ChaCha20 with a 64-bit counter %d and a 64-bit nonce" % counter)
    n12, p = os.urandom(12), os.urandom(300)
    ref = ChaCha20.new(key=k2, nonce=n12)
    ref.seek(7 * 64)
    eq(s.encrypt(chacha20_params((7).to_bytes(4, "little"), n12), key2, p), ref.encrypt(p), "ChaCha20 IETF, counter 7")
    g = s.generate_key(mech(CKM_CHACHA20_KEY_GEN), {CKA_TOKEN: False, CKA_ENCRYPT: True, CKA_DECRYPT: True,
                                                     CKA_SENSITIVE: False, CKA_EXTRACTABLE: True})
    eq(s.get_ulong(g, CKA_KEY_TYPE), CKK_CHACHA20, "generated key type")
    kg = value_of(g)
    eq(len(kg), 32, "generated ChaCha20 key length")
    ref = ChaCha20.new(key=kg, nonce=n12)
    eq(s.encrypt(chacha20_params(bytes(4), n12), g, p[:50]), ref.encrypt(p[:50]), "ChaCha20 with the generated key")
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "ChaCha20 with an 80-bit nonce", s.encrypt_init,
              chacha20_params(bytes(4), os.urandom(10)), key)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "ChaCha20 with a 16-bit counter", s.encrypt_init,
              chacha20_params(bytes(2), nonce), key)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "CK_CHACHA20_PARAMS of 24 bytes", s.encrypt_init, m.with_length(24), key)
    aes = secret(CKK_AES, os.urandom(32), CKA_ENCRYPT, CKA_DECRYPT)
    expect_rv(CKR_KEY_TYPE_INCONSISTENT, "ChaCha20 with an AES key", s.encrypt_init, m, aes)


RFC8439_AEAD_K = bytes(range(0x80, 0xA0))
RFC8439_AEAD_N = h("070000004041424344454647")
RFC8439_AEAD_A = h("50515253c0c1c2c3c4c5c6c7")
RFC8439_AEAD_C = h("d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b"
                   "1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116")
RFC8439_AEAD_T = h("1ae10b594f09e26a7e902ecbd0600691")


@test
def chacha20_poly1305():
    """CKM_CHACHA20_POLY1305 with CK_SALSA20_CHACHA20_POLY1305_PARAMS, ulNonceLen 12 as NSS,
    Kryoptic and the header's field name read it: RFC 8439 §2.8.2 (tag appended), pycryptodome,
    multi-part, a bad tag, a bad nonce length, a wrong key type."""
    check_mech(CKM_CHACHA20_POLY1305, CKF_ENCRYPT | CKF_DECRYPT, CIPHER_FLAGS, CHACHA_SIZES)
    s = C.s
    key = secret(CKK_CHACHA20, RFC8439_AEAD_K, CKA_ENCRYPT, CKA_DECRYPT)
    m = chacha20_poly1305_params(RFC8439_AEAD_N, RFC8439_AEAD_A)
    eq(s.encrypt(m, key, RFC8439_SUNSCREEN), RFC8439_AEAD_C + RFC8439_AEAD_T, "RFC 8439 §2.8.2")
    eq(s.decrypt(m, key, RFC8439_AEAD_C + RFC8439_AEAD_T), RFC8439_SUNSCREEN, "RFC 8439 §2.8.2 decrypted")
    eq(s.encrypt_parts(m, key, [RFC8439_SUNSCREEN[:1], RFC8439_SUNSCREEN[1:64], RFC8439_SUNSCREEN[64:]]),
       RFC8439_AEAD_C + RFC8439_AEAD_T, "multi-part ChaCha20-Poly1305")
    ct = RFC8439_AEAD_C + RFC8439_AEAD_T
    eq(s.decrypt_parts(m, key, [ct[:100], ct[100:120], ct[120:]]), RFC8439_SUNSCREEN, "multi-part decryption")
    k2, n2, p2 = os.urandom(32), os.urandom(12), os.urandom(77)
    ref = ChaCha20_Poly1305.new(key=k2, nonce=n2)
    c2, t2 = ref.encrypt_and_digest(p2)
    key2 = secret(CKK_CHACHA20, k2, CKA_ENCRYPT, CKA_DECRYPT)
    eq(s.encrypt(chacha20_poly1305_params(n2), key2, p2), c2 + t2, "ChaCha20-Poly1305 without AAD against pycryptodome")
    expect_rv(CKR_ENCRYPTED_DATA_INVALID, "ChaCha20-Poly1305 with a modified tag", s.decrypt, m, key, flip(ct))
    expect_rv(CKR_ENCRYPTED_DATA_INVALID, "ChaCha20-Poly1305 with modified AAD", s.decrypt,
              chacha20_poly1305_params(RFC8439_AEAD_N, flip(RFC8439_AEAD_A)), key, ct)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "ChaCha20-Poly1305 with a 10-byte nonce", s.encrypt_init,
              chacha20_poly1305_params(os.urandom(10)), key)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "parameter of 24 bytes", s.encrypt_init, m.with_length(24), key)
    aes = secret(CKK_AES, os.urandom(32), CKA_ENCRYPT, CKA_DECRYPT)
    expect_rv(CKR_KEY_TYPE_INCONSISTENT, "ChaCha20-Poly1305 with an AES key", s.encrypt_init, m, aes)


@test
def chacha20_poly1305_nonce_len_in_bits():
    """The specification's text: "ulNonceLen is the length of the nonce in bits" (96 for IETF)."""
    s = C.s
    key = secret(CKK_CHACHA20, RFC8439_AEAD_K, CKA_ENCRYPT, CKA_DECRYPT)
    m = chacha20_poly1305_params(RFC8439_AEAD_N, RFC8439_AEAD_A, nonce_len=96)
    eq(s.encrypt(m, key, RFC8439_SUNSCREEN), RFC8439_AEAD_C + RFC8439_AEAD_T, "RFC 8439 §2.8.2 with ulNonceLen 96")


# =============================================================================================
# MACs
# =============================================================================================
def mac_checks(mechanism, key, data, mac, parts=None):
    s = C.s
    eq(s.sign(mechanism, key, data), mac, "MAC")
    if parts:
        eq(s.sign_parts(mechanism, key, parts), mac, "multi-part MAC")
    s.verify(mechanism, key, data, mac)
    if parts:
        s.verify_parts(mechanism, key, parts, mac)
    expect_rv(CKR_SIGNATURE_INVALID, "verify a modified MAC", s.verify, mechanism, key, data, flip(mac))
    expect_rv(CKR_SIGNATURE_LEN_RANGE, "verify a MAC one byte longer", s.verify, mechanism, key, data, mac + b"\0")


@test
def aes_mac():
    """CKM_AES_MAC (half a block) and CKM_AES_MAC_GENERAL (CK_MAC_GENERAL_PARAMS) against CBC-MAC
    (FIPS 113: zero IV, last block zero-padded) from pycryptodome's AES-CBC."""
    check_mech(CKM_AES_MAC, CKF_SIGN | CKF_VERIFY, MAC_FLAGS, [(16, 32)])
    check_mech(CKM_AES_MAC_GENERAL, CKF_SIGN | CKF_VERIFY, MAC_FLAGS, [(16, 32)])
    s = C.s
    for klen in (16, 32):
        k = os.urandom(klen)
        key = secret(CKK_AES, k, CKA_SIGN, CKA_VERIFY)
        for n in (32, 37):
            data = os.urandom(n)
            mac_checks(mech(CKM_AES_MAC), key, data, cbc_mac(k, data, 8), [data[:3], data[3:20], data[20:]])
            for length in (1, 4, 16):
                mac_checks(mech(CKM_AES_MAC_GENERAL, length.to_bytes(8, "little")), key, data, cbc_mac(k, data, length))
    for bad in (0, 17):
        expect_rv(CKR_MECHANISM_PARAM_INVALID, "AES_MAC_GENERAL of length %d" % bad, s.sign_init,
                  mech(CKM_AES_MAC_GENERAL, bad.to_bytes(8, "little")), key)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "AES_MAC_GENERAL with a 4-byte parameter", s.sign_init,
              mech(CKM_AES_MAC_GENERAL, (8).to_bytes(4, "little")), key)


@test
def aes_cmac_general():
    """CKM_AES_CMAC_GENERAL: RFC 4493 example 2 truncated, pycryptodome's CMAC, bad lengths."""
    check_mech(CKM_AES_CMAC_GENERAL, CKF_SIGN | CKF_VERIFY, MAC_FLAGS, [(16, 32)])
    s = C.s
    key = secret(CKK_AES, NIST_K, CKA_SIGN, CKA_VERIFY)
    full = h("070a16b46b4d4144f79bdd9dd04a287c")
    for length in (4, 8, 16):
        mac_checks(mech(CKM_AES_CMAC_GENERAL, length.to_bytes(8, "little")), key, NIST_P[:16], full[:length])
    k2, data = os.urandom(32), os.urandom(45)
    key2 = secret(CKK_AES, k2, CKA_SIGN, CKA_VERIFY)
    ref = CMAC.new(k2, msg=data, ciphermod=AES).digest()
    mac_checks(mech(CKM_AES_CMAC_GENERAL, (12).to_bytes(8, "little")), key2, data, ref[:12], [data[:16], data[16:]])
    for bad in (0, 17):
        expect_rv(CKR_MECHANISM_PARAM_INVALID, "CMAC_GENERAL of length %d" % bad, s.sign_init,
                  mech(CKM_AES_CMAC_GENERAL, bad.to_bytes(8, "little")), key)


HMAC_GENERAL = [(CKM_SHA_1_HMAC_GENERAL, SHA1), (CKM_SHA224_HMAC_GENERAL, SHA224), (CKM_SHA256_HMAC_GENERAL, SHA256),
                (CKM_SHA384_HMAC_GENERAL, SHA384), (CKM_SHA512_HMAC_GENERAL, SHA512), (CKM_SHA3_224_HMAC_GENERAL, SHA3_224),
                (CKM_SHA3_256_HMAC_GENERAL, SHA3_256), (CKM_SHA3_384_HMAC_GENERAL, SHA3_384), (CKM_SHA3_512_HMAC_GENERAL, SHA3_512)]


@test
def hmac_general():
    """The nine _HMAC_GENERAL mechanisms: output truncated to CK_MAC_GENERAL_PARAMS bytes
    (pycryptodome's HMAC; RFC 4231 case 2 for SHA-256), lengths 0 and hLen+1 refused."""
    s = C.s
    for mechanism, hmod in HMAC_GENERAL:
        check_mech(mechanism, CKF_SIGN | CKF_VERIFY, MAC_FLAGS)
        k, data = os.urandom(hmod.digest_size), os.urandom(70)
        key = secret(CKK_GENERIC_SECRET, k, CKA_SIGN, CKA_VERIFY)
        full = HMAC.new(k, data, digestmod=hmod).digest()
        for length in (1, hmod.digest_size // 2, hmod.digest_size):
            try:
                mac_checks(mech(mechanism, length.to_bytes(8, "little")), key, data, full[:length],
                           [data[:9], data[9:]] if length == hmod.digest_size // 2 else None)
            except AssertionError as e:
                fail("mechanism 0x%X, length %d: %s" % (mechanism, length, e))
        for bad in (0, hmod.digest_size + 1):
            expect_rv(CKR_MECHANISM_PARAM_INVALID, "mechanism 0x%X of length %d" % (mechanism, bad), s.sign_init,
                      mech(mechanism, bad.to_bytes(8, "little")), key)
    jefe = secret(CKK_GENERIC_SECRET, b"Jefe", CKA_SIGN, CKA_VERIFY)
    eq(s.sign(mech(CKM_SHA256_HMAC_GENERAL, (16).to_bytes(8, "little")), jefe, b"what do ya want for nothing?"),
       h("5bdcc146bf60754e6a042426089575c7"), "RFC 4231 test case 2, truncated to 16 bytes")


# =============================================================================================
# Signatures
# =============================================================================================
SHA3_RSA = [(CKM_SHA3_224_RSA_PKCS, CKM_SHA3_224_RSA_PKCS_PSS, CKM_SHA3_224, CKG_MGF1_SHA3_224, SHA3_224),
            (CKM_SHA3_256_RSA_PKCS, CKM_SHA3_256_RSA_PKCS_PSS, CKM_SHA3_256, CKG_MGF1_SHA3_256, SHA3_256),
            (CKM_SHA3_384_RSA_PKCS, CKM_SHA3_384_RSA_PKCS_PSS, CKM_SHA3_384, CKG_MGF1_SHA3_384, SHA3_384),
            (CKM_SHA3_512_RSA_PKCS, CKM_SHA3_512_RSA_PKCS_PSS, CKM_SHA3_512, CKG_MGF1_SHA3_512, SHA3_512)]


@test
def rsa_sha3_pkcs1():
    """CKM_SHA3_*_RSA_PKCS: the signature equals pycryptodome's PKCS#1 v1.5 (deterministic),
    pycryptodome's verifies on the token, multi-part equals single-part."""
    pub, priv, twin, k = import_rsa()
    s = C.s
    for mechanism, _, _, _, hmod in SHA3_RSA:
        check_mech(mechanism, CKF_SIGN | CKF_VERIFY, SIGN_FLAGS, contains(2048))
        data = os.urandom(100)
        expected = pkcs1_15.new(twin).sign(hmod.new(data))
        eq(s.sign(mech(mechanism), priv, data), expected, "mechanism 0x%X signature" % mechanism)
        eq(s.sign_parts(mech(mechanism), priv, [data[:30], data[30:]]), expected, "mechanism 0x%X multi-part" % mechanism)
        s.verify(mech(mechanism), pub, data, expected)
        s.verify_parts(mech(mechanism), pub, [data[:1], data[1:]], expected)
        expect_rv(CKR_SIGNATURE_INVALID, "mechanism 0x%X, modified signature" % mechanism, s.verify, mech(mechanism), pub, data, flip(expected))


def pss_verify(twin, hmod, mgf_hmod, salt, data_hash_object, signature):
    pss.new(twin, mask_func=lambda x, y: MGF1(x, y, mgf_hmod), salt_bytes=salt).verify(data_hash_object, signature)


def pss_sign(twin, hmod, mgf_hmod, salt, data_hash_object):
    return pss.new(twin, mask_func=lambda x, y: MGF1(x, y, mgf_hmod), salt_bytes=salt).sign(data_hash_object)


@test
def rsa_sha3_pss():
    """CKM_SHA3_*_RSA_PKCS_PSS: verified by pycryptodome (MGF1 with the same SHA-3, and with
    MGF1-SHA256), pycryptodome's verify on the token, a hashAlg other than the mechanism's hash
    and a salt longer than k-2-hLen refused."""
    pub, priv, twin, k = import_rsa()
    s = C.s
    for mechanism_pkcs, mechanism, hash_mech, mgf, hmod in SHA3_RSA:
        check_mech(mechanism, CKF_SIGN | CKF_VERIFY, SIGN_FLAGS, contains(2048))
        for mgf_id, mgf_mod in ((mgf, hmod), (CKG_MGF1_SHA256, SHA256)):
            data = os.urandom(64)
            m = pss_params(mechanism, hash_mech, mgf_id, hmod.digest_size)
            sig = s.sign(m, priv, data)
            eq(len(sig), k, "PSS signature length")
            try:
                pss_verify(twin, hmod, mgf_mod, hmod.digest_size, hmod.new(data), sig)
            except ValueError:
                fail("mechanism 0x%X with MGF %d: pycryptodome rejects the token's signature" % (mechanism, mgf_id))
            sig2 = s.sign_parts(m, priv, [data[:10], data[10:]])
            pss_verify(twin, hmod, mgf_mod, hmod.digest_size, hmod.new(data), sig2)
            s.verify(m, pub, data, pss_sign(twin, hmod, mgf_mod, hmod.digest_size, hmod.new(data)))
            expect_rv(CKR_SIGNATURE_INVALID, "modified PSS signature", s.verify, m, pub, data, flip(sig))
        expect_rv(CKR_MECHANISM_PARAM_INVALID, "mechanism 0x%X with hashAlg SHA-256" % mechanism, s.sign_init,
                  pss_params(mechanism, CKM_SHA256, mgf, hmod.digest_size), priv)
        expect_rv(CKR_MECHANISM_PARAM_INVALID, "mechanism 0x%X with sLen k-1-hLen" % mechanism, s.sign_init,
                  pss_params(mechanism, hash_mech, mgf, k - 1 - hmod.digest_size), priv)


PSS_HASHES = [(CKM_SHA_1, SHA1), (CKM_SHA224, SHA224), (CKM_SHA256, SHA256), (CKM_SHA384, SHA384), (CKM_SHA512, SHA512),
              (CKM_SHA3_224, SHA3_224), (CKM_SHA3_256, SHA3_256), (CKM_SHA3_384, SHA3_384), (CKM_SHA3_512, SHA3_512)]
MGFS = [(CKG_MGF1_SHA1, SHA1), (CKG_MGF1_SHA224, SHA224), (CKG_MGF1_SHA256, SHA256), (CKG_MGF1_SHA384, SHA384),
        (CKG_MGF1_SHA512, SHA512), (CKG_MGF1_SHA3_224, SHA3_224), (CKG_MGF1_SHA3_256, SHA3_256),
        (CKG_MGF1_SHA3_384, SHA3_384), (CKG_MGF1_SHA3_512, SHA3_512)]


def pss_combinations(pairs):
    check_mech(CKM_RSA_PKCS_PSS, CKF_SIGN | CKF_VERIFY, SIGN_FLAGS, contains(2048))
    if not pairs:
        fail("no hash/MGF combination to test (harness error)")
    pub, priv, twin, k = import_rsa()
    s = C.s
    failures = []
    for (hash_mech, hmod), (mgf, mgf_mod) in pairs:
        data = os.urandom(33)
        digest = hmod.new(data).digest()
        m = pss_params(CKM_RSA_PKCS_PSS, hash_mech, mgf, hmod.digest_size)
        try:
            sig = s.sign(m, priv, digest)
            pss_verify(twin, hmod, mgf_mod, hmod.digest_size, hmod.new(data), sig)
            s.verify(m, pub, digest, pss_sign(twin, hmod, mgf_mod, hmod.digest_size, hmod.new(data)))
            expect_rv(CKR_SIGNATURE_INVALID, "modified signature", s.verify, m, pub, digest, flip(sig))
        except (CKRError, ValueError, AssertionError) as e:
            failures.append("hash 0x%X/MGF %d: %s" % (hash_mech, mgf, e if str(e) else "pycryptodome rejects the signature"))
    if failures:
        fail("%d of %d combinations: %s" % (len(failures), len(pairs), "; ".join(failures[:4])))
    return pub, priv


@test
def rsa_pss_sha2_mgfs():
    """CKM_RSA_PKCS_PSS (existing) with every SHA-1/SHA-2 hash × every SHA-1/SHA-2 MGF1,
    verified by pycryptodome and verifying pycryptodome's; an input not hLen long refused."""
    pub, priv = pss_combinations([(a, b) for a in PSS_HASHES[:5] for b in MGFS[:5]])
    m = pss_params(CKM_RSA_PKCS_PSS, CKM_SHA256, CKG_MGF1_SHA256, 32)
    expect_rv(CKR_DATA_LEN_RANGE, "PSS over 31 bytes with hashAlg SHA-256", C.s.sign, m, priv, os.urandom(31))


@test
def rsa_pss_sha3_mgfs():
    """CKM_RSA_PKCS_PSS with SHA-3 hashes and SHA-3 MGFs (CKG_MGF1_SHA3_*), every combination
    that involves SHA-3, hash ≠ MGF hash included."""
    pairs = [(a, b) for a in PSS_HASHES for b in MGFS if a[0] >= CKM_SHA3_256 or b[0] >= CKG_MGF1_SHA3_224]
    eq(len(pairs), 56, "number of SHA-3 combinations (harness self-check)")
    pss_combinations(pairs)


@test
def rsa_x_509():
    """CKM_RSA_X_509 (existing): raw RSA against Python's pow(): sign/verify, encrypt, decrypt to
    exactly k bytes (leading zeros kept), input ≥ modulus refused with CKR_DATA_INVALID."""
    check_mech(CKM_RSA_X_509, CKF_ENCRYPT | CKF_DECRYPT | CKF_SIGN | CKF_VERIFY,
               CKF_SIGN_RECOVER | CKF_VERIFY_RECOVER | CKF_WRAP | CKF_UNWRAP | CKF_ENCAPSULATE | CKF_DECAPSULATE, contains(2048))
    pub, priv, twin, k = import_rsa(private_usages=(CKA_SIGN, CKA_DECRYPT), public_usages=(CKA_VERIFY, CKA_ENCRYPT))
    s = C.s
    data = os.urandom(100)
    sig = s.sign(mech(CKM_RSA_X_509), priv, data)
    eq(sig, i2b(pow(b2i(data), twin.d, twin.n), k), "raw RSA signature")
    s.verify(mech(CKM_RSA_X_509), pub, data, sig)
    expect_rv(CKR_SIGNATURE_INVALID, "raw RSA, modified signature", s.verify, mech(CKM_RSA_X_509), pub, data, flip(sig))
    c = s.encrypt(mech(CKM_RSA_X_509), pub, data)
    eq(c, i2b(pow(b2i(data), twin.e, twin.n), k), "raw RSA encryption")
    eq(s.decrypt(mech(CKM_RSA_X_509), priv, c), bytes(k - len(data)) + data, "raw RSA decryption (k bytes)")
    expect_rv(CKR_DATA_INVALID, "raw RSA encryption of the modulus", s.encrypt, mech(CKM_RSA_X_509), pub, i2b(twin.n, k))
    expect_rv(CKR_ENCRYPTED_DATA_INVALID, "raw RSA decryption of the modulus", s.decrypt, mech(CKM_RSA_X_509), priv, i2b(twin.n, k))


SHA3_ECDSA = [(CKM_ECDSA_SHA3_224, SHA3_224), (CKM_ECDSA_SHA3_256, SHA3_256), (CKM_ECDSA_SHA3_384, SHA3_384),
              (CKM_ECDSA_SHA3_512, SHA3_512)]


@test
def ecdsa_sha3():
    """CKM_ECDSA_SHA3_*: P-256 and P-384 signatures (r||s) verified by pycryptodome's DSS,
    pycryptodome's verified on the token, multi-part."""
    s = C.s
    for curve, oid, name in ((ec.SECP256R1(), OID_P256, "P-256"), (ec.SECP384R1(), OID_P384, "P-384")):
        key = ec.generate_private_key(curve)
        n = key.private_numbers()
        size = (curve.key_size + 7) // 8
        point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        pub, priv = import_ec(oid, i2b(n.private_value, size), point)
        twin = ECC.construct(curve=name, d=n.private_value)
        for mechanism, hmod in SHA3_ECDSA:
            check_mech(mechanism, CKF_SIGN | CKF_VERIFY, SIGN_FLAGS | EC_CAPS, lambda lo, hi: lo <= 256 and hi >= 384)
            data = os.urandom(80)
            sig = s.sign(mech(mechanism), priv, data)
            eq(len(sig), 2 * size, "%s signature length" % name)
            try:
                DSS.new(twin.public_key(), "fips-186-3").verify(hmod.new(data), sig)
            except ValueError:
                fail("mechanism 0x%X on %s: pycryptodome rejects the token's signature" % (mechanism, name))
            sig2 = s.sign_parts(mech(mechanism), priv, [data[:40], data[40:]])
            DSS.new(twin.public_key(), "fips-186-3").verify(hmod.new(data), sig2)
            theirs = DSS.new(twin, "fips-186-3").sign(hmod.new(data))
            s.verify(mech(mechanism), pub, data, theirs)
            expect_rv(CKR_SIGNATURE_INVALID, "mechanism 0x%X, modified signature" % mechanism, s.verify, mech(mechanism), pub, data, flip(theirs))


# RFC 8032 §7 vectors: (seed, public key, message, signature)
ED25519_T1 = ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
              "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
              "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
ED25519_CTX = ("0305334e381af78f141cb666f6199f57bc3495335a256a95bd2a55bf546663f6",
               "dfc9425e4f968f7f0c29f0259cf5f9aed6851c2bb4ad8bfb860cfee0ab248292", "f726936d19c800494e3fdaff20b276a8",
               "55a4cc2f70a54e04288c5f4cd1e45a7bb520b36292911876cada7323198dd87a8b36950b95130022907a7fb7c4e9b2d5f6cca685a587b4b21f4b888e4e7edb0d")
ED25519_PH = ("833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
              "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf", "616263",
              "98a70222f0b8121aa9d30f813d683f809e462b469c7ff87639499bb94e6dae4131f85042463c2a355a2003d062adf5aaa10b8c61e636062aaad11c2a26083406")
ED448_BLANK = ("6c82a562cb808d10d632be89c8513ebf6c929f34ddfa8c9f63c9960ef6e348a3528c8a3fcc2f044e39a3fc5b94492f8f032e7549a20098f95b",
               "5fd7449b59b461fd2ce787ec616ad46a1da1342485a70e1f8a0ea75d80e96778edf124769b46c7061bd6783df1e50f6cd1fa1abeafe8256180", "",
               "533a37f6bbe457251f023c0d88f976ae2dfb504a843e34d2074fd823d41a591f2b233f034f628281f2fd7a22ddd47d7828c59bd0a21bfd3980ff0d2028d4b18a9df63e006c5d1c2d345b925d8dc00b4104852db99ac5c7cdda8530a113a0f4dbb61149f05a7363268c71d95808ff2e652600")
ED448_CTX = ("c4eab05d357007c632f3dbb48489924d552b08fe0c353a0d4a1f00acda2c463afbea67c5e8d2877c5e3bc397a659949ef8021e954e0a12274e",
             "43ba28f430cdff456ae531545f7ecd0ac834a55d9358c0372bfa0c6c6798c0866aea01eb00742802b8438ea4cb82169c235160627b4c3a9480", "03",
             "d4f8f6131770dd46f40867d6fd5d5055de43541f8c5e35abbcd001b32a89f7d2151f7647f11d8ca2ae279fb842d607217fce6e042f6815ea000c85741de5c8da1144a6a1aba7f96de42505d7a7298524fda538fccbbb754f578c1cad10d54d0d5428407e85dcbc98a49155c13764e66c3c00")
ED448_PH = ("833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42ef7822e0d5104127dc05d6dbefde69e3ab2cec7c867c6e2c49",
            "259b71c19f83ef77a7abd26524cbdb3161b590a48f7d17de3ee0ba9c52beb743c09428a131d6b1b57303d90d8132c276d5ed3d5d01c0f53880", "616263",
            "822f6901f7480f3d5f562c592994d9693602875614483256505600bbc281ae381f54d6bce2ea911574932f52a4e6cadd78769375ec3ffd1b801a0d9b3f4030cd433964b6457ea39476511214f97469b57dd32dbc560a9a94d00bff07620464a3ad203df7dc7ce360c3cd3696d9d9fab90f00")


def ed_import(vector, oid):
    seed, public = h(vector[0]), h(vector[1])
    return import_ec(oid, seed, public, key_type=CKK_EC_EDWARDS)


def ed_check(vector, oid, mechanism, ctx=None, ph=False, random_messages=2):
    """The RFC vector's signature exactly, multi-part too; the signature verifies on the token
    and a modified one does not; random messages against pycryptodome's RFC 8032 signer."""
    s = C.s
    pub, priv = ed_import(vector, oid)
    message, expected = h(vector[2]), h(vector[3])
    eq(s.sign(mechanism, priv, message), expected, "RFC 8032 signature")
    s.verify(mechanism, pub, message, expected)
    expect_rv(CKR_SIGNATURE_INVALID, "modified signature", s.verify, mechanism, pub, message, flip(expected))
    twin = eddsa.import_private_key(h(vector[0]))
    signer = eddsa.new(twin, "rfc8032", context=ctx)
    for _ in range(random_messages):
        data = os.urandom(150)
        if ph:  # pycryptodome signs Ed25519ph / Ed448ph when given the SHA-512 / SHAKE256 hash object
            ref = signer.sign(SHA512.new(data) if oid == OID_ED25519 else SHAKE256.new(data))
        else:
            ref = signer.sign(data)
        eq(s.sign(mechanism, priv, data), ref, "signature of a random message against pycryptodome")
        eq(s.sign_parts(mechanism, priv, [data[:50], data[50:]]), ref, "multi-part signature")
        s.verify_parts(mechanism, pub, [data[:1], data[1:]], ref)
    return pub, priv


@test
def eddsa_ed25519():
    """CKM_EDDSA (existing), pure Ed25519 without a parameter: RFC 8032 §7.1 TEST 1, pycryptodome,
    and a generated CKM_EC_EDWARDS_KEY_PAIR_GEN key whose CKA_EC_POINT verifies in pycryptodome."""
    check_mech(CKM_EDDSA, CKF_SIGN | CKF_VERIFY, SIGN_FLAGS, [(255, 448)])
    ed_check(ED25519_T1, OID_ED25519, mech(CKM_EDDSA))
    s = C.s
    _, named = import_ec(NAME_ED25519, h(ED25519_T1[0]), None, key_type=CKK_EC_EDWARDS)
    eq(s.sign(mech(CKM_EDDSA), named, b""), h(ED25519_T1[3]), "RFC 8032 TEST 1 with CKA_EC_PARAMS PrintableString edwards25519")
    pub, priv = s.generate_key_pair(mech(CKM_EC_EDWARDS_KEY_PAIR_GEN), {CKA_TOKEN: False, CKA_EC_PARAMS: OID_ED25519, CKA_VERIFY: True},
                                    {CKA_TOKEN: False, CKA_SIGN: True})
    point = strip_octet_string(s.get_attribute(pub, CKA_EC_POINT))
    data = os.urandom(40)
    sig = s.sign(mech(CKM_EDDSA), priv, data)
    try:
        eddsa.new(eddsa.import_public_key(point), "rfc8032").verify(data, sig)
    except ValueError:
        fail("pycryptodome rejects the generated key's signature")


@test
def eddsa_ed25519ctx():
    """CKM_EDDSA with CK_EDDSA_PARAMS {phFlag FALSE, context "foo"} on Ed25519: Ed25519ctx,
    RFC 8032 §7.2 and pycryptodome."""
    ed_check(ED25519_CTX, OID_ED25519, eddsa_params(False, b"foo"), ctx=b"foo")


@test
def eddsa_ed25519ph():
    """CKM_EDDSA with {phFlag TRUE}: Ed25519ph over the message (the token computes SHA-512),
    RFC 8032 §7.3; with a context too, against pycryptodome."""
    ed_check(ED25519_PH, OID_ED25519, eddsa_params(True), ph=True)
    pub, priv = ed_import(ED25519_PH, OID_ED25519)
    data = os.urandom(90)
    ref = eddsa.new(eddsa.import_private_key(h(ED25519_PH[0])), "rfc8032", context=b"context").sign(SHA512.new(data))
    eq(C.s.sign(eddsa_params(True, b"context"), priv, data), ref, "Ed25519ph with a context")


@test
def eddsa_ed448():
    """CKM_EDDSA on Ed448 (existing): pure Ed448 without a parameter and with {FALSE, empty
    context}: RFC 8032 §7.4 "Blank" and pycryptodome."""
    ed_check(ED448_BLANK, OID_ED448, mech(CKM_EDDSA))
    ed_check(ED448_BLANK, OID_ED448, eddsa_params(False), random_messages=1)
    _, named = import_ec(NAME_ED448, h(ED448_BLANK[0]), None, key_type=CKK_EC_EDWARDS)
    eq(C.s.sign(mech(CKM_EDDSA), named, b""), h(ED448_BLANK[3]), "RFC 8032 Ed448 Blank with CKA_EC_PARAMS PrintableString edwards448")


@test
def eddsa_ed448ctx():
    """CKM_EDDSA {FALSE, context "foo"} on Ed448: RFC 8032 §7.4 "1 octet (with context)"."""
    ed_check(ED448_CTX, OID_ED448, eddsa_params(False, b"foo"), ctx=b"foo")


@test
def eddsa_ed448ph():
    """CKM_EDDSA {TRUE} on Ed448: Ed448ph (the token computes SHAKE256/64), RFC 8032 §7.5."""
    ed_check(ED448_PH, OID_ED448, eddsa_params(True), ph=True)


@test
def eddsa_bad_parameters():
    """CK_EDDSA_PARAMS: a context of 256 bytes, a wrong structure size; a P-256 key."""
    s = C.s
    pub, priv = ed_import(ED25519_T1, OID_ED25519)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "EdDSA context of 256 bytes", s.sign_init, eddsa_params(False, os.urandom(256)), priv)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "CK_EDDSA_PARAMS of 16 bytes", s.sign_init, eddsa_params(False, b"foo").with_length(16), priv)
    key, ecpub, ecpriv = new_p256()
    expect_rv(CKR_KEY_TYPE_INCONSISTENT, "EdDSA with a P-256 key", s.sign_init, mech(CKM_EDDSA), ecpriv)


# =============================================================================================
# Key derivation
# =============================================================================================
RFC5869 = {  # name: (prf, ikm, salt or None, info, L, PRK, OKM)
    "1": (CKM_SHA256, b"\x0b" * 22, bytes(range(13)), bytes(range(0xF0, 0xFA)), 42,
          "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5",
          "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"),
    "3": (CKM_SHA256, b"\x0b" * 22, None, b"", 42,
          "19ef24a32c717b167f33a91d6f648bdf96596776afdb6377ac434c1c293ccb04",
          "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"),
    "4": (CKM_SHA_1, b"\x0b" * 11, bytes(range(13)), bytes(range(0xF0, 0xFA)), 42,
          "9b6c18c432a7bf8f0e71c8eb88f4b30baa2ba243",
          "085a01ea1b10f36933068b56efa5ad81a4f14b822f5b091568a9cdd4f155fda2c22e422478d305f3f896"),
}


def hkdf_mech(prf, extract, expand, salt=None, info=b"", salt_key=None, mechanism=CKM_HKDF_DERIVE):
    if salt_key is not None:
        return hkdf_params(extract, expand, prf, CKF_HKDF_SALT_KEY, None, salt_key, info, mechanism)
    if salt is None:
        return hkdf_params(extract, expand, prf, CKF_HKDF_SALT_NULL, None, 0, info, mechanism)
    return hkdf_params(extract, expand, prf, CKF_HKDF_SALT_DATA, salt, 0, info, mechanism)


@test
def hkdf_rfc5869():
    """CKM_HKDF_DERIVE: RFC 5869 cases 1 (SHA-256), 3 (no salt: CKF_HKDF_SALT_NULL) and 4
    (SHA-1) from a CKK_GENERIC_SECRET base key, extract+expand; an AES-256 key out of it."""
    check_mech(CKM_HKDF_DERIVE, CKF_DERIVE)
    s = C.s
    for name, (prf_mech, ikm, salt, info, length, prk, okm) in RFC5869.items():
        base = secret(CKK_GENERIC_SECRET, ikm, CKA_DERIVE)
        d = s.derive_key(hkdf_mech(prf_mech, True, True, salt, info), base, derived_template(length=length))
        eq(value_of(d), h(okm), "RFC 5869 case %s" % name)
    prf_mech, ikm, salt, info, length, prk, okm = RFC5869["1"]
    base = secret(CKK_GENERIC_SECRET, ikm, CKA_DERIVE)
    d = s.derive_key(hkdf_mech(prf_mech, True, True, salt, info), base, derived_template(CKK_AES, 32, CKA_ENCRYPT))
    eq(s.get_ulong(d, CKA_KEY_TYPE), CKK_AES, "derived key type")
    eq(value_of(d), h(okm)[:32], "AES-256 key from RFC 5869 case 1")
    eq(s.get_ulong(d, CKA_CLASS), CKO_SECRET_KEY, "derived key class")


@test
def hkdf_extract_expand_separately():
    """bExtract alone gives PRK (hash length, CKA_VALUE_LEN omitted or equal to it); bExpand
    alone from PRK gives OKM (RFC 5869 cases 1 and 4)."""
    s = C.s
    for name in ("1", "4"):
        prf_mech, ikm, salt, info, length, prk, okm = RFC5869[name]
        base = secret(CKK_GENERIC_SECRET, ikm, CKA_DERIVE)
        d = s.derive_key(hkdf_mech(prf_mech, True, False, salt, info), base, derived_template())
        eq(value_of(d), h(prk), "case %s extract only, CKA_VALUE_LEN omitted" % name)
        d = s.derive_key(hkdf_mech(prf_mech, True, False, salt), base, derived_template(length=len(h(prk))))
        eq(value_of(d), h(prk), "case %s extract only, CKA_VALUE_LEN = hash length" % name)
        prk_key = secret(CKK_GENERIC_SECRET, h(prk), CKA_DERIVE)
        d = s.derive_key(hkdf_mech(prf_mech, False, True, None, info), prk_key, derived_template(length=length))
        eq(value_of(d), h(okm), "case %s expand only from PRK" % name)
        # A generic secret without CKA_VALUE_LEN: HashLen bytes (as Kryoptic), not a refusal.
        d = s.derive_key(hkdf_mech(prf_mech, True, True, salt, info), base, derived_template())
        eq(value_of(d), h(okm)[:len(h(prk))], "case %s extract+expand, CKA_VALUE_LEN omitted: T(1)" % name)


@test
def hkdf_salt_key():
    """CKF_HKDF_SALT_KEY: the salt is the value of the key hSaltKey (RFC 5869 case 1)."""
    s = C.s
    prf_mech, ikm, salt, info, length, prk, okm = RFC5869["1"]
    base = secret(CKK_GENERIC_SECRET, ikm, CKA_DERIVE)
    salt_key = secret(CKK_GENERIC_SECRET, salt, CKA_DERIVE)
    d = s.derive_key(hkdf_mech(prf_mech, True, True, info=info, salt_key=salt_key), base, derived_template(length=length))
    eq(value_of(d), h(okm), "RFC 5869 case 1 with the salt in a key")


@test
def hkdf_key_type_and_key_gen():
    """A CKK_HKDF base key; CKM_HKDF_KEY_GEN makes a CKK_HKDF key of CKA_VALUE_LEN bytes (and
    refuses a template without it); SHA-384 and SHA3-256 PRFs against pycryptodome's HKDF."""
    check_mech(CKM_HKDF_KEY_GEN, CKF_GENERATE)
    s = C.s
    prf_mech, ikm, salt, info, length, prk, okm = RFC5869["1"]
    base = secret(CKK_HKDF, ikm, CKA_DERIVE)
    eq(value_of(s.derive_key(hkdf_mech(prf_mech, True, True, salt, info), base, derived_template(length=length))), h(okm),
       "RFC 5869 case 1 from a CKK_HKDF key")
    g = s.generate_key(mech(CKM_HKDF_KEY_GEN), {CKA_TOKEN: False, CKA_VALUE_LEN: 48, CKA_DERIVE: True,
                                                 CKA_SENSITIVE: False, CKA_EXTRACTABLE: True})
    eq(s.get_ulong(g, CKA_KEY_TYPE), CKK_HKDF, "CKM_HKDF_KEY_GEN key type")
    kg = value_of(g)
    eq(len(kg), 48, "CKM_HKDF_KEY_GEN key length")
    for prf_mech, hmod in ((CKM_SHA384, SHA384), (CKM_SHA3_256, SHA3_256)):
        salt, info = os.urandom(20), os.urandom(12)
        d = s.derive_key(hkdf_mech(prf_mech, True, True, salt, info), g, derived_template(length=70))
        eq(value_of(d), CryptoHKDF(kg, 70, salt, hmod, context=info), "HKDF with PRF 0x%X from the generated key" % prf_mech)
    expect_rv(CKR_TEMPLATE_INCOMPLETE, "CKM_HKDF_KEY_GEN without CKA_VALUE_LEN", s.generate_key, mech(CKM_HKDF_KEY_GEN),
              {CKA_TOKEN: False, CKA_DERIVE: True})


@test
def hkdf_data():
    """CKM_HKDF_DATA: the same derivation, the output a CKO_DATA object whose CKA_VALUE is OKM
    (CKA_VALUE_LEN in the template gives its length, as Kryoptic reads it)."""
    check_mech(CKM_HKDF_DATA, CKF_DERIVE)
    s = C.s
    prf_mech, ikm, salt, info, length, prk, okm = RFC5869["1"]
    base = secret(CKK_GENERIC_SECRET, ikm, CKA_DERIVE)
    d = s.derive_key(hkdf_mech(prf_mech, True, True, salt, info, mechanism=CKM_HKDF_DATA), base,
                     {CKA_CLASS: CKO_DATA, CKA_TOKEN: False, CKA_VALUE_LEN: length})
    eq(s.get_ulong(d, CKA_CLASS), CKO_DATA, "CKM_HKDF_DATA object class")
    eq(value_of(d), h(okm), "CKM_HKDF_DATA value (RFC 5869 case 1)")


@test
def hkdf_data_object_as_input():
    """"The exception is a data object which has the same size as the underlying hash function,
    and which may be supplied as an input key" (bExtract with a salt)."""
    s = C.s
    ikm, salt, info = os.urandom(32), os.urandom(16), b"data object input"
    base = s.create_object({CKA_CLASS: CKO_DATA, CKA_TOKEN: False, CKA_VALUE: ikm, CKA_APPLICATION: "modern-test"})
    d = s.derive_key(hkdf_mech(CKM_SHA256, True, True, salt, info), base, derived_template(length=32))
    eq(value_of(d), CryptoHKDF(ikm, 32, salt, SHA256, context=info), "HKDF from a CKO_DATA object")


@test
def hkdf_bad_parameters():
    """CK_HKDF_PARAMS refusals: neither extract nor expand, an unknown salt type, a PRF that is
    not a hash, a wrong structure size; an AES base key."""
    s = C.s
    base = secret(CKK_GENERIC_SECRET, os.urandom(32), CKA_DERIVE)
    t = derived_template(length=32)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "bExtract and bExpand FALSE", s.derive_key, hkdf_mech(CKM_SHA256, False, False), base, t)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "ulSaltType 3", s.derive_key,
              hkdf_params(True, True, CKM_SHA256, 3, b"salt", 0, b""), base, t)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "prfHashMechanism CKM_AES_ECB", s.derive_key,
              hkdf_mech(CKM_AES_ECB, True, True, b"salt"), base, t)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "CK_HKDF_PARAMS of 56 bytes", s.derive_key,
              hkdf_mech(CKM_SHA256, True, True, b"salt").with_length(56), base, t)
    aes = secret(CKK_AES, os.urandom(32), CKA_DERIVE)
    expect_rv(CKR_KEY_TYPE_INCONSISTENT, "HKDF from an AES key", s.derive_key, hkdf_mech(CKM_SHA256, True, True, b"salt"), aes, t)


PBKDF2_TEMPLATE = {CKA_CLASS: CKO_SECRET_KEY, CKA_KEY_TYPE: CKK_GENERIC_SECRET, CKA_TOKEN: False,
                   CKA_SENSITIVE: False, CKA_EXTRACTABLE: True}
RFC6070 = [(b"password", b"salt", 1, "0c60c80f961f0e71f3a9b524af6012062fe037a6"),
           (b"password", b"salt", 2, "ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957"),
           (b"password", b"salt", 4096, "4b007901b765489abead49d926f721d065a429c1"),
           (b"passwordPASSWORDpassword", b"saltSALTsaltSALTsaltSALTsaltSALTsalt", 4096, "3d2eec4fe41c849b80c8d83662c0e44a8b291a964cf2f07038"),
           (b"pass\0word", b"sa\0lt", 4096, "56fa6aa75548099dcc37d7f03425e0c3")]


@test
def pbkdf2_rfc6070():
    """CKM_PKCS5_PBKD2 through C_GenerateKey with CK_PKCS5_PBKD2_PARAMS2, PRF HMAC-SHA1: RFC 6070."""
    check_mech(CKM_PKCS5_PBKD2, CKF_GENERATE)
    s = C.s
    for password, salt, iterations, dk in RFC6070:
        t = {**PBKDF2_TEMPLATE, CKA_VALUE_LEN: len(h(dk))}
        k = s.generate_key(pbkdf2_params(password, salt, iterations, CKP_PKCS5_PBKD2_HMAC_SHA1), t)
        eq(value_of(k), h(dk), "RFC 6070 %r/%r c=%d" % (password, salt, iterations))
        # Made by C_GenerateKey on the token: CKA_LOCAL (PKCS#11 §4.7) and its mechanism.
        eq(s.get_bool(k, CKA_LOCAL), True, "CKA_LOCAL of a PBKDF2 key")
        eq(s.get_ulong(k, CKA_KEY_GEN_MECHANISM), CKM_PKCS5_PBKD2, "CKA_KEY_GEN_MECHANISM of a PBKDF2 key")


@test
def pbkdf2_sha2():
    """CKM_PKCS5_PBKD2 with the SHA-224/256/384/512 PRFs against pycryptodome's PBKDF2 (several
    blocks), and an AES key whose value is the derived key."""
    s = C.s
    for prf_id, hmod in ((CKP_PKCS5_PBKD2_HMAC_SHA224, SHA224), (CKP_PKCS5_PBKD2_HMAC_SHA256, SHA256),
                         (CKP_PKCS5_PBKD2_HMAC_SHA384, SHA384), (CKP_PKCS5_PBKD2_HMAC_SHA512, SHA512)):
        password, salt = os.urandom(12), os.urandom(16)
        for length in (hmod.digest_size, 100):
            t = {**PBKDF2_TEMPLATE, CKA_VALUE_LEN: length}
            k = s.generate_key(pbkdf2_params(password, salt, 1000, prf_id), t)
            eq(value_of(k), PBKDF2(password, salt, length, 1000, hmac_hash_module=hmod), "PRF %d, %d bytes" % (prf_id, length))
    password, salt = b"correct horse", os.urandom(16)
    t = {CKA_CLASS: CKO_SECRET_KEY, CKA_KEY_TYPE: CKK_AES, CKA_VALUE_LEN: 32, CKA_TOKEN: False, CKA_ENCRYPT: True,
         CKA_SENSITIVE: False, CKA_EXTRACTABLE: True}
    k = s.generate_key(pbkdf2_params(password, salt, 2000, CKP_PKCS5_PBKD2_HMAC_SHA256), t)
    eq(s.get_ulong(k, CKA_KEY_TYPE), CKK_AES, "PBKDF2 key type")
    dk = PBKDF2(password, salt, 32, 2000, hmac_hash_module=SHA256)
    eq(s.encrypt(mech(CKM_AES_ECB), k, bytes(16)), AES.new(dk, AES.MODE_ECB).encrypt(bytes(16)), "AES key made by PBKDF2")


@test
def pbkdf2_bad_parameters():
    """CK_PKCS5_PBKD2_PARAMS2 refusals: 0 iterations, an unknown PRF, salt source 2, pPrfData
    for a PRF that takes none, a 64-byte structure; a generic secret without CKA_VALUE_LEN."""
    s = C.s
    t = {**PBKDF2_TEMPLATE, CKA_VALUE_LEN: 32}
    gen = s.generate_key
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "0 iterations", gen, pbkdf2_params(b"pw", b"salt", 0, CKP_PKCS5_PBKD2_HMAC_SHA256), t)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "PRF 99", gen, pbkdf2_params(b"pw", b"salt", 10, 99), t)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "salt source 2", gen,
              pbkdf2_params(b"pw", b"salt", 10, CKP_PKCS5_PBKD2_HMAC_SHA256, salt_source=2), t)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "pPrfData with HMAC-SHA256", gen,
              pbkdf2_params(b"pw", b"salt", 10, CKP_PKCS5_PBKD2_HMAC_SHA256, prf_data=b"\x06\x01\x00"), t)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "a 64-byte parameter", gen,
              pbkdf2_params(b"pw", b"salt", 10, CKP_PKCS5_PBKD2_HMAC_SHA256).with_length(64), t)
    expect_rv(CKR_TEMPLATE_INCOMPLETE, "generic secret without CKA_VALUE_LEN", gen,
              pbkdf2_params(b"pw", b"salt", 10, CKP_PKCS5_PBKD2_HMAC_SHA256), PBKDF2_TEMPLATE)


KBKDF_LABEL, KBKDF_CONTEXT = b"modern label", b"the context"


def kbkdf_derive(mechanism, prf_type, base, items, lengths, key_types=None, iv=None):
    """Derives len(lengths) keys (the first through C_DeriveKey, the others as additional keys)
    and returns their values."""
    key_types = key_types or [CKK_GENERIC_SECRET] * len(lengths)
    extra = [derived_template(kt, n) for kt, n in zip(key_types[1:], lengths[1:])]
    m = sp800_108_params(mechanism, prf_type, items, extra, iv)
    first = C.s.derive_key(m, base, derived_template(key_types[0], lengths[0]))
    handles = [first] + (m.additional.handles() if m.additional else [])
    return [value_of(x) for x in handles]


@test
def sp800_108_counter_hmac():
    """CKM_SP800_108_COUNTER_KDF with HMAC PRFs against this file's SP 800-108 and `cryptography`'s
    KBKDFHMAC: [i]32 || label || 00 || context || [L]32; a 16-bit little-endian counter placed
    last; SHA-1/SHA-384/SHA3-256 PRFs; DKM length as the sum of segments."""
    check_mech(CKM_SP800_108_COUNTER_KDF, CKF_DERIVE, 0, contains(256))  # base key sizes in bits
    s = C.s
    k = os.urandom(32)
    base = secret(CKK_GENERIC_SECRET, k, CKA_DERIVE)
    items = [("iter", 32, False), ("bytes", KBKDF_LABEL), ("bytes", b"\0"), ("bytes", KBKDF_CONTEXT),
             ("dkm", CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS, 32, False)]
    got = kbkdf_derive(CKM_SP800_108_COUNTER_KDF, CKM_SHA256_HMAC, base, items, [42])[0]
    ref = KBKDFHMAC(algorithm=hashes.SHA256(), mode=Mode.CounterMode, length=42, rlen=4, llen=4,
                    location=CounterLocation.BeforeFixed, label=KBKDF_LABEL, context=KBKDF_CONTEXT, fixed=None).derive(k)
    eq(sp800_108("counter", CKM_SHA256_HMAC, k, items, [42])[0], ref, "harness SP 800-108 against cryptography (self-check)")
    eq(got, ref, "counter KDF, HMAC-SHA256, 42 bytes")
    items2 = [("bytes", KBKDF_LABEL), ("dkm", CK_SP800_108_DKM_LENGTH_SUM_OF_SEGMENTS, 16, True), ("iter", 16, True)]
    for prf_type in (CKM_SHA_1_HMAC, CKM_SHA384_HMAC, CKM_SHA3_256_HMAC):
        got = kbkdf_derive(CKM_SP800_108_COUNTER_KDF, prf_type, base, items2, [70])[0]
        eq(got, sp800_108("counter", prf_type, k, items2, [70])[0], "counter KDF, PRF 0x%X, LE counter last" % prf_type)


@test
def sp800_108_counter_cmac():
    """CKM_SP800_108_COUNTER_KDF with the AES-CMAC PRF from an AES base key against
    `cryptography`'s KBKDFCMAC; the derived key an AES key; a generic-secret base refused."""
    s = C.s
    k = os.urandom(32)
    base = secret(CKK_AES, k, CKA_DERIVE)
    items = [("iter", 32, False), ("bytes", KBKDF_LABEL), ("bytes", b"\0"), ("bytes", KBKDF_CONTEXT),
             ("dkm", CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS, 32, False)]
    got = kbkdf_derive(CKM_SP800_108_COUNTER_KDF, CKM_AES_CMAC, base, items, [32], [CKK_AES])[0]
    ref = KBKDFCMAC(algorithm=algorithms.AES, mode=Mode.CounterMode, length=32, rlen=4, llen=4,
                    location=CounterLocation.BeforeFixed, label=KBKDF_LABEL, context=KBKDF_CONTEXT, fixed=None).derive(k)
    eq(got, ref, "counter KDF, AES-CMAC, AES-256 key")
    generic = secret(CKK_GENERIC_SECRET, k, CKA_DERIVE)
    expect_rv(CKR_KEY_TYPE_INCONSISTENT, "AES-CMAC PRF from a generic secret", s.derive_key,
              sp800_108_params(CKM_SP800_108_COUNTER_KDF, CKM_AES_CMAC, items), generic, derived_template(CKK_AES, 32))


@test
def sp800_108_additional_keys():
    """CK_DERIVED_KEY: a 48-byte key and an additional 16-byte key from HMAC-SHA256 take three
    segments (the spec's example), DKM length 512 bits (sum of keys) or 768 (sum of segments)."""
    s = C.s
    k = os.urandom(32)
    base = secret(CKK_GENERIC_SECRET, k, CKA_DERIVE)
    for method in (CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS, CK_SP800_108_DKM_LENGTH_SUM_OF_SEGMENTS):
        items = [("iter", 8, False), ("bytes", KBKDF_LABEL), ("dkm", method, 32, False)]
        got = kbkdf_derive(CKM_SP800_108_COUNTER_KDF, CKM_SHA256_HMAC, base, items, [48, 16])
        expected = sp800_108("counter", CKM_SHA256_HMAC, k, items, [48, 16])
        if got != expected and got == sp800_108("counter", CKM_SHA256_HMAC, k, items, [48, 16], contiguous=True):
            fail("DKM method %d: the keys were cut from one stream of 2 segments (the 16-byte key from the second half of "
                 "segment 2); the spec gives each key whole segments: 48 bytes from segments 1-2, 16 from segment 3, "
                 "and DKM length 512 (sum of keys) or 768 (sum of segments)" % method)
        eq(got[0], expected[0], "48-byte key, DKM method %d" % method)
        eq(got[1], expected[1], "additional 16-byte key, DKM method %d" % method)


@test
def sp800_108_feedback():
    """CKM_SP800_108_FEEDBACK_KDF (CK_SP800_108_FEEDBACK_KDF_PARAMS): K(i) = PRF(K(i-1) || [i] ||
    fixed), K(0) the IV (32 bytes, or none), against this file's SP 800-108."""
    check_mech(CKM_SP800_108_FEEDBACK_KDF, CKF_DERIVE, 0, contains(256))  # base key sizes in bits
    s = C.s
    k = os.urandom(32)
    base = secret(CKK_GENERIC_SECRET, k, CKA_DERIVE)
    items = [("iter",), ("counter", 32, False), ("bytes", KBKDF_LABEL), ("bytes", b"\0"), ("bytes", KBKDF_CONTEXT),
             ("dkm", CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS, 32, False)]
    for iv in (os.urandom(32), None):
        got = kbkdf_derive(CKM_SP800_108_FEEDBACK_KDF, CKM_SHA256_HMAC, base, items, [80], iv=iv)[0]
        eq(got, sp800_108("feedback", CKM_SHA256_HMAC, k, items, [80], iv or b"")[0], "feedback KDF, IV %s" % ("32 bytes" if iv else "none"))
    items2 = [("bytes", KBKDF_LABEL), ("iter",)]
    got = kbkdf_derive(CKM_SP800_108_FEEDBACK_KDF, CKM_SHA512_HMAC, base, items2, [100], iv=b"0123456789")[0]
    eq(got, sp800_108("feedback", CKM_SHA512_HMAC, k, items2, [100], b"0123456789")[0], "feedback KDF without counter, SHA-512")


@test
def sp800_108_double_pipeline():
    """CKM_SP800_108_DOUBLE_PIPELINE_KDF: A(0) = the fixed input, A(i) = PRF(A(i-1)),
    K(i) = PRF(A(i) || [i] || fixed), against this file's SP 800-108."""
    check_mech(CKM_SP800_108_DOUBLE_PIPELINE_KDF, CKF_DERIVE, 0, contains(256))  # base key sizes in bits
    s = C.s
    k = os.urandom(32)
    base = secret(CKK_GENERIC_SECRET, k, CKA_DERIVE)
    items = [("iter",), ("counter", 32, False), ("bytes", KBKDF_LABEL), ("bytes", b"\0"), ("bytes", KBKDF_CONTEXT),
             ("dkm", CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS, 32, False)]
    got = kbkdf_derive(CKM_SP800_108_DOUBLE_PIPELINE_KDF, CKM_SHA256_HMAC, base, items, [72])[0]
    eq(got, sp800_108("pipeline", CKM_SHA256_HMAC, k, items, [72])[0], "double-pipeline KDF with counter")
    items2 = [("bytes", KBKDF_LABEL), ("iter",), ("bytes", KBKDF_CONTEXT)]
    got = kbkdf_derive(CKM_SP800_108_DOUBLE_PIPELINE_KDF, CKM_SHA384_HMAC, base, items2, [60])[0]
    eq(got, sp800_108("pipeline", CKM_SHA384_HMAC, k, items2, [60])[0], "double-pipeline KDF without counter")


@test
def sp800_108_bad_parameters():
    """CK_SP800_108_* refusals: no iteration variable, CK_SP800_108_OPTIONAL_COUNTER in counter
    mode, two DKM lengths, a zero-length byte array, a PRF that is not a MAC, a feedback
    iteration variable with a format, a wrong structure size."""
    s = C.s
    base = secret(CKK_GENERIC_SECRET, os.urandom(32), CKA_DERIVE)
    t = derived_template(length=32)
    CTR, FBK = CKM_SP800_108_COUNTER_KDF, CKM_SP800_108_FEEDBACK_KDF
    def bad(what, mechanism, prf_type, items, length=None):
        m = sp800_108_params(mechanism, prf_type, items)
        if length is not None:
            m = m.with_length(length)
        expect_rv(CKR_MECHANISM_PARAM_INVALID, what, s.derive_key, m, base, t)
    bad("counter mode without iteration variable", CTR, CKM_SHA256_HMAC, [("bytes", b"label")])
    bad("counter mode with an optional counter", CTR, CKM_SHA256_HMAC, [("iter", 32, False), ("counter", 32, False)])
    dkm = ("dkm", CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS, 32, False)
    bad("two DKM lengths", CTR, CKM_SHA256_HMAC, [("iter", 32, False), dkm, dkm])
    bad("zero-length byte array", CTR, CKM_SHA256_HMAC, [("iter", 32, False), ("raw", CK_SP800_108_BYTE_ARRAY, None, 0)])
    bad("PRF CKM_SHA256", CTR, CKM_SHA256, [("iter", 32, False), ("bytes", b"label")])
    bad("feedback iteration variable with a counter format", FBK, CKM_SHA256_HMAC, [("iter", 32, False), ("bytes", b"label")])
    bad("CK_SP800_108_KDF_PARAMS of 32 bytes", CTR, CKM_SHA256_HMAC, [("iter", 32, False)], length=32)


def ecdh_derive(mechanism, kdf, private, public_data, length, shared=b""):
    return value_of(C.s.derive_key(ecdh_params(kdf, public_data, shared, mechanism), private, derived_template(length=length)))


@test
def ecdh_null():
    """CKM_ECDH1_DERIVE with CKD_NULL (existing): P-256 with the peer's raw uncompressed point
    (imported and generated keys), X25519 with the raw little-endian u, against `cryptography`."""
    check_mech(CKM_ECDH1_DERIVE, CKF_DERIVE, EC_CAPS, lambda lo, hi: lo <= 255 and hi >= 256)
    s = C.s
    key, pub, priv = new_p256(private_usages=(CKA_DERIVE,), public_usages=())
    peer = ec.generate_private_key(ec.SECP256R1())
    peer_point = peer.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    eq(ecdh_derive(CKM_ECDH1_DERIVE, CKD_NULL, priv, peer_point, 32), peer.exchange(ec.ECDH(), key.public_key()), "P-256 ECDH")
    gpub, gpriv = s.generate_key_pair(mech(CKM_EC_KEY_PAIR_GEN), {CKA_TOKEN: False, CKA_EC_PARAMS: OID_P256},
                                      {CKA_TOKEN: False, CKA_DERIVE: True})
    gpoint = strip_octet_string(s.get_attribute(gpub, CKA_EC_POINT))
    theirs = peer.exchange(ec.ECDH(), ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), gpoint))
    eq(ecdh_derive(CKM_ECDH1_DERIVE, CKD_NULL, gpriv, peer_point, 32), theirs, "P-256 ECDH with a generated key")
    xkey = x25519.X25519PrivateKey.generate()
    xraw = xkey.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    xpub, xpriv = import_ec(OID_X25519, xraw, None, private_usages=(CKA_DERIVE,), key_type=CKK_EC_MONTGOMERY)
    xpeer = x25519.X25519PrivateKey.generate()
    xpeer_raw = xpeer.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    eq(ecdh_derive(CKM_ECDH1_DERIVE, CKD_NULL, xpriv, xpeer_raw, 32), xpeer.exchange(xkey.public_key()), "X25519")


KDFS_SHA2 = [(CKD_SHA1_KDF, "sha1", hashes.SHA1()), (CKD_SHA224_KDF, "sha224", hashes.SHA224()),
             (CKD_SHA256_KDF, "sha256", hashes.SHA256()), (CKD_SHA384_KDF, "sha384", hashes.SHA384()),
             (CKD_SHA512_KDF, "sha512", hashes.SHA512())]
KDFS_SHA3 = [(CKD_SHA3_224_KDF, "sha3_224", hashes.SHA3_224()), (CKD_SHA3_256_KDF, "sha3_256", hashes.SHA3_256()),
             (CKD_SHA3_384_KDF, "sha3_384", hashes.SHA3_384()), (CKD_SHA3_512_KDF, "sha3_512", hashes.SHA3_512())]


def ecdh_kdf_test(kdfs):
    s = C.s
    key, pub, priv = new_p256(private_usages=(CKA_DERIVE,), public_usages=())
    peer = ec.generate_private_key(ec.SECP256R1())
    peer_point = peer.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    z = peer.exchange(ec.ECDH(), key.public_key())
    xkey = x25519.X25519PrivateKey.generate()
    xraw = xkey.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    _, xpriv = import_ec(OID_X25519, xraw, None, private_usages=(CKA_DERIVE,), key_type=CKK_EC_MONTGOMERY)
    xpeer = x25519.X25519PrivateKey.generate()
    xpeer_raw = xpeer.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    xz = xpeer.exchange(xkey.public_key())
    for kdf, name, algorithm in kdfs:
        for label, private, public, secret_z in (("P-256", priv, peer_point, z), ("X25519", xpriv, xpeer_raw, xz)):
            for shared, length in ((os.urandom(20), 80), (b"", 32)):
                ref = X963KDF(algorithm=algorithm, length=length, sharedinfo=shared or None).derive(secret_z)
                eq(x963_kdf(name, secret_z, shared, length), ref, "harness X9.63 against cryptography (self-check)")
                eq(ecdh_derive(CKM_ECDH1_DERIVE, kdf, private, public, length, shared), ref,
                   "%s ECDH with KDF 0x%X, %d bytes of shared data, %d bytes" % (label, kdf, len(shared), length))


@test
def ecdh_kdf_sha2():
    """CKM_ECDH1_DERIVE with CKD_SHA1/224/256/384/512_KDF (ANSI X9.63, shared data or none) on
    P-256 and X25519 against `cryptography`'s X963KDF and this file's X9.63."""
    ecdh_kdf_test(KDFS_SHA2)


@test
def ecdh_kdf_sha3():
    """CKM_ECDH1_DERIVE with CKD_SHA3_224/256/384/512_KDF (ANSI X9.63) on P-256 and X25519."""
    ecdh_kdf_test(KDFS_SHA3)


@test
def ecdh_cofactor():
    """CKM_ECDH1_COFACTOR_DERIVE on P-256 (cofactor 1): the plain ECDH value, with and without KDF."""
    check_mech(CKM_ECDH1_COFACTOR_DERIVE, CKF_DERIVE, EC_CAPS, contains(256))
    key, pub, priv = new_p256(private_usages=(CKA_DERIVE,), public_usages=())
    peer = ec.generate_private_key(ec.SECP256R1())
    peer_point = peer.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    z = peer.exchange(ec.ECDH(), key.public_key())
    eq(ecdh_derive(CKM_ECDH1_COFACTOR_DERIVE, CKD_NULL, priv, peer_point, 32), z, "cofactor ECDH, CKD_NULL")
    shared = b"cofactor shared"
    eq(ecdh_derive(CKM_ECDH1_COFACTOR_DERIVE, CKD_SHA256_KDF, priv, peer_point, 40, shared),
       X963KDF(algorithm=hashes.SHA256(), length=40, sharedinfo=shared).derive(z), "cofactor ECDH, CKD_SHA256_KDF")


@test
def ecdh_bad_parameters():
    """CK_ECDH1_DERIVE_PARAMS refusals: CKD_NULL with shared data, an unknown KDF, a wrong
    structure size; an Ed25519 base key."""
    s = C.s
    key, pub, priv = new_p256(private_usages=(CKA_DERIVE,), public_usages=())
    point = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(serialization.Encoding.X962,
                                                                              serialization.PublicFormat.UncompressedPoint)
    t = derived_template(length=32)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "CKD_NULL with shared data", s.derive_key, ecdh_params(CKD_NULL, point, b"x"), priv, t)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "KDF 0x55", s.derive_key, ecdh_params(0x55, point), priv, t)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "CK_ECDH1_DERIVE_PARAMS of 32 bytes", s.derive_key,
              ecdh_params(CKD_NULL, point).with_length(32), priv, t)
    _, edpriv = import_ec(OID_ED25519, h(ED25519_T1[0]), None, private_usages=(CKA_DERIVE,), key_type=CKK_EC_EDWARDS)
    expect_rv(CKR_KEY_TYPE_INCONSISTENT, "ECDH with an Ed25519 key", s.derive_key, ecdh_params(CKD_NULL, point), edpriv, t)


# =============================================================================================
# Key wrapping
# =============================================================================================
def wrap_secondary_encrypt(mechanism, kek, data, expected):
    """AES key wrap's table also marks Encrypt & Decrypt: when C_GetMechanismInfo says so, C_Encrypt
    gives the wrap; when it does not, C_EncryptInit is CKR_MECHANISM_INVALID."""
    s = C.s
    _, _, flags = C.module.mechanism_info(C.slot, mechanism)
    if flags & CKF_ENCRYPT:
        eq(s.encrypt(mech(mechanism), kek, data), expected, "C_Encrypt with mechanism 0x%X" % mechanism)
        eq(s.decrypt(mech(mechanism), kek, expected), data, "C_Decrypt with mechanism 0x%X" % mechanism)
    else:
        expect_rv(CKR_MECHANISM_INVALID, "C_EncryptInit with mechanism 0x%X (no CKF_ENCRYPT)" % mechanism,
                  s.encrypt_init, mech(mechanism), kek)


RFC3394 = [("000102030405060708090a0b0c0d0e0f", "00112233445566778899aabbccddeeff",
            "1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5"),
           ("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
            "00112233445566778899aabbccddeeff000102030405060708090a0b0c0d0e0f",
            "28c9f404c4b810f4cbccb35cfb87f8263f5786e2d80ed326cbc7f0e71a99f43bfb988b9b7a02dd21")]


@test
def aes_key_wrap_rfc3394():
    """CKM_AES_KEY_WRAP: RFC 3394 §4.1 and §4.6 through C_WrapKey and back through C_UnwrapKey;
    a modified blob and a blob of a wrong length refused."""
    check_mech(CKM_AES_KEY_WRAP, CKF_WRAP | CKF_UNWRAP, CKF_ENCRYPT | CKF_DECRYPT, [(16, 32)])
    s = C.s
    for kek_hex, key_hex, wrapped_hex in RFC3394:
        kek = secret(CKK_AES, h(kek_hex), CKA_WRAP, CKA_UNWRAP)
        target = secret(CKK_AES, h(key_hex), CKA_ENCRYPT)
        eq(s.wrap_key(mech(CKM_AES_KEY_WRAP), kek, target), h(wrapped_hex), "RFC 3394 wrap, %d-bit KEK" % (len(h(kek_hex)) * 8))
        u = s.unwrap_key(mech(CKM_AES_KEY_WRAP), kek, h(wrapped_hex), derived_template(CKK_AES, None, CKA_ENCRYPT))
        eq(value_of(u), h(key_hex), "RFC 3394 unwrapped key")
        expect_rv(CKR_WRAPPED_KEY_INVALID, "unwrap a modified blob", s.unwrap_key, mech(CKM_AES_KEY_WRAP), kek,
                  flip(h(wrapped_hex), 3), derived_template(CKK_AES))
        expect_rv(CKR_WRAPPED_KEY_LEN_RANGE, "unwrap a 20-byte blob", s.unwrap_key, mech(CKM_AES_KEY_WRAP), kek,
                  h(wrapped_hex)[:20], derived_template(CKK_AES))
    kek2 = secret(CKK_AES, h(RFC3394[0][0]), CKA_ENCRYPT, CKA_DECRYPT, CKA_WRAP, CKA_UNWRAP)
    wrap_secondary_encrypt(CKM_AES_KEY_WRAP, kek2, h(RFC3394[0][1]), h(RFC3394[0][2]))


@test
def aes_key_wrap_iv_parameter():
    """CKM_AES_KEY_WRAP's optional parameter, an 8-byte initial value: the default A6…A6 given
    explicitly, another value (against RFC 3394 from AES-ECB), unwrap with it; 5 bytes refused."""
    s = C.s
    k, data = os.urandom(32), os.urandom(24)
    kek = secret(CKK_AES, k, CKA_WRAP, CKA_UNWRAP)
    target = secret(CKK_GENERIC_SECRET, data, CKA_SIGN)
    eq(aes_kw(k, data), aes_key_wrap(k, data), "harness RFC 3394 against cryptography (self-check)")
    eq(s.wrap_key(mech(CKM_AES_KEY_WRAP, h("a6a6a6a6a6a6a6a6")), kek, target), aes_key_wrap(k, data), "explicit default IV")
    iv = h("0102030405060708")
    blob = aes_kw(k, data, iv)
    eq(s.wrap_key(mech(CKM_AES_KEY_WRAP, iv), kek, target), blob, "IV 0102030405060708")
    u = s.unwrap_key(mech(CKM_AES_KEY_WRAP, iv), kek, blob, derived_template(CKK_GENERIC_SECRET, 24, CKA_SIGN))
    eq(value_of(u), data, "unwrapped with IV 0102030405060708")
    expect_rv(CKR_WRAPPED_KEY_INVALID, "unwrap with the default IV what another IV wrapped", s.unwrap_key,
              mech(CKM_AES_KEY_WRAP), kek, blob, derived_template(CKK_GENERIC_SECRET, 24))
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "a 5-byte IV", s.wrap_key, mech(CKM_AES_KEY_WRAP, bytes(5)), kek, target)


RFC5649_KEK = h("5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8")
RFC5649 = [("c37b7e6492584340bed12207808941155068f738", "138bdeaa9b8fa7fc61f97742e72248ee5ae6ae5360d1ae6a5f54f373fa543b6a"),
           ("466f7250617369", "afbeb0f07dfbf5419200f2ccb50bb24f")]


@test
def aes_key_wrap_pad_rfc5649():
    """CKM_AES_KEY_WRAP_PAD (existing): RFC 5649 §6 (a 20-byte and a 7-byte key under a 192-bit
    KEK) through C_WrapKey and C_UnwrapKey; random keys against `cryptography`."""
    check_mech(CKM_AES_KEY_WRAP_PAD, CKF_WRAP | CKF_UNWRAP, CKF_ENCRYPT | CKF_DECRYPT, [(16, 32)])
    s = C.s
    kek = secret(CKK_AES, RFC5649_KEK, CKA_WRAP, CKA_UNWRAP)
    for key_hex, wrapped_hex in RFC5649:
        target = secret(CKK_GENERIC_SECRET, h(key_hex), CKA_SIGN)
        eq(s.wrap_key(mech(CKM_AES_KEY_WRAP_PAD), kek, target), h(wrapped_hex), "RFC 5649 §6, %d-byte key" % len(h(key_hex)))
        u = s.unwrap_key(mech(CKM_AES_KEY_WRAP_PAD), kek, h(wrapped_hex), derived_template(CKK_GENERIC_SECRET, None, CKA_SIGN))
        eq(value_of(u), h(key_hex), "RFC 5649 unwrapped %d-byte key" % len(h(key_hex)))
    expect_rv(CKR_WRAPPED_KEY_INVALID, "unwrap a modified KWP blob", s.unwrap_key, mech(CKM_AES_KEY_WRAP_PAD), kek,
              flip(h(RFC5649[0][1]), 5), derived_template(CKK_GENERIC_SECRET))
    k = os.urandom(32)
    kek2 = secret(CKK_AES, k, CKA_WRAP, CKA_UNWRAP)
    for n in (16, 29, 32):
        v = os.urandom(n)
        eq(s.wrap_key(mech(CKM_AES_KEY_WRAP_PAD), kek2, secret(CKK_GENERIC_SECRET, v, CKA_SIGN)),
           aes_key_wrap_with_padding(k, v), "KWP of a %d-byte key against cryptography" % n)
    kek3 = secret(CKK_AES, RFC5649_KEK, CKA_ENCRYPT, CKA_DECRYPT, CKA_WRAP, CKA_UNWRAP)
    wrap_secondary_encrypt(CKM_AES_KEY_WRAP_PAD, kek3, h(RFC5649[0][0]), h(RFC5649[0][1]))


def pkcs8_scalar(der):
    """The private value of a PKCS#8 EC or RSA key (pycryptodome's parser)."""
    try:
        return ("ec", int(ECC.import_key(der).d))
    except (ValueError, IndexError, TypeError):
        return ("rsa", RSA.import_key(der).d)


def check_unwrapped_ec(handle, peer_key):
    """An unwrapped EC key signs what the original public key verifies."""
    data = os.urandom(50)
    sig = C.s.sign(mech(CKM_ECDSA_SHA256), handle, data)
    twin = ECC.construct(curve="P-256", d=peer_key.private_numbers().private_value)
    try:
        DSS.new(twin.public_key(), "fips-186-3").verify(SHA256.new(data), sig)
    except ValueError:
        fail("the unwrapped EC key's signature does not verify")


def ec_pkcs8(key):
    return key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


@test
def aes_kwp_private_keys():
    """Private keys under CKM_AES_KEY_WRAP_PAD are PKCS#8 PrivateKeyInfo (spec §6.7): EC P-256 and
    RSA-2048 blobs unwrapped by `cryptography` parse in pycryptodome to the same private value;
    a PKCS#8 blob wrapped in Python unwraps into a key that signs."""
    s = C.s
    k = os.urandom(32)
    kek = secret(CKK_AES, k, CKA_WRAP, CKA_UNWRAP)
    key, pub, priv = new_p256(extractable=True)
    blob = s.wrap_key(mech(CKM_AES_KEY_WRAP_PAD), kek, priv)
    eq(pkcs8_scalar(aes_key_unwrap_with_padding(k, blob)), ("ec", key.private_numbers().private_value), "wrapped EC key")
    rpub, rpriv, twin, _ = import_rsa(extractable=True)
    blob = s.wrap_key(mech(CKM_AES_KEY_WRAP_PAD), kek, rpriv)
    eq(pkcs8_scalar(aes_key_unwrap_with_padding(k, blob)), ("rsa", twin.d), "wrapped RSA key")
    fresh = ec.generate_private_key(ec.SECP256R1())
    u = s.unwrap_key(mech(CKM_AES_KEY_WRAP_PAD), kek, aes_key_wrap_with_padding(k, ec_pkcs8(fresh)),
                     {CKA_CLASS: CKO_PRIVATE_KEY, CKA_KEY_TYPE: CKK_EC, CKA_TOKEN: False, CKA_SIGN: True})
    check_unwrapped_ec(u, fresh)


def rsa_aes_open(twin, blob, k, hmod, mgf_mod, label=b""):
    """Splits a CKM_RSA_AES_KEY_WRAP blob: RSA-OAEP(temporary AES key) || KWP(target)."""
    oaep = PKCS1_OAEP.new(twin, hashAlgo=hmod, mgfunc=lambda x, y: MGF1(x, y, mgf_mod), label=label)
    temporary = oaep.decrypt(blob[:k])
    return temporary, aes_key_unwrap_with_padding(temporary, blob[k:])


def rsa_aes_seal(twin, target, aes_bits, hmod, mgf_mod):
    temporary = os.urandom(aes_bits // 8)
    oaep = PKCS1_OAEP.new(twin.public_key(), hashAlgo=hmod, mgfunc=lambda x, y: MGF1(x, y, mgf_mod))
    return oaep.encrypt(temporary) + aes_key_wrap_with_padding(temporary, target)


@test
def rsa_aes_key_wrap():
    """CKM_RSA_AES_KEY_WRAP: an AES key and an EC private key wrapped under an RSA public key open
    in pycryptodome (RSA-OAEP of a temporary AES key of ulAESKeyBits, then RFC 5649 KWP; PKCS#8
    for the private key); blobs made in Python unwrap on the token."""
    check_mech(CKM_RSA_AES_KEY_WRAP, CKF_WRAP | CKF_UNWRAP, 0, contains(2048))
    s = C.s
    pub, priv, twin, k = import_rsa(private_usages=(CKA_UNWRAP,), public_usages=(CKA_WRAP,))
    value = os.urandom(32)
    target = secret(CKK_AES, value, CKA_ENCRYPT)
    for bits, hash_mech, mgf, hmod, mgf_mod, label in ((256, CKM_SHA256, CKG_MGF1_SHA256, SHA256, SHA256, b""),
                                                         (128, CKM_SHA_1, CKG_MGF1_SHA1, SHA1, SHA1, b""),
                                                         (192, CKM_SHA384, CKG_MGF1_SHA256, SHA384, SHA256, b"a label")):
        blob = s.wrap_key(rsa_aes_key_wrap_params(bits, hash_mech, mgf, label), pub, target)
        eq(len(blob), k + 40, "blob length (k + KWP of 32 bytes)")
        temporary, opened = rsa_aes_open(twin, blob, k, hmod, mgf_mod, label)
        eq(len(temporary), bits // 8, "temporary AES key length for ulAESKeyBits %d" % bits)
        eq(opened, value, "AES key opened from the blob (ulAESKeyBits %d)" % bits)
    m = rsa_aes_key_wrap_params(256, CKM_SHA256, CKG_MGF1_SHA256)
    key, ecpub, ecpriv = new_p256(extractable=True)
    _, opened = rsa_aes_open(twin, s.wrap_key(m, pub, ecpriv), k, SHA256, SHA256)
    eq(pkcs8_scalar(opened), ("ec", key.private_numbers().private_value), "EC private key from the blob")
    value2 = os.urandom(24)
    u = s.unwrap_key(m, priv, rsa_aes_seal(twin, value2, 256, SHA256, SHA256), derived_template(CKK_AES, None, CKA_ENCRYPT))
    eq(value_of(u), value2, "AES key unwrapped from a Python blob")
    fresh = ec.generate_private_key(ec.SECP256R1())
    m128 = rsa_aes_key_wrap_params(128, CKM_SHA256, CKG_MGF1_SHA256)
    u = s.unwrap_key(m128, priv, rsa_aes_seal(twin, ec_pkcs8(fresh), 128, SHA256, SHA256),
                     {CKA_CLASS: CKO_PRIVATE_KEY, CKA_KEY_TYPE: CKK_EC, CKA_TOKEN: False, CKA_SIGN: True})
    check_unwrapped_ec(u, fresh)


@test
def rsa_aes_key_wrap_bad_parameters():
    """CK_RSA_AES_KEY_WRAP_PARAMS refusals: ulAESKeyBits 100, pOAEPParams NULL, a wrong structure
    size; an AES wrapping key is CKR_WRAPPING_KEY_TYPE_INCONSISTENT."""
    s = C.s
    pub, priv, twin, k = import_rsa(private_usages=(CKA_UNWRAP,), public_usages=(CKA_WRAP,))
    target = secret(CKK_AES, os.urandom(32), CKA_ENCRYPT)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "ulAESKeyBits 100", s.wrap_key,
              rsa_aes_key_wrap_params(100, CKM_SHA256, CKG_MGF1_SHA256), pub, target)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "pOAEPParams NULL", s.wrap_key,
              Mechanism(CKM_RSA_AES_KEY_WRAP, CK_RSA_AES_KEY_WRAP_PARAMS(256, None)), pub, target)
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "CK_RSA_AES_KEY_WRAP_PARAMS of 8 bytes", s.wrap_key,
              rsa_aes_key_wrap_params(256, CKM_SHA256, CKG_MGF1_SHA256).with_length(8), pub, target)
    aes_kek = secret(CKK_AES, os.urandom(32), CKA_WRAP, CKA_UNWRAP)
    expect_rv(CKR_WRAPPING_KEY_TYPE_INCONSISTENT, "RSA AES key wrap with an AES wrapping key", s.wrap_key,
              rsa_aes_key_wrap_params(256, CKM_SHA256, CKG_MGF1_SHA256), aes_kek, target)


# =============================================================================================
# The mechanism list as a whole; post-quantum
# =============================================================================================
@test
def mechanism_list_info():
    """Every listed mechanism answers C_GetMechanismInfo with ulMinKeySize ≤ ulMaxKeySize, and the
    list has no duplicates."""
    eq(len(set(C.mechanism_list)), len(C.mechanism_list), "duplicates in C_GetMechanismList")
    bad = []
    for m in C.mechanism_list:
        lo, hi, flags = C.module.mechanism_info(C.slot, m)
        if lo > hi:
            bad.append("0x%X: %d > %d" % (m, lo, hi))
    if bad:
        fail("ulMinKeySize > ulMaxKeySize: " + ", ".join(bad))
    expect_rv(CKR_MECHANISM_INVALID, "C_GetMechanismInfo of 0x80001234 (unknown)", C.module.mechanism_info, C.slot, 0x80001234)


@test
def refusals_before_reading_or_working():
    """Refusals that must come before the module reads or works: a ChaCha20-Poly1305 ulNonceLen
    that is neither 12/8 bytes nor 96/64 bits (192: XChaCha in bits) is refused without reading
    192 bytes from a 24-byte nonce; PBKDF2 whose iterations × output blocks pass 10 million, or
    whose ulPasswordLen is neither a length (≤ 64 KiB) nor a 2.40 pointer, is refused at once; a
    failed SP 800-108 derivation sets each additional key's phKey to CK_INVALID_HANDLE."""
    s = C.s
    key = secret(CKK_CHACHA20, os.urandom(32), CKA_ENCRYPT, CKA_DECRYPT)
    for length in (24, 192, 16, 128):
        expect_rv(CKR_MECHANISM_PARAM_INVALID, "ChaCha20-Poly1305 ulNonceLen %d" % length, s.encrypt_init,
                  chacha20_poly1305_params(os.urandom(24), b"", nonce_len=length), key)
    template = derived_template(CKK_GENERIC_SECRET, 64)
    start = time.monotonic()
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "PBKDF2-SHA-1, 10 M iterations × 4 blocks", s.generate_key,
              pbkdf2_params(b"password", b"salt", 10_000_000, CKP_PKCS5_PBKD2_HMAC_SHA1), template)
    if time.monotonic() - start > 1:
        fail("the PBKDF2 refusal took %.1f s: the work was done before the check" % (time.monotonic() - start))
    bad_length = pbkdf2_params(b"password", b"salt", 1, CKP_PKCS5_PBKD2_HMAC_SHA1)
    bad_length.param.ulPasswordLen = 100000
    expect_rv(CKR_MECHANISM_PARAM_INVALID, "PBKDF2 ulPasswordLen 100000", s.generate_key, bad_length, template)
    base = secret(CKK_GENERIC_SECRET, os.urandom(32), CKA_DERIVE)
    items = [("iter", 8, False), ("bytes", b"label")]
    m = sp800_108_params(CKM_SP800_108_COUNTER_KDF, CKM_SHA256_HMAC, items,
                         [{CKA_CLASS: CKO_SECRET_KEY, CKA_KEY_TYPE: CKK_GENERIC_SECRET, CKA_VALUE_LEN: 16, CKA_TOKEN: False}])
    m.additional.handle_slots[0] = 0xDEAD
    expect_rv(CKR_TEMPLATE_INCOMPLETE, "SP 800-108 whose first key has no length", s.derive_key, m, base,
              {CKA_CLASS: CKO_SECRET_KEY, CKA_KEY_TYPE: CKK_GENERIC_SECRET, CKA_TOKEN: False})
    eq(m.additional.handles(), [0], "the additional key's phKey after a failed derivation")


@test
def generic_secret_key_gen():
    """CKM_GENERIC_SECRET_KEY_GEN makes a CKK_GENERIC_SECRET of CKA_VALUE_LEN bytes whose HMAC
    (the module's SHA-256 HMAC) is pycryptodome's HMAC over the value read back; no length →
    CKR_TEMPLATE_INCOMPLETE."""
    s = C.s
    check_mech(CKM_GENERIC_SECRET_KEY_GEN, CKF_GENERATE)
    key = s.generate_key(mech(CKM_GENERIC_SECRET_KEY_GEN), derived_template(CKK_GENERIC_SECRET, 40, CKA_SIGN, CKA_VERIFY))
    eq(s.get_ulong(key, CKA_KEY_TYPE), CKK_GENERIC_SECRET, "CKA_KEY_TYPE")
    value = value_of(key)
    eq(len(value), 40, "CKA_VALUE length")
    data = os.urandom(33)
    eq(s.sign(mech(CKM_SHA256_HMAC), key, data), HMAC.new(value, data, digestmod=SHA256).digest(), "HMAC-SHA-256 with the generated key")
    expect_rv(CKR_TEMPLATE_INCOMPLETE, "generic secret without CKA_VALUE_LEN", s.generate_key, mech(CKM_GENERIC_SECRET_KEY_GEN),
              derived_template(CKK_GENERIC_SECRET, None, CKA_SIGN))


@test
def post_quantum_mechanisms():
    """ML-DSA and ML-KEM (PKCS#11 3.2) are listed with exactly their flags and no key sizes (the
    parameter set chooses the key); each offered set makes a pair whose halves carry
    CKA_PARAMETER_SET, the encoded public key (CKA_VALUE) and a sensitive CKA_SEED; the sets the
    library lacks and bad templates get their exact codes. Signatures and shared secrets are
    checked against an independent implementation by test_pq_pyca.sh."""
    check_mech(CKM_ML_DSA_KEY_PAIR_GEN, CKF_GENERATE_KEY_PAIR, sizes=[(1952, 2592)])  # public key bytes of ML-DSA-65..87
    check_mech(CKM_ML_DSA, CKF_SIGN | CKF_VERIFY, sizes=[(1952, 2592)])
    check_mech(CKM_ML_KEM_KEY_PAIR_GEN, CKF_GENERATE_KEY_PAIR, sizes=[(1184, 1568)])  # ML-KEM-768..1024
    check_mech(CKM_ML_KEM, CKF_ENCAPSULATE | CKF_DECAPSULATE, sizes=[(1184, 1568)])
    CKA_PARAMETER_SET, CKA_SEED, CKA_ENCAPSULATE, CKA_DECAPSULATE = 0x61D, 0x637, 0x633, 0x634
    sets = [(CKM_ML_DSA_KEY_PAIR_GEN, 2, 1952, 32), (CKM_ML_DSA_KEY_PAIR_GEN, 3, 2592, 32),
            (CKM_ML_KEM_KEY_PAIR_GEN, 2, 1184, 64), (CKM_ML_KEM_KEY_PAIR_GEN, 3, 1568, 64)]
    for gen, parameter_set, public_length, seed_length in sets:
        what = "0x%X set %d" % (gen, parameter_set)
        pub, priv = C.s.generate_key_pair(mech(gen), {CKA_TOKEN: False, CKA_PARAMETER_SET: parameter_set}, {CKA_TOKEN: False})
        eq(C.s.get_ulong(pub, CKA_PARAMETER_SET), parameter_set, what + ": public CKA_PARAMETER_SET")
        eq(C.s.get_ulong(priv, CKA_PARAMETER_SET), parameter_set, what + ": private CKA_PARAMETER_SET")
        eq(len(C.s.get_attribute(pub, CKA_VALUE)), public_length, what + ": public CKA_VALUE length")
        expect_rv(CKR_ATTRIBUTE_SENSITIVE, what + ": CKA_SEED of a sensitive key", C.s.get_attribute, priv, CKA_SEED)
        if gen == CKM_ML_KEM_KEY_PAIR_GEN:
            eq(C.s.get_bool(pub, CKA_ENCAPSULATE), True, what + ": CKA_ENCAPSULATE")
            eq(C.s.get_bool(priv, CKA_DECAPSULATE), True, what + ": CKA_DECAPSULATE")
            eq(C.s.get_bool(priv, CKA_SIGN), False, what + ": CKA_SIGN")
        else:
            eq(C.s.get_bool(priv, CKA_SIGN), True, what + ": CKA_SIGN")
        readable_pub, readable = C.s.generate_key_pair(mech(gen), {CKA_TOKEN: False, CKA_PARAMETER_SET: parameter_set},
                                                       {CKA_TOKEN: False, CKA_SENSITIVE: False, CKA_EXTRACTABLE: True})
        eq(len(C.s.get_attribute(readable, CKA_SEED)), seed_length, what + ": CKA_SEED length")
    for gen in (CKM_ML_DSA_KEY_PAIR_GEN, CKM_ML_KEM_KEY_PAIR_GEN):
        expect_rv(0x209, "0x%X with parameter set 1 (ML-DSA-44 / ML-KEM-512): CKR_PARAMETER_SET_NOT_SUPPORTED" % gen,
                  C.s.generate_key_pair, mech(gen), {CKA_TOKEN: False, CKA_PARAMETER_SET: 1}, {CKA_TOKEN: False})
        expect_rv(CKR_ATTRIBUTE_VALUE_INVALID, "0x%X with parameter set 7" % gen,
                  C.s.generate_key_pair, mech(gen), {CKA_TOKEN: False, CKA_PARAMETER_SET: 7}, {CKA_TOKEN: False})
        expect_rv(CKR_TEMPLATE_INCOMPLETE, "0x%X without CKA_PARAMETER_SET" % gen,
                  C.s.generate_key_pair, mech(gen), {CKA_TOKEN: False}, {CKA_TOKEN: False})
    # An extractable ML-DSA private key travels under AES-KWP as PKCS#8 (seed form) and comes back
    # as the same key: same seed, its signatures verify with the original public key.
    wrapping = C.s.generate_key(mech(CKM_AES_KEY_GEN), {CKA_TOKEN: False, CKA_VALUE_LEN: 32, CKA_WRAP: True, CKA_UNWRAP: True})
    pub, priv = C.s.generate_key_pair(mech(CKM_ML_DSA_KEY_PAIR_GEN), {CKA_TOKEN: False, CKA_PARAMETER_SET: 3},
                                      {CKA_TOKEN: False, CKA_SENSITIVE: False, CKA_EXTRACTABLE: True})
    wrapped = C.s.wrap_key(mech(CKM_AES_KEY_WRAP_PAD), wrapping, priv)
    back = C.s.unwrap_key(mech(CKM_AES_KEY_WRAP_PAD), wrapping, wrapped,
                          {CKA_CLASS: CKO_PRIVATE_KEY, CKA_KEY_TYPE: 0x4A, CKA_TOKEN: False, CKA_SENSITIVE: False, CKA_EXTRACTABLE: True,
                           CKA_SIGN: True})
    eq(C.s.get_ulong(back, CKA_PARAMETER_SET), 3, "unwrapped ML-DSA key: CKA_PARAMETER_SET (from the PKCS#8 OID)")
    eq(C.s.get_attribute(back, CKA_SEED), C.s.get_attribute(priv, CKA_SEED), "unwrapped ML-DSA key: CKA_SEED")
    message = os.urandom(100)
    C.s.verify(mech(CKM_ML_DSA), pub, message, C.s.sign(mech(CKM_ML_DSA), back, message))  # raises unless it verifies
    expect_rv(CKR_TEMPLATE_INCONSISTENT, "unwrapping an ML-DSA-87 key as ML-KEM", C.s.unwrap_key, mech(CKM_AES_KEY_WRAP_PAD), wrapping, wrapped,
              {CKA_CLASS: CKO_PRIVATE_KEY, CKA_KEY_TYPE: 0x49, CKA_TOKEN: False})
    expect_rv(CKR_TEMPLATE_INCONSISTENT, "unwrapping an ML-DSA-87 key with CKA_PARAMETER_SET 2", C.s.unwrap_key, mech(CKM_AES_KEY_WRAP_PAD), wrapping, wrapped,
              {CKA_CLASS: CKO_PRIVATE_KEY, CKA_KEY_TYPE: 0x4A, CKA_TOKEN: False, CKA_PARAMETER_SET: 2})
    # Import: 3.2 lets a token refuse a private key given by its expanded form alone (the library
    # makes keys from seeds): CKR_TEMPLATE_INCOMPLETE; an expanded key beside the seed must be the
    # seed's (its public parts are compared), else CKR_ATTRIBUTE_VALUE_INVALID.
    private_template = {CKA_CLASS: CKO_PRIVATE_KEY, CKA_KEY_TYPE: 0x4A, CKA_TOKEN: False, CKA_PARAMETER_SET: 2}
    expect_rv(CKR_TEMPLATE_INCOMPLETE, "ML-DSA-65 private key by CKA_VALUE alone", C.s.create_object,
              {**private_template, CKA_VALUE: os.urandom(4032)})
    expect_rv(CKR_ATTRIBUTE_VALUE_INVALID, "ML-DSA-65 private key whose CKA_VALUE is not its seed's", C.s.create_object,
              {**private_template, CKA_SEED: os.urandom(32), CKA_VALUE: os.urandom(4032)})
    # A KEM key asked to sign, a signing key asked to decapsulate: the key does not fit the mechanism.
    kem_pub, kem_priv = C.s.generate_key_pair(mech(CKM_ML_KEM_KEY_PAIR_GEN), {CKA_TOKEN: False, CKA_PARAMETER_SET: 2}, {CKA_TOKEN: False})
    expect_rv(CKR_KEY_TYPE_INCONSISTENT, "C_SignInit(CKM_ML_DSA) with an ML-KEM key", C.s.call, "C_SignInit", mech(CKM_ML_DSA).ref(), kem_priv)
    dsa_pub, dsa_priv = C.s.generate_key_pair(mech(CKM_ML_DSA_KEY_PAIR_GEN), {CKA_TOKEN: False, CKA_PARAMETER_SET: 2}, {CKA_TOKEN: False})
    expect_rv(CKR_KEY_TYPE_INCONSISTENT, "C_SignInit(CKM_ML_DSA) with an ML-DSA public key", C.s.call, "C_SignInit", mech(CKM_ML_DSA).ref(), dsa_pub)


# --- main ------------------------------------------------------------------------------------
def main():
    if len(sys.argv) < 4:
        print("usage: test_modern.py MODULE TOKEN_LABEL USER_PIN [name-filter]", file=sys.stderr)
        return 2
    path, label, pin = sys.argv[1:4]
    only = sys.argv[4] if len(sys.argv) > 4 else ""
    C.module = Module(path)
    C.module.initialize()
    C.slot = C.module.slot_with_label(label)
    C.mechanism_list = C.module.mechanisms(C.slot)
    passed = failed = skipped = 0
    login = C.module.open_session(C.slot)
    login.login(pin)
    started = time.time()
    for function in TESTS:
        name = function.__name__
        if only and only not in name:
            continue
        C.s = C.module.open_session(C.slot)
        try:
            function()
            print("ok %s" % name)
            passed += 1
        except Skip as e:
            print("skip %s: %s" % (name, e))
            skipped += 1
        except AssertionError as e:
            print("FAIL %s: %s" % (name, e))
            failed += 1
        except CKRError as e:
            line = traceback.extract_tb(e.__traceback__)
            where = next((f for f in reversed(line) if f.filename == __file__), line[-1])
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
    sys.stderr.write("modern tests took %.1f s\n" % (time.time() - started))
    print("modern: %d passed, %d failed%s" % (passed, failed, ", %d skipped" % skipped if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
