/*
 * p11_sign.c — ECDSA P-256 signatures per second through any PKCS#11 module, as a host calls it:
 * dlopen, C_GetFunctionList, C_Initialize, one session, logged in, C_SignInit + C_Sign
 * (CKM_ECDSA over a 32-byte digest) COUNT times. The TPM rows of scripts/tpm-bench.sh use it for
 * tpm2-pkcs11 and for this project's module alike.
 *
 * The token labelled LABEL is used when it exists; otherwise the first slot whose token is not
 * initialised gets one (C_InitToken with SO PIN "12345678", then C_InitPIN with user PIN PIN).
 * The private key labelled "tpm-bench" is used when it exists; otherwise a P-256 token key pair
 * is generated, and with --tpm its private template carries CKA_KC_TPM = TRUE (this module's
 * vendor attribute: the key is made and kept in the TPM), which is then read back and must be TRUE.
 * One signature is checked with C_Verify on the public key before the loop.
 *
 * Prints, one per line ("<measure> <value> <unit>", as Benchmarks/bench.c does):
 *     keygen.ecdsa.p256 <ms> ms        (only when the key was generated in this run)
 *     sign.ecdsa.p256 <rate> op/s
 * Exit status 0 only when every call succeeded.
 *
 * Usage: p11_sign MODULE LABEL PIN COUNT [--tpm]
 * Build: cc -O2 -IInclude -o p11_sign Benchmarks/p11_sign.c -ldl
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include "keychain-pkcs11.h"

#ifndef CKA_KC_TPM
/* The key lives in the TPM (Docs/vendor-constants.md); CK_BBOOL. */
#define CKA_KC_TPM (CKA_KC_VENDOR_BASE + 0x2CUL)
#endif

static CK_FUNCTION_LIST_PTR p11;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Prints a failed call and says so. */
static int ok(CK_RV rv, const char *what) {
    if (rv == CKR_OK) return 1;
    fprintf(stderr, "p11_sign: %s: 0x%lx\n", what, rv);
    return 0;
}

/* A label padded with spaces to the 32 bytes of CK_TOKEN_INFO.label. */
static void padded(const char *text, CK_UTF8CHAR out[32]) {
    memset(out, ' ', 32);
    size_t length = strlen(text);
    memcpy(out, text, length > 32 ? 32 : length);
}

/* The slot whose token is labelled `label` (initialised == 1), or the first slot with a token
 * that is not initialised (initialised == 0). */
static int find_slot(const CK_UTF8CHAR label[32], int initialised, CK_SLOT_ID *slot) {
    CK_SLOT_ID slots[64];
    CK_ULONG count = 64;
    if (!ok(p11->C_GetSlotList(CK_TRUE, slots, &count), "C_GetSlotList")) return 0;
    for (CK_ULONG i = 0; i < count; i++) {
        CK_TOKEN_INFO info;
        if (p11->C_GetTokenInfo(slots[i], &info) != CKR_OK) continue;
        int is_initialised = (info.flags & CKF_TOKEN_INITIALIZED) != 0;
        if (initialised ? (is_initialised && memcmp(info.label, label, 32) == 0) : !is_initialised) {
            *slot = slots[i];
            return 1;
        }
    }
    return 0;
}

/* The first object matching `template`, or CK_INVALID_HANDLE. */
static CK_OBJECT_HANDLE find_object(CK_SESSION_HANDLE session, CK_ATTRIBUTE *template, CK_ULONG count) {
    CK_OBJECT_HANDLE found = CK_INVALID_HANDLE;
    CK_ULONG n = 0;
    if (!ok(p11->C_FindObjectsInit(session, template, count), "C_FindObjectsInit")) return CK_INVALID_HANDLE;
    if (p11->C_FindObjects(session, &found, 1, &n) != CKR_OK || n == 0) found = CK_INVALID_HANDLE;
    p11->C_FindObjectsFinal(session);
    return found;
}

int main(int argc, char **argv) {
    if (argc < 5 || (argc == 6 && strcmp(argv[5], "--tpm")) || argc > 6) {
        fprintf(stderr, "usage: p11_sign MODULE LABEL PIN COUNT [--tpm]\n");
        return 2;
    }
    const char *pin = argv[3];
    long count = strtol(argv[4], NULL, 10);
    int tpm = argc == 6;
    if (count <= 0) { fprintf(stderr, "p11_sign: COUNT must be positive\n"); return 2; }

    void *module = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!module) { fprintf(stderr, "p11_sign: dlopen: %s\n", dlerror()); return 1; }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(module, "C_GetFunctionList");
    if (!get || !ok(get(&p11), "C_GetFunctionList")) return 1;
    CK_C_INITIALIZE_ARGS args = {NULL, NULL, NULL, NULL, CKF_OS_LOCKING_OK, NULL};
    if (!ok(p11->C_Initialize(&args), "C_Initialize")) return 1;

    int status = 1;
    CK_SESSION_HANDLE session = CK_INVALID_HANDLE;
    CK_UTF8CHAR label[32];
    padded(argv[2], label);
    CK_UTF8CHAR so_pin[] = "12345678";
    CK_SLOT_ID slot;
    if (!find_slot(label, 1, &slot)) {
        if (!find_slot(label, 0, &slot)) { fprintf(stderr, "p11_sign: no token %s and no empty slot\n", argv[2]); goto done; }
        if (!ok(p11->C_InitToken(slot, so_pin, 8, label), "C_InitToken")) goto done;
        /* Some modules (SoftHSM, tpm2-pkcs11) show the new token in another slot. */
        if (!find_slot(label, 1, &slot)) { fprintf(stderr, "p11_sign: no token %s after C_InitToken\n", argv[2]); goto done; }
        if (!ok(p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &session), "C_OpenSession") ||
            !ok(p11->C_Login(session, CKU_SO, so_pin, 8), "C_Login(SO)") ||
            !ok(p11->C_InitPIN(session, (CK_UTF8CHAR_PTR)pin, strlen(pin)), "C_InitPIN") ||
            !ok(p11->C_Logout(session), "C_Logout") || !ok(p11->C_CloseSession(session), "C_CloseSession")) goto done;
        session = CK_INVALID_HANDLE;
    }
    if (!ok(p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &session), "C_OpenSession") ||
        !ok(p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)), "C_Login")) goto done;

    CK_BBOOL yes = CK_TRUE;
    CK_OBJECT_CLASS private_class = CKO_PRIVATE_KEY, public_class = CKO_PUBLIC_KEY;
    CK_KEY_TYPE ec = CKK_EC;
    CK_UTF8CHAR key_label[] = "tpm-bench";
    CK_BYTE p256[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
    CK_ATTRIBUTE private_query[] = {{CKA_CLASS, &private_class, sizeof private_class}, {CKA_KEY_TYPE, &ec, sizeof ec},
                                    {CKA_LABEL, key_label, sizeof key_label - 1}};
    CK_ATTRIBUTE public_query[] = {{CKA_CLASS, &public_class, sizeof public_class}, {CKA_KEY_TYPE, &ec, sizeof ec},
                                   {CKA_LABEL, key_label, sizeof key_label - 1}};
    CK_OBJECT_HANDLE private_key = find_object(session, private_query, 3);
    CK_OBJECT_HANDLE public_key = find_object(session, public_query, 3);
    if (private_key == CK_INVALID_HANDLE || public_key == CK_INVALID_HANDLE) {
        CK_MECHANISM generate = {CKM_EC_KEY_PAIR_GEN, NULL, 0};
        CK_ATTRIBUTE public_template[] = {{CKA_TOKEN, &yes, 1}, {CKA_EC_PARAMS, p256, sizeof p256}, {CKA_VERIFY, &yes, 1},
                                          {CKA_LABEL, key_label, sizeof key_label - 1}};
        CK_ATTRIBUTE private_template[] = {{CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &yes, 1}, {CKA_SENSITIVE, &yes, 1}, {CKA_SIGN, &yes, 1},
                                           {CKA_LABEL, key_label, sizeof key_label - 1}, {CKA_KC_TPM, &yes, 1}};
        double start = now();
        if (!ok(p11->C_GenerateKeyPair(session, &generate, public_template, 4, private_template, tpm ? 6 : 5, &public_key, &private_key),
                "C_GenerateKeyPair")) goto done;
        printf("keygen.ecdsa.p256 %.1f ms\n", (now() - start) * 1e3);
    }
    if (tpm) {
        CK_BBOOL in_tpm = CK_FALSE;
        CK_ATTRIBUTE read = {CKA_KC_TPM, &in_tpm, 1};
        if (!ok(p11->C_GetAttributeValue(session, private_key, &read, 1), "C_GetAttributeValue(CKA_KC_TPM)")) goto done;
        if (in_tpm != CK_TRUE) { fprintf(stderr, "p11_sign: the key is not in the TPM (CKA_KC_TPM is FALSE)\n"); goto done; }
    }

    CK_MECHANISM ecdsa = {CKM_ECDSA, NULL, 0};
    CK_BYTE digest[32], signature[132];
    CK_ULONG signature_length = sizeof signature;
    if (getrandom(digest, sizeof digest, 0) != (ssize_t)sizeof digest) { perror("getrandom"); goto done; }
    /* One signature checked against the public key: the loop below signs for real. */
    if (!ok(p11->C_SignInit(session, &ecdsa, private_key), "C_SignInit") ||
        !ok(p11->C_Sign(session, digest, sizeof digest, signature, &signature_length), "C_Sign")) goto done;
    if (signature_length != 64) { fprintf(stderr, "p11_sign: a %lu-byte signature, not 64\n", signature_length); goto done; }
    if (!ok(p11->C_VerifyInit(session, &ecdsa, public_key), "C_VerifyInit") ||
        !ok(p11->C_Verify(session, digest, sizeof digest, signature, signature_length), "C_Verify")) goto done;

    double start = now();
    for (long i = 0; i < count; i++) {
        digest[i % 32] ^= (CK_BYTE)(i + 1); /* a different digest each time */
        signature_length = sizeof signature;
        if (!ok(p11->C_SignInit(session, &ecdsa, private_key), "C_SignInit") ||
            !ok(p11->C_Sign(session, digest, sizeof digest, signature, &signature_length), "C_Sign")) goto done;
    }
    printf("sign.ecdsa.p256 %.1f op/s\n", count / (now() - start));
    status = 0;

done:
    if (session != CK_INVALID_HANDLE) p11->C_CloseSession(session);
    p11->C_Finalize(NULL);
    return status;
}
