/*
 * pq_bench.c — ML-DSA and ML-KEM through a PKCS#11 module, as a host calls it, for
 * scripts/pq-bench.sh (which runs Benchmarks/PQLimit, swift-crypto called directly, beside it).
 * Prints one line per measure, "<measure> <value> <unit>", as Benchmarks/bench.c does.
 *
 *   pq_bench MODULE ops SECONDS [MEASURE]
 *                                    the 3.2 function list (C_GetInterface "PKCS 11" {3,2}), the
 *                                    token labelled "pqbench" (made in the empty slot when
 *                                    missing: SO PIN 12345678, user PIN 1234), one R/W session,
 *                                    logged in; then for ML-DSA-65, ML-DSA-87, ML-KEM-768 and
 *                                    ML-KEM-1024, SECONDS each:
 *       keygen.SET   op/s   C_GenerateKeyPair of a session pair (CKA_TOKEN false, the private
 *                           key CKA_PRIVATE)
 *       sign.SET     op/s   C_SignInit (CKM_ML_DSA, no parameter) + C_Sign of a fixed 1 KiB message
 *       verify.SET   op/s   C_VerifyInit + C_Verify of that message and a valid signature
 *       encaps.SET   op/s   C_EncapsulateKey (CKM_ML_KEM) into a session generic secret key
 *       decaps.SET   op/s   C_DecapsulateKey of one ciphertext into such a key
 *     Each operation is timed alone, its calls between two clock readings; what it made (a key
 *     pair, a secret key) is destroyed after the second reading, untimed. The rate is
 *     operations / the sum of their times.
 *     Before the timing, one signature is verified, and one encapsulated secret is decapsulated
 *     and compared (CKA_VALUE of both keys): the timed calls do the work they claim.
 *     With MEASURE (keygen.mlkem768, say) only that measure runs: for perf and callgrind.
 *
 *   pq_bench MODULE startup COUNT    in this fresh process (run it with exec: the module must not
 *                                    be mapped yet), through the 2.40 list both old and new
 *                                    modules have:
 *       dlopen             ms   dlopen(RTLD_NOW) of the module
 *       initialize.first   ms   the process's first C_Initialize
 *       initialize.finalize us  median of COUNT C_Finalize + C_Initialize pairs
 *       mechanism.list     us   median of COUNT C_GetMechanismList pairs (count, then the list)
 *                               on the "pqbench" token's slot
 *       mechanism.count    n    how many mechanisms the list has
 *
 *   pq_bench MODULE init             makes the "pqbench" token when missing (for startup runs)
 *
 * Build: gcc -O2 -IInclude -o pq_bench Benchmarks/pq_bench.c -ldl
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "keychain-pkcs11.h"

static CK_FUNCTION_LIST_3_2 *p11;
static CK_SESSION_HANDLE session;
static double budget;
static const char *only;  /* the one measure to run, or NULL for all */

/* Whether the measure OPERATION.SET runs. */
static int wanted(const char *operation, const char *set) {
    char name[64];
    snprintf(name, sizeof name, "%s.%s", operation, set);
    return !only || strcmp(only, name) == 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Prints a failed call and says so. */
static int ok(CK_RV rv, const char *what) {
    if (rv == CKR_OK) return 1;
    fprintf(stderr, "pq_bench: %s: 0x%lx\n", what, rv);
    return 0;
}

static void report(const char *measure, const char *set, double value, const char *unit) {
    if (set) printf("%s.%s %.3f %s\n", measure, set, value, unit);
    else printf("%s %.3f %s\n", measure, value, unit);
    fflush(stdout);
}

/* The slot of the token labelled "pqbench" (initialised == 1), or the first slot whose token is
 * not initialised (initialised == 0). */
static int find_slot(int initialised, CK_SLOT_ID *slot) {
    CK_SLOT_ID slots[64];
    CK_ULONG count = 64;
    CK_UTF8CHAR label[32];
    memset(label, ' ', sizeof label);
    memcpy(label, "pqbench", 7);
    if (!ok(p11->C_GetSlotList(CK_FALSE, slots, &count), "C_GetSlotList")) return 0;
    for (CK_ULONG i = 0; i < count; i++) {
        CK_TOKEN_INFO info;
        if (p11->C_GetTokenInfo(slots[i], &info) != CKR_OK) continue;
        int made = (info.flags & CKF_TOKEN_INITIALIZED) != 0;
        if (initialised ? made && memcmp(info.label, label, 32) == 0 : !made) { *slot = slots[i]; return 1; }
    }
    return 0;
}

/* The "pqbench" token's slot, the token made in the empty slot first when there is none. */
static int token_slot(CK_SLOT_ID *slot) {
    if (find_slot(1, slot)) return 1;
    CK_UTF8CHAR label[32], so[] = "12345678", pin[] = "1234";
    memset(label, ' ', sizeof label);
    memcpy(label, "pqbench", 7);
    CK_SLOT_ID empty;
    CK_SESSION_HANDLE s;
    if (!find_slot(0, &empty)) { fprintf(stderr, "pq_bench: no empty slot\n"); return 0; }
    if (!ok(p11->C_InitToken(empty, so, 8, label), "C_InitToken")) return 0;
    if (!find_slot(1, slot)) { fprintf(stderr, "pq_bench: no slot labelled pqbench\n"); return 0; }
    int done = ok(p11->C_OpenSession(*slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s), "C_OpenSession") &&
               ok(p11->C_Login(s, CKU_SO, so, 8), "C_Login(SO)") && ok(p11->C_InitPIN(s, pin, 4), "C_InitPIN") &&
               ok(p11->C_Logout(s), "C_Logout");
    p11->C_CloseSession(s);
    return done;
}

/* dlopen and, with `v32`, the PKCS#11 3.2 list from C_GetInterface; otherwise C_GetFunctionList's
 * 2.40 list (whose first entries are the same functions). */
static void *open_module(const char *module, int v32) {
    void *handle = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    if (!handle) { fprintf(stderr, "pq_bench: dlopen: %s\n", dlerror()); return NULL; }
    if (v32) {
        CK_C_GetInterface get = (CK_C_GetInterface)dlsym(handle, "C_GetInterface");
        CK_VERSION version = {3, 2};
        CK_INTERFACE_PTR interface = NULL;
        if (!get || !ok(get((CK_UTF8CHAR_PTR) "PKCS 11", &version, &interface, 0), "C_GetInterface(PKCS 11, 3.2)")) return NULL;
        p11 = interface->pFunctionList;
    } else {
        CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(handle, "C_GetFunctionList");
        CK_FUNCTION_LIST_PTR list = NULL;
        if (!get || !ok(get(&list), "C_GetFunctionList")) return NULL;
        p11 = (CK_FUNCTION_LIST_3_2 *)list;
    }
    return handle;
}

/* ---- ops ---- */

struct parameter_set {
    const char *name;          /* the measures' suffix, as Benchmarks/PQLimit prints them */
    CK_KEY_TYPE key_type;
    CK_MECHANISM_TYPE generator;
    CK_ULONG ckp;
};

static const struct parameter_set sets[] = {
    {"mldsa65", CKK_ML_DSA, CKM_ML_DSA_KEY_PAIR_GEN, CKP_ML_DSA_65},
    {"mldsa87", CKK_ML_DSA, CKM_ML_DSA_KEY_PAIR_GEN, CKP_ML_DSA_87},
    {"mlkem768", CKK_ML_KEM, CKM_ML_KEM_KEY_PAIR_GEN, CKP_ML_KEM_768},
    {"mlkem1024", CKK_ML_KEM, CKM_ML_KEM_KEY_PAIR_GEN, CKP_ML_KEM_1024},
};

static unsigned char message[1024];
static CK_MECHANISM ml_dsa = {CKM_ML_DSA, NULL, 0}, ml_kem = {CKM_ML_KEM, NULL, 0};
static CK_OBJECT_CLASS secret_class = CKO_SECRET_KEY;
static CK_KEY_TYPE generic_secret = CKK_GENERIC_SECRET;
static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
/* The timed calls' new key: a session generic secret, the module's defaults otherwise. */
static CK_ATTRIBUTE new_key[] = {{CKA_CLASS, &secret_class, sizeof secret_class},
                                 {CKA_KEY_TYPE, &generic_secret, sizeof generic_secret}, {CKA_TOKEN, &no, 1}};
/* The check's new keys: readable. */
static CK_ATTRIBUTE readable_key[] = {{CKA_CLASS, &secret_class, sizeof secret_class},
                                      {CKA_KEY_TYPE, &generic_secret, sizeof generic_secret}, {CKA_TOKEN, &no, 1},
                                      {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};

/* What a parameter set's measures use, made once: a key pair, a valid signature (ML-DSA) or a
 * ciphertext (ML-KEM). */
struct fixture {
    const struct parameter_set *set;
    CK_OBJECT_HANDLE pub, priv;
    unsigned char signature[8192];
    CK_ULONG signature_length;
    unsigned char ciphertext[2048];
    CK_ULONG ciphertext_length;
};

/* A session key pair of `set`: ML-DSA for signing and verifying, ML-KEM for (de)capsulating. */
static int key_pair(const struct parameter_set *set, CK_OBJECT_HANDLE *pub, CK_OBJECT_HANDLE *priv) {
    CK_MECHANISM mechanism = {set->generator, NULL, 0};
    CK_ULONG ckp = set->ckp;
    int kem = set->key_type == CKK_ML_KEM;
    CK_ATTRIBUTE public_template[] = {{CKA_TOKEN, &no, 1}, {CKA_PARAMETER_SET, &ckp, sizeof ckp}, {kem ? CKA_ENCAPSULATE : CKA_VERIFY, &yes, 1}};
    CK_ATTRIBUTE private_template[] = {{CKA_TOKEN, &no, 1}, {CKA_PRIVATE, &yes, 1}, {kem ? CKA_DECAPSULATE : CKA_SIGN, &yes, 1}};
    return ok(p11->C_GenerateKeyPair(session, &mechanism, public_template, 3, private_template, 3, pub, priv), "C_GenerateKeyPair");
}

static int destroy(CK_OBJECT_HANDLE object) { return ok(p11->C_DestroyObject(session, object), "C_DestroyObject"); }

/* The operations, one call each: *timed is the time of the PKCS#11 calls alone (what an
 * operation made is destroyed after its clock stops). */
typedef int (*operation)(struct fixture *f, double *timed);

static int generate(struct fixture *f, double *timed) {
    CK_OBJECT_HANDLE pub, priv;
    double t0 = now();
    if (!key_pair(f->set, &pub, &priv)) return 0;
    *timed = now() - t0;
    return destroy(pub) && destroy(priv);
}

static int sign(struct fixture *f, double *timed) {
    f->signature_length = sizeof f->signature;
    double t0 = now();
    int done = ok(p11->C_SignInit(session, &ml_dsa, f->priv), "C_SignInit") &&
               ok(p11->C_Sign(session, message, sizeof message, f->signature, &f->signature_length), "C_Sign");
    *timed = now() - t0;
    return done;
}

static int verify(struct fixture *f, double *timed) {
    double t0 = now();
    int done = ok(p11->C_VerifyInit(session, &ml_dsa, f->pub), "C_VerifyInit") &&
               ok(p11->C_Verify(session, message, sizeof message, f->signature, f->signature_length), "C_Verify");
    *timed = now() - t0;
    return done;
}

static int encapsulate(struct fixture *f, double *timed) {
    unsigned char ciphertext[2048];
    CK_ULONG length = sizeof ciphertext;
    CK_OBJECT_HANDLE key;
    double t0 = now();
    if (!ok(p11->C_EncapsulateKey(session, &ml_kem, f->pub, new_key, 3, ciphertext, &length, &key), "C_EncapsulateKey")) return 0;
    *timed = now() - t0;
    return destroy(key);
}

static int decapsulate(struct fixture *f, double *timed) {
    CK_OBJECT_HANDLE key;
    double t0 = now();
    if (!ok(p11->C_DecapsulateKey(session, &ml_kem, f->priv, new_key, 3, f->ciphertext, f->ciphertext_length, &key), "C_DecapsulateKey")) return 0;
    *timed = now() - t0;
    return destroy(key);
}

/* OPERATION.SET: operations per second of timed time, repeated for the budget. */
static int measure(const char *name, struct fixture *f, operation op) {
    if (!wanted(name, f->set->name)) return 1;
    double spent = 0, start = now();
    long n = 0;
    do {
        double timed;
        if (!op(f, &timed)) return 0;
        spent += timed;
        n++;
    } while (now() - start < budget);
    report(name, f->set->name, n / spent, "op/s");
    return 1;
}

/* A session key's CKA_VALUE (the check's keys are readable). */
static int secret_value(CK_OBJECT_HANDLE key, unsigned char out[64], CK_ULONG *length) {
    CK_ATTRIBUTE value = {CKA_VALUE, out, 64};
    if (!ok(p11->C_GetAttributeValue(session, key, &value, 1), "C_GetAttributeValue(CKA_VALUE)")) return 0;
    *length = value.ulValueLen;
    return 1;
}

/* The fixture's key pair, and the check that the operations do their work: the first signature
 * verifies; an encapsulated secret decapsulates to the same value. */
static int set_up(struct fixture *f) {
    double timed;
    if (!key_pair(f->set, &f->pub, &f->priv)) return 0;
    if (f->set->key_type == CKK_ML_DSA) return sign(f, &timed) && verify(f, &timed);
    CK_OBJECT_HANDLE key, other;
    unsigned char a[64], b[64];
    CK_ULONG a_length, b_length;
    f->ciphertext_length = sizeof f->ciphertext;
    if (!ok(p11->C_EncapsulateKey(session, &ml_kem, f->pub, readable_key, 5, f->ciphertext, &f->ciphertext_length, &key), "C_EncapsulateKey") ||
        !ok(p11->C_DecapsulateKey(session, &ml_kem, f->priv, readable_key, 5, f->ciphertext, f->ciphertext_length, &other), "C_DecapsulateKey") ||
        !secret_value(key, a, &a_length) || !secret_value(other, b, &b_length))
        return 0;
    if (a_length != 32 || b_length != 32 || memcmp(a, b, 32) != 0) {
        fprintf(stderr, "pq_bench: %s: the decapsulated secret differs from the encapsulated one\n", f->set->name);
        return 0;
    }
    return destroy(key) && destroy(other);
}

static int run_set(const struct parameter_set *set) {
    static struct fixture f;
    memset(&f, 0, sizeof f);
    f.set = set;
    if (!measure("keygen", &f, generate) || !set_up(&f)) return 0;
    int done = set->key_type == CKK_ML_DSA ? measure("sign", &f, sign) && measure("verify", &f, verify)
                                           : measure("encaps", &f, encapsulate) && measure("decaps", &f, decapsulate);
    return done && destroy(f.pub) && destroy(f.priv);
}

static int ops(const char *module) {
    CK_UTF8CHAR pin[] = "1234";
    CK_SLOT_ID slot;
    CK_C_INITIALIZE_ARGS args = {NULL, NULL, NULL, NULL, CKF_OS_LOCKING_OK, NULL};
    if (!open_module(module, 1) || !ok(p11->C_Initialize(&args), "C_Initialize") || !token_slot(&slot) ||
        !ok(p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &session), "C_OpenSession") ||
        !ok(p11->C_Login(session, CKU_USER, pin, 4), "C_Login"))
        return 1;
    for (size_t i = 0; i < sizeof message; i++) message[i] = (unsigned char)(i * 7 + 1);
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (!run_set(&sets[i])) return 1;
    p11->C_Logout(session);
    p11->C_CloseSession(session);
    return ok(p11->C_Finalize(NULL), "C_Finalize") ? 0 : 1;
}

/* ---- startup ---- */

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, int count) {
    qsort(values, count, sizeof *values, by_value);
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

static int startup(const char *module, int count) {
    double t0 = now();
    if (!open_module(module, 0)) return 1;
    double opened = now();
    if (!ok(p11->C_Initialize(NULL), "C_Initialize")) return 1;
    double initialised = now();
    report("dlopen", NULL, (opened - t0) * 1e3, "ms");
    report("initialize.first", NULL, (initialised - opened) * 1e3, "ms");
    double *times = calloc(count > 0 ? count : 1, sizeof *times);
    for (int i = 0; i < count; i++) {
        double start = now();
        if (!ok(p11->C_Finalize(NULL), "C_Finalize") || !ok(p11->C_Initialize(NULL), "C_Initialize")) return 1;
        times[i] = (now() - start) * 1e6;
    }
    if (count > 0) report("initialize.finalize", NULL, median(times, count), "us");
    CK_SLOT_ID slot;
    if (!find_slot(1, &slot)) { fprintf(stderr, "pq_bench: no token labelled pqbench (run pq_bench MODULE init first)\n"); return 1; }
    CK_MECHANISM_TYPE list[256];
    CK_ULONG mechanisms = 0;
    for (int i = 0; i < count; i++) {
        double start = now();
        CK_ULONG n = 0;
        if (!ok(p11->C_GetMechanismList(slot, NULL, &n), "C_GetMechanismList(count)")) return 1;
        if (n > sizeof list / sizeof list[0]) { fprintf(stderr, "pq_bench: %lu mechanisms\n", n); return 1; }
        if (!ok(p11->C_GetMechanismList(slot, list, &n), "C_GetMechanismList")) return 1;
        times[i] = (now() - start) * 1e6;
        mechanisms = n;
    }
    if (count > 0) {
        report("mechanism.list", NULL, median(times, count), "us");
        report("mechanism.count", NULL, mechanisms, "n");
    }
    free(times);
    return ok(p11->C_Finalize(NULL), "C_Finalize") ? 0 : 1;
}

int main(int argc, char **argv) {
    if ((argc == 4 || argc == 5) && strcmp(argv[2], "ops") == 0 && (budget = atof(argv[3])) > 0) {
        only = argc == 5 ? argv[4] : NULL;
        return ops(argv[1]);
    }
    if (argc == 4 && strcmp(argv[2], "startup") == 0) return startup(argv[1], atoi(argv[3]));
    if (argc == 3 && strcmp(argv[2], "init") == 0) {
        CK_SLOT_ID slot;
        int done = open_module(argv[1], 0) && ok(p11->C_Initialize(NULL), "C_Initialize") && token_slot(&slot) &&
                   ok(p11->C_Finalize(NULL), "C_Finalize");
        return done ? 0 : 1;
    }
    fprintf(stderr, "usage: pq_bench MODULE ops SECONDS [MEASURE] | MODULE startup COUNT | MODULE init\n");
    return 64;
}
