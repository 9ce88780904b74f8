/*
 * stress.c — crash safety and concurrency of libkeychain-pkcs11.so, through the C API as hosts
 * call it. The keychain folder is KEYCHAIN_PKCS11_DIR; `setup` makes the keychain first.
 *
 * Usage: stress MODULE SUBCOMMAND [ARGS]
 *   setup                      initialise the empty slot as token "stress" (user PIN 1234) with
 *                              a token P-256 key pair labelled "stress-key"
 *   crash CYCLES               CYCLES times: start a writer process, SIGKILL it at a random moment
 *                              (0-250 ms after its start: during loading, login, creations or a
 *                              PIN change), then check the database (PRAGMA integrity_check) and
 *                              every object: each creation acknowledged before the kill is present
 *                              once and intact, nothing else is visible but the one in flight, and
 *                              the acknowledged PIN (or the one being set) opens the keychain
 *   concurrency P T SECONDS    P processes x T threads, each thread opening its own session and
 *                              calling C_Login with the right PIN at the same moment (CKR_OK or
 *                              CKR_USER_ALREADY_LOGGED_IN, nothing else), then creating, finding,
 *                              signing with the shared token key, verifying and destroying token
 *                              objects for SECONDS; then the objects on the token must be exactly
 *                              the ones that were created and not destroyed
 *   guess P T MAXIMUM          P processes x T threads guessing wrong user PINs at the same moment
 *                              until CKR_PIN_LOCKED: exactly MAXIMUM guesses may be answered
 *                              CKR_PIN_INCORRECT (evaluated) in all, every other one CKR_PIN_LOCKED,
 *                              and afterwards the right PIN is refused with CKR_PIN_LOCKED too
 * Internal (started by the above): writer START PIN, verify ACKFILE full|recent,
 * worker ID T SECONDS OUTFILE START_AT, guesser T START_AT.
 *
 * Prints "ok: ..." lines and a summary; any "FAIL: ..." makes the exit status non-zero.
 *
 * Build: gcc -Wall -Wextra -Werror -O1 -pthread -I Include stress.c -o stress -ldl -lsqlite3
 */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "keychain-pkcs11.h"

#define SO_PIN "12345678"
#define TOKEN_LABEL "stress"
#define KEY_LABEL "stress-key"

static CK_FUNCTION_LIST_PTR p11;
static const char *module_path;
static char self_path[4096];

/* Ends the process at once (no atexit handlers, no module teardown), output flushed. */
static void bail(void)
{
    fflush(stdout);
    _exit(1);
}

static void die(const char *what, CK_RV rv)
{
    printf("FAIL: %s: rv=0x%lx\n", what, (unsigned long)rv);
    bail();
}

#define CHECK(call, what) do { CK_RV rv_ = (call); if (rv_ != CKR_OK) die(what, rv_); } while (0)

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wall-clock time: a moment that several processes agree on. */
static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void wait_until(double moment)
{
    double left = moment - wall_seconds();
    if (left > 0) usleep((useconds_t)(left * 1e6));
}

static void load_module(int threads)
{
    void *handle = dlopen(module_path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        printf("FAIL: dlopen %s: %s\n", module_path, dlerror());
        bail();
    }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(handle, "C_GetFunctionList");
    if (!get || get(&p11) != CKR_OK) die("C_GetFunctionList", CKR_GENERAL_ERROR);
    CK_C_INITIALIZE_ARGS args;
    memset(&args, 0, sizeof args);
    args.flags = CKF_OS_LOCKING_OK;
    CHECK(p11->C_Initialize(threads ? &args : NULL), "C_Initialize");
}

/* The slot of token "stress", or of the empty slot when `label` is NULL. */
static CK_SLOT_ID find_slot(const char *label)
{
    CK_SLOT_ID slots[64];
    CK_ULONG count = 64;
    CHECK(p11->C_GetSlotList(CK_TRUE, slots, &count), "C_GetSlotList");
    for (CK_ULONG i = 0; i < count; i++) {
        CK_TOKEN_INFO info;
        if (p11->C_GetTokenInfo(slots[i], &info) != CKR_OK) continue;
        int initialised = (info.flags & CKF_TOKEN_INITIALIZED) != 0;
        if (!label && !initialised) return slots[i];
        if (label && initialised) {
            char padded[32];
            memset(padded, ' ', sizeof padded);
            memcpy(padded, label, strlen(label));
            if (memcmp(info.label, padded, 32) == 0) return slots[i];
        }
    }
    die(label ? "no token labelled stress" : "no empty slot", CKR_SLOT_ID_INVALID);
    return 0;
}

static CK_SESSION_HANDLE open_session(CK_SLOT_ID slot)
{
    CK_SESSION_HANDLE session;
    CHECK(p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &session), "C_OpenSession");
    return session;
}

/* The one object matching `template`, or 0 with *count set to how many matched. */
static CK_OBJECT_HANDLE find_one(CK_SESSION_HANDLE session, CK_ATTRIBUTE *template, CK_ULONG n, CK_ULONG *count)
{
    CK_OBJECT_HANDLE found[4];
    CHECK(p11->C_FindObjectsInit(session, template, n), "C_FindObjectsInit");
    CHECK(p11->C_FindObjects(session, found, 4, count), "C_FindObjects");
    CHECK(p11->C_FindObjectsFinal(session), "C_FindObjectsFinal");
    return *count == 1 ? found[0] : 0;
}

static CK_OBJECT_HANDLE find_key(CK_SESSION_HANDLE session, CK_OBJECT_CLASS klass)
{
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &klass, sizeof klass}, {CKA_LABEL, KEY_LABEL, strlen(KEY_LABEL)}};
    CK_ULONG count = 0;
    CK_OBJECT_HANDLE key = find_one(session, t, 2, &count);
    if (!key) die("the stress key is not there once", CKR_GENERAL_ERROR);
    return key;
}

/* The value of object `index`: its index, then a pattern; 20 to 1,519 bytes. */
static size_t expected_value(long index, unsigned char *out)
{
    size_t length = 20 + (size_t)((index * 37) % 1500);
    for (size_t k = 0; k < length; k++) out[k] = (unsigned char)(index * 31 + (long)k * 7);
    out[0] = (unsigned char)(index >> 24);
    out[1] = (unsigned char)(index >> 16);
    out[2] = (unsigned char)(index >> 8);
    out[3] = (unsigned char)index;
    return length;
}

static CK_RV create_data(CK_SESSION_HANDLE session, const char *label, const unsigned char *value, size_t length,
                         CK_BBOOL private_, CK_OBJECT_HANDLE *object)
{
    CK_OBJECT_CLASS klass = CKO_DATA;
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE t[] = {
        {CKA_CLASS, &klass, sizeof klass}, {CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &private_, 1},
        {CKA_LABEL, (void *)label, strlen(label)}, {CKA_VALUE, (void *)value, length},
    };
    return p11->C_CreateObject(session, t, 5, object);
}

/* Reads CKA_LABEL and CKA_VALUE; returns 0 on any failure. */
static int read_object(CK_SESSION_HANDLE session, CK_OBJECT_HANDLE object, char *label, size_t label_room,
                       unsigned char *value, CK_ULONG *value_length)
{
    CK_ATTRIBUTE t[] = {{CKA_LABEL, NULL, 0}, {CKA_VALUE, NULL, 0}};
    if (p11->C_GetAttributeValue(session, object, t, 2) != CKR_OK) return 0;
    if (t[0].ulValueLen >= label_room || t[1].ulValueLen > *value_length) return 0;
    t[0].pValue = label;
    t[1].pValue = value;
    if (p11->C_GetAttributeValue(session, object, t, 2) != CKR_OK) return 0;
    label[t[0].ulValueLen] = 0;
    *value_length = t[1].ulValueLen;
    return 1;
}

/* ---- setup ---------------------------------------------------------------------------------- */

static int cmd_setup(void)
{
    load_module(0);
    CK_SLOT_ID slot = find_slot(NULL);
    CK_UTF8CHAR label[32];
    memset(label, ' ', sizeof label);
    memcpy(label, TOKEN_LABEL, strlen(TOKEN_LABEL));
    CHECK(p11->C_InitToken(slot, (CK_UTF8CHAR_PTR)SO_PIN, 8, label), "C_InitToken");
    slot = find_slot(TOKEN_LABEL);
    CK_SESSION_HANDLE session = open_session(slot);
    CHECK(p11->C_Login(session, CKU_SO, (CK_UTF8CHAR_PTR)SO_PIN, 8), "C_Login(SO)");
    CHECK(p11->C_InitPIN(session, (CK_UTF8CHAR_PTR) "1234", 4), "C_InitPIN");
    CHECK(p11->C_Logout(session), "C_Logout");
    CHECK(p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR) "1234", 4), "C_Login");
    CK_MECHANISM gen = {CKM_EC_KEY_PAIR_GEN, NULL, 0};
    unsigned char p256[] = {0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07};
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE pub[] = {{CKA_EC_PARAMS, p256, sizeof p256}, {CKA_TOKEN, &yes, 1}, {CKA_VERIFY, &yes, 1},
                          {CKA_LABEL, KEY_LABEL, strlen(KEY_LABEL)}};
    CK_ATTRIBUTE priv[] = {{CKA_TOKEN, &yes, 1}, {CKA_SIGN, &yes, 1}, {CKA_PRIVATE, &yes, 1},
                           {CKA_LABEL, KEY_LABEL, strlen(KEY_LABEL)}};
    CK_OBJECT_HANDLE public_key, private_key;
    CHECK(p11->C_GenerateKeyPair(session, &gen, pub, 4, priv, 4, &public_key, &private_key), "C_GenerateKeyPair");
    CHECK(p11->C_Finalize(NULL), "C_Finalize");
    printf("ok: token \"%s\" with key pair \"%s\"\n", TOKEN_LABEL, KEY_LABEL);
    return 0;
}

/* ---- crash safety --------------------------------------------------------------------------- */

/* Acknowledges on fd 1 with one write(2) per line: what the driver reads happened. */
static void acknowledge(const char *line)
{
    size_t length = strlen(line), done = 0;
    while (done < length) {
        ssize_t n = write(1, line + done, length - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) _exit(1);
        done += (size_t)n;
    }
}

/* Creates objects START, START+1, ... until killed; every 40th step changes the PIN. */
static __attribute__((noreturn)) void cmd_writer(long start, const char *pin)
{
    char current[16];
    snprintf(current, sizeof current, "%s", pin);
    load_module(0);
    CK_SESSION_HANDLE session = open_session(find_slot(TOKEN_LABEL));
    CHECK(p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)current, strlen(current)), "writer C_Login");
    acknowledge("ready\n");
    unsigned char value[1600];
    char label[32], line[64];
    for (long i = start;; i++) {
        if (i % 40 == 39) {
            const char *next = strcmp(current, "1234") == 0 ? "5678" : "1234";
            snprintf(line, sizeof line, "pin-begin %s\n", next);
            acknowledge(line);
            CHECK(p11->C_SetPIN(session, (CK_UTF8CHAR_PTR)current, strlen(current), (CK_UTF8CHAR_PTR)next, strlen(next)), "C_SetPIN");
            snprintf(current, sizeof current, "%s", next);
            snprintf(line, sizeof line, "pin %s\n", current);
            acknowledge(line);
        }
        size_t length = expected_value(i, value);
        snprintf(label, sizeof label, "obj-%07ld", i);
        CK_OBJECT_HANDLE object;
        CHECK(create_data(session, label, value, length, (CK_BBOOL)(i % 2), &object), "writer C_CreateObject");
        snprintf(line, sizeof line, "ok %ld\n", i);
        acknowledge(line);
    }
}

/* Reads the acknowledgements in ACKFILE and checks the keychain against them: with `full`, every
 * object is read and checked; otherwise the count of all objects, and each object of the last
 * cycle found by its label and checked (the full check every cycle would grow with the square
 * of the cycles). Prints "pin P" (the PIN that opened it) and "next N" (the next index to use). */
static int cmd_verify(const char *ack_path, int full)
{
    FILE *acks = fopen(ack_path, "r");
    if (!acks) die("open the acknowledgement file", CKR_GENERAL_ERROR);
    char line[128], pin[16] = "1234", pending_pin[16] = "";
    /* acked: acknowledged creations of every cycle so far; in_flight: per cycle, the one index
     * that may have been committed without its acknowledgement (the one after its last). */
    static unsigned char acked[1 << 20], in_flight[1 << 20];
    long cycle_start = -1, cycle_last = -1;
    while (fgets(line, sizeof line, acks)) {
        long index;
        char word[16];
        if (sscanf(line, "ok %ld", &index) == 1) {
            if (index < 0 || index + 1 >= (long)sizeof acked) die("acknowledged index out of range", CKR_GENERAL_ERROR);
            acked[index] = 1;
            cycle_last = index;
        } else if (sscanf(line, "pin-begin %15s", word) == 1) {
            snprintf(pending_pin, sizeof pending_pin, "%s", word);
        } else if (sscanf(line, "pin %15s", word) == 1) {
            snprintf(pin, sizeof pin, "%s", word);
            pending_pin[0] = 0;
        } else if (sscanf(line, "start %ld %15s", &index, word) == 2) {
            if (cycle_start >= 0) in_flight[cycle_last >= 0 ? cycle_last + 1 : cycle_start] = 1;
            if (index < 0 || index >= (long)sizeof acked) die("start index out of range", CKR_GENERAL_ERROR);
            cycle_start = index;
            cycle_last = -1;
            snprintf(pin, sizeof pin, "%s", word);
            pending_pin[0] = 0;
        }
    }
    if (cycle_start >= 0) in_flight[cycle_last >= 0 ? cycle_last + 1 : cycle_start] = 1;
    fclose(acks);

    load_module(0);
    CK_SESSION_HANDLE session = open_session(find_slot(TOKEN_LABEL));
    CK_RV rv = p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin));
    if (rv == CKR_PIN_INCORRECT && pending_pin[0]) {
        /* The kill came inside C_SetPIN: the new PIN may have been committed. */
        snprintf(pin, sizeof pin, "%s", pending_pin);
        rv = p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin));
    }
    if (rv != CKR_OK) die("no acknowledged PIN opens the keychain", rv);

    if (!full) {
        CK_OBJECT_CLASS data_class = CKO_DATA;
        CK_ATTRIBUTE all_data[] = {{CKA_CLASS, &data_class, sizeof data_class}};
        CHECK(p11->C_FindObjectsInit(session, all_data, 1), "C_FindObjectsInit");
        CK_OBJECT_HANDLE handles[512];
        CK_ULONG got;
        long present = 0, acknowledged = 0, flights = 0;
        do {
            CHECK(p11->C_FindObjects(session, handles, 512, &got), "C_FindObjects");
            present += (long)got;
        } while (got > 0);
        CHECK(p11->C_FindObjectsFinal(session), "C_FindObjectsFinal");
        for (long i = 0; i < (long)sizeof acked; i++) {
            acknowledged += acked[i];
            flights += in_flight[i] && !acked[i];
        }
        if (present < acknowledged || present > acknowledged + flights) {
            printf("FAIL: %ld objects on the token; %ld acknowledged, %ld more possible in flight\n", present, acknowledged, flights);
            bail();
        }
        long next = cycle_start;
        unsigned char value[1600], expected[1600];
        for (long i = cycle_start; i <= (cycle_last >= 0 ? cycle_last + 1 : cycle_start); i++) {
            char label[32];
            snprintf(label, sizeof label, "obj-%07ld", i);
            CK_ATTRIBUTE by_label[] = {{CKA_CLASS, &data_class, sizeof data_class}, {CKA_LABEL, label, strlen(label)}};
            CK_ULONG count = 0;
            CK_OBJECT_HANDLE object = find_one(session, by_label, 2, &count);
            if (count > 1 || (acked[i] && count != 1)) {
                printf("FAIL: object %ld is on the token %lu times (acknowledged: %d)\n", i, count, acked[i]);
                bail();
            }
            if (count == 1 && !acked[i] && !in_flight[i]) {
                printf("FAIL: object %ld is present but was never acknowledged nor in flight at a kill\n", i);
                bail();
            }
            if (count == 1) {
                char read_label[64];
                CK_ULONG length = sizeof value;
                size_t want = expected_value(i, expected);
                if (!read_object(session, object, read_label, sizeof read_label, value, &length) || length != want ||
                    memcmp(value, expected, want) != 0) {
                    printf("FAIL: object %ld is not intact\n", i);
                    bail();
                }
                next = i + 1;
            }
        }
        CHECK(p11->C_Finalize(NULL), "C_Finalize");
        printf("pin %s\nnext %ld\nfound %ld\n", pin, next, present);
        return 0;
    }

    static unsigned char seen[1 << 20];
    CK_OBJECT_CLASS klass = CKO_DATA;
    CK_ATTRIBUTE query[] = {{CKA_CLASS, &klass, sizeof klass}};
    CHECK(p11->C_FindObjectsInit(session, query, 1), "C_FindObjectsInit");
    CK_OBJECT_HANDLE batch[256];
    CK_ULONG n;
    long found = 0, highest = -1;
    unsigned char value[1600], expected[1600];
    char label[64];
    /* Collect handles first: reading attributes inside a search is allowed, but keep it simple. */
    static CK_OBJECT_HANDLE all[1 << 20];
    long total = 0;
    do {
        CHECK(p11->C_FindObjects(session, batch, 256, &n), "C_FindObjects");
        for (CK_ULONG i = 0; i < n && total < (long)(sizeof all / sizeof all[0]); i++) all[total++] = batch[i];
    } while (n > 0);
    CHECK(p11->C_FindObjectsFinal(session), "C_FindObjectsFinal");
    for (long i = 0; i < total; i++) {
        CK_ULONG length = sizeof value;
        if (!read_object(session, all[i], label, sizeof label, value, &length)) die("an object on the token cannot be read", CKR_GENERAL_ERROR);
        long index;
        if (sscanf(label, "obj-%ld", &index) != 1 || index < 0 || index >= (long)sizeof seen) {
            printf("FAIL: an object with an unexpected label [%s]\n", label);
            bail();
        }
        size_t want = expected_value(index, expected);
        if (length != want || memcmp(value, expected, want) != 0) {
            printf("FAIL: object %ld is not intact (%lu bytes, expected %zu)\n", index, (unsigned long)length, want);
            bail();
        }
        if (seen[index]) {
            printf("FAIL: object %ld is on the token twice\n", index);
            bail();
        }
        seen[index] = 1;
        found++;
        if (index > highest) highest = index;
    }
    long missing = 0;
    for (long i = 0; i < (long)sizeof acked; i++) {
        if (acked[i] && !seen[i]) {
            printf("FAIL: acknowledged object %ld is missing\n", i);
            missing++;
        }
    }
    if (missing) bail();
    /* Not acknowledged but present: only a creation in flight when a kill came. */
    for (long i = 0; i <= highest; i++) {
        if (seen[i] && !acked[i] && !in_flight[i]) {
            printf("FAIL: object %ld is present but was never acknowledged nor in flight at a kill\n", i);
            bail();
        }
    }
    CHECK(p11->C_Finalize(NULL), "C_Finalize");
    printf("pin %s\nnext %ld\nfound %ld\n", pin, highest + 1, found);
    return 0;
}

/* PRAGMA integrity_check on the keychain database; 1 when it says "ok". */
static int integrity_ok(char *detail, size_t room)
{
    const char *dir = getenv("KEYCHAIN_PKCS11_DIR");
    char pattern[4096];
    snprintf(pattern, sizeof pattern, "%s/*.keychain-db", dir ? dir : ".");
    glob_t files;
    if (glob(pattern, 0, NULL, &files) != 0 || files.gl_pathc != 1) {
        snprintf(detail, room, "expected one keychain file in KEYCHAIN_PKCS11_DIR");
        return 0;
    }
    sqlite3 *db = NULL;
    int ok = 0;
    if (sqlite3_open_v2(files.gl_pathv[0], &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_stmt *statement = NULL;
        if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &statement, NULL) == SQLITE_OK &&
            sqlite3_step(statement) == SQLITE_ROW) {
            const unsigned char *text = sqlite3_column_text(statement, 0);
            snprintf(detail, room, "%s", text ? (const char *)text : "(null)");
            ok = text && strcmp((const char *)text, "ok") == 0;
        } else {
            snprintf(detail, room, "%s", sqlite3_errmsg(db));
        }
        sqlite3_finalize(statement);
    } else {
        snprintf(detail, room, "cannot open %s", files.gl_pathv[0]);
    }
    sqlite3_close(db);
    globfree(&files);
    return ok;
}

/* Runs `self ARGS...` with stdout into `out` (a file or pipe fd); returns the pid. */
static pid_t spawn(int out, char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        if (out >= 0 && dup2(out, 1) < 0) _exit(127);
        execv(self_path, argv);
        _exit(127);
    }
    return pid;
}

static int cmd_crash(int cycles)
{
    char ack_path[4096];
    const char *dir = getenv("KEYCHAIN_PKCS11_DIR");
    snprintf(ack_path, sizeof ack_path, "%s/../acks", dir ? dir : ".");
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    long next = 0, acknowledged_total = 0, killed_writing = 0, killed_in_pin = 0, killed_before_ready = 0;
    char pin[16] = "1234";
    double started = now_seconds();
    for (int cycle = 0; cycle < cycles; cycle++) {
        int pipefd[2];
        if (pipe(pipefd) != 0) die("pipe", CKR_GENERAL_ERROR);
        char start_arg[32];
        snprintf(start_arg, sizeof start_arg, "%ld", next);
        char *writer_argv[] = {self_path, (char *)module_path, "writer", start_arg, pin, NULL};
        pid_t writer = spawn(pipefd[1], writer_argv);
        close(pipefd[1]);
        FILE *acks = fopen(ack_path, cycle == 0 ? "w" : "a");
        if (!acks) die("create the acknowledgement file", CKR_GENERAL_ERROR);
        fprintf(acks, "start %ld %s\n", next, pin);
        double deadline = now_seconds() + (rand() % 250) / 1000.0;
        char buffer[4096], partial[256] = "";
        size_t partial_length = 0;
        int ready = 0, in_pin = 0;
        long acked_now = 0;
        int killed = 0;
        for (;;) {
            double left = deadline - now_seconds();
            if (!killed && left <= 0) {
                kill(writer, SIGKILL);
                killed = 1;
            }
            struct pollfd p = {pipefd[0], POLLIN, 0};
            int timeout = killed ? 1000 : (int)(left * 1000) + 1;
            if (poll(&p, 1, timeout) <= 0) continue;
            ssize_t got = read(pipefd[0], buffer, sizeof buffer);
            if (got <= 0) break; /* the writer is gone and everything it wrote has been read */
            for (ssize_t i = 0; i < got; i++) {
                if (partial_length < sizeof partial - 1) partial[partial_length++] = buffer[i];
                if (buffer[i] != '\n') continue;
                partial[partial_length] = 0;
                if (strcmp(partial, "ready\n") == 0) ready = 1;
                else fputs(partial, acks);
                if (strncmp(partial, "ok ", 3) == 0) acked_now++;
                in_pin = strncmp(partial, "pin-begin", 9) == 0;
                partial_length = 0;
            }
        }
        close(pipefd[0]);
        fclose(acks);
        int status;
        waitpid(writer, &status, 0);
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
            printf("FAIL: cycle %d: the writer ended by itself (status 0x%x)\n", cycle, status);
            return 1;
        }
        if (!ready) killed_before_ready++;
        else if (in_pin) killed_in_pin++;
        else killed_writing++;
        acknowledged_total += acked_now;

        char detail[512];
        if (!integrity_ok(detail, sizeof detail)) {
            printf("FAIL: cycle %d: PRAGMA integrity_check: %s\n", cycle, detail);
            return 1;
        }
        /* Verify in a fresh process: this one never loads the module. */
        int verify_pipe[2];
        if (pipe(verify_pipe) != 0) die("pipe", CKR_GENERAL_ERROR);
        char *verify_argv[] = {self_path, (char *)module_path, "verify", ack_path,
                               cycle % 25 == 24 || cycle == cycles - 1 ? "full" : "recent", NULL};
        pid_t verifier = spawn(verify_pipe[1], verify_argv);
        close(verify_pipe[1]);
        FILE *report = fdopen(verify_pipe[0], "r");
        char line[512];
        long reported_next = -1;
        while (report && fgets(line, sizeof line, report)) {
            if (sscanf(line, "next %ld", &reported_next) == 1) continue;
            if (sscanf(line, "pin %15s", pin) == 1) continue;
            if (strncmp(line, "found ", 6) == 0) continue;
            printf("cycle %d: %s", cycle, line);
        }
        if (report) fclose(report);
        waitpid(verifier, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || reported_next < 0) {
            printf("FAIL: cycle %d: verification failed (status 0x%x)\n", cycle, status);
            return 1;
        }
        if (reported_next > next) next = reported_next;
    }
    printf("ok: %d SIGKILL cycles in %.1f s: %ld acknowledged creations all present and intact (all objects read every 25 cycles); "
           "kills during loading/login %ld, during creations %ld, inside C_SetPIN %ld; integrity_check ok every time\n",
           cycles, now_seconds() - started, acknowledged_total, killed_before_ready, killed_writing, killed_in_pin);
    return 0;
}

/* ---- concurrency ---------------------------------------------------------------------------- */

struct worker {
    int process, thread;
    double seconds, start_at, login_seconds;
    CK_SLOT_ID slot;
    long created, destroyed, signatures, finds;
    char **survivors;
    long survivor_count;
};

static void *worker_thread(void *argument)
{
    struct worker *w = argument;
    CK_SESSION_HANDLE session = open_session(w->slot);
    /* Every thread of every process logs in at the same moment: the first of each process is
     * logged in, the others find it so; a right PIN is never refused. */
    wait_until(w->start_at);
    double asked = now_seconds();
    CK_RV login = p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR) "1234", 4);
    w->login_seconds = now_seconds() - asked;
    if (login != CKR_OK && login != CKR_USER_ALREADY_LOGGED_IN) die("worker C_Login (right PIN, all threads at once)", login);
    CK_OBJECT_HANDLE private_key = find_key(session, CKO_PRIVATE_KEY), public_key = find_key(session, CKO_PUBLIC_KEY);
    CK_MECHANISM ecdsa = {CKM_ECDSA, NULL, 0};
    unsigned char value[1600], digest[32], signature[128];
    char label[64];
    long capacity = 1024;
    w->survivors = malloc(sizeof(char *) * (size_t)capacity);
    CK_OBJECT_HANDLE previous = 0;
    double end = now_seconds() + w->seconds;
    for (long i = 0; now_seconds() < end; i++) {
        snprintf(label, sizeof label, "c-%d-%d-%ld", w->process, w->thread, i);
        size_t length = expected_value(i, value);
        CK_OBJECT_HANDLE object;
        CHECK(create_data(session, label, value, length, (CK_BBOOL)(i % 2), &object), "worker C_CreateObject");
        w->created++;
        CK_OBJECT_CLASS klass = CKO_DATA;
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &klass, sizeof klass}, {CKA_LABEL, label, strlen(label)}};
        CK_ULONG count = 0;
        if (find_one(session, t, 2, &count) != object) {
            printf("FAIL: process %d thread %d: %s found %lu times right after its creation\n", w->process, w->thread, label, count);
            bail();
        }
        w->finds++;
        if (i % 3 == 0) {
            memset(digest, (int)i, sizeof digest);
            CK_ULONG signature_length = sizeof signature;
            CHECK(p11->C_SignInit(session, &ecdsa, private_key), "worker C_SignInit");
            CHECK(p11->C_Sign(session, digest, sizeof digest, signature, &signature_length), "worker C_Sign");
            CHECK(p11->C_VerifyInit(session, &ecdsa, public_key), "worker C_VerifyInit");
            CHECK(p11->C_Verify(session, digest, sizeof digest, signature, signature_length), "worker C_Verify");
            w->signatures++;
        }
        /* Every other iteration destroys the object of the iteration before. */
        if (previous && i % 2 == 1) {
            CHECK(p11->C_DestroyObject(session, previous), "worker C_DestroyObject");
            w->destroyed++;
            w->survivor_count--; /* the previous one was the last kept */
            free(w->survivors[w->survivor_count]);
        }
        if (w->survivor_count == capacity) {
            capacity *= 2;
            w->survivors = realloc(w->survivors, sizeof(char *) * (size_t)capacity);
        }
        w->survivors[w->survivor_count++] = strdup(label);
        previous = object;
    }
    CHECK(p11->C_CloseSession(session), "worker C_CloseSession");
    return NULL;
}

static int cmd_worker(int process, int threads, double seconds, const char *out_path, double start_at)
{
    load_module(1);
    CK_SLOT_ID slot = find_slot(TOKEN_LABEL);
    pthread_t ids[64];
    struct worker workers[64];
    if (threads > 64) threads = 64;
    for (int t = 0; t < threads; t++) {
        memset(&workers[t], 0, sizeof workers[t]);
        workers[t].process = process;
        workers[t].thread = t;
        workers[t].seconds = seconds;
        workers[t].start_at = start_at;
        workers[t].slot = slot;
        if (pthread_create(&ids[t], NULL, worker_thread, &workers[t]) != 0) die("pthread_create", CKR_GENERAL_ERROR);
    }
    FILE *out = fopen(out_path, "w");
    if (!out) die("open the survivors file", CKR_GENERAL_ERROR);
    long created = 0, destroyed = 0, signatures = 0, finds = 0;
    double slowest_login = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        if (workers[t].login_seconds > slowest_login) slowest_login = workers[t].login_seconds;
        created += workers[t].created;
        destroyed += workers[t].destroyed;
        signatures += workers[t].signatures;
        finds += workers[t].finds;
        for (long i = 0; i < workers[t].survivor_count; i++) fprintf(out, "%s\n", workers[t].survivors[i]);
    }
    fclose(out);
    CHECK(p11->C_Finalize(NULL), "worker C_Finalize");
    printf("process %d: %ld created, %ld found, %ld signed and verified, %ld destroyed; slowest login %.0f ms\n", process, created, finds,
           signatures, destroyed, slowest_login * 1000);
    return 0;
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmd_concurrency(int processes, int threads, double seconds)
{
    const char *dir = getenv("KEYCHAIN_PKCS11_DIR");
    pid_t pids[64];
    if (processes > 64) processes = 64;
    double started = now_seconds();
    /* All logins at one moment, after every process has loaded the module. */
    char start_arg[32];
    snprintf(start_arg, sizeof start_arg, "%.3f", wall_seconds() + 1.5);
    for (int p = 0; p < processes; p++) {
        char id[16], thread_arg[16], seconds_arg[32], out[4096];
        snprintf(id, sizeof id, "%d", p);
        snprintf(thread_arg, sizeof thread_arg, "%d", threads);
        snprintf(seconds_arg, sizeof seconds_arg, "%g", seconds);
        snprintf(out, sizeof out, "%s/../survivors-%d", dir ? dir : ".", p);
        char *argv[] = {self_path, (char *)module_path, "worker", id, thread_arg, seconds_arg, out, start_arg, NULL};
        pids[p] = spawn(-1, argv);
    }
    /* A worker that has not finished long after its time is hung (a deadlock): fail. */
    double limit = now_seconds() + 1.5 + seconds + 120;
    int failed = 0;
    for (int p = 0; p < processes; p++) {
        int status = 0;
        for (;;) {
            pid_t done = waitpid(pids[p], &status, WNOHANG);
            if (done == pids[p]) break;
            if (now_seconds() > limit) {
                printf("FAIL: process %d still running %.0f s after its time: hung\n", p, seconds + 120);
                for (int q = 0; q < processes; q++) kill(pids[q], SIGKILL);
                return 1;
            }
            usleep(20000);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            printf("FAIL: worker process %d ended with status 0x%x\n", p, status);
            failed = 1;
        }
    }
    if (failed) return 1;
    double elapsed = now_seconds() - started;

    /* Expected: every survivor of every process, each once. */
    long expected_count = 0, capacity = 4096;
    char **expected = malloc(sizeof(char *) * (size_t)capacity);
    for (int p = 0; p < processes; p++) {
        char path[4096], line[128];
        snprintf(path, sizeof path, "%s/../survivors-%d", dir ? dir : ".", p);
        FILE *f = fopen(path, "r");
        if (!f) die("read a survivors file", CKR_GENERAL_ERROR);
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = 0;
            if (expected_count == capacity) {
                capacity *= 2;
                expected = realloc(expected, sizeof(char *) * (size_t)capacity);
            }
            expected[expected_count++] = strdup(line);
        }
        fclose(f);
    }
    qsort(expected, (size_t)expected_count, sizeof(char *), compare_strings);

    load_module(0);
    CK_SESSION_HANDLE session = open_session(find_slot(TOKEN_LABEL));
    CHECK(p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR) "1234", 4), "C_Login");
    CK_OBJECT_CLASS klass = CKO_DATA;
    CK_ATTRIBUTE query[] = {{CKA_CLASS, &klass, sizeof klass}};
    CHECK(p11->C_FindObjectsInit(session, query, 1), "C_FindObjectsInit");
    long actual_count = 0, actual_capacity = 4096;
    CK_OBJECT_HANDLE *handles = malloc(sizeof(CK_OBJECT_HANDLE) * (size_t)actual_capacity);
    CK_ULONG n;
    do {
        if (actual_count + 256 > actual_capacity) {
            actual_capacity *= 2;
            handles = realloc(handles, sizeof(CK_OBJECT_HANDLE) * (size_t)actual_capacity);
        }
        CHECK(p11->C_FindObjects(session, handles + actual_count, 256, &n), "C_FindObjects");
        actual_count += (long)n;
    } while (n > 0);
    CHECK(p11->C_FindObjectsFinal(session), "C_FindObjectsFinal");
    char **actual = malloc(sizeof(char *) * (size_t)(actual_count + 1));
    unsigned char value[1600], want[1600];
    for (long i = 0; i < actual_count; i++) {
        char label[64];
        CK_ULONG length = sizeof value;
        if (!read_object(session, handles[i], label, sizeof label, value, &length)) die("read an object", CKR_GENERAL_ERROR);
        long index = -1;
        int process, thread;
        if (sscanf(label, "c-%d-%d-%ld", &process, &thread, &index) != 3) {
            printf("FAIL: unexpected object [%s]\n", label);
            return 1;
        }
        size_t expected_length = expected_value(index, want);
        if (length != expected_length || memcmp(value, want, expected_length) != 0) {
            printf("FAIL: object %s is not intact\n", label);
            return 1;
        }
        actual[i] = strdup(label);
    }
    qsort(actual, (size_t)actual_count, sizeof(char *), compare_strings);
    for (long i = 1; i < actual_count; i++) {
        if (strcmp(actual[i], actual[i - 1]) == 0) {
            printf("FAIL: object %s is on the token twice\n", actual[i]);
            return 1;
        }
    }
    long i = 0, j = 0, lost = 0, extra = 0;
    while (i < expected_count || j < actual_count) {
        int c = i == expected_count ? 1 : j == actual_count ? -1 : strcmp(expected[i], actual[j]);
        if (c == 0) { i++; j++; continue; }
        if (c < 0) { if (lost++ < 5) printf("FAIL: %s was created, not destroyed, and is missing\n", expected[i]); i++; }
        else { if (extra++ < 5) printf("FAIL: %s is on the token but was destroyed or never created\n", actual[j]); j++; }
    }
    if (lost || extra) {
        printf("FAIL: %ld lost, %ld unexpected objects\n", lost, extra);
        return 1;
    }
    CHECK(p11->C_Finalize(NULL), "C_Finalize");
    printf("ok: %d processes x %d threads for %.0f s (%.0f process-thread-seconds, %.1f s wall): %ld objects on the token, exactly the survivors; no error, no hang\n",
           processes, threads, seconds, processes * threads * seconds, elapsed, actual_count);
    return 0;
}

/* ---- guessing ------------------------------------------------------------------------------- */

struct guesser {
    CK_SLOT_ID slot;
    double start_at;
    long evaluated, locked;
};

/* Wrong PINs until the token answers CKR_PIN_LOCKED; any other answer fails. */
static void *guesser_thread(void *argument)
{
    struct guesser *g = argument;
    CK_SESSION_HANDLE session = open_session(g->slot);
    wait_until(g->start_at);
    for (int i = 0; i < 1000; i++) {
        char wrong[16];
        snprintf(wrong, sizeof wrong, "9%07d", (int)((getpid() * 131 + i) % 10000000));
        CK_RV rv = p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)wrong, strlen(wrong));
        if (rv == CKR_PIN_INCORRECT) { g->evaluated++; continue; }
        if (rv == CKR_PIN_LOCKED) { g->locked++; break; }
        die("guesser C_Login (wrong PIN)", rv);
    }
    CHECK(p11->C_CloseSession(session), "guesser C_CloseSession");
    return NULL;
}

/* One guessing process: prints "evaluated N" for the driver. */
static int cmd_guesser(int threads, double start_at)
{
    load_module(1);
    CK_SLOT_ID slot = find_slot(TOKEN_LABEL);
    pthread_t ids[64];
    struct guesser guessers[64];
    if (threads > 64) threads = 64;
    for (int t = 0; t < threads; t++) {
        memset(&guessers[t], 0, sizeof guessers[t]);
        guessers[t].slot = slot;
        guessers[t].start_at = start_at;
        if (pthread_create(&ids[t], NULL, guesser_thread, &guessers[t]) != 0) die("pthread_create", CKR_GENERAL_ERROR);
    }
    long evaluated = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        if (guessers[t].locked != 1) die("a guesser never saw CKR_PIN_LOCKED", CKR_GENERAL_ERROR);
        evaluated += guessers[t].evaluated;
    }
    CHECK(p11->C_Finalize(NULL), "guesser C_Finalize");
    printf("evaluated %ld\n", evaluated);
    return 0;
}

static int cmd_guess(int processes, int threads, long maximum)
{
    char start_arg[32], thread_arg[16];
    snprintf(start_arg, sizeof start_arg, "%.3f", wall_seconds() + 1.5);
    snprintf(thread_arg, sizeof thread_arg, "%d", threads);
    if (processes > 64) processes = 64;
    int fds[64];
    pid_t pids[64];
    for (int p = 0; p < processes; p++) {
        int pipe_fds[2];
        if (pipe(pipe_fds) != 0) die("pipe", CKR_GENERAL_ERROR);
        char *argv[] = {self_path, (char *)module_path, "guesser", thread_arg, start_arg, NULL};
        pids[p] = spawn(pipe_fds[1], argv);
        close(pipe_fds[1]);
        fds[p] = pipe_fds[0];
    }
    long evaluated = 0;
    int failed = 0;
    for (int p = 0; p < processes; p++) {
        char out[4096];
        size_t used = 0;
        ssize_t n;
        while (used < sizeof out - 1 && (n = read(fds[p], out + used, sizeof out - 1 - used)) > 0) used += (size_t)n;
        out[used] = 0;
        close(fds[p]);
        int status = 0;
        waitpid(pids[p], &status, 0);
        long count = -1;
        char *line = strstr(out, "evaluated ");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !line || sscanf(line, "evaluated %ld", &count) != 1) {
            printf("FAIL: guessing process %d ended with status 0x%x: %s\n", p, status, out);
            failed = 1;
            continue;
        }
        evaluated += count;
    }
    if (failed) return 1;
    if (evaluated != maximum) {
        printf("FAIL: %ld wrong PINs were evaluated by %d processes x %d threads at once; the limit is %ld\n", evaluated, processes, threads, maximum);
        return 1;
    }
    load_module(0);
    CK_SESSION_HANDLE session = open_session(find_slot(TOKEN_LABEL));
    CK_RV rv = p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR) "1234", 4);
    if (rv != CKR_PIN_LOCKED) {
        printf("FAIL: the right PIN after the limit answered 0x%lx, not CKR_PIN_LOCKED\n", (unsigned long)rv);
        return 1;
    }
    CK_TOKEN_INFO info;
    CHECK(p11->C_GetTokenInfo(find_slot(TOKEN_LABEL), &info), "C_GetTokenInfo");
    if (!(info.flags & CKF_USER_PIN_LOCKED)) {
        printf("FAIL: CKF_USER_PIN_LOCKED is not set after the limit\n");
        return 1;
    }
    CHECK(p11->C_Finalize(NULL), "C_Finalize");
    printf("ok: %d processes x %d threads guessing at once: exactly %ld wrong PINs evaluated (the limit), then CKR_PIN_LOCKED for every guess and for the right PIN\n",
           processes, threads, evaluated);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODULE setup | crash CYCLES | concurrency PROCESSES THREADS SECONDS | guess PROCESSES THREADS MAXIMUM\n", argv[0]);
        return 2;
    }
    module_path = argv[1];
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0) return 2;
    self_path[n] = 0;
    const char *command = argv[2];
    if (strcmp(command, "setup") == 0) return cmd_setup();
    if (strcmp(command, "crash") == 0 && argc == 4) return cmd_crash(atoi(argv[3]));
    if (strcmp(command, "writer") == 0 && argc == 5) cmd_writer(atol(argv[3]), argv[4]);
    if (strcmp(command, "verify") == 0 && argc == 5) return cmd_verify(argv[3], strcmp(argv[4], "full") == 0);
    if (strcmp(command, "concurrency") == 0 && argc == 6) return cmd_concurrency(atoi(argv[3]), atoi(argv[4]), atof(argv[5]));
    if (strcmp(command, "worker") == 0 && argc == 8) return cmd_worker(atoi(argv[3]), atoi(argv[4]), atof(argv[5]), argv[6], atof(argv[7]));
    if (strcmp(command, "guess") == 0 && argc == 6) return cmd_guess(atoi(argv[3]), atoi(argv[4]), atol(argv[5]));
    if (strcmp(command, "guesser") == 0 && argc == 5) return cmd_guesser(atoi(argv[3]), atof(argv[4]));
    fprintf(stderr, "unknown subcommand or wrong arguments\n");
    return 2;
}
