/*
 * items.c — a minimal PKCS#11 client for tests of protection classes across processes:
 *   items MODULE create LABEL CLASS PIN   log in, store a data object with CKA_KC_ACCESSIBLE = CLASS
 *   items MODULE login PIN                log in and out again (a first unlock, then nothing)
 *   items MODULE read LABEL               without logging in, print the object's CKA_VALUE
 *   items MODULE hold SECONDS             stay initialised (with an open session) for SECONDS
 *   items MODULE unlock-read LABEL PIN    log in and out, then read as `read` does, in one process
 * Exit status 0 on success, 1 on a PKCS#11 failure (the CK_RV is printed), 2 when not found.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "keychain-pkcs11.h"


static CK_FUNCTION_LIST_PTR p11;

static void check(CK_RV rv, const char *what) {
    if (rv != CKR_OK) { printf("%s: 0x%lx\n", what, rv); exit(1); }
}

static CK_SESSION_HANDLE open_session(const char *module) {
    void *handle = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    if (!handle) { printf("dlopen: %s\n", dlerror()); exit(1); }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(handle, "C_GetFunctionList");
    if (!get) exit(1);
    check(get(&p11), "C_GetFunctionList");
    check(p11->C_Initialize(NULL), "C_Initialize");
    CK_SLOT_ID slots[16];
    CK_ULONG count = 16;
    check(p11->C_GetSlotList(CK_TRUE, slots, &count), "C_GetSlotList");
    /* The first initialised token (the module also offers an empty slot for C_InitToken). */
    CK_SLOT_ID slot = 0;
    int chosen = 0;
    for (CK_ULONG i = 0; i < count && !chosen; i++) {
        CK_TOKEN_INFO info;
        if (p11->C_GetTokenInfo(slots[i], &info) == CKR_OK && (info.flags & CKF_TOKEN_INITIALIZED)) { slot = slots[i]; chosen = 1; }
    }
    if (!chosen) { printf("no token\n"); exit(1); }
    CK_SESSION_HANDLE session;
    check(p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &session), "C_OpenSession");
    return session;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: items MODULE create LABEL CLASS PIN | login PIN | read LABEL\n"); return 64; }
    CK_SESSION_HANDLE session = open_session(argv[1]);
    CK_OBJECT_CLASS data = CKO_DATA;
    CK_BBOOL yes = CK_TRUE;
    if (strcmp(argv[2], "create") == 0 && argc == 6) {
        check(p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)argv[5], strlen(argv[5])), "C_Login");
        CK_ULONG protection = strtoul(argv[4], NULL, 10);
        CK_BBOOL private_ = (protection == 1 || protection == 4 || protection == 5) ? CK_TRUE : CK_FALSE;
        char value[64];
        snprintf(value, sizeof value, "value of %s", argv[3]);
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &data, sizeof data}, {CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &private_, 1},
                            {CKA_LABEL, argv[3], strlen(argv[3])}, {CKA_VALUE, value, strlen(value)},
                            {CKA_KC_ACCESSIBLE, &protection, sizeof protection}};
        CK_OBJECT_HANDLE object;
        check(p11->C_CreateObject(session, t, 6, &object), "C_CreateObject");
    } else if (strcmp(argv[2], "login") == 0) {
        check(p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)argv[3], strlen(argv[3])), "C_Login");
        check(p11->C_Logout(session), "C_Logout");
    } else if (strcmp(argv[2], "hold") == 0) {
        sleep((unsigned)strtoul(argv[3], NULL, 10));
    } else if (strcmp(argv[2], "read") == 0 || (strcmp(argv[2], "unlock-read") == 0 && argc == 5)) {
        if (argc == 5) {
            check(p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)argv[4], strlen(argv[4])), "C_Login");
            check(p11->C_Logout(session), "C_Logout");
        }
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &data, sizeof data}, {CKA_LABEL, argv[3], strlen(argv[3])}};
        CK_OBJECT_HANDLE object;
        CK_ULONG found = 0;
        check(p11->C_FindObjectsInit(session, t, 2), "C_FindObjectsInit");
        check(p11->C_FindObjects(session, &object, 1, &found), "C_FindObjects");
        check(p11->C_FindObjectsFinal(session), "C_FindObjectsFinal");
        if (found == 0) { printf("not found\n"); return 2; }
        char value[256];
        CK_ATTRIBUTE v = {CKA_VALUE, value, sizeof value - 1};
        check(p11->C_GetAttributeValue(session, object, &v, 1), "C_GetAttributeValue");
        value[v.ulValueLen] = 0;
        printf("%s\n", value);
    } else {
        return 64;
    }
    p11->C_CloseSession(session);
    p11->C_Finalize(NULL);
    return 0;
}
