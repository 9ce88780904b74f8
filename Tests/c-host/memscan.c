/*
 * memscan.c — are secrets left in the process after C_Logout? (security issue, item 8)
 *   memscan MODULE LABEL PIN
 * Logs in to the token LABEL, stores a private data object with a random value, makes extractable
 * RSA-2048, P-256 and Ed25519 key pairs and reads their private parts (to know them), signs with
 * each key (so the module keeps it ready), reads the data object back; then scans this process's
 * own writable memory for the secrets in either byte order (OpenSSL's BIGNUMs hold numbers
 * least significant byte first), while logged in, after C_Logout and after C_Finalize, and prints
 *   canary value=N reversed=N   (copies put back on purpose among dumpable pages: each must be found)
 *   MOMENT value=N prime=N exponent=N ec=N ed25519=N            (anywhere writable)
 *   MOMENT-dumpable value=N prime=N exponent=N ec=N ed25519=N   (only what a core dump holds)
 * This program never holds a secret in clear after use: it keeps them XOR-masked and wipes every
 * buffer that held them, so whatever the scan finds is the module's. It also prints
 *   secure-pages dontdump=KiB locked=KiB
 * the size of this process's mappings that the kernel leaves out of core dumps (VmFlags "dd")
 * and that are locked in RAM ("lo"), while logged in: the module's pages for keys and records;
 *   decoder-copies value=N prime=N exponent=N ec=N ed25519=N
 * how many copies of each secret OpenSSL's decoders freed uncleared, which this host clears (see
 * free_clearing_decoder_copies) so that the counts above are the same in every run.
 */
#include <malloc.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include "labelled-token.h"

static void random_bytes(unsigned char *out, size_t n) {
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(out, 1, n, f) != n) { fprintf(stderr, "urandom\n"); exit(1); }
    fclose(f);
}

/* The writable mappings of this process, from /proc/self/smaps, each with whether the kernel
 * leaves it out of core dumps (VmFlags "dd"). */
struct mapping { unsigned long start, end; int dontdump; };
static int mappings(struct mapping *out, int capacity) {
    FILE *smaps = fopen("/proc/self/smaps", "r");
    if (!smaps) exit(1);
    char line[512];
    int count = 0, current = -1;
    while (fgets(line, sizeof line, smaps)) {
        unsigned long start, end;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3 && strchr(line, '-') < strchr(line, ' ')) {
            current = -1;
            if (perms[0] != 'r' || perms[1] != 'w') continue;
            if (strstr(line, "[vvar]") || strstr(line, "[vsyscall]")) continue;
            if (count == capacity) { fprintf(stderr, "too many mappings\n"); exit(1); }
            out[count] = (struct mapping){start, end, 0};
            current = count++;
        } else if (current >= 0 && strncmp(line, "VmFlags:", 8) == 0) {
            out[current].dontdump = strstr(line, " dd") != NULL;
        }
    }
    fclose(smaps);
    return count;
}

/* Occurrences of the secret (masked ^ mask, `n` bytes) in the `size` bytes at `p`, in the order
 * given or, with `reversed`, byte-reversed (how OpenSSL's BIGNUM limbs hold a number on a
 * little-endian machine). */
static int occurrences(const unsigned char *p, unsigned long size, const unsigned char *masked, const unsigned char *mask,
                       size_t n, int reversed) {
    int found = 0;
    size_t f = reversed ? n - 1 : 0;
    unsigned char first = masked[f] ^ mask[f];
    for (unsigned long i = 0; i + n <= size; i++) {
        if (p[i] != first) continue;
        size_t k = 1;
        while (k < n) {
            size_t j = reversed ? n - 1 - k : k;
            if (p[i + k] != (masked[j] ^ mask[j])) break;
            k++;
        }
        if (k == n) found++;
    }
    return found;
}

/* Occurrences of the secret in this process's writable memory (see occurrences); with
 * `dumpable_only`, only in mappings a core dump would contain. */
static int scan(const unsigned char *masked, const unsigned char *mask, size_t n, int reversed, int dumpable_only) {
    static struct mapping list[4096];
    int count = mappings(list, 4096);
    int found = 0;
    for (int m = 0; m < count; m++) {
        if (dumpable_only && list[m].dontdump) continue;
        found += occurrences((const unsigned char *)list[m].start, list[m].end - list[m].start, masked, mask, n, reversed);
    }
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

/* A secret the scan looks for: `n` bytes kept XOR-masked (masked ^ mask), never in clear here. */
struct secret { const char *name; size_t n; unsigned char masked[64], mask[64]; };
enum { SECRETS = 5 };
static struct secret secrets[SECRETS];

/* Keeps `n` bytes of `clear` as the secret `name` and wipes `clear`. */
static void remember(int index, const char *name, unsigned char *clear, size_t n) {
    struct secret *s = &secrets[index];
    s->name = name;
    s->n = n;
    random_bytes(s->mask, n);
    for (size_t i = 0; i < n; i++) s->masked[i] = clear[i] ^ s->mask[i];
    explicit_bzero(clear, n);
}

/* OpenSSL 3.0's decoders (d2i_PrivateKey_ex and every other DER decoding goes through them) read
 * their whole input into a buffer of their own and free it with OPENSSL_free, uncleared
 * (decode_der2key.c, decode_spki2typespki.c): a key's DER, private parts included, is left in
 * freed heap memory, and how much of it the next allocations overwrite depends on the heap's
 * layout, which changes from run to run (Swift's per-process hash seed, the new keys). This host
 * gives OpenSSL allocation functions whose free clears exactly those buffers, and counts the ones
 * that held each secret (once it was read); every other copy, live or freed, is still scanned.
 * Docs/security.md (4b) tells what the clearing hides and why the module cannot clear it. */
static int decoder_copies[SECRETS];

static void *openssl_malloc(size_t n, const char *file, int line) {
    (void)file;
    (void)line;
    return malloc(n);
}

static void *openssl_realloc(void *p, size_t n, const char *file, int line) {
    (void)file;
    (void)line;
    return realloc(p, n);
}

static void free_clearing_decoder_copies(void *p, const char *file, int line) {
    (void)line;
    if (p && file && strstr(file, "/encode_decode/decode_")) {
        size_t size = malloc_usable_size(p);
        for (int i = 0; i < SECRETS; i++) {
            const struct secret *s = &secrets[i];
            if (s->n && occurrences(p, size, s->masked, s->mask, s->n, 0) + occurrences(p, size, s->masked, s->mask, s->n, 1) > 0)
                decoder_copies[i]++;
        }
        explicit_bzero(p, size);
    }
    free(p);
}

/* Two lines per moment: copies of each secret (in either byte order) anywhere writable, then
 * only in what a core dump would hold. */
static void report(const char *moment) {
    for (int dumpable = 0; dumpable <= 1; dumpable++) {
        printf("%s%s", moment, dumpable ? "-dumpable" : "");
        for (int i = 0; i < SECRETS; i++) {
            const struct secret *s = &secrets[i];
            printf(" %s=%d", s->name, scan(s->masked, s->mask, s->n, 0, dumpable) + scan(s->masked, s->mask, s->n, 1, dumpable));
        }
        printf("\n");
    }
}

/* Generates an extractable, non-sensitive signing key pair; returns the private key. */
static CK_OBJECT_HANDLE key_pair(CK_SESSION_HANDLE session, CK_MECHANISM_TYPE type, CK_ATTRIBUTE *extra, CK_ULONG extras) {
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_MECHANISM keygen = {type, NULL, 0};
    CK_ATTRIBUTE public_template[4] = {{CKA_TOKEN, &yes, 1}, {CKA_VERIFY, &yes, 1}};
    for (CK_ULONG i = 0; i < extras; i++) public_template[2 + i] = extra[i];
    CK_ATTRIBUTE private_template[] = {{CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &yes, 1}, {CKA_SIGN, &yes, 1},
                                       {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CK_OBJECT_HANDLE public_key, private_key;
    check(p11->C_GenerateKeyPair(session, &keygen, public_template, 2 + extras, private_template, 5, &public_key, &private_key),
          "C_GenerateKeyPair");
    return private_key;
}

/* Reads attribute `type` of `object` and remembers `n` bytes of it from `offset` (the middle of a
 * big number: no leading-zero or DER-header ambiguity). */
static void remember_attribute(int index, const char *name, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE object,
                               CK_ATTRIBUTE_TYPE type, size_t offset, size_t n) {
    unsigned char *buffer = malloc(512);
    CK_ATTRIBUTE read = {type, buffer, 512};
    check(p11->C_GetAttributeValue(session, object, &read, 1), name);
    if (read.ulValueLen < offset + n) { fprintf(stderr, "%s: short value\n", name); exit(1); }
    remember(index, name, buffer + offset, n);
    explicit_bzero(buffer, 512);
    free(buffer);
}

/* Signs `message` with `key`: the module then keeps the key ready for the next signature. */
static void sign_once(CK_SESSION_HANDLE session, CK_MECHANISM_TYPE type, CK_OBJECT_HANDLE key) {
    CK_MECHANISM mechanism = {type, NULL, 0};
    unsigned char message[32] = {1}, signature[512];
    CK_ULONG length = sizeof signature;
    check(p11->C_SignInit(session, &mechanism, key), "C_SignInit");
    check(p11->C_Sign(session, message, sizeof message, signature, &length), "C_Sign");
}

/* memscan MODULE LABEL PIN crowd N: makes N RSA-2048 key pairs and signs with each, twice over,
 * in one process (every key kept ready fills OpenSSL's secure heap), and prints "crowd signed=S"
 * with the number of signatures made, 2N when the module makes room as it should. */
static int crowd(CK_SESSION_HANDLE session, int n) {
    CK_ULONG bits = 2048;
    CK_ATTRIBUTE rsa_bits = {CKA_MODULUS_BITS, &bits, sizeof bits};
    CK_OBJECT_HANDLE *keys = calloc(n, sizeof *keys);
    for (int i = 0; i < n; i++) keys[i] = key_pair(session, CKM_RSA_PKCS_KEY_PAIR_GEN, &rsa_bits, 1);
    int signed_count = 0;
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < n; i++) {
            CK_MECHANISM mechanism = {CKM_SHA256_RSA_PKCS, NULL, 0};
            unsigned char message[32] = {1}, signature[256];
            CK_ULONG length = sizeof signature;
            CK_RV rv = p11->C_SignInit(session, &mechanism, keys[i]);
            if (rv == CKR_OK) rv = p11->C_Sign(session, message, sizeof message, signature, &length);
            if (rv == CKR_OK) signed_count++;
            else fprintf(stderr, "key %d, round %d: 0x%lx\n", i, round, rv);
        }
    printf("crowd signed=%d\n", signed_count);
    free(keys);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 6 && strcmp(argv[4], "crowd") == 0)) {
        fprintf(stderr, "usage: memscan MODULE LABEL PIN [crowd N]\n");
        return 64;
    }
    /* Before the module's first call into OpenSSL: OpenSSL refuses to change them later. */
    if (!CRYPTO_set_mem_functions(openssl_malloc, openssl_realloc, free_clearing_decoder_copies)) {
        fprintf(stderr, "CRYPTO_set_mem_functions refused\n");
        return 1;
    }
    CK_SESSION_HANDLE session = open_labelled_session(argv[1], argv[2]);
    check(p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)argv[3], strlen(argv[3])), "C_Login");
    if (argc == 6) return crowd(session, atoi(argv[5]));

    /* A private data object with a random value (built in a buffer that is wiped at once). */
    enum { VALUE = 48 };
    unsigned char *value = malloc(VALUE);
    random_bytes(value, VALUE);
    CK_OBJECT_CLASS data = CKO_DATA;
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE object[] = {{CKA_CLASS, &data, sizeof data}, {CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &yes, 1},
                             {CKA_LABEL, "scanned", 7}, {CKA_VALUE, value, VALUE}};
    CK_OBJECT_HANDLE stored;
    check(p11->C_CreateObject(session, object, 5, &stored), "C_CreateObject");
    remember(0, "value", value, VALUE);
    free(value);

    /* Key pairs whose private parts are read once and kept masked: RSA-2048 (a prime and the
     * private exponent), P-256 (the scalar), Ed25519 (the private key). */
    CK_ULONG bits = 2048;
    CK_ATTRIBUTE rsa_bits = {CKA_MODULUS_BITS, &bits, sizeof bits};
    CK_OBJECT_HANDLE rsa = key_pair(session, CKM_RSA_PKCS_KEY_PAIR_GEN, &rsa_bits, 1);
    remember_attribute(1, "prime", session, rsa, CKA_PRIME_1, 32, 32);
    remember_attribute(2, "exponent", session, rsa, CKA_PRIVATE_EXPONENT, 96, 32);
    unsigned char p256[] = {0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07};
    CK_ATTRIBUTE ec_params = {CKA_EC_PARAMS, p256, sizeof p256};
    CK_OBJECT_HANDLE ec = key_pair(session, CKM_EC_KEY_PAIR_GEN, &ec_params, 1);
    remember_attribute(3, "ec", session, ec, CKA_VALUE, 0, 32);
    unsigned char ed25519_oid[] = {0x06, 0x03, 0x2B, 0x65, 0x70};
    CK_ATTRIBUTE ed_params = {CKA_EC_PARAMS, ed25519_oid, sizeof ed25519_oid};
    CK_OBJECT_HANDLE ed = key_pair(session, CKM_EC_EDWARDS_KEY_PAIR_GEN, &ed_params, 1);
    remember_attribute(4, "ed25519", session, ed, CKA_VALUE, 0, 32);

    /* Use them all: a signature with each key (the module keeps them ready), a read of the value. */
    sign_once(session, CKM_SHA256_RSA_PKCS, rsa);
    sign_once(session, CKM_ECDSA, ec);
    sign_once(session, CKM_EDDSA, ed);
    unsigned char *back = malloc(VALUE);
    CK_ATTRIBUTE read_value = {CKA_VALUE, back, VALUE};
    check(p11->C_GetAttributeValue(session, stored, &read_value, 1), "C_GetAttributeValue(CKA_VALUE)");
    int same = read_value.ulValueLen == VALUE;
    for (int i = 0; same && i < VALUE; i++) same = back[i] == (secrets[0].masked[i] ^ secrets[0].mask[i]);
    explicit_bzero(back, VALUE);
    free(back);
    if (!same) { fprintf(stderr, "value read back differs\n"); return 1; }

    /* The scanner's own check: the value put back in clear into a heap buffer, and the prime
     * byte-reversed (as a BIGNUM holds it), must each be found once, also among dumpable pages. */
    const struct secret *v = &secrets[0], *p = &secrets[1];
    int value_before = scan(v->masked, v->mask, v->n, 0, 1), reversed_before = scan(p->masked, p->mask, p->n, 1, 1);
    unsigned char *canary = malloc(v->n), *reversed = malloc(p->n);
    for (size_t i = 0; i < v->n; i++) canary[i] = v->masked[i] ^ v->mask[i];
    for (size_t i = 0; i < p->n; i++) reversed[p->n - 1 - i] = p->masked[i] ^ p->mask[i];
    printf("canary value=%d reversed=%d\n", scan(v->masked, v->mask, v->n, 0, 1) - value_before,
           scan(p->masked, p->mask, p->n, 1, 1) - reversed_before);
    explicit_bzero(canary, v->n);
    explicit_bzero(reversed, p->n);
    free(canary);
    free(reversed);
    printf("secure-pages dontdump=%ld locked=%ld\n", flagged_kib("dd"), flagged_kib("lo"));
    printf("decoder-copies");
    for (int i = 0; i < SECRETS; i++) printf(" %s=%d", secrets[i].name, decoder_copies[i]);
    printf("\n");
    report("logged-in");
    check(p11->C_Logout(session), "C_Logout");
    report("logged-out");
    check(p11->C_Finalize(NULL), "C_Finalize");
    report("finalized");
    return 0;
}
