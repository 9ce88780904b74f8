/*
 * bench.c — one round of the side-by-side benchmark, through the C API as hosts call it.
 * Loads MODULE, initialises a token in its empty (last) slot, and prints one line per measure:
 *     <measure> <value> <unit>
 * so that scripts/bench.sh can alternate modules, repeat rounds and take medians.
 * Usage: bench MODULE SECONDS_PER_MEASURE
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "keychain-pkcs11.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static CK_FUNCTION_LIST_PTR p11;
static CK_SESSION_HANDLE session;
static double budget;

#define TRY(call) ((call) == CKR_OK)

static int open_token(const char *module) {
    void *handle = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    if (!handle) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 0; }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(handle, "C_GetFunctionList");
    if (!get || !TRY(get(&p11)) || !TRY(p11->C_Initialize(NULL))) return 0;
    CK_SLOT_ID slots[64];
    CK_ULONG count = 64;
    if (!TRY(p11->C_GetSlotList(CK_FALSE, slots, &count)) || count == 0) return 0;
    CK_UTF8CHAR label[32], so[] = "12345678", pin[] = "1234";
    memset(label, ' ', sizeof label);
    memcpy(label, "bench", 5);
    CK_SLOT_ID slot = slots[count - 1];
    if (!TRY(p11->C_InitToken(slot, so, 8, label))) return 0;
    /* SoftHSM moves a new token to a new slot ID: find it by its label. */
    count = 64;
    if (!TRY(p11->C_GetSlotList(CK_TRUE, slots, &count))) return 0;
    for (CK_ULONG i = 0; i < count; i++) {
        CK_TOKEN_INFO info;
        if (TRY(p11->C_GetTokenInfo(slots[i], &info)) && memcmp(info.label, label, 32) == 0) slot = slots[i];
    }
    return TRY(p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &session)) &&
           TRY(p11->C_Login(session, CKU_SO, so, 8)) && TRY(p11->C_InitPIN(session, pin, 4)) &&
           TRY(p11->C_Logout(session)) && TRY(p11->C_Login(session, CKU_USER, pin, 4));
}

static void report(const char *name, double value, const char *unit) {
    if (value < 0) printf("%s n/a %s\n", name, unit);
    else printf("%s %.3f %s\n", name, value, unit);
    fflush(stdout);
}

static unsigned char p256[] = {0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07};
static unsigned char p384[] = {0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x22};
static unsigned char ed25519[] = {0x06, 0x03, 0x2B, 0x65, 0x70};

static int key_pair(CK_MECHANISM_TYPE gen, unsigned char *params, CK_ULONG params_len, CK_ULONG bits,
                    CK_OBJECT_HANDLE *pub, CK_OBJECT_HANDLE *priv) {
    CK_MECHANISM m = {gen, NULL, 0};
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE ec[] = {{CKA_EC_PARAMS, params, params_len}, {CKA_VERIFY, &yes, 1}};
    CK_ATTRIBUTE rsa[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_VERIFY, &yes, 1}};
    CK_ATTRIBUTE priv_t[] = {{CKA_SIGN, &yes, 1}};
    return TRY(p11->C_GenerateKeyPair(session, &m, params ? ec : rsa, 2, priv_t, 1, pub, priv));
}

/* Signatures (sign) or verifications (verify) per second with one mechanism. */
static void signatures(const char *name, CK_MECHANISM_TYPE gen, unsigned char *params, CK_ULONG params_len, CK_ULONG bits,
                       CK_MECHANISM mech) {
    CK_OBJECT_HANDLE pub, priv;
    char label[64];
    if (!key_pair(gen, params, params_len, bits, &pub, &priv)) {
        snprintf(label, sizeof label, "sign.%s", name); report(label, -1, "op/s");
        snprintf(label, sizeof label, "verify.%s", name); report(label, -1, "op/s");
        return;
    }
    unsigned char data[32], sig[1024];
    memset(data, 0x42, sizeof data);
    CK_ULONG siglen = sizeof sig;
    long n = 0;
    double start = now(), elapsed;
    int ok = 1;
    do {
        siglen = sizeof sig;
        ok = TRY(p11->C_SignInit(session, &mech, priv)) && TRY(p11->C_Sign(session, data, sizeof data, sig, &siglen));
        n++;
    } while (ok && (elapsed = now() - start) < budget);
    snprintf(label, sizeof label, "sign.%s", name);
    report(label, ok ? n / elapsed : -1, "op/s");
    n = 0;
    start = now();
    do {
        ok = TRY(p11->C_VerifyInit(session, &mech, pub)) && TRY(p11->C_Verify(session, data, sizeof data, sig, siglen));
        n++;
    } while (ok && (elapsed = now() - start) < budget);
    snprintf(label, sizeof label, "verify.%s", name);
    report(label, ok ? n / elapsed : -1, "op/s");
}

/* Encryption throughput (MiB/s) of one AES mechanism for messages of `size` bytes. */
static void aes(const char *name, CK_MECHANISM_TYPE type, size_t size) {
    CK_MECHANISM gen = {CKM_AES_KEY_GEN, NULL, 0};
    CK_ULONG len = 32;
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE t[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_ENCRYPT, &yes, 1}};
    CK_OBJECT_HANDLE key;
    if (!TRY(p11->C_GenerateKey(session, &gen, t, 2, &key))) { report(name, -1, "MiB/s"); return; }
    unsigned char iv[16] = {0};
    CK_GCM_PARAMS gcm = {iv, 12, 96, NULL, 0, 128};
    CK_MECHANISM m = {type, type == CKM_AES_GCM ? (void *)&gcm : (void *)iv, type == CKM_AES_GCM ? sizeof gcm : sizeof iv};
    unsigned char *in = calloc(1, size), *out = malloc(size + 32);
    double bytes = 0, start = now(), elapsed;
    int ok;
    do {
        CK_ULONG outlen = size + 32;
        ok = TRY(p11->C_EncryptInit(session, &m, key)) && TRY(p11->C_Encrypt(session, in, size, out, &outlen));
        bytes += size;
    } while (ok && (elapsed = now() - start) < budget);
    report(name, ok ? bytes / elapsed / 1048576.0 : -1, "MiB/s");
    free(in);
    free(out);
}

static void sha256(size_t size) {
    CK_MECHANISM m = {CKM_SHA256, NULL, 0};
    unsigned char *in = calloc(1, size), out[32];
    double bytes = 0, start = now(), elapsed;
    int ok;
    do {
        CK_ULONG outlen = sizeof out;
        ok = TRY(p11->C_DigestInit(session, &m)) && TRY(p11->C_Digest(session, in, size, out, &outlen));
        bytes += size;
    } while (ok && (elapsed = now() - start) < budget);
    report("digest.sha256.1MiB", ok ? bytes / elapsed / 1048576.0 : -1, "MiB/s");
    free(in);
}

static void keygen(const char *name, CK_MECHANISM_TYPE gen, unsigned char *params, CK_ULONG params_len, CK_ULONG bits) {
    long n = 0;
    double start = now(), elapsed;
    int ok;
    do {
        CK_OBJECT_HANDLE pub, priv;
        ok = key_pair(gen, params, params_len, bits, &pub, &priv);
        if (ok) { p11->C_DestroyObject(session, pub); p11->C_DestroyObject(session, priv); }
        n++;
    } while (ok && (elapsed = now() - start) < budget);
    report(name, ok ? n / elapsed : -1, "op/s");
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s MODULE SECONDS\n", argv[0]); return 2; }
    budget = atof(argv[2]);
    if (!open_token(argv[1])) { fprintf(stderr, "cannot set up a token in %s\n", argv[1]); return 1; }
    CK_MECHANISM pkcs = {CKM_SHA256_RSA_PKCS, NULL, 0};
    CK_RSA_PKCS_PSS_PARAMS pss_params = {CKM_SHA256, CKG_MGF1_SHA256, 32};
    CK_MECHANISM pss = {CKM_SHA256_RSA_PKCS_PSS, &pss_params, sizeof pss_params};
    /* Raw ECDSA over a 32-byte hash: SoftHSM 2.6 offers no hashing ECDSA mechanisms. */
    CK_MECHANISM ecdsa = {CKM_ECDSA, NULL, 0};
    CK_MECHANISM eddsa = {0x1057 /* CKM_EDDSA */, NULL, 0};
    signatures("rsa2048.pkcs1", CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0, 2048, pkcs);
    signatures("rsa2048.pss", CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0, 2048, pss);
    signatures("ecdsa.p256", CKM_EC_KEY_PAIR_GEN, p256, sizeof p256, 0, ecdsa);
    signatures("ecdsa.p384", CKM_EC_KEY_PAIR_GEN, p384, sizeof p384, 0, ecdsa);
    signatures("ed25519", 0x1055 /* CKM_EC_EDWARDS_KEY_PAIR_GEN */, ed25519, sizeof ed25519, 0, eddsa);
    aes("aes256.gcm.1KiB", CKM_AES_GCM, 1024);
    aes("aes256.gcm.1MiB", CKM_AES_GCM, 1 << 20);
    aes("aes256.cbc.1KiB", CKM_AES_CBC, 1024);
    aes("aes256.cbc.1MiB", CKM_AES_CBC, 1 << 20);
    sha256(1 << 20);
    keygen("keygen.ecdsa.p256", CKM_EC_KEY_PAIR_GEN, p256, sizeof p256, 0);
    keygen("keygen.rsa2048", CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0, 2048);
    p11->C_Finalize(NULL);
    return 0;
}
