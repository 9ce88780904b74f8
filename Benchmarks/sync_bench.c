/*
 * sync_bench.c — the C side of scripts/sync-bench.sh (issue 47 part 7): the changes a sync
 * carries, the signer whose latency a running sync may disturb, and the files git alone writes.
 * Prints one line per measure, "<measure> <value> <unit>", as Benchmarks/bench.c does.
 *
 *   sync_bench MODULE PIN_FILE items N TAG
 *       In the token labelled "login" (logged in with the PIN in PIN_FILE), N synchronizable
 *       generic passwords: CKO_DATA, CKA_KC_ITEM_CLASS 1, service (CKA_APPLICATION)
 *       "sync-bench.example", account and label "sync-bench-<i>", a 32-byte value that names TAG.
 *       Each is created when missing, else its CKA_VALUE is set (one item per transaction, as
 *       any host's writes): N items changed since the last sync.
 *           items.write   s   the time of the N writes
 *
 *   sync_bench MODULE PIN_FILE signer
 *       The token key pair labelled "sync-bench-signer" in that token (ECDSA P-256, CKA_TOKEN,
 *       not synchronizable; generated when missing), then one thread doing C_SignInit + C_Sign
 *       (CKM_ECDSA over a 32-byte digest) back to back, as bench.c's latency() does, each call
 *       pair timed. Prints "ready" once signing; then reads phase names from standard input, one
 *       a line: "quiet" and "busy" keep each signature's latency under that phase, "idle" keeps
 *       none (it signs on), "report" prints for each phase and ends:
 *           latency.PHASE.signatures  count
 *           latency.PHASE.p50         ms
 *           latency.PHASE.p99         ms
 *           latency.PHASE.max         ms
 *
 *   sync_bench write-files LIST
 *       For each line "SIZE PATH" of LIST, PATH is written with SIZE random bytes (the old file
 *       unlinked, a new one written, no fsync — as the sync writes its files): what git alone
 *       commits in place of the sync's sealed files.
 *           files.write   s   the time of the writes
 *
 * Build: gcc -O2 -IInclude -o sync_bench Benchmarks/sync_bench.c -ldl -lpthread
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include "keychain-pkcs11.h"

static CK_FUNCTION_LIST_PTR p11;
static CK_SLOT_ID slot;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Prints a failed call and says so. */
static int ok(CK_RV rv, const char *what) {
    if (rv == CKR_OK) return 1;
    fprintf(stderr, "sync_bench: %s: 0x%lx\n", what, rv);
    return 0;
}

static void report(const char *measure, double value, const char *unit) {
    printf("%s %.3f %s\n", measure, value, unit);
    fflush(stdout);
}

/* Loads MODULE (threads call in: CKF_OS_LOCKING_OK) and finds the slot of the token "login". */
static int open_module(const char *module) {
    void *handle = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    if (!handle) { fprintf(stderr, "sync_bench: dlopen: %s\n", dlerror()); return 0; }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(handle, "C_GetFunctionList");
    if (!get || !ok(get(&p11), "C_GetFunctionList")) return 0;
    CK_C_INITIALIZE_ARGS args = {NULL, NULL, NULL, NULL, CKF_OS_LOCKING_OK, NULL};
    if (!ok(p11->C_Initialize(&args), "C_Initialize")) return 0;
    CK_SLOT_ID slots[64];
    CK_ULONG count = 64;
    CK_UTF8CHAR label[32];
    memset(label, ' ', sizeof label);
    memcpy(label, "login", 5);
    if (!ok(p11->C_GetSlotList(CK_TRUE, slots, &count), "C_GetSlotList")) return 0;
    for (CK_ULONG i = 0; i < count; i++) {
        CK_TOKEN_INFO info;
        if (p11->C_GetTokenInfo(slots[i], &info) == CKR_OK && memcmp(info.label, label, 32) == 0) { slot = slots[i]; return 1; }
    }
    fprintf(stderr, "sync_bench: no token labelled login\n");
    return 0;
}

/* A R/W session logged in as the user with the PIN in PIN_FILE (its first line). */
static int login(const char *pin_file, CK_SESSION_HANDLE *session) {
    char pin[256];
    FILE *file = fopen(pin_file, "r");
    if (!file) { perror(pin_file); return 0; }
    size_t length = fread(pin, 1, sizeof pin - 1, file);
    fclose(file);
    while (length > 0 && (pin[length - 1] == '\n' || pin[length - 1] == '\r')) length--;
    return ok(p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, session), "C_OpenSession") &&
           ok(p11->C_Login(*session, CKU_USER, (CK_UTF8CHAR_PTR)pin, length), "C_Login");
}

/* The first object matching TEMPLATE, or CK_INVALID_HANDLE. */
static CK_OBJECT_HANDLE find_one(CK_SESSION_HANDLE session, CK_ATTRIBUTE *template, CK_ULONG count) {
    CK_OBJECT_HANDLE found = CK_INVALID_HANDLE;
    CK_ULONG n = 0;
    if (!ok(p11->C_FindObjectsInit(session, template, count), "C_FindObjectsInit")) return CK_INVALID_HANDLE;
    if (!ok(p11->C_FindObjects(session, &found, 1, &n), "C_FindObjects")) n = 0;
    p11->C_FindObjectsFinal(session);
    return n == 1 ? found : CK_INVALID_HANDLE;
}

static int items(const char *module, const char *pin_file, long count, const char *tag) {
    CK_SESSION_HANDLE session;
    if (!open_module(module) || !login(pin_file, &session)) return 1;
    static const char service[] = "sync-bench.example";
    CK_OBJECT_CLASS data = CKO_DATA;
    CK_ULONG generic = 1;
    CK_BBOOL yes = CK_TRUE;
    double start = now();
    for (long i = 0; i < count; i++) {
        char name[32], value[48];
        snprintf(name, sizeof name, "sync-bench-%ld", i);
        /* 32 bytes that differ from one TAG to the next. */
        snprintf(value, sizeof value, "%-16.16s%016ld", tag, i);
        CK_ATTRIBUTE find[] = {{CKA_CLASS, &data, sizeof data}, {CKA_APPLICATION, (void *)service, sizeof service - 1},
                               {CKA_LABEL, name, strlen(name)}};
        CK_OBJECT_HANDLE object = find_one(session, find, 3);
        if (object != CK_INVALID_HANDLE) {
            CK_ATTRIBUTE set[] = {{CKA_VALUE, value, 32}};
            if (!ok(p11->C_SetAttributeValue(session, object, set, 1), "C_SetAttributeValue")) return 1;
        } else {
            CK_ATTRIBUTE create[] = {{CKA_CLASS, &data, sizeof data}, {CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &yes, 1},
                                     {CKA_LABEL, name, strlen(name)}, {CKA_APPLICATION, (void *)service, sizeof service - 1},
                                     {CKA_KC_ITEM_CLASS, &generic, sizeof generic}, {CKA_KC_ACCOUNT, name, strlen(name)},
                                     {CKA_KC_SYNCHRONIZABLE, &yes, 1}, {CKA_VALUE, value, 32}};
            if (!ok(p11->C_CreateObject(session, create, sizeof create / sizeof *create, &object), "C_CreateObject")) return 1;
        }
    }
    report("items.write", now() - start, "s");
    p11->C_Finalize(NULL);
    return 0;
}

/* The signer's phases: where each signature's latency goes. */
enum { IDLE = 0, QUIET = 1, BUSY = 2, PHASES = 3 };
static const char *phase_names[PHASES] = {"idle", "quiet", "busy"};
enum { CAPACITY = 4000000 };
static double samples[PHASES][CAPACITY];
static long counts[PHASES];
static volatile int phase = IDLE, stop = 0, failed = 0;
static CK_OBJECT_HANDLE signing_key;

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *sign_loop(void *argument) {
    CK_SESSION_HANDLE *session = argument;
    CK_MECHANISM mechanism = {CKM_ECDSA, NULL, 0};
    unsigned char digest[32], signature[128];
    memset(digest, 0x42, sizeof digest);
    while (!stop) {
        CK_ULONG length = sizeof signature;
        double t0 = now();
        if (!ok(p11->C_SignInit(*session, &mechanism, signing_key), "C_SignInit") ||
            !ok(p11->C_Sign(*session, digest, sizeof digest, signature, &length), "C_Sign")) {
            failed = 1;
            return NULL;
        }
        double elapsed = now() - t0;
        int p = phase;
        if (p != IDLE && counts[p] < CAPACITY) samples[p][counts[p]++] = elapsed;
    }
    return NULL;
}

static int signer(const char *module, const char *pin_file) {
    CK_SESSION_HANDLE session, signing;
    if (!open_module(module) || !login(pin_file, &session)) return 1;
    static const char label[] = "sync-bench-signer";
    CK_OBJECT_CLASS private_class = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE find[] = {{CKA_CLASS, &private_class, sizeof private_class}, {CKA_LABEL, (void *)label, sizeof label - 1}};
    signing_key = find_one(session, find, 2);
    if (signing_key == CK_INVALID_HANDLE) {
        static unsigned char p256[] = {0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07};
        CK_MECHANISM generate = {CKM_EC_KEY_PAIR_GEN, NULL, 0};
        CK_BBOOL yes = CK_TRUE;
        CK_ATTRIBUTE public_template[] = {{CKA_EC_PARAMS, p256, sizeof p256}, {CKA_VERIFY, &yes, 1}, {CKA_TOKEN, &yes, 1},
                                          {CKA_LABEL, (void *)label, sizeof label - 1}};
        CK_ATTRIBUTE private_template[] = {{CKA_SIGN, &yes, 1}, {CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &yes, 1},
                                           {CKA_LABEL, (void *)label, sizeof label - 1}};
        CK_OBJECT_HANDLE public_key;
        if (!ok(p11->C_GenerateKeyPair(session, &generate, public_template, 4, private_template, 4, &public_key, &signing_key),
                "C_GenerateKeyPair")) return 1;
    }
    /* The signer's own session, as another thread of a host would have. */
    if (!ok(p11->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &signing), "C_OpenSession")) return 1;
    pthread_t thread;
    if (pthread_create(&thread, NULL, sign_loop, &signing) != 0) { fprintf(stderr, "sync_bench: pthread_create\n"); return 1; }
    printf("ready\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        if (strcmp(line, "report") == 0) break;
        int next = -1;
        for (int p = 0; p < PHASES; p++) if (strcmp(line, phase_names[p]) == 0) next = p;
        if (next < 0) { fprintf(stderr, "sync_bench: unknown phase %s\n", line); failed = 1; break; }
        phase = next;
    }
    stop = 1;
    pthread_join(thread, NULL);
    if (failed) return 1;
    for (int p = QUIET; p < PHASES; p++) {
        long n = counts[p];
        char name[64];
        if (n == 0) { fprintf(stderr, "sync_bench: no signature in phase %s\n", phase_names[p]); return 1; }
        qsort(samples[p], n, sizeof(double), compare);
        snprintf(name, sizeof name, "latency.%s.signatures", phase_names[p]); report(name, n, "count");
        snprintf(name, sizeof name, "latency.%s.p50", phase_names[p]); report(name, samples[p][n / 2] * 1e3, "ms");
        snprintf(name, sizeof name, "latency.%s.p99", phase_names[p]); report(name, samples[p][(long)(n * 0.99)] * 1e3, "ms");
        snprintf(name, sizeof name, "latency.%s.max", phase_names[p]); report(name, samples[p][n - 1] * 1e3, "ms");
    }
    p11->C_CloseSession(signing);
    p11->C_Finalize(NULL);
    return 0;
}

static int write_files(const char *list_path) {
    FILE *list = fopen(list_path, "r");
    if (!list) { perror(list_path); return 1; }
    static unsigned char buffer[1 << 20];
    char path[4096];
    long size;
    double start = now();
    while (fscanf(list, "%ld %4095s", &size, path) == 2) {
        if (size < 0 || size > (long)sizeof buffer) { fprintf(stderr, "sync_bench: size %ld of %s\n", size, path); return 1; }
        for (long done = 0; done < size;) {
            ssize_t got = getrandom(buffer + done, size - done, 0);
            if (got <= 0) { perror("getrandom"); return 1; }
            done += got;
        }
        /* A new file under the old name, as the sync writes its files (and git's checkout does):
         * truncating the old one in place would have ext4 flush it at close. */
        if (unlink(path) != 0 && errno != ENOENT) { perror(path); return 1; }
        FILE *file = fopen(path, "wb");
        if (!file || fwrite(buffer, 1, size, file) != (size_t)size || fclose(file) != 0) { perror(path); return 1; }
    }
    fclose(list);
    report("files.write", now() - start, "s");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 6 && strcmp(argv[3], "items") == 0) return items(argv[1], argv[2], atol(argv[4]), argv[5]);
    if (argc == 4 && strcmp(argv[3], "signer") == 0) return signer(argv[1], argv[2]);
    if (argc == 3 && strcmp(argv[1], "write-files") == 0) return write_files(argv[2]);
    fprintf(stderr, "usage: %s MODULE PIN_FILE items N TAG | MODULE PIN_FILE signer | write-files LIST\n", argv[0]);
    return 2;
}
