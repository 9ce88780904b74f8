/*
 * host.c — a small C host that loads libkeychain-pkcs11.so with dlopen and checks the behaviour
 * that Swift tests cannot: load/unload cycles, fork (also while another thread is inside the
 * module), the interface lists, C_Initialize arguments and many threads.
 *
 * Usage: host MODULE_PATH SUBCOMMAND [ARGS]
 *   cycles N     N x (dlopen, C_GetFunctionList, C_Initialize, C_GetSlotList, C_Finalize, dlclose)
 *   fork         fork() with an open session, and fork() while a thread is inside the module
 *   interfaces   C_GetInterfaceList / C_GetInterface / C_GetFunctionList / C_GetInfo versions
 *                (the 3.0 list by default, 3.2 and 2.40 on request)
 *   initargs     CK_C_INITIALIZE_ARGS handling, double initialise, C_Finalize arguments
 *   threads      8 threads x 200 session-object round trips
 *   errqueue     OpenSSL's per-thread error queue, shared with the host, is left as the host had
 *                it by calls that fail inside OpenSSL (an off-curve EC point, a bad GCM tag)
 *
 * Every check prints "ok: ..." or "FAIL: ... rv=0x..."; the exit status is 0 only if all passed.
 *
 * Build: gcc -Wall -Wextra -Werror -O1 -pthread -I Include host.c -o host -ldl -lcrypto
 */
#define _XOPEN_SOURCE 700

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "keychain-pkcs11.h"
#include <openssl/err.h>

static const char *module_path;
static int failures;

#define SO_PIN "12345678"
#define USER_PIN "1234"

/* ---- reporting ------------------------------------------------------------------------------ */

static void ok(const char *what)
{
    printf("ok: %s\n", what);
    fflush(stdout);
}

static void fail(const char *what, CK_RV rv, CK_RV expected)
{
    printf("FAIL: %s: rv=0x%lx (expected 0x%lx)\n", what, (unsigned long)rv, (unsigned long)expected);
    fflush(stdout);
    failures++;
}

static void fail_msg(const char *what)
{
    printf("FAIL: %s\n", what);
    fflush(stdout);
    failures++;
}

/* Checks rv == expected; returns 1 when it matched. */
static int expect_rv(CK_RV rv, CK_RV expected, const char *what)
{
    if (rv == expected) {
        char buf[300];
        if (expected == CKR_OK)
            snprintf(buf, sizeof buf, "%s", what);
        else
            snprintf(buf, sizeof buf, "%s -> 0x%lx", what, (unsigned long)expected);
        ok(buf);
        return 1;
    }
    fail(what, rv, expected);
    return 0;
}

/* Checks quietly (for loops): prints only failures. */
static int quiet_rv(CK_RV rv, CK_RV expected, const char *what)
{
    if (rv == expected)
        return 1;
    fail(what, rv, expected);
    return 0;
}

static void check(int cond, const char *what)
{
    if (cond)
        ok(what);
    else
        fail_msg(what);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Async-signal-safe report from a forked child (no stdio: another thread may hold its lock). */
static void child_report(const char *what, CK_RV rv)
{
    char buf[200];
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    const char *prefix = "FAIL (child): ";
    while (*prefix && n < sizeof buf - 40)
        buf[n++] = *prefix++;
    while (*what && n < sizeof buf - 40)
        buf[n++] = *what++;
    buf[n++] = ':';
    buf[n++] = ' ';
    buf[n++] = 'r';
    buf[n++] = 'v';
    buf[n++] = '=';
    buf[n++] = '0';
    buf[n++] = 'x';
    {
        char digits[20];
        int d = 0;
        unsigned long v = (unsigned long)rv;
        do {
            digits[d++] = hex[v & 0xf];
            v >>= 4;
        } while (v && d < 20);
        while (d > 0)
            buf[n++] = digits[--d];
    }
    buf[n++] = '\n';
    if (write(STDOUT_FILENO, buf, n) < 0) {
        /* nothing more we can do */
    }
}

/* ---- loading -------------------------------------------------------------------------------- */

static void *load_module(CK_FUNCTION_LIST_PTR *fl)
{
    void *h = dlopen(module_path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("FAIL: dlopen %s: %s\n", module_path, dlerror());
        failures++;
        return NULL;
    }
    CK_C_GetFunctionList gfl;
    void *sym = dlsym(h, "C_GetFunctionList");
    memcpy(&gfl, &sym, sizeof gfl);
    if (!gfl) {
        fail_msg("dlsym C_GetFunctionList");
        dlclose(h);
        return NULL;
    }
    CK_RV rv = gfl(fl);
    if (rv != CKR_OK || !*fl) {
        fail("C_GetFunctionList", rv, CKR_OK);
        dlclose(h);
        return NULL;
    }
    return h;
}

static void *sym_of(void *h, const char *name)
{
    return dlsym(h, name);
}

static void pad32(CK_UTF8CHAR out[32], const char *s)
{
    memset(out, ' ', 32);
    size_t n = strlen(s);
    memcpy(out, s, n > 32 ? 32 : n);
}

/* Finds the slot whose token carries LABEL; if there is none, initialises the empty slot with
 * that label (SO PIN 12345678) and sets the user PIN 1234. Returns 1 on success. */
static int ensure_token(CK_FUNCTION_LIST_PTR fl, const char *label, CK_SLOT_ID *slot_out)
{
    CK_UTF8CHAR want[32];
    pad32(want, label);
    CK_RV rv;
    for (int round = 0; round < 2; round++) {
        CK_ULONG n = 0;
        rv = fl->C_GetSlotList(CK_TRUE, NULL, &n);
        if (!quiet_rv(rv, CKR_OK, "C_GetSlotList (count)"))
            return 0;
        CK_SLOT_ID *slots = calloc(n ? n : 1, sizeof *slots);
        rv = fl->C_GetSlotList(CK_TRUE, slots, &n);
        if (!quiet_rv(rv, CKR_OK, "C_GetSlotList")) {
            free(slots);
            return 0;
        }
        CK_SLOT_ID empty = (CK_SLOT_ID)-1;
        int have_empty = 0;
        for (CK_ULONG i = 0; i < n; i++) {
            CK_TOKEN_INFO ti;
            rv = fl->C_GetTokenInfo(slots[i], &ti);
            if (!quiet_rv(rv, CKR_OK, "C_GetTokenInfo")) {
                free(slots);
                return 0;
            }
            if (!(ti.flags & CKF_TOKEN_INITIALIZED)) {
                empty = slots[i];
                have_empty = 1;
            } else if (memcmp(ti.label, want, 32) == 0) {
                *slot_out = slots[i];
                free(slots);
                return 1;
            }
        }
        free(slots);
        if (round == 1)
            break;
        if (!have_empty) {
            fail_msg("no slot with an uninitialised token");
            return 0;
        }
        char what[200];
        snprintf(what, sizeof what, "C_InitToken slot %lu label \"%s\"", (unsigned long)empty, label);
        if (!expect_rv(fl->C_InitToken(empty, (CK_UTF8CHAR_PTR)SO_PIN, strlen(SO_PIN), want), CKR_OK, what))
            return 0;
        CK_SLOT_ID slot = (CK_SLOT_ID)-1;
        /* Look the new token up again by label (its slot ID should be the former empty slot's). */
        {
            CK_ULONG m = 0;
            if (!quiet_rv(fl->C_GetSlotList(CK_TRUE, NULL, &m), CKR_OK, "C_GetSlotList (count)"))
                return 0;
            CK_SLOT_ID *s2 = calloc(m ? m : 1, sizeof *s2);
            if (!quiet_rv(fl->C_GetSlotList(CK_TRUE, s2, &m), CKR_OK, "C_GetSlotList")) {
                free(s2);
                return 0;
            }
            for (CK_ULONG i = 0; i < m; i++) {
                CK_TOKEN_INFO ti;
                if (fl->C_GetTokenInfo(s2[i], &ti) == CKR_OK && (ti.flags & CKF_TOKEN_INITIALIZED) &&
                    memcmp(ti.label, want, 32) == 0)
                    slot = s2[i];
            }
            free(s2);
        }
        if (slot == (CK_SLOT_ID)-1) {
            fail_msg("the initialised token is not listed by its label");
            return 0;
        }
        snprintf(what, sizeof what, "new token keeps the empty slot's ID (%lu -> %lu)",
                 (unsigned long)empty, (unsigned long)slot);
        check(slot == empty, what);
        CK_SESSION_HANDLE s;
        if (!expect_rv(fl->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s), CKR_OK,
                       "C_OpenSession RW"))
            return 0;
        int good = expect_rv(fl->C_Login(s, CKU_SO, (CK_UTF8CHAR_PTR)SO_PIN, strlen(SO_PIN)), CKR_OK,
                             "C_Login SO") &&
                   expect_rv(fl->C_InitPIN(s, (CK_UTF8CHAR_PTR)USER_PIN, strlen(USER_PIN)), CKR_OK,
                             "C_InitPIN") &&
                   expect_rv(fl->C_Logout(s), CKR_OK, "C_Logout");
        expect_rv(fl->C_CloseSession(s), CKR_OK, "C_CloseSession");
        if (!good)
            return 0;
    }
    fail_msg("token not found after C_InitToken");
    return 0;
}

/* ---- cycles --------------------------------------------------------------------------------- */

static int cmd_cycles(int iterations)
{
    double t0 = now_seconds();
    int done = 0, sessions_left = 0;
    CK_SESSION_HANDLE left_open = CK_INVALID_HANDLE;
    for (int i = 0; i < iterations; i++) {
        char what[120];
        CK_FUNCTION_LIST_PTR fl = NULL;
        void *h = load_module(&fl);
        if (!h)
            break;
        CK_ULONG n = 0;
        snprintf(what, sizeof what, "cycle %d: C_GetSlotList before C_Initialize", i);
        quiet_rv(fl->C_GetSlotList(CK_FALSE, NULL, &n), CKR_CRYPTOKI_NOT_INITIALIZED, what);
        snprintf(what, sizeof what, "cycle %d: C_Initialize", i);
        CK_RV rv = fl->C_Initialize(NULL);
        if (!quiet_rv(rv, CKR_OK, what)) {
            dlclose(h);
            break;
        }
        /* C_Finalize must have closed the session left open by the previous cycle. */
        if (i > 0 && left_open != CK_INVALID_HANDLE) {
            CK_SESSION_INFO si;
            snprintf(what, sizeof what, "cycle %d: session of the previous cycle is gone", i);
            quiet_rv(fl->C_GetSessionInfo(left_open, &si), CKR_SESSION_HANDLE_INVALID, what);
        }
        left_open = CK_INVALID_HANDLE;
        n = 0;
        snprintf(what, sizeof what, "cycle %d: C_GetSlotList (count)", i);
        quiet_rv(fl->C_GetSlotList(CK_FALSE, NULL, &n), CKR_OK, what);
        CK_SLOT_ID slots[64];
        CK_ULONG cap = 64;
        snprintf(what, sizeof what, "cycle %d: C_GetSlotList", i);
        quiet_rv(fl->C_GetSlotList(CK_FALSE, slots, &cap), CKR_OK, what);
        snprintf(what, sizeof what, "cycle %d: at least one slot", i);
        if (n < 1)
            fail_msg(what);
        /* Leave a session open on an initialised token, if there is one. */
        for (CK_ULONG k = 0; k < cap && k < 64; k++) {
            CK_TOKEN_INFO ti;
            if (fl->C_GetTokenInfo(slots[k], &ti) == CKR_OK && (ti.flags & CKF_TOKEN_INITIALIZED)) {
                snprintf(what, sizeof what, "cycle %d: C_OpenSession", i);
                quiet_rv(fl->C_OpenSession(slots[k], CKF_SERIAL_SESSION, NULL, NULL, &left_open), CKR_OK, what);
                sessions_left++;
                break;
            }
        }
        snprintf(what, sizeof what, "cycle %d: C_Finalize", i);
        quiet_rv(fl->C_Finalize(NULL), CKR_OK, what);
        snprintf(what, sizeof what, "cycle %d: dlclose", i);
        if (dlclose(h) != 0)
            fail_msg(what);
        if (failures)
            break;
        done++;
    }
    double dt = now_seconds() - t0;
    char what[200];
    snprintf(what, sizeof what, "%d/%d load/initialise/finalise/unload cycles, all calls CKR_OK", done, iterations);
    check(done == iterations && failures == 0, what);
    if (sessions_left)
        printf("info: %d cycles left a session open for C_Finalize to close\n", sessions_left);
    printf("cycles: %d cycles in %.3f s (%.2f ms per cycle)\n", done, dt, done ? dt * 1000.0 / done : 0.0);
    return failures ? 1 : 0;
}

/* ---- fork ----------------------------------------------------------------------------------- */

static CK_FUNCTION_LIST_PTR g_fl;
static CK_SLOT_ID g_slot;
static volatile sig_atomic_t g_stop;
static volatile sig_atomic_t g_started;
static long g_thread_iterations;
static int g_thread_failures;
static const char *g_thread_fail_what;
static CK_RV g_thread_fail_rv;

/* The busy thread records its first failure; the main thread reports it after pthread_join. */
static void thread_fail(const char *what, CK_RV rv)
{
    if (g_thread_failures++ == 0) {
        g_thread_fail_what = what;
        g_thread_fail_rv = rv;
    }
}

/* The child's part: NOT_INITIALIZED first, then C_Initialize within 5 s, C_GetSlotList, C_Finalize. */
static void fork_child(void)
{
    int bad = 0;
    alarm(5);
    CK_ULONG n = 0;
    CK_RV rv = g_fl->C_GetSlotList(CK_FALSE, NULL, &n);
    if (rv != CKR_CRYPTOKI_NOT_INITIALIZED) {
        child_report("C_GetSlotList before C_Initialize (expected 0x190)", rv);
        bad = 1;
    }
    rv = g_fl->C_Initialize(NULL);
    if (rv != CKR_OK) {
        child_report("C_Initialize", rv);
        _exit(1);
    }
    n = 0;
    rv = g_fl->C_GetSlotList(CK_FALSE, NULL, &n);
    if (rv != CKR_OK || n < 1) {
        child_report("C_GetSlotList after C_Initialize", rv);
        bad = 1;
    }
    CK_SLOT_ID slots[64];
    CK_ULONG cap = 64;
    rv = g_fl->C_GetSlotList(CK_FALSE, slots, &cap);
    if (rv != CKR_OK) {
        child_report("C_GetSlotList (list) after C_Initialize", rv);
        bad = 1;
    }
    rv = g_fl->C_Finalize(NULL);
    if (rv != CKR_OK) {
        child_report("C_Finalize", rv);
        bad = 1;
    }
    _exit(bad);
}

static const char *describe_status(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exit %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d%s", WTERMSIG(status),
                 WTERMSIG(status) == SIGALRM ? " (SIGALRM: hung for 5 s)" : "");
    else
        snprintf(buf, len, "status 0x%x", status);
    return buf;
}

static void *busy_thread(void *arg)
{
    (void)arg;
    CK_SESSION_HANDLE s;
    CK_RV rv = g_fl->C_OpenSession(g_slot, CKF_SERIAL_SESSION, NULL, NULL, &s);
    if (rv != CKR_OK) {
        thread_fail("busy thread: C_OpenSession", rv);
        g_started = 1;
        return NULL;
    }
    double t0 = now_seconds();
    long it = 0;
    g_started = 1;
    while (!g_stop || now_seconds() - t0 < 1.0) {
        CK_TOKEN_INFO ti;
        CK_OBJECT_HANDLE objs[16];
        CK_ULONG n = 0;
        rv = g_fl->C_GetTokenInfo(g_slot, &ti);
        if (rv != CKR_OK) {
            thread_fail("busy thread: C_GetTokenInfo", rv);
            break;
        }
        rv = g_fl->C_FindObjectsInit(s, NULL, 0);
        if (rv != CKR_OK) {
            thread_fail("busy thread: C_FindObjectsInit", rv);
            break;
        }
        rv = g_fl->C_FindObjects(s, objs, 16, &n);
        if (rv != CKR_OK) {
            thread_fail("busy thread: C_FindObjects", rv);
            break;
        }
        rv = g_fl->C_FindObjectsFinal(s);
        if (rv != CKR_OK) {
            thread_fail("busy thread: C_FindObjectsFinal", rv);
            break;
        }
        it++;
        if (now_seconds() - t0 > 30.0)
            break;
    }
    g_thread_iterations = it;
    rv = g_fl->C_CloseSession(s);
    if (rv != CKR_OK) {
        thread_fail("busy thread: C_CloseSession", rv);
    }
    return NULL;
}

static int cmd_fork(void)
{
    CK_FUNCTION_LIST_PTR fl = NULL;
    void *h = load_module(&fl);
    if (!h)
        return 1;
    g_fl = fl;
    if (!expect_rv(fl->C_Initialize(NULL), CKR_OK, "C_Initialize"))
        return 1;
    if (!ensure_token(fl, "c-host fork", &g_slot))
        return 1;
    CK_SESSION_HANDLE s;
    if (!expect_rv(fl->C_OpenSession(g_slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s), CKR_OK,
                   "parent: C_OpenSession RW"))
        return 1;
    expect_rv(fl->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)USER_PIN, strlen(USER_PIN)), CKR_OK,
              "parent: C_Login user");

    /* (a) a plain fork with an open, logged-in session. */
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        fail_msg("fork");
        return 1;
    }
    if (pid == 0)
        fork_child();
    int status = 0;
    waitpid(pid, &status, 0);
    {
        char what[200], st[100];
        snprintf(what, sizeof what,
                 "(a) child: C_GetSlotList -> NOT_INITIALIZED, C_Initialize/C_GetSlotList/C_Finalize OK (%s)",
                 describe_status(status, st, sizeof st));
        check(WIFEXITED(status) && WEXITSTATUS(status) == 0, what);
    }
    CK_SESSION_INFO si;
    if (expect_rv(fl->C_GetSessionInfo(s, &si), CKR_OK, "(a) parent: C_GetSessionInfo after the child exited"))
        check(si.slotID == g_slot && si.state == CKS_RW_USER_FUNCTIONS,
              "(a) parent: session still on its slot, state CKS_RW_USER_FUNCTIONS");
    {
        CK_ULONG n = 0;
        expect_rv(fl->C_GetSlotList(CK_FALSE, NULL, &n), CKR_OK, "(a) parent: C_GetSlotList after the child exited");
    }

    /* (b) fork 40 times while another thread is inside the module. */
    enum { CHILDREN = 40 };
    pthread_t th;
    g_stop = 0;
    g_started = 0;
    if (pthread_create(&th, NULL, busy_thread, NULL) != 0) {
        fail_msg("pthread_create");
        return 1;
    }
    while (!g_started)
        sleep_ms(1);
    pid_t pids[CHILDREN];
    int forked = 0;
    fflush(stdout);
    for (int i = 0; i < CHILDREN; i++) {
        pid_t p = fork();
        if (p < 0) {
            fail_msg("fork (b)");
            break;
        }
        if (p == 0)
            fork_child();
        pids[forked++] = p;
        sleep_ms(20);
    }
    g_stop = 1;
    int good_children = 0;
    for (int i = 0; i < forked; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            good_children++;
        } else {
            char what[200], d[100];
            snprintf(what, sizeof what, "(b) child %d (pid %d): %s", i, (int)pids[i], describe_status(st, d, sizeof d));
            fail_msg(what);
        }
    }
    pthread_join(th, NULL);
    if (g_thread_failures)
        fail(g_thread_fail_what, g_thread_fail_rv, CKR_OK);
    {
        char what[250];
        snprintf(what, sizeof what,
                 "(b) %d/%d children forked while a thread was inside the module initialised within 5 s and exited 0",
                 good_children, CHILDREN);
        check(good_children == CHILDREN, what);
        snprintf(what, sizeof what, "(b) busy thread: %ld iterations of C_GetTokenInfo + C_FindObjects*, all OK",
                 g_thread_iterations);
        check(g_thread_failures == 0 && g_thread_iterations > 0, what);
    }
    expect_rv(fl->C_GetSessionInfo(s, &si), CKR_OK, "(b) parent: C_GetSessionInfo after the children");
    expect_rv(fl->C_Logout(s), CKR_OK, "parent: C_Logout");
    expect_rv(fl->C_CloseSession(s), CKR_OK, "parent: C_CloseSession");
    expect_rv(fl->C_Finalize(NULL), CKR_OK, "parent: C_Finalize");
    dlclose(h);
    return failures ? 1 : 0;
}

/* ---- interfaces ----------------------------------------------------------------------------- */

static int all_non_null(const void *list, size_t first_offset, size_t n, size_t *first_null)
{
    const unsigned char *p = (const unsigned char *)list + first_offset;
    for (size_t i = 0; i < n; i++) {
        void *fp;
        memcpy(&fp, p + i * sizeof(void *), sizeof fp);
        if (!fp) {
            *first_null = i;
            return 0;
        }
    }
    return 1;
}

static int no_nul(const CK_UTF8CHAR *s, size_t n)
{
    return memchr(s, 0, n) == NULL;
}

static int cmd_interfaces(void)
{
    CK_FUNCTION_LIST_PTR fl = NULL;
    void *h = load_module(&fl);
    if (!h)
        return 1;
    CK_C_GetInterfaceList gil;
    CK_C_GetInterface gi;
    void *a = sym_of(h, "C_GetInterfaceList");
    void *b = sym_of(h, "C_GetInterface");
    memcpy(&gil, &a, sizeof gil);
    memcpy(&gi, &b, sizeof gi);
    check(gil != NULL, "dlsym C_GetInterfaceList");
    check(gi != NULL, "dlsym C_GetInterface");
    if (!gil || !gi)
        return 1;

    CK_ULONG n = 0;
    expect_rv(gil(NULL, &n), CKR_OK, "C_GetInterfaceList(NULL, &n)");
    {
        char what[100];
        snprintf(what, sizeof what, "interface count == 3 (got %lu)", (unsigned long)n);
        check(n == 3, what);
    }
    {
        CK_INTERFACE one[1];
        CK_ULONG small = 1;
        expect_rv(gil(one, &small), CKR_BUFFER_TOO_SMALL, "C_GetInterfaceList with room for 1");
        check(small == 3, "C_GetInterfaceList with room for 1 reports 3 needed");
    }
    expect_rv(gil(NULL, NULL), CKR_ARGUMENTS_BAD, "C_GetInterfaceList(NULL, NULL)");
    CK_INTERFACE ifs[4];
    memset(ifs, 0, sizeof ifs);
    n = 4;
    if (!expect_rv(gil(ifs, &n), CKR_OK, "C_GetInterfaceList(list, &n)") || n != 3)
        return 1;
    void *list30 = NULL, *list32 = NULL, *list240 = NULL;
    for (CK_ULONG i = 0; i < n; i++) {
        char what[200];
        const char *name = ifs[i].pInterfaceName ? (const char *)ifs[i].pInterfaceName : "(null)";
        snprintf(what, sizeof what, "interface %lu named \"PKCS 11\" (got \"%s\")", (unsigned long)i, name);
        check(ifs[i].pInterfaceName && strcmp(name, "PKCS 11") == 0, what);
        if (!ifs[i].pFunctionList) {
            fail_msg("interface with a NULL function list");
            continue;
        }
        CK_VERSION v = *(CK_VERSION *)ifs[i].pFunctionList;
        printf("info: interface %lu: \"%s\" version %u.%u flags 0x%lx\n", (unsigned long)i, name, v.major, v.minor,
               (unsigned long)ifs[i].flags);
        if (v.major == 3 && v.minor == 0)
            list30 = ifs[i].pFunctionList;
        else if (v.major == 3 && v.minor == 2)
            list32 = ifs[i].pFunctionList;
        else if (v.major == 2 && v.minor == 40)
            list240 = ifs[i].pFunctionList;
    }
    check(list30 != NULL, "one interface's function list reports version 3.0");
    check(list32 != NULL, "one interface's function list reports version 3.2");
    check(ifs[0].pFunctionList == list30, "the 3.0 interface is listed first");
    check(list240 != NULL, "one interface's function list reports version 2.40");

    CK_INTERFACE_PTR ip = NULL;
    if (expect_rv(gi(NULL, NULL, &ip, 0), CKR_OK, "C_GetInterface(NULL, NULL)") && ip) {
        CK_VERSION v = *(CK_VERSION *)ip->pFunctionList;
        check(v.major == 3 && v.minor == 0 && ip->pFunctionList == list30,
              "C_GetInterface(NULL, NULL) returns the 3.0 list");
    }
    CK_VERSION want240 = {2, 40};
    ip = NULL;
    if (expect_rv(gi((CK_UTF8CHAR_PTR) "PKCS 11", &want240, &ip, 0), CKR_OK, "C_GetInterface(\"PKCS 11\", 2.40)") &&
        ip) {
        CK_VERSION v = *(CK_VERSION *)ip->pFunctionList;
        check(v.major == 2 && v.minor == 40 && ip->pFunctionList == list240,
              "C_GetInterface(\"PKCS 11\", 2.40) returns the 2.40 list");
    }
    CK_VERSION want30 = {3, 0};
    ip = NULL;
    if (expect_rv(gi((CK_UTF8CHAR_PTR) "PKCS 11", &want30, &ip, 0), CKR_OK, "C_GetInterface(\"PKCS 11\", 3.0)") && ip)
        check(ip->pFunctionList == list30, "C_GetInterface(\"PKCS 11\", 3.0) returns the 3.0 list");
    CK_VERSION want32 = {3, 2};
    ip = NULL;
    if (expect_rv(gi((CK_UTF8CHAR_PTR) "PKCS 11", &want32, &ip, 0), CKR_OK, "C_GetInterface(\"PKCS 11\", 3.2)") && ip) {
        CK_VERSION v = *(CK_VERSION *)ip->pFunctionList;
        check(v.major == 3 && v.minor == 2 && ip->pFunctionList == list32,
              "C_GetInterface(\"PKCS 11\", 3.2) returns the 3.2 list");
    }
    CK_VERSION want31 = {3, 1};
    ip = NULL;
    expect_rv(gi((CK_UTF8CHAR_PTR) "PKCS 11", &want31, &ip, 0), CKR_ARGUMENTS_BAD, "C_GetInterface(\"PKCS 11\", 3.1)");
    ip = NULL;
    expect_rv(gi((CK_UTF8CHAR_PTR) "Bogus 11", NULL, &ip, 0), CKR_ARGUMENTS_BAD, "C_GetInterface(\"Bogus 11\")");
    expect_rv(gi(NULL, NULL, NULL, 0), CKR_ARGUMENTS_BAD, "C_GetInterface(NULL, NULL, NULL)");

    /* C_GetFunctionList: 2.40, 68 non-NULL entries. */
    {
        size_t first = offsetof(CK_FUNCTION_LIST, C_Initialize);
        size_t entries = (sizeof(CK_FUNCTION_LIST) - first) / sizeof(void *);
        char what[200];
        snprintf(what, sizeof what, "CK_FUNCTION_LIST has 68 entries (header: %zu)", entries);
        check(entries == 68, what);
        snprintf(what, sizeof what, "C_GetFunctionList's list reports 2.40 (got %u.%u)", fl->version.major,
                 fl->version.minor);
        check(fl->version.major == 2 && fl->version.minor == 40, what);
        size_t null_at = 0;
        int full = all_non_null(fl, first, entries, &null_at);
        snprintf(what, sizeof what, "all 68 function pointers of C_GetFunctionList's list are non-NULL%s",
                 full ? "" : " (a NULL entry found)");
        check(full, what);
        if (!full)
            printf("info: first NULL entry at index %zu\n", null_at);
        check((void *)fl == list240, "C_GetFunctionList returns the same list as the 2.40 interface");
    }
    /* The 3.0 list: 68 + 4 + 20 entries, all non-NULL. */
    if (list30) {
        size_t first = offsetof(CK_FUNCTION_LIST_3_0, C_Initialize);
        size_t entries = (sizeof(CK_FUNCTION_LIST_3_0) - first) / sizeof(void *);
        size_t null_at = 0;
        char what[200];
        int full = all_non_null(list30, first, entries, &null_at);
        snprintf(what, sizeof what, "all %zu function pointers of the 3.0 list are non-NULL", entries);
        check(full, what);
        if (!full)
            printf("info: first NULL entry of the 3.0 list at index %zu\n", null_at);
    }
    /* The 3.2 list: the 92 of 3.0 + 12, all non-NULL; the 3.2 functions are also exported by name
     * (the asynchronous and authenticated-wrap ones, not offered, are not). */
    if (list32) {
        size_t first = offsetof(CK_FUNCTION_LIST_3_2, C_Initialize);
        size_t entries = (sizeof(CK_FUNCTION_LIST_3_2) - first) / sizeof(void *);
        size_t null_at = 0;
        char what[200];
        snprintf(what, sizeof what, "CK_FUNCTION_LIST_3_2 has 104 entries (header: %zu)", entries);
        check(entries == 104, what);
        int full = all_non_null(list32, first, entries, &null_at);
        snprintf(what, sizeof what, "all %zu function pointers of the 3.2 list are non-NULL", entries);
        check(full, what);
        if (!full)
            printf("info: first NULL entry of the 3.2 list at index %zu\n", null_at);
        CK_FUNCTION_LIST_3_2_PTR f32 = (CK_FUNCTION_LIST_3_2_PTR)list32;
        check(sym_of(h, "C_VerifySignatureInit") != NULL && sym_of(h, "C_EncapsulateKey") != NULL &&
                  sym_of(h, "C_GetSessionValidationFlags") != NULL,
              "the 3.2 functions are exported by name");
        check(sym_of(h, "C_AsyncComplete") == NULL, "C_AsyncComplete (not offered) is not exported");
        CK_FLAGS vflags = 0;
        expect_rv(f32->C_GetSessionValidationFlags(1, CKS_LAST_VALIDATION_OK, &vflags), CKR_CRYPTOKI_NOT_INITIALIZED,
                  "3.2 list: C_GetSessionValidationFlags before C_Initialize");
        expect_rv(f32->C_AsyncGetID(1, (CK_UTF8CHAR_PTR) "C_Sign", &vflags), CKR_CRYPTOKI_NOT_INITIALIZED,
                  "3.2 list: C_AsyncGetID before C_Initialize");
    }

    /* C_GetInfo through each list. */
    if (list30 && list32 && list240) {
        CK_FUNCTION_LIST_3_0_PTR f30 = (CK_FUNCTION_LIST_3_0_PTR)list30;
        CK_FUNCTION_LIST_3_2_PTR f32 = (CK_FUNCTION_LIST_3_2_PTR)list32;
        CK_FUNCTION_LIST_PTR f240 = (CK_FUNCTION_LIST_PTR)list240;
        CK_INFO info;
        expect_rv(f30->C_GetInfo(&info), CKR_CRYPTOKI_NOT_INITIALIZED, "C_GetInfo before C_Initialize");
        if (expect_rv(f30->C_Initialize(NULL), CKR_OK, "3.0 list: C_Initialize")) {
            char what[200];
            memset(&info, 0, sizeof info);
            if (expect_rv(f30->C_GetInfo(&info), CKR_OK, "3.0 list: C_GetInfo")) {
                snprintf(what, sizeof what, "3.0 list: C_GetInfo cryptokiVersion 3.0 (got %u.%u)",
                         info.cryptokiVersion.major, info.cryptokiVersion.minor);
                check(info.cryptokiVersion.major == 3 && info.cryptokiVersion.minor == 0, what);
                check(no_nul(info.manufacturerID, 32), "3.0 list: CK_INFO.manufacturerID has no NUL bytes");
            }
            memset(&info, 0, sizeof info);
            if (expect_rv(f32->C_GetInfo(&info), CKR_OK, "3.2 list: C_GetInfo")) {
                snprintf(what, sizeof what, "3.2 list: C_GetInfo cryptokiVersion 3.2 (got %u.%u)",
                         info.cryptokiVersion.major, info.cryptokiVersion.minor);
                check(info.cryptokiVersion.major == 3 && info.cryptokiVersion.minor == 2, what);
            }
            CK_FLAGS vflags = 0xff;
            expect_rv(f32->C_GetSessionValidationFlags(0xbad, CKS_LAST_VALIDATION_OK, &vflags), CKR_SESSION_HANDLE_INVALID,
                      "3.2 list: C_GetSessionValidationFlags on no session");
            expect_rv(f32->C_WrapKeyAuthenticated(0xbad, NULL, 0, 0, NULL, 0, NULL, NULL), CKR_SESSION_HANDLE_INVALID,
                      "3.2 list: C_WrapKeyAuthenticated on no session");
            memset(&info, 0, sizeof info);
            if (expect_rv(f240->C_GetInfo(&info), CKR_OK, "2.40 list: C_GetInfo")) {
                snprintf(what, sizeof what, "2.40 list: C_GetInfo cryptokiVersion 2.40 (got %u.%u)",
                         info.cryptokiVersion.major, info.cryptokiVersion.minor);
                check(info.cryptokiVersion.major == 2 && info.cryptokiVersion.minor == 40, what);
                check(no_nul(info.manufacturerID, 32), "2.40 list: CK_INFO.manufacturerID has no NUL bytes");
                check(no_nul(info.libraryDescription, 32), "2.40 list: CK_INFO.libraryDescription has no NUL bytes");
                printf("info: manufacturerID \"%.32s\"\n", (const char *)info.manufacturerID);
                printf("info: libraryDescription \"%.32s\"\n", (const char *)info.libraryDescription);
            }
            expect_rv(f240->C_Finalize(NULL), CKR_OK, "2.40 list: C_Finalize");
        }
    }
    dlclose(h);
    return failures ? 1 : 0;
}

/* ---- initargs ------------------------------------------------------------------------------- */

static CK_RV mx_create(CK_VOID_PTR_PTR out)
{
    if (!out)
        return CKR_ARGUMENTS_BAD;
    pthread_mutex_t *m = malloc(sizeof *m);
    if (!m)
        return CKR_HOST_MEMORY;
    pthread_mutex_init(m, NULL);
    *out = m;
    return CKR_OK;
}

static CK_RV mx_destroy(CK_VOID_PTR m)
{
    if (!m)
        return CKR_MUTEX_BAD;
    pthread_mutex_destroy((pthread_mutex_t *)m);
    free(m);
    return CKR_OK;
}

static CK_RV mx_lock(CK_VOID_PTR m)
{
    if (!m)
        return CKR_MUTEX_BAD;
    pthread_mutex_lock((pthread_mutex_t *)m);
    return CKR_OK;
}

static CK_RV mx_unlock(CK_VOID_PTR m)
{
    if (!m)
        return CKR_MUTEX_BAD;
    pthread_mutex_unlock((pthread_mutex_t *)m);
    return CKR_OK;
}

static int cmd_initargs(void)
{
    CK_FUNCTION_LIST_PTR fl = NULL;
    void *h = load_module(&fl);
    if (!h)
        return 1;
    CK_C_INITIALIZE_ARGS args;

    memset(&args, 0, sizeof args);
    args.CreateMutex = mx_create;
    args.LockMutex = mx_lock;
    if (expect_rv(fl->C_Initialize(&args), CKR_ARGUMENTS_BAD, "C_Initialize with 2 of 4 mutex callbacks") == 0)
        fl->C_Finalize(NULL);
    args.flags = CKF_OS_LOCKING_OK;
    if (expect_rv(fl->C_Initialize(&args), CKR_ARGUMENTS_BAD,
                  "C_Initialize with 2 of 4 mutex callbacks and CKF_OS_LOCKING_OK") == 0)
        fl->C_Finalize(NULL);

    memset(&args, 0, sizeof args);
    args.CreateMutex = mx_create;
    args.DestroyMutex = mx_destroy;
    args.LockMutex = mx_lock;
    args.UnlockMutex = mx_unlock;
    if (expect_rv(fl->C_Initialize(&args), CKR_CANT_LOCK, "C_Initialize with 4 mutex callbacks, no CKF_OS_LOCKING_OK") ==
        0)
        fl->C_Finalize(NULL);

    args.flags = CKF_OS_LOCKING_OK;
    if (expect_rv(fl->C_Initialize(&args), CKR_OK, "C_Initialize with 4 mutex callbacks and CKF_OS_LOCKING_OK")) {
        CK_ULONG n = 0;
        expect_rv(fl->C_GetSlotList(CK_FALSE, NULL, &n), CKR_OK, "  C_GetSlotList");
        expect_rv(fl->C_Finalize(NULL), CKR_OK, "  C_Finalize");
    }

    memset(&args, 0, sizeof args);
    args.flags = CKF_LIBRARY_CANT_CREATE_OS_THREADS | CKF_OS_LOCKING_OK;
    if (expect_rv(fl->C_Initialize(&args), CKR_OK,
                  "C_Initialize with CKF_LIBRARY_CANT_CREATE_OS_THREADS|CKF_OS_LOCKING_OK, no callbacks")) {
        CK_ULONG n = 0;
        expect_rv(fl->C_GetSlotList(CK_FALSE, NULL, &n), CKR_OK, "  C_GetSlotList");
        expect_rv(fl->C_Initialize(NULL), CKR_CRYPTOKI_ALREADY_INITIALIZED, "second C_Initialize(NULL)");
        expect_rv(fl->C_Initialize(&args), CKR_CRYPTOKI_ALREADY_INITIALIZED, "second C_Initialize(args)");
        int dummy = 0;
        expect_rv(fl->C_Finalize(&dummy), CKR_ARGUMENTS_BAD, "C_Finalize(non-NULL)");
        expect_rv(fl->C_GetSlotList(CK_FALSE, NULL, &n), CKR_OK, "  still initialised after C_Finalize(non-NULL)");
        expect_rv(fl->C_Finalize(NULL), CKR_OK, "C_Finalize(NULL)");
        expect_rv(fl->C_Finalize(NULL), CKR_CRYPTOKI_NOT_INITIALIZED, "C_Finalize(NULL) again");
        expect_rv(fl->C_GetSlotList(CK_FALSE, NULL, &n), CKR_CRYPTOKI_NOT_INITIALIZED,
                  "C_GetSlotList after C_Finalize");
    }

    /* PKCS#11 §5.4: pReserved must be NULL; the module stays uninitialised. */
    memset(&args, 0, sizeof args);
    args.flags = CKF_OS_LOCKING_OK;
    args.pReserved = (CK_VOID_PTR) "configdir='sql:/nonexistent' certPrefix='' keyPrefix='' secmod=''";
    if (expect_rv(fl->C_Initialize(&args), CKR_ARGUMENTS_BAD, "C_Initialize with a non-NULL pReserved")) {
        CK_ULONG n = 0;
        expect_rv(fl->C_GetSlotList(CK_FALSE, NULL, &n), CKR_CRYPTOKI_NOT_INITIALIZED, "  not initialised after it");
    } else {
        fl->C_Finalize(NULL);
    }

    dlclose(h);
    return failures ? 1 : 0;
}

/* ---- threads -------------------------------------------------------------------------------- */

enum { THREADS = 8, ITERATIONS = 200 };

struct worker {
    int index;
    int failures;
    long done;
    pthread_t th;
};

static void worker_fail(struct worker *w, const char *what, int iteration, CK_RV rv)
{
    if (w->failures++ < 3) {
        printf("FAIL: thread %d iteration %d: %s: rv=0x%lx\n", w->index, iteration, what, (unsigned long)rv);
        fflush(stdout);
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    /* Even threads use read-only sessions (session objects are allowed there), odd ones R/W. */
    CK_FLAGS sflags = CKF_SERIAL_SESSION | ((w->index & 1) ? CKF_RW_SESSION : 0);
    for (int i = 0; i < ITERATIONS; i++) {
        CK_SESSION_HANDLE s;
        CK_RV rv = g_fl->C_OpenSession(g_slot, sflags, NULL, NULL, &s);
        if (rv != CKR_OK) {
            worker_fail(w, "C_OpenSession", i, rv);
            continue;
        }
        CK_OBJECT_CLASS cls = CKO_DATA;
        CK_BBOOL no = CK_FALSE;
        CK_BYTE val[16];
        char label[32];
        for (int k = 0; k < 16; k++)
            val[k] = (CK_BYTE)(w->index * 31 + i * 7 + k);
        int ll = snprintf(label, sizeof label, "t%d-%d", w->index, i);
        CK_ATTRIBUTE tmpl[] = {
            {CKA_CLASS, &cls, sizeof cls},
            {CKA_TOKEN, &no, sizeof no},
            {CKA_PRIVATE, &no, sizeof no},
            {CKA_LABEL, label, (CK_ULONG)ll},
            {CKA_VALUE, val, sizeof val},
        };
        CK_OBJECT_HANDLE obj = CK_INVALID_HANDLE;
        rv = g_fl->C_CreateObject(s, tmpl, sizeof tmpl / sizeof tmpl[0], &obj);
        if (rv != CKR_OK) {
            worker_fail(w, "C_CreateObject", i, rv);
        } else {
            CK_BYTE back[32];
            memset(back, 0, sizeof back);
            CK_ATTRIBUTE get = {CKA_VALUE, NULL, 0};
            rv = g_fl->C_GetAttributeValue(s, obj, &get, 1);
            if (rv != CKR_OK || get.ulValueLen != 16) {
                worker_fail(w, "C_GetAttributeValue(CKA_VALUE, NULL) length 16", i, rv);
            } else {
                get.pValue = back;
                get.ulValueLen = sizeof back;
                rv = g_fl->C_GetAttributeValue(s, obj, &get, 1);
                if (rv != CKR_OK || get.ulValueLen != 16 || memcmp(back, val, 16) != 0)
                    worker_fail(w, "C_GetAttributeValue(CKA_VALUE) returns the value written", i, rv);
            }
            rv = g_fl->C_DestroyObject(s, obj);
            if (rv != CKR_OK)
                worker_fail(w, "C_DestroyObject", i, rv);
        }
        rv = g_fl->C_CloseSession(s);
        if (rv != CKR_OK)
            worker_fail(w, "C_CloseSession", i, rv);
        else if (w->failures == 0)
            w->done++;
    }
    return NULL;
}

static int cmd_threads(void)
{
    CK_FUNCTION_LIST_PTR fl = NULL;
    void *h = load_module(&fl);
    if (!h)
        return 1;
    g_fl = fl;
    CK_C_INITIALIZE_ARGS args;
    memset(&args, 0, sizeof args);
    args.flags = CKF_OS_LOCKING_OK;
    if (!expect_rv(fl->C_Initialize(&args), CKR_OK, "C_Initialize (CKF_OS_LOCKING_OK)"))
        return 1;
    if (!ensure_token(fl, "c-host threads", &g_slot))
        return 1;
    struct worker w[THREADS];
    memset(w, 0, sizeof w);
    double t0 = now_seconds();
    for (int i = 0; i < THREADS; i++) {
        w[i].index = i;
        if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0) {
            fail_msg("pthread_create");
            return 1;
        }
    }
    long total = 0;
    int bad = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(w[i].th, NULL);
        total += w[i].done;
        bad += w[i].failures;
    }
    double dt = now_seconds() - t0;
    failures += bad;
    char what[200];
    snprintf(what, sizeof what,
             "%d threads x %d iterations (open, create session data object, read CKA_VALUE, destroy, close): "
             "%ld clean, %d failed calls",
             THREADS, ITERATIONS, total, bad);
    check(bad == 0 && total == (long)THREADS * ITERATIONS, what);
    printf("threads: %d x %d iterations in %.3f s (%.3f ms per iteration)\n", THREADS, ITERATIONS, dt,
           dt * 1000.0 / (THREADS * ITERATIONS));
    {
        CK_SESSION_INFO si;
        CK_SESSION_HANDLE s;
        if (expect_rv(fl->C_OpenSession(g_slot, CKF_SERIAL_SESSION, NULL, NULL, &s), CKR_OK, "C_OpenSession after")) {
            CK_OBJECT_CLASS cls = CKO_DATA;
            CK_ATTRIBUTE t = {CKA_CLASS, &cls, sizeof cls};
            CK_OBJECT_HANDLE objs[8];
            CK_ULONG n = 99;
            expect_rv(fl->C_FindObjectsInit(s, &t, 1), CKR_OK, "C_FindObjectsInit(CKO_DATA)");
            expect_rv(fl->C_FindObjects(s, objs, 8, &n), CKR_OK, "C_FindObjects");
            expect_rv(fl->C_FindObjectsFinal(s), CKR_OK, "C_FindObjectsFinal");
            snprintf(what, sizeof what, "no data objects left after the threads (found %lu)", (unsigned long)n);
            check(n == 0, what);
            (void)si;
            expect_rv(fl->C_CloseSession(s), CKR_OK, "C_CloseSession");
        }
    }
    expect_rv(fl->C_Finalize(NULL), CKR_OK, "C_Finalize");
    dlclose(h);
    return failures ? 1 : 0;
}

/* ---- OpenSSL's error queue ------------------------------------------------------------------ */

/* Runs the two failing calls; the queue must hold exactly `expected` afterwards (0: empty). */
static void failing_calls(CK_FUNCTION_LIST_PTR fl, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE aes, unsigned long expected,
                          const char *when)
{
    char what[200];
    CK_OBJECT_CLASS klass = CKO_PUBLIC_KEY;
    CK_KEY_TYPE type = CKK_EC;
    CK_BYTE p256[] = {0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07};
    CK_BYTE point[67] = {0x04, 65, 0x04};
    memset(point + 3, 0x01, 64); /* not on the curve: OpenSSL refuses it */
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &klass, sizeof klass}, {CKA_KEY_TYPE, &type, sizeof type},
                        {CKA_EC_PARAMS, p256, sizeof p256}, {CKA_EC_POINT, point, sizeof point}};
    CK_OBJECT_HANDLE object;
    CK_RV rv = fl->C_CreateObject(s, t, 4, &object);
    snprintf(what, sizeof what, "%s: C_CreateObject with an off-curve EC point is refused", when);
    check(rv != CKR_OK, what);
    snprintf(what, sizeof what, "%s: after it the host's error queue is as it was (0x%lx)", when, expected);
    check(ERR_peek_error() == expected && ERR_peek_last_error() == expected, what);

    CK_BYTE iv[12] = {0}, sealed[32] = {0}, out[64];
    CK_GCM_PARAMS gcm = {iv, sizeof iv, 96, NULL, 0, 128};
    CK_MECHANISM m = {CKM_AES_GCM, &gcm, sizeof gcm};
    CK_ULONG out_len = sizeof out;
    expect_rv(fl->C_DecryptInit(s, &m, aes), CKR_OK, "C_DecryptInit (AES-GCM)");
    snprintf(what, sizeof what, "%s: C_Decrypt with a wrong tag", when);
    expect_rv(fl->C_Decrypt(s, sealed, sizeof sealed, out, &out_len), CKR_ENCRYPTED_DATA_INVALID, what);
    snprintf(what, sizeof what, "%s: after it the host's error queue is as it was (0x%lx)", when, expected);
    check(ERR_peek_error() == expected && ERR_peek_last_error() == expected, what);
}

static int cmd_errqueue(void)
{
    CK_FUNCTION_LIST_PTR fl;
    void *h = load_module(&fl);
    if (!h) return 1;
    if (!expect_rv(fl->C_Initialize(NULL), CKR_OK, "C_Initialize")) return 1;
    CK_SLOT_ID slot;
    if (!ensure_token(fl, "errqueue", &slot)) return 1;
    CK_SESSION_HANDLE s;
    expect_rv(fl->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s), CKR_OK, "C_OpenSession");
    expect_rv(fl->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)USER_PIN, 4), CKR_OK, "C_Login");
    CK_MECHANISM gen = {CKM_AES_KEY_GEN, NULL, 0};
    CK_ULONG len = 32;
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE kt[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_DECRYPT, &yes, 1}};
    CK_OBJECT_HANDLE aes;
    expect_rv(fl->C_GenerateKey(s, &gen, kt, 2, &aes), CKR_OK, "C_GenerateKey (AES-256)");

    ERR_clear_error();
    failing_calls(fl, s, aes, 0, "empty queue");
    /* The host's own pending error must survive the module's calls, including those where the
     * module drops the errors OpenSSL queued for it. */
    ERR_raise(ERR_LIB_USER, 42);
    unsigned long mine = ERR_peek_last_error();
    check(mine != 0, "the host queued an error of its own");
    failing_calls(fl, s, aes, mine, "host error pending");
    ERR_clear_error();
    expect_rv(fl->C_Finalize(NULL), CKR_OK, "C_Finalize");
    dlclose(h);
    return failures ? 1 : 0;
}

/* ---- main ----------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODULE cycles N | fork | interfaces | initargs | threads | errqueue\n", argv[0]);
        return 2;
    }
    module_path = argv[1];
    const char *cmd = argv[2];
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rc;
    if (strcmp(cmd, "cycles") == 0)
        rc = cmd_cycles(argc > 3 ? atoi(argv[3]) : 50);
    else if (strcmp(cmd, "fork") == 0)
        rc = cmd_fork();
    else if (strcmp(cmd, "interfaces") == 0)
        rc = cmd_interfaces();
    else if (strcmp(cmd, "initargs") == 0)
        rc = cmd_initargs();
    else if (strcmp(cmd, "threads") == 0)
        rc = cmd_threads();
    else if (strcmp(cmd, "errqueue") == 0)
        rc = cmd_errqueue();
    else {
        fprintf(stderr, "unknown subcommand %s\n", cmd);
        return 2;
    }
    printf("%s: %s\n", cmd, rc == 0 && failures == 0 ? "all checks passed" : "FAILED");
    return rc == 0 && failures == 0 ? 0 : 1;
}
