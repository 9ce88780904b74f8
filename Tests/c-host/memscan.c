/*
 * memscan.c — are secrets left in the process after C_Logout? (security issue, item 8)
 *   memscan MODULE LABEL PIN
 * Logs in to the token LABEL, stores a private data object with a random value, makes an
 * extractable RSA-2048 key pair and reads its first prime (to know it), signs with the key (so
 * the module caches it), reads the data object back; then scans this process's own writable
 * memory for both secrets, once while logged in and once after C_Logout, and prints
 *   canary value=N         (the value put back in clear on purpose: the scanner must find it)
 *   logged-in value=N prime=N
 *   logged-out value=N prime=N
 * This program never holds either secret in clear after use: it keeps them XOR-masked and wipes
 * every buffer that held them, so whatever the scan finds is the module's. It also prints
 *   secure-pages dontdump=KiB locked=KiB
 * the size of this process's mappings that the kernel leaves out of core dumps (VmFlags "dd")
 * and that are locked in RAM ("lo"), while logged in: the module's pages for keys and records.
 */
#include <unistd.h>
#include "labelled-token.h"

static void random_bytes(unsigned char *out, size_t n) {
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(out, 1, n, f) != n) { fprintf(stderr, "urandom\n"); exit(1); }
    fclose(f);
}

/* Occurrences of the secret (masked ^ mask, first `n` bytes) in this process's writable memory. */
static int scan(const unsigned char *masked, const unsigned char *mask, size_t n) {
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) exit(1);
    char line[512];
    int found = 0;
    unsigned char first = masked[0] ^ mask[0];
    while (fgets(line, sizeof line, maps)) {
        unsigned long start, end;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) != 3) continue;
        if (perms[0] != 'r' || perms[1] != 'w') continue;
        if (strstr(line, "[vvar]") || strstr(line, "[vsyscall]")) continue;
        const unsigned char *p = (const unsigned char *)start;
        for (unsigned long i = 0; i + n <= end - start; i++) {
            if (p[i] != first) continue;
            size_t k = 1;
            while (k < n && p[i + k] == (masked[k] ^ mask[k])) k++;
            if (k == n) found++;
        }
    }
    fclose(maps);
    return found;
}

/* KiB of mappings whose VmFlags in /proc/self/smaps contain `flag` ("dd", "lo"). */
static long flagged_kib(const char *flag) {
    FILE *smaps = fopen("/proc/self/smaps", "r");
    if (!smaps) exit(1);
    char line[512];
    long size = 0, total = 0;
    while (fgets(line, sizeof line, smaps)) {
        long kib;
        if (sscanf(line, "Size: %ld kB", &kib) == 1) size = kib;
        if (strncmp(line, "VmFlags:", 8) == 0) {
            char *p = line + 8, *token;
            while ((token = strtok(p, " \n")) != NULL) {
                p = NULL;
                if (strcmp(token, flag) == 0) { total += size; break; }
            }
        }
    }
    fclose(smaps);
    return total;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: memscan MODULE LABEL PIN\n"); return 64; }
    CK_SESSION_HANDLE session = open_labelled_session(argv[1], argv[2]);
    check(p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)argv[3], strlen(argv[3])), "C_Login");

    enum { VALUE = 48, PRIME = 32 };
    unsigned char value_mask[VALUE], value_masked[VALUE], prime_mask[PRIME], prime_masked[PRIME];
    random_bytes(value_mask, VALUE);
    random_bytes(value_masked, VALUE);
    random_bytes(prime_mask, PRIME);

    /* A private data object with the value (built in a buffer that is wiped at once). */
    unsigned char *value = malloc(VALUE);
    for (int i = 0; i < VALUE; i++) value[i] = value_masked[i] ^ value_mask[i];
    CK_OBJECT_CLASS data = CKO_DATA;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_ATTRIBUTE object[] = {{CKA_CLASS, &data, sizeof data}, {CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &yes, 1},
                             {CKA_LABEL, "scanned", 7}, {CKA_VALUE, value, VALUE}};
    CK_OBJECT_HANDLE stored;
    check(p11->C_CreateObject(session, object, 5, &stored), "C_CreateObject");
    explicit_bzero(value, VALUE);
    free(value);

    /* An extractable RSA key pair: read its first prime, keep it masked. */
    CK_MECHANISM keygen = {CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
    CK_ULONG bits = 2048;
    CK_ATTRIBUTE public_template[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_TOKEN, &yes, 1}, {CKA_VERIFY, &yes, 1}};
    CK_ATTRIBUTE private_template[] = {{CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &yes, 1}, {CKA_SIGN, &yes, 1},
                                       {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CK_OBJECT_HANDLE public_key, private_key;
    check(p11->C_GenerateKeyPair(session, &keygen, public_template, 3, private_template, 5, &public_key, &private_key), "C_GenerateKeyPair");
    unsigned char *prime = malloc(256);
    CK_ATTRIBUTE read_prime = {CKA_PRIME_1, prime, 256};
    check(p11->C_GetAttributeValue(session, private_key, &read_prime, 1), "C_GetAttributeValue(CKA_PRIME_1)");
    if (read_prime.ulValueLen < 64) { fprintf(stderr, "short prime\n"); return 1; }
    /* The middle of the prime: no leading-zero or DER-header ambiguity. */
    for (int i = 0; i < PRIME; i++) prime_masked[i] = prime[32 + i] ^ prime_mask[i];
    explicit_bzero(prime, 256);
    free(prime);

    /* Use both: a signature (the module keeps the key ready), a read of the value. */
    CK_MECHANISM sign = {CKM_SHA256_RSA_PKCS, NULL, 0};
    unsigned char message[32] = {1}, signature[256];
    CK_ULONG signature_length = sizeof signature;
    check(p11->C_SignInit(session, &sign, private_key), "C_SignInit");
    check(p11->C_Sign(session, message, sizeof message, signature, &signature_length), "C_Sign");
    unsigned char *back = malloc(VALUE);
    CK_ATTRIBUTE read_value = {CKA_VALUE, back, VALUE};
    check(p11->C_GetAttributeValue(session, stored, &read_value, 1), "C_GetAttributeValue(CKA_VALUE)");
    int same = read_value.ulValueLen == VALUE;
    for (int i = 0; same && i < VALUE; i++) same = back[i] == (value_masked[i] ^ value_mask[i]);
    explicit_bzero(back, VALUE);
    free(back);
    if (!same) { fprintf(stderr, "value read back differs\n"); return 1; }

    /* The scanner's own check: the value put back in clear into a heap buffer must be found. */
    unsigned char *canary = malloc(VALUE);
    for (int i = 0; i < VALUE; i++) canary[i] = value_masked[i] ^ value_mask[i];
    printf("canary value=%d\n", scan(value_masked, value_mask, VALUE));
    explicit_bzero(canary, VALUE);
    free(canary);
    printf("secure-pages dontdump=%ld locked=%ld\n", flagged_kib("dd"), flagged_kib("lo"));
    printf("logged-in value=%d prime=%d\n", scan(value_masked, value_mask, VALUE), scan(prime_masked, prime_mask, PRIME));
    check(p11->C_Logout(session), "C_Logout");
    printf("logged-out value=%d prime=%d\n", scan(value_masked, value_mask, VALUE), scan(prime_masked, prime_mask, PRIME));
    check(p11->C_Finalize(NULL), "C_Finalize");
    printf("finalized value=%d prime=%d\n", scan(value_masked, value_mask, VALUE), scan(prime_masked, prime_mask, PRIME));
    return 0;
}
