/*
 * labelled-token.h — shared by the attack test programs and tpm-quiet.c: load a module, initialise it and open a
 * read/write session on the token with a given label. Exits with status 1 on any failure.
 */
#ifndef LABELLED_TOKEN_H
#define LABELLED_TOKEN_H
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "keychain-pkcs11.h"

static CK_FUNCTION_LIST_PTR p11;

static void check(CK_RV rv, const char *what) {
    if (rv != CKR_OK) { fprintf(stderr, "%s: 0x%lx\n", what, rv); exit(1); }
}

static CK_SESSION_HANDLE open_labelled_session(const char *module, const char *label) {
    void *handle = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    if (!handle) { fprintf(stderr, "dlopen: %s\n", dlerror()); exit(1); }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(handle, "C_GetFunctionList");
    if (!get) exit(1);
    check(get(&p11), "C_GetFunctionList");
    check(p11->C_Initialize(NULL), "C_Initialize");
    CK_SLOT_ID slots[64];
    CK_ULONG count = 64;
    check(p11->C_GetSlotList(CK_TRUE, slots, &count), "C_GetSlotList");
    char padded[32];
    memset(padded, ' ', sizeof padded);
    memcpy(padded, label, strlen(label) < sizeof padded ? strlen(label) : sizeof padded);
    for (CK_ULONG i = 0; i < count; i++) {
        CK_TOKEN_INFO info;
        if (p11->C_GetTokenInfo(slots[i], &info) == CKR_OK && memcmp(info.label, padded, sizeof padded) == 0) {
            CK_SESSION_HANDLE session;
            check(p11->C_OpenSession(slots[i], CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &session), "C_OpenSession");
            return session;
        }
    }
    fprintf(stderr, "no token labelled %s\n", label);
    exit(1);
}
#endif
