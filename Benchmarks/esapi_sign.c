/*
 * esapi_sign.c — the limit row of the TPM benchmark: the same TPM, the same key and the same
 * kind of session as KeychainTPM, driven directly through tpm2-tss's ESAPI with nothing above it.
 *
 * Opens TCTI (tpm2-tss's TCTI loader: "swtpm:host=127.0.0.1,port=P", "device:/dev/tpmrm0", …),
 * makes the primary key from the TCG ECC P-256 storage-root template that
 * Sources/KeychainTPM/TPMTemplates.swift documents (owner hierarchy, fixedTPM | fixedParent |
 * sensitiveDataOrigin | userWithAuth | noDA | restricted | decrypt, AES-128-CFB, NIST P-256),
 * starts a salted HMAC session (salted to that primary, AES-128-CFB parameter encryption,
 * SHA-256), creates under it a P-256 child key with a random 32-byte authValue and the
 * attributes of TPMTemplates.key (fixedTPM | fixedParent | userWithAuth | noDA |
 * sensitiveDataOrigin | sign | decrypt, NULL scheme), loads it, checks one signature with
 * TPM2_VerifySignature, and then times COUNT TPM2_Sign calls (ECDSA, SHA-256, a 32-byte digest,
 * no ticket) for each MODE given:
 *
 *   aes        the session KeychainTPM uses for a signature: salted HMAC, the digest (the
 *              command's first parameter) encrypted with AES-128-CFB (TPMA_SESSION_DECRYPT)
 *   hmac       the same salted HMAC session without parameter encryption
 *   password   a password session (authValue sent in clear): no HMAC, no encryption; the
 *              cheapest way the TPM signs with this key
 *   roundtrip  TPM2_GetRandom of 32 bytes, no session: one command's cost through this TCTI and
 *              this TPM, with no cryptography to speak of
 *
 * Prints one line per mode, "<measure> <value> <unit>", as Benchmarks/bench.c does:
 *     sign.ecdsa.p256.aes 412.3 op/s
 * Exit status 0 only when every signature succeeded and the check passed.
 *
 * Usage: esapi_sign TCTI COUNT MODE...
 * Build: cc -O2 -o esapi_sign esapi_sign.c $(pkg-config --cflags --libs tss2-esys tss2-tctildr)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Prints a failed call and says so. */
static int ok(TSS2_RC rc, const char *what) {
    if (rc == TSS2_RC_SUCCESS) return 1;
    fprintf(stderr, "esapi_sign: %s: 0x%x\n", what, rc);
    return 0;
}

/* The TCG ECC P-256 storage root key template (TPMTemplates.primary()). */
static TPM2B_PUBLIC primary_template(void) {
    TPM2B_PUBLIC t;
    memset(&t, 0, sizeof t);
    t.publicArea.type = TPM2_ALG_ECC;
    t.publicArea.nameAlg = TPM2_ALG_SHA256;
    t.publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                                    TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    t.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    t.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128;
    t.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    t.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    t.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    t.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    return t;
}

/* A P-256 key for signing and ECDH, used with its authValue (TPMTemplates.key(.ecP256)). */
static TPM2B_PUBLIC key_template(void) {
    TPM2B_PUBLIC t;
    memset(&t, 0, sizeof t);
    t.publicArea.type = TPM2_ALG_ECC;
    t.publicArea.nameAlg = TPM2_ALG_SHA256;
    t.publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA |
                                    TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_DECRYPT;
    t.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    t.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    t.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    t.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    return t;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: esapi_sign TCTI COUNT aes|hmac|password|roundtrip...\n");
        return 2;
    }
    long count = strtol(argv[2], NULL, 10);
    if (count <= 0) { fprintf(stderr, "esapi_sign: COUNT must be positive\n"); return 2; }
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "aes") && strcmp(argv[i], "hmac") && strcmp(argv[i], "password") && strcmp(argv[i], "roundtrip")) {
            fprintf(stderr, "esapi_sign: unknown mode %s\n", argv[i]);
            return 2;
        }
    }

    TSS2_TCTI_CONTEXT *tcti = NULL;
    ESYS_CONTEXT *esys = NULL;
    if (!ok(Tss2_TctiLdr_Initialize(argv[1], &tcti), "Tss2_TctiLdr_Initialize")) return 1;
    if (!ok(Esys_Initialize(&esys, tcti, NULL), "Esys_Initialize")) { Tss2_TctiLdr_Finalize(&tcti); return 1; }

    int status = 1;
    ESYS_TR primary = ESYS_TR_NONE, session = ESYS_TR_NONE, key = ESYS_TR_NONE;
    TPM2B_PRIVATE *private_part = NULL;
    TPM2B_PUBLIC *public_part = NULL;

    /* The primary key, as TPMConnection.ready() makes it. */
    TPM2B_PUBLIC primary_public = primary_template();
    TPM2B_SENSITIVE_CREATE empty_sensitive;
    memset(&empty_sensitive, 0, sizeof empty_sensitive);
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION pcrs = {0};
    if (!ok(Esys_CreatePrimary(esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &empty_sensitive, &primary_public,
                               &outside, &pcrs, &primary, NULL, NULL, NULL, NULL), "Esys_CreatePrimary")) goto done;

    /* The salted HMAC session with AES-128-CFB parameter encryption, SHA-256. */
    TPMT_SYM_DEF cfb = {.algorithm = TPM2_ALG_AES, .keyBits = {.aes = 128}, .mode = {.aes = TPM2_ALG_CFB}};
    if (!ok(Esys_StartAuthSession(esys, primary, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL, TPM2_SE_HMAC, &cfb,
                                  TPM2_ALG_SHA256, &session), "Esys_StartAuthSession")) goto done;

    /* The child key with a random 32-byte authValue; Create's sensitive data goes encrypted. */
    TPM2B_SENSITIVE_CREATE sensitive;
    memset(&sensitive, 0, sizeof sensitive);
    sensitive.sensitive.userAuth.size = 32;
    if (getrandom(sensitive.sensitive.userAuth.buffer, 32, 0) != 32) { perror("getrandom"); goto done; }
    TPM2B_AUTH auth = sensitive.sensitive.userAuth;
    TPM2B_PUBLIC key_public = key_template();
    if (!ok(Esys_TRSess_SetAttributes(esys, session, TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT, 0xff),
            "Esys_TRSess_SetAttributes")) goto done;
    if (!ok(Esys_Create(esys, primary, session, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &key_public, &outside, &pcrs, &private_part,
                        &public_part, NULL, NULL, NULL), "Esys_Create")) goto done;
    if (!ok(Esys_TRSess_SetAttributes(esys, session, TPMA_SESSION_CONTINUESESSION, 0xff), "Esys_TRSess_SetAttributes")) goto done;
    if (!ok(Esys_Load(esys, primary, session, ESYS_TR_NONE, ESYS_TR_NONE, private_part, public_part, &key), "Esys_Load")) goto done;
    if (!ok(Esys_TR_SetAuth(esys, key, &auth), "Esys_TR_SetAuth")) goto done;

    TPM2B_DIGEST digest = {.size = 32};
    if (getrandom(digest.buffer, 32, 0) != 32) { perror("getrandom"); goto done; }
    TPMT_SIG_SCHEME scheme = {.scheme = TPM2_ALG_ECDSA, .details = {.ecdsa = {.hashAlg = TPM2_ALG_SHA256}}};
    TPMT_TK_HASHCHECK validation = {.tag = TPM2_ST_HASHCHECK, .hierarchy = TPM2_RH_NULL};

    /* One signature, checked by the TPM against the key's public part: the loop signs for real. */
    {
        TPMT_SIGNATURE *signature = NULL;
        TPMT_TK_VERIFIED *verified = NULL;
        if (!ok(Esys_TRSess_SetAttributes(esys, session, TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_DECRYPT, 0xff), "Esys_TRSess_SetAttributes") ||
            !ok(Esys_Sign(esys, key, session, ESYS_TR_NONE, ESYS_TR_NONE, &digest, &scheme, &validation, &signature), "Esys_Sign")) goto done;
        int checked = ok(Esys_VerifySignature(esys, key, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &digest, signature, &verified),
                         "Esys_VerifySignature");
        Esys_Free(signature);
        Esys_Free(verified);
        if (!checked) goto done;
    }

    for (int m = 3; m < argc; m++) {
        const char *mode = argv[m];
        ESYS_TR authorization = session;
        if (!strcmp(mode, "password")) {
            authorization = ESYS_TR_PASSWORD;
        } else if (!strcmp(mode, "aes")) {
            if (!ok(Esys_TRSess_SetAttributes(esys, session, TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_DECRYPT, 0xff), "Esys_TRSess_SetAttributes")) goto done;
        } else if (!strcmp(mode, "hmac")) {
            if (!ok(Esys_TRSess_SetAttributes(esys, session, TPMA_SESSION_CONTINUESESSION, 0xff), "Esys_TRSess_SetAttributes")) goto done;
        }
        double start = now();
        for (long i = 0; i < count; i++) {
            if (!strcmp(mode, "roundtrip")) {
                TPM2B_DIGEST *random = NULL;
                TSS2_RC rc = Esys_GetRandom(esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, 32, &random);
                Esys_Free(random);
                if (!ok(rc, "Esys_GetRandom")) goto done;
            } else {
                TPMT_SIGNATURE *signature = NULL;
                digest.buffer[i % 32] ^= (unsigned char)(i + 1); /* a different digest each time */
                TSS2_RC rc = Esys_Sign(esys, key, authorization, ESYS_TR_NONE, ESYS_TR_NONE, &digest, &scheme, &validation, &signature);
                int good = rc == TSS2_RC_SUCCESS && signature && signature->sigAlg == TPM2_ALG_ECDSA;
                Esys_Free(signature);
                if (!good) { ok(rc ? rc : 1, "Esys_Sign"); goto done; }
            }
        }
        double elapsed = now() - start;
        if (!strcmp(mode, "roundtrip")) printf("roundtrip.getrandom %.1f op/s\n", count / elapsed);
        else printf("sign.ecdsa.p256.%s %.1f op/s\n", mode, count / elapsed);
        fflush(stdout);
    }
    status = 0;

done:
    memset(&auth, 0, sizeof auth);
    memset(&sensitive, 0, sizeof sensitive);
    Esys_Free(private_part);
    Esys_Free(public_part);
    /* Transient objects and the session take TPM slots until flushed (swtpm has no resource manager). */
    if (key != ESYS_TR_NONE) Esys_FlushContext(esys, key);
    if (session != ESYS_TR_NONE) Esys_FlushContext(esys, session);
    if (primary != ESYS_TR_NONE) Esys_FlushContext(esys, primary);
    Esys_Finalize(&esys);
    Tss2_TctiLdr_Finalize(&tcti);
    return status;
}
