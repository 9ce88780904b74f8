/*
 * measure.c — the foundation's figures, through the C API as a host calls it:
 *   load N      median time of dlopen + C_GetFunctionList + C_Initialize in N fresh processes
 *   find N      creates N token data objects (half private), then the median time of
 *               C_FindObjectsInit(CKA_LABEL) + C_FindObjects + C_FindObjectsFinal, and of the
 *               same by CKA_ID; also the durable creation rate.
 * Usage: measure MODULE load|find N   (KEYCHAIN_PKCS11_DIR chooses the keychain folder)
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

static int measure_load(const char *module, int runs) {
    double *times = calloc(runs, sizeof(double));
    for (int i = 0; i < runs; i++) {
        int pipefd[2];
        if (pipe(pipefd) != 0) return 1;
        pid_t child = fork();
        if (child == 0) {
            double start = now();
            void *handle;
            CK_FUNCTION_LIST_PTR p11 = load(module, &handle);
            CHECK(p11->C_Initialize(NULL));
            double elapsed = now() - start;
            if (write(pipefd[1], &elapsed, sizeof elapsed) != sizeof elapsed) _exit(1);
            p11->C_Finalize(NULL);
            _exit(0);
        }
        int status;
        if (read(pipefd[0], &times[i], sizeof(double)) != sizeof(double)) return 1;
        waitpid(child, &status, 0);
        close(pipefd[0]);
        close(pipefd[1]);
    }
    printf("dlopen+C_Initialize: median %.2f ms over %d fresh processes\n", median(times, runs) * 1e3, runs);
    return 0;
}

static int measure_find(const char *module, int objects) {
    void *handle;
    CK_FUNCTION_LIST_PTR p11 = load(module, &handle);
    CHECK(p11->C_Initialize(NULL));
    CK_SLOT_ID slots[64];
    CK_ULONG count = 64;
    CHECK(p11->C_GetSlotList(CK_FALSE, slots, &count));
    CK_SLOT_ID slot = slots[count - 1];  /* the empty slot: a new keychain for this run */
    CK_UTF8CHAR label[32];
    memset(label, ' ', sizeof label);
    memcpy(label, "measure", 7);
    CK_UTF8CHAR so[] = "12345678", pin[] = "1234";
    CHECK(p11->C_InitToken(slot, so, 8, label));
    CK_SESSION_HANDLE session;
    CHECK(p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &session));
    CHECK(p11->C_Login(session, CKU_SO, so, 8));
    CHECK(p11->C_InitPIN(session, pin, 4));
    CHECK(p11->C_Logout(session));
    CHECK(p11->C_Login(session, CKU_USER, pin, 4));

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

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODULE load|find N\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[3]);
    if (strcmp(argv[2], "load") == 0) return measure_load(argv[1], n);
    if (strcmp(argv[2], "find") == 0) return measure_find(argv[1], n);
    return 2;
}
