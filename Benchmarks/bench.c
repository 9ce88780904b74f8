/*
 * bench.c — one round of the side-by-side benchmark, through the C API as hosts call it.
 * Loads MODULE, initialises a token in its empty (last) slot, and prints one line per measure:
 *     <measure> <value> <unit>
 * so that scripts/bench.sh can alternate modules, repeat rounds and take medians.
 * Usage: bench MODULE SECONDS_PER_MEASURE     signatures, ciphers, digests, key generation, and
 *                                             ECDSA signing in two processes at once
 *        bench MODULE scale N                 N durable token objects: creation rate, find by
 *                                             CKA_LABEL and by CKA_ID, and in fresh processes
 *                                             dlopen+C_Initialize, C_Login and resident memory
 *        bench MODULE threads SECONDS         signatures with 1, 2 and 4 threads in one process
 *                                             (each its own session, one shared token key), and
 *                                             the latency of a signing thread while another
 *                                             logs in and out of a second token, or generates
 *                                             RSA-3072 key pairs on the same token
 * With BENCH_RAW_SQLITE=FILE (our module's scale runs), the creation rate is followed by raw SQLite
 * doing the same writes per commit, in a new file beside FILE (the keychain the run wrote): one
 * row per object of the same record size, the same number of index rows, the manifest update;
 * printed as "@openssl create.N<N>" (the "raw" column).
 * With BENCH_OPENSSL_INLINE=1, each signature measure is followed at once by the same measure on
 * raw OpenSSL in this process (EVP, contexts initialised once, as `openssl speed` does), printed
 * as "@openssl <measure> <value> <unit>": the two run in the same seconds, which on a shared
 * machine matters more than anything else about the comparison.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <sqlite3.h>
#include <stdint.h>
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

static CK_FUNCTION_LIST_PTR p11;
static CK_SESSION_HANDLE session;
static double budget;
static CK_UTF8CHAR user_pin[] = "1234";

#define TRY(call) ((call) == CKR_OK)

static int load_module(const char *module) {
    void *handle = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    if (!handle) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 0; }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(handle, "C_GetFunctionList");
    if (!get || !TRY(get(&p11))) return 0;
    /* Threads call in: the module must lock (SoftHSM does only when told so). */
    CK_C_INITIALIZE_ARGS args = {NULL, NULL, NULL, NULL, CKF_OS_LOCKING_OK, NULL};
    CK_RV rv = p11->C_Initialize(&args);
    return rv == CKR_OK || rv == CKR_CRYPTOKI_ALREADY_INITIALIZED;
}

/* The slot of the token labelled "bench" (SoftHSM moves a new token to a new slot ID). */
static int bench_slot(CK_SLOT_ID *slot) {
    CK_SLOT_ID slots[64];
    CK_ULONG count = 64;
    CK_UTF8CHAR label[32];
    memset(label, ' ', sizeof label);
    memcpy(label, "bench", 5);
    if (!TRY(p11->C_GetSlotList(CK_TRUE, slots, &count))) return 0;
    for (CK_ULONG i = 0; i < count; i++) {
        CK_TOKEN_INFO info;
        if (TRY(p11->C_GetTokenInfo(slots[i], &info)) && memcmp(info.label, label, 32) == 0) { *slot = slots[i]; return 1; }
    }
    return 0;
}

/* The slot whose token is not initialised (SoftHSM numbers slots by serial, not in order). */
static int empty_slot(CK_SLOT_ID *slot) {
    CK_SLOT_ID slots[64];
    CK_ULONG count = 64;
    if (!TRY(p11->C_GetSlotList(CK_FALSE, slots, &count)) || count == 0) return 0;
    for (CK_ULONG i = 0; i < count; i++) {
        CK_TOKEN_INFO info;
        if (TRY(p11->C_GetTokenInfo(slots[i], &info)) && !(info.flags & CKF_TOKEN_INITIALIZED)) { *slot = slots[i]; return 1; }
    }
    return 0;
}

static int open_token(const char *module) {
    if (!load_module(module)) return 0;
    CK_UTF8CHAR label[32], so[] = "12345678", pin[] = "1234";
    memset(label, ' ', sizeof label);
    memcpy(label, "bench", 5);
    CK_SLOT_ID slot;
    if (!empty_slot(&slot)) { fprintf(stderr, "no empty slot\n"); return 0; }
    CK_RV init = p11->C_InitToken(slot, so, 8, label);
    if (init != CKR_OK) { fprintf(stderr, "C_InitToken: 0x%lx\n", init); return 0; }
    if (!bench_slot(&slot)) return 0;
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

/* A 32-byte secret key for encryption made by `generator` (AES or ChaCha20 key generation). */
static int encryption_key(CK_MECHANISM_TYPE generator, CK_OBJECT_HANDLE *key) {
    CK_MECHANISM gen = {generator, NULL, 0};
    CK_ULONG len = 32;
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE t[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_ENCRYPT, &yes, 1}};
    return TRY(p11->C_GenerateKey(session, &gen, t, 2, key));
}

/* Throughput (MiB/s) of whole C_EncryptInit + C_Encrypt operations on messages of `size` bytes. */
static void encryption(const char *name, CK_MECHANISM *m, CK_OBJECT_HANDLE key, size_t size) {
    unsigned char *in = calloc(1, size), *out = malloc(size + 32);
    double bytes = 0, start = now(), elapsed;
    int ok;
    do {
        CK_ULONG outlen = size + 32;
        ok = TRY(p11->C_EncryptInit(session, m, key)) && TRY(p11->C_Encrypt(session, in, size, out, &outlen));
        bytes += size;
    } while (ok && (elapsed = now() - start) < budget);
    report(name, ok ? bytes / elapsed / 1048576.0 : -1, "MiB/s");
    free(in);
    free(out);
}

/* One AES mechanism (AES-256; GCM with a 12-byte IV, the others a 16-byte one). */
static void aes(const char *name, CK_MECHANISM_TYPE type, size_t size) {
    CK_OBJECT_HANDLE key;
    if (!encryption_key(CKM_AES_KEY_GEN, &key)) { report(name, -1, "MiB/s"); return; }
    unsigned char iv[16] = {0};
    CK_GCM_PARAMS gcm = {iv, 12, 96, NULL, 0, 128};
    CK_MECHANISM m = {type, type == CKM_AES_GCM ? (void *)&gcm : (void *)iv, type == CKM_AES_GCM ? sizeof gcm : sizeof iv};
    encryption(name, &m, key, size);
}

/* ChaCha20-Poly1305 (CKM_CHACHA20_KEY_GEN key) or AES-256-CCM, 12-byte nonce, 16-byte tag. */
static void aead(const char *name, int chacha, size_t size) {
    CK_OBJECT_HANDLE key;
    if (!encryption_key(chacha ? CKM_CHACHA20_KEY_GEN : CKM_AES_KEY_GEN, &key)) { report(name, -1, "MiB/s"); return; }
    unsigned char nonce[12] = {0};
    CK_CCM_PARAMS ccm = {size, nonce, sizeof nonce, NULL, 0, 16};
    CK_SALSA20_CHACHA20_POLY1305_PARAMS poly = {nonce, sizeof nonce, NULL, 0};
    CK_MECHANISM m = {chacha ? CKM_CHACHA20_POLY1305 : CKM_AES_CCM,
                      chacha ? (void *)&poly : (void *)&ccm, chacha ? sizeof poly : sizeof ccm};
    encryption(name, &m, key, size);
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

/* ECDSA P-256 signatures per second, in total, with `processes` processes signing at once,
 * each with its own login and session key (one token, as two programs would share it). */
static void parallel_signatures(const char *module, int processes) {
    int pipes[8][2];
    pid_t children[8];
    for (int i = 0; i < processes; i++) {
        if (pipe(pipes[i]) != 0) { report("sign.ecdsa.p256.2proc", -1, "op/s"); return; }
        children[i] = fork();
        if (children[i] == 0) {
            double rate = -1;
            CK_SLOT_ID slot;
            CK_SESSION_HANDLE s;
            if (load_module(module) && bench_slot(&slot) && TRY(p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s)) &&
                TRY(p11->C_Login(s, CKU_USER, user_pin, 4))) {
                session = s;
                CK_OBJECT_HANDLE pub, priv;
                CK_MECHANISM m = {CKM_ECDSA, NULL, 0};
                if (key_pair(CKM_EC_KEY_PAIR_GEN, p256, sizeof p256, 0, &pub, &priv)) {
                    unsigned char data[32], sig[256];
                    memset(data, 0x42, sizeof data);
                    long n = 0;
                    double start = now(), elapsed;
                    int ok;
                    do {
                        CK_ULONG siglen = sizeof sig;
                        ok = TRY(p11->C_SignInit(s, &m, priv)) && TRY(p11->C_Sign(s, data, sizeof data, sig, &siglen));
                        n++;
                    } while (ok && (elapsed = now() - start) < budget);
                    if (ok) rate = n / elapsed;
                }
            }
            if (write(pipes[i][1], &rate, sizeof rate) != sizeof rate) _exit(1);
            _exit(0);
        }
    }
    double total = 0;
    int ok = 1;
    for (int i = 0; i < processes; i++) {
        double rate = -1;
        if (read(pipes[i][0], &rate, sizeof rate) != sizeof rate || rate < 0) ok = 0;
        total += rate;
        waitpid(children[i], NULL, 0);
        close(pipes[i][0]);
        close(pipes[i][1]);
    }
    report("sign.ecdsa.p256.2proc", ok ? total : -1, "op/s");
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, int count) {
    qsort(values, count, sizeof(double), compare);
    return values[count / 2];
}

/* ---- raw SQLite doing the writes of one C_CreateObject per commit ---- */

/* What one object costs the keychain file `path`: the average record size, index rows per
 * object, and the manifest's size, read from the file the scale run just wrote. */
struct write_shape { int record, index_rows, index_commit, manifest; };

static int read_shape(const char *path, struct write_shape *shape) {
    sqlite3 *db;
    sqlite3_stmt *st;
    int ok = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) { sqlite3_close(db); return 0; }
    const char *sql = "SELECT (SELECT avg(length(record)) FROM objects), (SELECT count(*) FROM object_index) * 1.0 / (SELECT count(*) FROM objects),"
                      " (SELECT avg(length(index_commit)) FROM objects), (SELECT length(value) FROM meta WHERE key = 'integrity.manifest')";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        shape->record = (int)(sqlite3_column_double(st, 0) + 0.5);
        shape->index_rows = (int)(sqlite3_column_double(st, 1) + 0.5);
        shape->index_commit = (int)(sqlite3_column_double(st, 2) + 0.5);
        shape->manifest = sqlite3_column_int(st, 3);
        ok = shape->record > 0 && shape->manifest > 0;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return ok;
}

/* A fast 64-bit generator (Steele, Lea and Flood's SplitMix64) for the raw loop's unique bytes. */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static int exec(sqlite3 *db, const char *sql) { return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK; }

/* Commits per second of `objects` transactions, each the writes of one durable C_CreateObject
 * in `shape`, on a new file `path` with SQLite's defaults but for WAL and synchronous=FULL. */
static double raw_sqlite_creates(const char *path, const struct write_shape *shape, int objects) {
    sqlite3 *db;
    sqlite3_stmt *row = NULL, *entry = NULL, *manifest = NULL;
    char extra[4400];
    double rate = -1;
    snprintf(extra, sizeof extra, "%s-wal", path); unlink(extra);
    snprintf(extra, sizeof extra, "%s-shm", path); unlink(extra);
    unlink(path);
    if (sqlite3_open(path, &db) != SQLITE_OK) goto done;
    sqlite3_busy_timeout(db, 10000);
    if (!exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
                  "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value);"
                  "CREATE TABLE objects (id INTEGER PRIMARY KEY AUTOINCREMENT, uid BLOB NOT NULL UNIQUE, class INTEGER NOT NULL,"
                  " protection INTEGER NOT NULL, record BLOB NOT NULL, record_version INTEGER NOT NULL, primary_key BLOB UNIQUE,"
                  " created INTEGER NOT NULL, modified INTEGER NOT NULL, epoch INTEGER NOT NULL DEFAULT 0, index_commit BLOB);"
                  "CREATE INDEX objects_by_class ON objects(class, protection);"
                  "CREATE TABLE object_index (object_id INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,"
                  " attribute INTEGER NOT NULL, digest BLOB NOT NULL);"
                  "CREATE INDEX object_index_lookup ON object_index(attribute, digest);"
                  "CREATE INDEX object_index_owner ON object_index(object_id);")) goto done;
    if (sqlite3_prepare_v2(db, "INSERT INTO objects (uid, class, protection, record, record_version, created, modified, epoch, index_commit)"
                               " VALUES (?, 4, 1, ?, 2, 0, 0, ?, ?)", -1, &row, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO object_index (object_id, attribute, digest) VALUES (?, ?, ?)", -1, &entry, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta (key, value) VALUES ('integrity.manifest', ?)", -1, &manifest, NULL) != SQLITE_OK)
        goto done;
    unsigned char uid[16], record[65536], digest[32], commit[64], sums[65536];
    if (shape->record > (int)sizeof record || shape->manifest > (int)sizeof sums || shape->index_commit > (int)sizeof commit) goto done;
    /* Random bytes, as sealed records and keyed digests are: the record, commitment and manifest
     * drawn once; the uid and the digests, which must differ per object, from splitmix64 (no
     * system or DRBG call in the timed loop: raw SQLite's own CPU only). */
    RAND_bytes(record, shape->record); RAND_bytes(commit, shape->index_commit); RAND_bytes(sums, shape->manifest);
    uint64_t state;
    RAND_bytes((unsigned char *)&state, sizeof state);
    double start = now();
    for (int i = 0; i < objects; i++) {
        for (size_t k = 0; k < sizeof uid; k += 8) { uint64_t v = splitmix64(&state); memcpy(uid + k, &v, 8); }
        if (!exec(db, "BEGIN IMMEDIATE")) goto done;
        sqlite3_bind_blob(row, 1, uid, sizeof uid, SQLITE_STATIC);
        sqlite3_bind_blob(row, 2, record, shape->record, SQLITE_STATIC);
        sqlite3_bind_int64(row, 3, i + 1);
        sqlite3_bind_blob(row, 4, commit, shape->index_commit, SQLITE_STATIC);
        if (sqlite3_step(row) != SQLITE_DONE) goto done;
        sqlite3_reset(row);
        sqlite3_int64 id = sqlite3_last_insert_rowid(db);
        for (int a = 0; a < shape->index_rows; a++) {
            for (size_t k = 0; k < sizeof digest; k += 8) { uint64_t v = splitmix64(&state); memcpy(digest + k, &v, 8); }
            sqlite3_bind_int64(entry, 1, id);
            sqlite3_bind_int64(entry, 2, a);
            sqlite3_bind_blob(entry, 3, digest, sizeof digest, SQLITE_STATIC);
            if (sqlite3_step(entry) != SQLITE_DONE) goto done;
            sqlite3_reset(entry);
        }
        sqlite3_bind_blob(manifest, 1, sums, shape->manifest, SQLITE_STATIC);
        if (sqlite3_step(manifest) != SQLITE_DONE) goto done;
        sqlite3_reset(manifest);
        if (!exec(db, "COMMIT")) goto done;
    }
    rate = objects / (now() - start);
done:
    sqlite3_finalize(row);
    sqlite3_finalize(entry);
    sqlite3_finalize(manifest);
    sqlite3_close(db);
    snprintf(extra, sizeof extra, "%s-wal", path); unlink(extra);
    snprintf(extra, sizeof extra, "%s-shm", path); unlink(extra);
    unlink(path);
    return rate;
}

/* Resident memory of this process in MiB (VmRSS), or -1. */
static double resident_mib(void) {
    FILE *status = fopen("/proc/self/status", "r");
    if (!status) return -1;
    char line[256];
    double kib = -1;
    while (fgets(line, sizeof line, status)) {
        if (strncmp(line, "VmRSS:", 6) == 0) kib = atof(line + 6);
    }
    fclose(status);
    return kib < 0 ? -1 : kib / 1024.0;
}

/* `bench MODULE probe LABEL`, run as a fresh process: prints the dlopen+C_Initialize time and
 * the C_Login time (ms), and the resident memory after finding LABEL (MiB). */
static int probe(const char *module, const char *label) {
    double load = -1, login = -1, rss = -1;
    double start = now();
    CK_SLOT_ID slot;
    CK_SESSION_HANDLE s;
    if (load_module(module)) {
        load = (now() - start) * 1e3;
        if (bench_slot(&slot) && TRY(p11->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s))) {
            start = now();
            if (TRY(p11->C_Login(s, CKU_USER, user_pin, 4))) {
                login = (now() - start) * 1e3;
                CK_ATTRIBUTE query[] = {{CKA_LABEL, (void *)label, strlen(label)}};
                CK_OBJECT_HANDLE found[2];
                CK_ULONG n = 0;
                if (TRY(p11->C_FindObjectsInit(s, query, 1)) && TRY(p11->C_FindObjects(s, found, 2, &n)) && TRY(p11->C_FindObjectsFinal(s)) && n == 1)
                    rss = resident_mib();
            }
        }
        p11->C_Finalize(NULL);
    }
    printf("%f %f %f\n", load, login, rss);
    return load < 0 || login < 0 || rss < 0;
}

/* N durable token objects (generic secret keys with a label and a CKA_ID): the creation rate,
 * the median find time by CKA_LABEL and by CKA_ID, and in fresh processes the load and login
 * times and resident memory. Keys because CKA_ID belongs to keys and certificates. */
static int scale(const char *module, int objects) {
    if (!open_token(module)) { fprintf(stderr, "cannot set up a token in %s\n", module); return 1; }
    CK_OBJECT_CLASS klass = CKO_SECRET_KEY;
    CK_KEY_TYPE type = CKK_GENERIC_SECRET;
    CK_BBOOL yes = CK_TRUE;
    unsigned char value[32];
    memset(value, 0x5a, sizeof value);
    char label[32], id[32], name[64];
    double start = now();
    for (int i = 0; i < objects; i++) {
        snprintf(label, sizeof label, "object-%d", i);
        snprintf(id, sizeof id, "id-%08d", i);
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &klass, sizeof klass}, {CKA_KEY_TYPE, &type, sizeof type}, {CKA_TOKEN, &yes, 1},
                            {CKA_PRIVATE, &yes, 1}, {CKA_LABEL, label, strlen(label)}, {CKA_ID, id, strlen(id)},
                            {CKA_VALUE, value, sizeof value}};
        CK_OBJECT_HANDLE object;
        if (!TRY(p11->C_CreateObject(session, t, 7, &object))) { fprintf(stderr, "C_CreateObject %d failed\n", i); return 1; }
    }
    snprintf(name, sizeof name, "create.N%d", objects);
    report(name, objects / (now() - start), "op/s");
    const char *keychain_file = getenv("BENCH_RAW_SQLITE");
    if (keychain_file) {
        struct write_shape shape = {0, 0, 0, 0};
        char raw_path[4200];
        snprintf(raw_path, sizeof raw_path, "%s.raw-bench", keychain_file);
        double rate = read_shape(keychain_file, &shape) ? raw_sqlite_creates(raw_path, &shape, objects) : -1;
        printf("@openssl ");
        report(name, rate, "op/s");
    }
    /* Up to 200 searches, fewer when a token takes more than 5 s for them (at least 5). */
    enum { most = 200 };
    double times[most];
    for (int pass = 0; pass < 2; pass++) {
        int searches = most;
        double began = now();
        for (int i = 0; i < searches; i++) {
            if (i >= 5 && now() - began > 5.0) { searches = i; break; }
            int which = (int)(((long)i * 7919) % objects);
            if (pass == 0) snprintf(label, sizeof label, "object-%d", which); else snprintf(label, sizeof label, "id-%08d", which);
            CK_ATTRIBUTE query[] = {{pass == 0 ? CKA_LABEL : CKA_ID, label, strlen(label)}};
            CK_OBJECT_HANDLE found[2];
            CK_ULONG n = 0;
            double t0 = now();
            int ok = TRY(p11->C_FindObjectsInit(session, query, 1)) && TRY(p11->C_FindObjects(session, found, 2, &n)) &&
                     TRY(p11->C_FindObjectsFinal(session));
            times[i] = now() - t0;
            if (!ok || n != 1) { fprintf(stderr, "find %s: found %lu\n", label, n); return 1; }
        }
        snprintf(name, sizeof name, pass == 0 ? "find.label.N%d" : "find.id.N%d", objects);
        report(name, median(times, searches) * 1e3, "ms");
    }
    p11->C_Finalize(NULL);
    /* Fresh processes (exec, not fork: the module must not be mapped already). */
    enum { runs = 5 };
    double load[runs], login[runs], rss[runs];
    char self[4096], command[8400];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length <= 0) return 1;
    self[length] = 0;
    snprintf(command, sizeof command, "'%s' '%s' probe object-0", self, module);
    for (int i = 0; i < runs; i++) {
        FILE *child = popen(command, "r");
        if (!child || fscanf(child, "%lf %lf %lf", &load[i], &login[i], &rss[i]) != 3) { fprintf(stderr, "probe failed\n"); return 1; }
        pclose(child);
    }
    snprintf(name, sizeof name, "load.N%d", objects);
    report(name, median(load, runs), "ms");
    snprintf(name, sizeof name, "login.N%d", objects);
    report(name, median(login, runs), "ms");
    snprintf(name, sizeof name, "rss.N%d", objects);
    report(name, median(rss, runs), "MiB");
    return 0;
}

/* Raw OpenSSL signing and verifying with one key type, contexts set up once outside the loop. */
enum evp_kind { EVP_RSA_PKCS1, EVP_RSA_PSS, EVP_EC_P256, EVP_EC_P384, EVP_ED25519 };

static EVP_PKEY *evp_key(enum evp_kind kind) {
    switch (kind) {
    case EVP_RSA_PKCS1: case EVP_RSA_PSS: return EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    case EVP_EC_P256: return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    case EVP_EC_P384: return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
    default: return EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    }
}

static int evp_setup(EVP_PKEY_CTX *ctx, enum evp_kind kind, int signing) {
    if ((signing ? EVP_PKEY_sign_init(ctx) : EVP_PKEY_verify_init(ctx)) != 1) return 0;
    if (kind == EVP_RSA_PKCS1)
        return EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1 && EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha256()) == 1;
    if (kind == EVP_RSA_PSS)
        return EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PSS_PADDING) == 1 && EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha256()) == 1 &&
               EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx, 32) == 1;
    return 1;
}

static void evp_signatures(const char *name, enum evp_kind kind) {
    char label[64];
    EVP_PKEY *key = evp_key(kind);
    unsigned char data[32], sig[1024];
    memset(data, 0x42, sizeof data);
    size_t siglen = sizeof sig;
    long n = 0;
    int ok = key != NULL;
    double start, elapsed = 0;
    if (kind == EVP_ED25519) {
        EVP_MD_CTX *sign = EVP_MD_CTX_new(), *verify = EVP_MD_CTX_new();
        ok = ok && EVP_DigestSignInit(sign, NULL, NULL, NULL, key) == 1 && EVP_DigestVerifyInit(verify, NULL, NULL, NULL, key) == 1;
        start = now();
        do { siglen = sizeof sig; ok = ok && EVP_DigestSign(sign, sig, &siglen, data, sizeof data) == 1; n++; } while (ok && (elapsed = now() - start) < budget);
        snprintf(label, sizeof label, "sign.%s", name); printf("@openssl "); report(label, ok ? n / elapsed : -1, "op/s");
        n = 0; start = now();
        do { ok = ok && EVP_DigestVerify(verify, sig, siglen, data, sizeof data) == 1; n++; } while (ok && (elapsed = now() - start) < budget);
        snprintf(label, sizeof label, "verify.%s", name); printf("@openssl "); report(label, ok ? n / elapsed : -1, "op/s");
        EVP_MD_CTX_free(sign); EVP_MD_CTX_free(verify);
    } else {
        EVP_PKEY_CTX *sign = key ? EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL) : NULL, *verify = key ? EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL) : NULL;
        ok = ok && sign && verify && evp_setup(sign, kind, 1) && evp_setup(verify, kind, 0);
        start = now();
        do { siglen = sizeof sig; ok = ok && EVP_PKEY_sign(sign, sig, &siglen, data, sizeof data) == 1; n++; } while (ok && (elapsed = now() - start) < budget);
        snprintf(label, sizeof label, "sign.%s", name); printf("@openssl "); report(label, ok ? n / elapsed : -1, "op/s");
        n = 0; start = now();
        do { ok = ok && EVP_PKEY_verify(verify, sig, siglen, data, sizeof data) == 1; n++; } while (ok && (elapsed = now() - start) < budget);
        snprintf(label, sizeof label, "verify.%s", name); printf("@openssl "); report(label, ok ? n / elapsed : -1, "op/s");
        EVP_PKEY_CTX_free(sign); EVP_PKEY_CTX_free(verify);
    }
    EVP_PKEY_free(key);
}

/* ---- threads: many threads, one process ---- */

/* The slot of the token labelled `name`. */
static int labelled_slot(const char *name, CK_SLOT_ID *slot) {
    CK_SLOT_ID slots[64];
    CK_ULONG count = 64;
    CK_UTF8CHAR label[32];
    memset(label, ' ', sizeof label);
    memcpy(label, name, strlen(name));
    if (!TRY(p11->C_GetSlotList(CK_TRUE, slots, &count))) return 0;
    for (CK_ULONG i = 0; i < count; i++) {
        CK_TOKEN_INFO info;
        if (TRY(p11->C_GetTokenInfo(slots[i], &info)) && memcmp(info.label, label, 32) == 0) { *slot = slots[i]; return 1; }
    }
    return 0;
}

/* A second token, "bench2", with the same PINs, for the login loop (returns its slot). */
static int second_token(CK_SLOT_ID *slot) {
    CK_UTF8CHAR label[32], so[] = "12345678";
    memset(label, ' ', sizeof label);
    memcpy(label, "bench2", 6);
    CK_SESSION_HANDLE s;
    CK_SLOT_ID empty;
    if (!empty_slot(&empty)) return 0;
    CK_RV rv = p11->C_InitToken(empty, so, 8, label);
    if (rv != CKR_OK) { fprintf(stderr, "C_InitToken of the second token: 0x%lx\n", rv); return 0; }
    if (!labelled_slot("bench2", slot)) { fprintf(stderr, "no slot labelled bench2\n"); return 0; }
    int ok = TRY(p11->C_OpenSession(*slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s)) && TRY(p11->C_Login(s, CKU_SO, so, 8)) &&
             TRY(p11->C_InitPIN(s, user_pin, 4)) && TRY(p11->C_Logout(s));
    p11->C_CloseSession(s);
    return ok;
}

struct signer {
    CK_SLOT_ID slot;
    CK_OBJECT_HANDLE key;
    CK_MECHANISM mechanism;
    double seconds;
    volatile int *stop;     /* for the latency runs: sign until told to stop */
    long count;
    int ok;
    double *latencies;      /* per signature, when not NULL (capacity `capacity`) */
    long capacity;
};

static void *sign_loop(void *argument) {
    struct signer *w = argument;
    CK_SESSION_HANDLE s;
    w->ok = TRY(p11->C_OpenSession(w->slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s));
    unsigned char data[32], sig[1024];
    memset(data, 0x42, sizeof data);
    double start = now(), t = start;
    while (w->ok && (w->stop ? !*w->stop : t - start < w->seconds)) {
        CK_ULONG siglen = sizeof sig;
        double t0 = now();
        w->ok = TRY(p11->C_SignInit(s, &w->mechanism, w->key)) && TRY(p11->C_Sign(s, data, sizeof data, sig, &siglen));
        t = now();
        if (w->latencies && w->count < w->capacity) w->latencies[w->count] = t - t0;
        w->count++;
    }
    p11->C_CloseSession(s);
    return NULL;
}

/* Token key pair (CKA_TOKEN true: every session sees it). */
static int token_key_pair(CK_MECHANISM_TYPE gen, unsigned char *params, CK_ULONG params_len, CK_ULONG bits,
                          CK_OBJECT_HANDLE *pub, CK_OBJECT_HANDLE *priv) {
    CK_MECHANISM m = {gen, NULL, 0};
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE ec[] = {{CKA_EC_PARAMS, params, params_len}, {CKA_VERIFY, &yes, 1}, {CKA_TOKEN, &yes, 1}};
    CK_ATTRIBUTE rsa[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_VERIFY, &yes, 1}, {CKA_TOKEN, &yes, 1}};
    CK_ATTRIBUTE priv_t[] = {{CKA_SIGN, &yes, 1}, {CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &yes, 1}};
    return TRY(p11->C_GenerateKeyPair(session, &m, params ? ec : rsa, 3, priv_t, 3, pub, priv));
}

static void threaded_signatures(CK_SLOT_ID slot, const char *name, CK_MECHANISM_TYPE gen, unsigned char *params, CK_ULONG params_len,
                                CK_ULONG bits, CK_MECHANISM mechanism) {
    CK_OBJECT_HANDLE pub, priv;
    int have = token_key_pair(gen, params, params_len, bits, &pub, &priv);
    int counts[] = {1, 2, 4};
    for (int c = 0; c < 3; c++) {
        int n = counts[c];
        struct signer workers[4];
        pthread_t threads[4];
        char label[64];
        snprintf(label, sizeof label, "threads.sign.%s.t%d", name, n);
        if (!have) { report(label, -1, "op/s"); continue; }
        for (int i = 0; i < n; i++) {
            workers[i] = (struct signer){slot, priv, mechanism, budget, NULL, 0, 0, NULL, 0};
            pthread_create(&threads[i], NULL, sign_loop, &workers[i]);
        }
        double total = 0;
        int ok = 1;
        for (int i = 0; i < n; i++) {
            pthread_join(threads[i], NULL);
            ok = ok && workers[i].ok;
            total += workers[i].count / budget;
        }
        report(label, ok ? total : -1, "op/s");
    }
}

struct disturber {
    CK_SLOT_ID slot;        /* the other token (logins) or this one (key generation) */
    int keygen;
    volatile int stop;
    long count;
    int ok;
};

static void *disturb(void *argument) {
    struct disturber *d = argument;
    CK_SESSION_HANDLE s;
    d->ok = TRY(p11->C_OpenSession(d->slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s));
    while (d->ok && !d->stop) {
        if (d->keygen) {
            CK_MECHANISM m = {CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
            CK_ULONG bits = 3072;
            CK_BBOOL yes = CK_TRUE;
            CK_ATTRIBUTE pub_t[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_VERIFY, &yes, 1}, {CKA_TOKEN, &yes, 1}};
            CK_ATTRIBUTE priv_t[] = {{CKA_SIGN, &yes, 1}, {CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &yes, 1}};
            CK_OBJECT_HANDLE pub, priv;
            d->ok = TRY(p11->C_GenerateKeyPair(s, &m, pub_t, 3, priv_t, 3, &pub, &priv)) && TRY(p11->C_DestroyObject(s, pub)) &&
                    TRY(p11->C_DestroyObject(s, priv));
        } else {
            d->ok = TRY(p11->C_Login(s, CKU_USER, user_pin, 4)) && TRY(p11->C_Logout(s));
        }
        d->count++;
    }
    p11->C_CloseSession(s);
    return NULL;
}

/* A P-256 signer's latency per signature while a second thread disturbs it. */
static void latency(CK_SLOT_ID slot, CK_SLOT_ID other, CK_OBJECT_HANDLE key, const char *name, int keygen) {
    enum { capacity = 2000000 };
    static double samples[capacity];
    struct disturber d = {keygen ? slot : other, keygen, 0, 0, 0};
    volatile int stop = 0;
    struct signer w = {slot, key, {CKM_ECDSA, NULL, 0}, 0, &stop, 0, 0, samples, capacity};
    pthread_t signer_thread, disturber_thread;
    pthread_create(&disturber_thread, NULL, disturb, &d);
    pthread_create(&signer_thread, NULL, sign_loop, &w);
    double start = now();
    while (now() - start < budget) usleep(10000);
    stop = 1;
    pthread_join(signer_thread, NULL);
    d.stop = 1;
    pthread_join(disturber_thread, NULL);
    char label[80];
    long n = w.count < capacity ? w.count : capacity;
    int ok = w.ok && d.ok && n > 0;
    if (ok) qsort(samples, n, sizeof(double), compare);
    snprintf(label, sizeof label, "latency.%s.signatures", name); report(label, ok ? (double)w.count : -1, "count");
    snprintf(label, sizeof label, "latency.%s.p50", name); report(label, ok ? samples[n / 2] * 1e3 : -1, "ms");
    snprintf(label, sizeof label, "latency.%s.p99", name); report(label, ok ? samples[(long)(n * 0.99)] * 1e3 : -1, "ms");
    snprintf(label, sizeof label, "latency.%s.max", name); report(label, ok ? samples[n - 1] * 1e3 : -1, "ms");
    snprintf(label, sizeof label, "latency.%s.disturbances", name); report(label, d.ok ? (double)d.count : -1, "count");
}

static int threads_main(const char *module) {
    /* The second token first: SoftHSM initialises no token while any session is open. */
    CK_SLOT_ID slot, other;
    if (!load_module(module) || !second_token(&other)) { fprintf(stderr, "cannot set up the second token\n"); return 1; }
    /* SoftHSM offers a new empty slot only after initialising again. */
    p11->C_Finalize(NULL);
    if (!open_token(module)) { fprintf(stderr, "cannot set up a token in %s\n", module); return 1; }
    if (!labelled_slot("bench", &slot) || !labelled_slot("bench2", &other)) { fprintf(stderr, "no bench tokens\n"); return 1; }
    CK_MECHANISM pkcs = {CKM_SHA256_RSA_PKCS, NULL, 0};
    CK_MECHANISM ecdsa = {CKM_ECDSA, NULL, 0};
    CK_MECHANISM eddsa = {CKM_EDDSA, NULL, 0};
    threaded_signatures(slot, "rsa2048.pkcs1", CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0, 2048, pkcs);
    threaded_signatures(slot, "ecdsa.p256", CKM_EC_KEY_PAIR_GEN, p256, sizeof p256, 0, ecdsa);
    threaded_signatures(slot, "ed25519", CKM_EC_EDWARDS_KEY_PAIR_GEN, ed25519, sizeof ed25519, 0, eddsa);
    CK_OBJECT_HANDLE pub, priv;
    if (!token_key_pair(CKM_EC_KEY_PAIR_GEN, p256, sizeof p256, 0, &pub, &priv)) { fprintf(stderr, "P-256 key\n"); return 1; }
    latency(slot, other, priv, "login", 0);
    latency(slot, other, priv, "keygen", 1);
    p11->C_Finalize(NULL);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[2], "scale") == 0) return scale(argv[1], atoi(argv[3]));
    if (argc == 4 && strcmp(argv[2], "probe") == 0) return probe(argv[1], argv[3]);
    if (argc == 4 && strcmp(argv[2], "threads") == 0) {
        budget = atof(argv[3]);
        return threads_main(argv[1]);
    }
    if ((argc == 4 || argc == 5) && strcmp(argv[2], "aes") == 0) {
        /* The 1 KiB cipher rows alone, or one of them (for profiling the per-call path). */
        budget = atof(argv[3]);
        const char *only = argc == 5 ? argv[4] : "";
        if (!open_token(argv[1])) { fprintf(stderr, "cannot set up a token in %s\n", argv[1]); return 1; }
        if (strcmp(only, "cbc") != 0) aes("aes256.gcm.1KiB", CKM_AES_GCM, 1024);
        if (strcmp(only, "gcm") != 0) aes("aes256.cbc.1KiB", CKM_AES_CBC, 1024);
        p11->C_Finalize(NULL);
        return 0;
    }
    if (argc == 4 && strcmp(argv[2], "aead") == 0) {
        /* The ChaCha20-Poly1305 and AES-CCM rows alone (for comparing with openssl speed). */
        budget = atof(argv[3]);
        if (!open_token(argv[1])) { fprintf(stderr, "cannot set up a token in %s\n", argv[1]); return 1; }
        aead("chacha20poly1305.1KiB", 1, 1024);
        aead("chacha20poly1305.1MiB", 1, 1 << 20);
        aead("aes256.ccm.1KiB", 0, 1024);
        aead("aes256.ccm.1MiB", 0, 1 << 20);
        p11->C_Finalize(NULL);
        return 0;
    }
    if (argc != 3) { fprintf(stderr, "usage: %s MODULE SECONDS | %s MODULE scale N\n", argv[0], argv[0]); return 2; }
    budget = atof(argv[2]);
    if (!open_token(argv[1])) { fprintf(stderr, "cannot set up a token in %s\n", argv[1]); return 1; }
    CK_MECHANISM pkcs = {CKM_SHA256_RSA_PKCS, NULL, 0};
    CK_RSA_PKCS_PSS_PARAMS pss_params = {CKM_SHA256, CKG_MGF1_SHA256, 32};
    CK_MECHANISM pss = {CKM_SHA256_RSA_PKCS_PSS, &pss_params, sizeof pss_params};
    /* Raw ECDSA over a 32-byte hash: SoftHSM 2.6 offers no hashing ECDSA mechanisms. */
    CK_MECHANISM ecdsa = {CKM_ECDSA, NULL, 0};
    CK_MECHANISM eddsa = {CKM_EDDSA, NULL, 0};
    int inline_openssl = getenv("BENCH_OPENSSL_INLINE") && strcmp(getenv("BENCH_OPENSSL_INLINE"), "1") == 0;
    signatures("rsa2048.pkcs1", CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0, 2048, pkcs);
    if (inline_openssl) evp_signatures("rsa2048.pkcs1", EVP_RSA_PKCS1);
    signatures("rsa2048.pss", CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0, 2048, pss);
    if (inline_openssl) evp_signatures("rsa2048.pss", EVP_RSA_PSS);
    signatures("ecdsa.p256", CKM_EC_KEY_PAIR_GEN, p256, sizeof p256, 0, ecdsa);
    if (inline_openssl) evp_signatures("ecdsa.p256", EVP_EC_P256);
    signatures("ecdsa.p384", CKM_EC_KEY_PAIR_GEN, p384, sizeof p384, 0, ecdsa);
    if (inline_openssl) evp_signatures("ecdsa.p384", EVP_EC_P384);
    signatures("ed25519", CKM_EC_EDWARDS_KEY_PAIR_GEN, ed25519, sizeof ed25519, 0, eddsa);
    if (inline_openssl) evp_signatures("ed25519", EVP_ED25519);
    aes("aes256.gcm.1KiB", CKM_AES_GCM, 1024);
    aes("aes256.gcm.1MiB", CKM_AES_GCM, 1 << 20);
    aes("aes256.cbc.1KiB", CKM_AES_CBC, 1024);
    aes("aes256.cbc.1MiB", CKM_AES_CBC, 1 << 20);
    aead("chacha20poly1305.1KiB", 1, 1024);
    aead("chacha20poly1305.1MiB", 1, 1 << 20);
    aead("aes256.ccm.1KiB", 0, 1024);
    aead("aes256.ccm.1MiB", 0, 1 << 20);
    sha256(1 << 20);
    keygen("keygen.ecdsa.p256", CKM_EC_KEY_PAIR_GEN, p256, sizeof p256, 0);
    keygen("keygen.rsa2048", CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0, 2048);
    p11->C_Finalize(NULL);
    parallel_signatures(argv[1], 2);
    return 0;
}
