/*
 * measure.c — the foundation's figures, through the C API as a host calls it:
 *   load N      median time of dlopen + C_GetFunctionList + C_Initialize in N fresh processes
 *   open N      median time of dlopen + C_GetFunctionList alone (the cost of mapping, relocating
 *               and constructing the module, before it does any work) in N fresh processes
 *   find N      creates N token data objects (half private), then the median time of
 *               C_FindObjectsInit(CKA_LABEL) + C_FindObjects + C_FindObjectsFinal, and of the
 *               same by CKA_ID; also the durable creation rate.
 *   sign SECONDS  C_SignInit + C_Sign in a loop on session keys: RSA-2048 PKCS#1 (SHA-256),
 *               ECDSA P-256 (SHA-256), Ed25519; prints signatures per second for each.
 *   gcm N       N × (C_EncryptInit + C_Encrypt) of 1 KiB with AES-256-GCM on a session key
 *               (a fixed count, for profiling under callgrind); prints messages per second.
 *   keygen N    N × (C_GenerateKeyPair P-256 session key pair + C_DestroyObject of both), as the
 *               benchmark's keygen.ecdsa.p256 does (a fixed count, for callgrind).
 * Usage: measure MODULE load|open|find|sign|gcm N   (KEYCHAIN_PKCS11_DIR chooses the keychain folder)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "keychain-pkcs11.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, int count) {
    qsort(values, count, sizeof(double), compare);
    return values[count / 2];
}

static CK_FUNCTION_LIST_PTR load(const char *path, void **handle) {
    *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*handle) { fprintf(stderr, "dlopen: %s\n", dlerror()); exit(1); }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(*handle, "C_GetFunctionList");
    CK_FUNCTION_LIST_PTR list = NULL;
    if (!get || get(&list) != CKR_OK) { fprintf(stderr, "C_GetFunctionList failed\n"); exit(1); }
    return list;
}

#define CHECK(call) do { CK_RV rv_ = (call); if (rv_ != CKR_OK) { fprintf(stderr, "%s: 0x%lx\n", #call, rv_); exit(1); } } while (0)

/* With `initialize`, the time includes C_Initialize (and C_Finalize runs after the timing). */
static int measure_load(const char *module, int runs, int initialize) {
    double *times = calloc(runs, sizeof(double));
    for (int i = 0; i < runs; i++) {
        int pipefd[2];
        if (pipe(pipefd) != 0) return 1;
        pid_t child = fork();
        if (child == 0) {
            double start = now();
            void *handle;
            CK_FUNCTION_LIST_PTR p11 = load(module, &handle);
            if (initialize) CHECK(p11->C_Initialize(NULL));
            double elapsed = now() - start;
            if (write(pipefd[1], &elapsed, sizeof elapsed) != sizeof elapsed) _exit(1);
            if (initialize) p11->C_Finalize(NULL);
            _exit(0);
        }
        int status;
        if (read(pipefd[0], &times[i], sizeof(double)) != sizeof(double)) return 1;
        waitpid(child, &status, 0);
        close(pipefd[0]);
        close(pipefd[1]);
    }
    printf("%s: median %.2f ms over %d fresh processes\n", initialize ? "dlopen+C_Initialize" : "dlopen+C_GetFunctionList",
           median(times, runs) * 1e3, runs);
    return 0;
}

/* Opens a logged-in R/W session on a fresh keychain in the empty slot. */
static CK_SESSION_HANDLE fresh_session(CK_FUNCTION_LIST_PTR p11) {
    CK_SLOT_ID slots[64];
    CK_ULONG count = 64;
    CHECK(p11->C_GetSlotList(CK_FALSE, slots, &count));
    CK_SLOT_ID slot = slots[count - 1];
    CK_UTF8CHAR label[32];
    memset(label, ' ', sizeof label);
    memcpy(label, "bench", 5);
    CK_UTF8CHAR so[] = "12345678", pin[] = "1234";
    CHECK(p11->C_InitToken(slot, so, 8, label));
    CK_SESSION_HANDLE session;
    CHECK(p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &session));
    CHECK(p11->C_Login(session, CKU_SO, so, 8));
    CHECK(p11->C_InitPIN(session, pin, 4));
    CHECK(p11->C_Logout(session));
    CHECK(p11->C_Login(session, CKU_USER, pin, 4));
    return session;
}

static int measure_find(const char *module, int objects) {
    void *handle;
    CK_FUNCTION_LIST_PTR p11 = load(module, &handle);
    CHECK(p11->C_Initialize(NULL));
    CK_SESSION_HANDLE session = fresh_session(p11);

    CK_OBJECT_CLASS klass = CKO_DATA;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    char name[64];
    unsigned char value[64];
    memset(value, 0x5a, sizeof value);
    double start = now();
    for (int i = 0; i < objects; i++) {
        snprintf(name, sizeof name, "object-%d", i);
        CK_ATTRIBUTE template[] = {
            {CKA_CLASS, &klass, sizeof klass},
            {CKA_TOKEN, &yes, sizeof yes},
            {CKA_PRIVATE, (i % 2) ? &yes : &no, 1},
            {CKA_LABEL, name, strlen(name)},
            {CKA_OBJECT_ID, name, strlen(name)},
            {CKA_VALUE, value, sizeof value},
        };
        CK_OBJECT_HANDLE object;
        CHECK(p11->C_CreateObject(session, template, 6, &object));
    }
    double created = now() - start;
    printf("created %d durable token objects: %.0f objects/s\n", objects, objects / created);

    const int runs = 1000;
    double *times = calloc(runs, sizeof(double));
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < runs; i++) {
            snprintf(name, sizeof name, "object-%d", (i * 7919) % objects);
            CK_ATTRIBUTE query[] = {{pass == 0 ? CKA_LABEL : CKA_OBJECT_ID, name, strlen(name)}};
            CK_OBJECT_HANDLE found[4];
            CK_ULONG n = 0;
            double t0 = now();
            CHECK(p11->C_FindObjectsInit(session, query, 1));
            CHECK(p11->C_FindObjects(session, found, 4, &n));
            CHECK(p11->C_FindObjectsFinal(session));
            times[i] = now() - t0;
            if (n != 1) { fprintf(stderr, "expected 1 object for %s, found %lu\n", name, n); return 1; }
        }
        printf("find by %s among %d objects: median %.3f ms over %d searches\n",
               pass == 0 ? "CKA_LABEL" : "CKA_OBJECT_ID", objects, median(times, runs) * 1e3, runs);
    }
    CHECK(p11->C_Finalize(NULL));
    return 0;
}

static void sign_rate(CK_FUNCTION_LIST_PTR p11, CK_SESSION_HANDLE session, const char *name, CK_MECHANISM_TYPE keygen,
                      CK_ATTRIBUTE *pub, CK_ULONG pub_count, CK_MECHANISM_TYPE mech, double seconds) {
    CK_MECHANISM gen = {keygen, NULL, 0};
    CK_OBJECT_HANDLE pubkey, privkey;
    CHECK(p11->C_GenerateKeyPair(session, &gen, pub, pub_count, NULL, 0, &pubkey, &privkey));
    CK_MECHANISM m = {mech, NULL, 0};
    unsigned char data[32], sig[1024];
    memset(data, 0x42, sizeof data);
    long n = 0;
    double start = now(), elapsed;
    do {
        CK_ULONG len = sizeof sig;
        CHECK(p11->C_SignInit(session, &m, privkey));
        CHECK(p11->C_Sign(session, data, sizeof data, sig, &len));
        n++;
    } while ((elapsed = now() - start) < seconds);
    printf("%-22s %10.0f sign/s\n", name, n / elapsed);
}

static int measure_sign(const char *module, double seconds) {
    void *handle;
    CK_FUNCTION_LIST_PTR p11 = load(module, &handle);
    CHECK(p11->C_Initialize(NULL));
    CK_SESSION_HANDLE session = fresh_session(p11);
    CK_ULONG bits = 2048;
    CK_ATTRIBUTE rsa[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}};
    unsigned char p256[] = {0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07};
    CK_ATTRIBUTE ec[] = {{CKA_EC_PARAMS, p256, sizeof p256}};
    unsigned char ed25519[] = {0x06, 0x03, 0x2B, 0x65, 0x70};
    CK_ATTRIBUTE ed[] = {{CKA_EC_PARAMS, ed25519, sizeof ed25519}};
    sign_rate(p11, session, "RSA-2048 SHA256-PKCS", CKM_RSA_PKCS_KEY_PAIR_GEN, rsa, 1, CKM_SHA256_RSA_PKCS, seconds);
    sign_rate(p11, session, "ECDSA P-256 SHA256", CKM_EC_KEY_PAIR_GEN, ec, 1, CKM_ECDSA_SHA256, seconds);
    sign_rate(p11, session, "Ed25519", CKM_EC_EDWARDS_KEY_PAIR_GEN, ed, 1, CKM_EDDSA, seconds);
    CHECK(p11->C_Finalize(NULL));
    return 0;
}

static int measure_gcm(const char *module, long count) {
    void *handle;
    CK_FUNCTION_LIST_PTR p11 = load(module, &handle);
    CHECK(p11->C_Initialize(NULL));
    CK_SESSION_HANDLE session = fresh_session(p11);
    CK_ULONG length = 32;
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE template[] = {{CKA_VALUE_LEN, &length, sizeof length}, {CKA_ENCRYPT, &yes, sizeof yes}};
    CK_MECHANISM gen = {CKM_AES_KEY_GEN, NULL, 0};
    CK_OBJECT_HANDLE key;
    CHECK(p11->C_GenerateKey(session, &gen, template, 2, &key));
    unsigned char iv[12] = {0}, data[1024], out[1024 + 32];
    memset(data, 0x42, sizeof data);
    CK_GCM_PARAMS params = {iv, sizeof iv, 96, NULL, 0, 128};
    CK_MECHANISM m = {CKM_AES_GCM, &params, sizeof params};
    double start = now();
    for (long i = 0; i < count; i++) {
        CK_ULONG len = sizeof out;
        iv[0] = (unsigned char)i;
        CHECK(p11->C_EncryptInit(session, &m, key));
        CHECK(p11->C_Encrypt(session, data, sizeof data, out, &len));
    }
    double elapsed = now() - start;
    printf("AES-256-GCM 1 KiB: %.0f messages/s (%.2f us each)\n", count / elapsed, elapsed / count * 1e6);
    CHECK(p11->C_Finalize(NULL));
    return 0;
}

static int measure_keygen(const char *module, long count) {
    void *handle;
    CK_FUNCTION_LIST_PTR p11 = load(module, &handle);
    CHECK(p11->C_Initialize(NULL));
    CK_SESSION_HANDLE session = fresh_session(p11);
    unsigned char p256[] = {0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07};
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE pub[] = {{CKA_EC_PARAMS, p256, sizeof p256}, {CKA_VERIFY, &yes, 1}};
    CK_ATTRIBUTE priv[] = {{CKA_SIGN, &yes, 1}};
    CK_MECHANISM gen = {CKM_EC_KEY_PAIR_GEN, NULL, 0};
    double start = now();
    for (long i = 0; i < count; i++) {
        CK_OBJECT_HANDLE pubkey, privkey;
        CHECK(p11->C_GenerateKeyPair(session, &gen, pub, 2, priv, 1, &pubkey, &privkey));
        CHECK(p11->C_DestroyObject(session, pubkey));
        CHECK(p11->C_DestroyObject(session, privkey));
    }
    double elapsed = now() - start;
    printf("P-256 session key pairs: %.0f/s (%.1f us each)\n", count / elapsed, elapsed / count * 1e6);
    CHECK(p11->C_Finalize(NULL));
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODULE load|open|find|sign|gcm|keygen N\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[3]);
    if (strcmp(argv[2], "load") == 0) return measure_load(argv[1], n, 1);
    if (strcmp(argv[2], "open") == 0) return measure_load(argv[1], n, 0);
    if (strcmp(argv[2], "find") == 0) return measure_find(argv[1], n);
    if (strcmp(argv[2], "sign") == 0) return measure_sign(argv[1], atof(argv[3]));
    if (strcmp(argv[2], "gcm") == 0) return measure_gcm(argv[1], atol(argv[3]));
    if (strcmp(argv[2], "keygen") == 0) return measure_keygen(argv[1], atol(argv[3]));
    return 2;
}
