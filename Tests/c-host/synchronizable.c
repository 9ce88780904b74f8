/*
 * synchronizable.c — reads and sets CKA_KC_SYNCHRONIZABLE through the module, as a C client does
 * (pkcs11-tool has no way to name a vendor attribute):
 *   synchronizable MODULE PIN show LABEL       log in; print "CLASS yes|no" for each object labelled LABEL
 *                                              (else each whose CKA_APPLICATION, a password's service, is LABEL)
 *   synchronizable MODULE PIN set LABEL 1|0    log in; C_SetAttributeValue on the first such object
 *   synchronizable MODULE PIN session LABEL    log in; C_CreateObject of a synchronizable session data object
 * The first initialised token is used. `set` and `session` print the CK_RV in hex; the exit
 * status is 0 when it is CKR_OK, 1 otherwise (2: no object labelled LABEL).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "keychain-pkcs11.h"

static CK_FUNCTION_LIST_PTR p11;

static void check(CK_RV rv, const char *what) {
    if (rv != CKR_OK) { printf("%s: 0x%lx\n", what, rv); exit(1); }
}

static CK_SESSION_HANDLE logged_in(const char *module, const char *pin) {
    void *handle = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    if (!handle) { printf("dlopen: %s\n", dlerror()); exit(1); }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(handle, "C_GetFunctionList");
    if (!get) exit(1);
    check(get(&p11), "C_GetFunctionList");
    check(p11->C_Initialize(NULL), "C_Initialize");
    CK_SLOT_ID slots[16];
    CK_ULONG count = 16;
    check(p11->C_GetSlotList(CK_TRUE, slots, &count), "C_GetSlotList");
    for (CK_ULONG i = 0; i < count; i++) {
        CK_TOKEN_INFO info;
        if (p11->C_GetTokenInfo(slots[i], &info) != CKR_OK || !(info.flags & CKF_TOKEN_INITIALIZED)) continue;
        CK_SESSION_HANDLE session;
        check(p11->C_OpenSession(slots[i], CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &session), "C_OpenSession");
        check(p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)), "C_Login");
        return session;
    }
    printf("no token\n");
    exit(1);
}

static const char *class_name(CK_OBJECT_CLASS value) {
    switch (value) {
    case CKO_DATA: return "data";
    case CKO_CERTIFICATE: return "certificate";
    case CKO_PUBLIC_KEY: return "public-key";
    case CKO_PRIVATE_KEY: return "private-key";
    case CKO_SECRET_KEY: return "secret-key";
    default: return "other";
    }
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: synchronizable MODULE PIN show LABEL | set LABEL 1|0 | session LABEL\n"); return 64; }
    CK_SESSION_HANDLE session = logged_in(argv[1], argv[2]);
    const char *label = argv[4];
    CK_RV rv = CKR_OK;
    if (strcmp(argv[3], "session") == 0) {
        CK_OBJECT_CLASS data = CKO_DATA;
        CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &data, sizeof data}, {CKA_TOKEN, &no, 1}, {CKA_LABEL, (void *)label, strlen(label)},
                            {CKA_VALUE, "v", 1}, {CKA_KC_SYNCHRONIZABLE, &yes, 1}};
        CK_OBJECT_HANDLE object;
        rv = p11->C_CreateObject(session, t, 5, &object);
        printf("0x%lx\n", rv);
    } else {
        /* By label, else by CKA_APPLICATION (a password's service or server: SecItemAdd sets no label). */
        CK_OBJECT_HANDLE objects[16];
        CK_ULONG found = 0;
        CK_ATTRIBUTE_TYPE names[] = {CKA_LABEL, CKA_APPLICATION};
        for (int n = 0; n < 2 && found == 0; n++) {
            CK_ATTRIBUTE t[] = {{names[n], (void *)label, strlen(label)}};
            check(p11->C_FindObjectsInit(session, t, 1), "C_FindObjectsInit");
            check(p11->C_FindObjects(session, objects, 16, &found), "C_FindObjects");
            check(p11->C_FindObjectsFinal(session), "C_FindObjectsFinal");
        }
        if (found == 0) { printf("not found\n"); return 2; }
        if (strcmp(argv[3], "show") == 0) {
            for (CK_ULONG i = 0; i < found; i++) {
                CK_OBJECT_CLASS cls = 0;
                CK_BBOOL flag = CK_FALSE;
                CK_ATTRIBUTE v[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KC_SYNCHRONIZABLE, &flag, 1}};
                check(p11->C_GetAttributeValue(session, objects[i], v, 2), "C_GetAttributeValue");
                printf("%s %s\n", class_name(cls), flag ? "yes" : "no");
            }
        } else if (strcmp(argv[3], "set") == 0 && argc == 6) {
            CK_BBOOL flag = strcmp(argv[5], "1") == 0 ? CK_TRUE : CK_FALSE;
            CK_ATTRIBUTE v[] = {{CKA_KC_SYNCHRONIZABLE, &flag, 1}};
            rv = p11->C_SetAttributeValue(session, objects[0], v, 1);
            printf("0x%lx\n", rv);
        } else {
            return 64;
        }
    }
    p11->C_Logout(session);
    p11->C_CloseSession(session);
    p11->C_Finalize(NULL);
    return rv == CKR_OK ? 0 : 1;
}
