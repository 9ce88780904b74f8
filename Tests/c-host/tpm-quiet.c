/*
 * tpm-quiet.c — a C host that uses keys in the TPM through the module and prints every CK_RV on
 * standard output, so that a test can require the module to leave standard error untouched
 * whatever the TPM does (absent, unreachable, answering errors).
 *
 * Usage: tpm-quiet MODULE TOKEN PIN generate LABEL   C_GenerateKeyPair of an EC P-256 key with CKA_KC_TPM
 *        tpm-quiet MODULE TOKEN PIN sign LABEL       C_SignInit + C_Sign (CKM_ECDSA, 32 bytes) with that key
 * on the token labelled TOKEN. Prints "<what>: 0x<rv>"; exit 0 when the calls were made (a failure
 * before them, loading or opening the token, is said on stderr by labelled-token.h, exit 1).
 *
 * Build: gcc -Wall -Wextra -Werror -O1 -I Include tpm-quiet.c -o tpm-quiet -ldl
 */
#include "labelled-token.h"

static void report(const char *what, CK_RV rv)
{
    printf("%s: 0x%lx\n", what, (unsigned long)rv);
    fflush(stdout);
}

static void require(CK_RV rv, const char *what)
{
    if (rv != CKR_OK) {
        report(what, rv);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        printf("usage: tpm-quiet MODULE TOKEN PIN generate|sign LABEL\n");
        return 64;
    }
    const char *pin = argv[3], *command = argv[4], *label = argv[5];
    CK_SESSION_HANDLE session = open_labelled_session(argv[1], argv[2]);
    require(p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)), "C_Login");

    CK_BBOOL yes = CK_TRUE;
    if (strcmp(command, "generate") == 0) {
        static const CK_BYTE p256[] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
        CK_MECHANISM mechanism = { CKM_EC_KEY_PAIR_GEN, NULL, 0 };
        CK_ATTRIBUTE public_template[] = {
            { CKA_EC_PARAMS, (void *)p256, sizeof(p256) },
            { CKA_TOKEN, &yes, sizeof(yes) },
            { CKA_VERIFY, &yes, sizeof(yes) },
            { CKA_LABEL, (void *)label, strlen(label) },
        };
        CK_ATTRIBUTE private_template[] = {
            { CKA_TOKEN, &yes, sizeof(yes) },
            { CKA_SIGN, &yes, sizeof(yes) },
            { CKA_KC_TPM, &yes, sizeof(yes) },
            { CKA_LABEL, (void *)label, strlen(label) },
        };
        CK_OBJECT_HANDLE public_key, private_key;
        report("C_GenerateKeyPair", p11->C_GenerateKeyPair(session, &mechanism, public_template, 4, private_template, 4,
                                                           &public_key, &private_key));
    } else if (strcmp(command, "sign") == 0) {
        CK_OBJECT_CLASS class = CKO_PRIVATE_KEY;
        CK_ATTRIBUTE search[] = { { CKA_CLASS, &class, sizeof(class) }, { CKA_LABEL, (void *)label, strlen(label) } };
        CK_OBJECT_HANDLE key;
        CK_ULONG found = 0;
        require(p11->C_FindObjectsInit(session, search, 2), "C_FindObjectsInit");
        require(p11->C_FindObjects(session, &key, 1, &found), "C_FindObjects");
        require(p11->C_FindObjectsFinal(session), "C_FindObjectsFinal");
        if (found != 1) {
            printf("no key %s\n", label);
            return 1;
        }
        CK_MECHANISM mechanism = { CKM_ECDSA, NULL, 0 };
        CK_BYTE digest[32], signature[128];
        CK_ULONG length = sizeof(signature);
        memset(digest, 0x42, sizeof(digest));
        CK_RV rv = p11->C_SignInit(session, &mechanism, key);
        if (rv == CKR_OK)
            rv = p11->C_Sign(session, digest, sizeof(digest), signature, &length);
        report("C_Sign", rv);
    } else {
        printf("unknown command %s\n", command);
        return 64;
    }
    p11->C_Logout(session);
    p11->C_CloseSession(session);
    require(p11->C_Finalize(NULL), "C_Finalize");
    return 0;
}
