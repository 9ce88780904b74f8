/*
 * provider-fork.c — a token key loaded once through OpenSSL's pkcs11 provider, used after fork()
 * by the child and by the parent (Tests/interop/test_openssl_provider_scenarios_tls.sh).
 *
 * Usage: provider-fork KEY PUBLIC-KEY-FILE ROUNDS
 *   KEY              a pkcs11: URI (loaded with OSSL_STORE) or the name of a PEM file that holds
 *                    a "PKCS#11 PROVIDER URI" (read with PEM_read_bio_PrivateKey, as an
 *                    application that knows nothing of stores would; the provider decodes it)
 *   PUBLIC-KEY-FILE  the key's public half (PEM or DER SubjectPublicKeyInfo), read by OpenSSL's
 *                    default provider: every signature is verified there, never on the token
 *   ROUNDS           how many times to fork
 * The provider comes from OPENSSL_CONF (module path and PIN). The program loads the key, checks
 * that the pkcs11 provider holds it, signs and verifies once, then ROUNDS times: forks; the child
 * signs a message of its own with the parent's key object and sends the signature through a pipe;
 * the parent verifies it (and that it does not verify a different message), then signs and
 * verifies in the parent too. Last, for keys signed in parts (RSA, EC), it starts a signature in
 * the parent (init + update), forks, and finishes it on both sides: the child's session handle is
 * the parent's, so the child must fail, and the parent's signature must verify.
 * Prints one line per step; exit 0 when every step went as expected.
 *
 * Build: gcc -Wall -Wextra -Werror -O1 provider-fork.c -o provider-fork -lcrypto
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/provider.h>
#include <openssl/store.h>
#include <openssl/x509.h>

#define MAX_SIG 1024

static void die(const char *what)
{
    printf("FAIL: %s\n", what);
    ERR_print_errors_fp(stdout);
    fflush(stdout);
    exit(1);
}

static EVP_PKEY *load_private(const char *key)
{
    EVP_PKEY *pkey = NULL;
    if (strncmp(key, "pkcs11:", 7) == 0) {
        OSSL_STORE_CTX *store = OSSL_STORE_open(key, NULL, NULL, NULL, NULL);
        if (store == NULL)
            die("OSSL_STORE_open");
        if (OSSL_STORE_expect(store, OSSL_STORE_INFO_PKEY) != 1)
            die("OSSL_STORE_expect");
        while (!OSSL_STORE_eof(store)) {
            OSSL_STORE_INFO *info = OSSL_STORE_load(store);
            if (info == NULL)
                continue;
            if (OSSL_STORE_INFO_get_type(info) == OSSL_STORE_INFO_PKEY) {
                if (pkey != NULL)
                    die("the URI names more than one private key");
                pkey = OSSL_STORE_INFO_get1_PKEY(info);
            }
            OSSL_STORE_INFO_free(info);
        }
        OSSL_STORE_close(store);
    } else {
        BIO *in = BIO_new_file(key, "r");
        if (in == NULL)
            die("open the key file");
        pkey = PEM_read_bio_PrivateKey(in, NULL, NULL, NULL);
        BIO_free(in);
    }
    if (pkey == NULL)
        die("no private key loaded");
    return pkey;
}

static EVP_PKEY *load_public(const char *file)
{
    BIO *in = BIO_new_file(file, "rb");
    if (in == NULL)
        die("open the public key file");
    EVP_PKEY *pub = PEM_read_bio_PUBKEY(in, NULL, NULL, NULL);
    if (pub == NULL) {
        ERR_clear_error();
        (void)BIO_reset(in);
        pub = d2i_PUBKEY_bio(in, NULL);
    }
    BIO_free(in);
    if (pub == NULL)
        die("read the public key");
    return pub;
}

/* SHA-256 for RSA and EC; none (the whole message) for EdDSA. */
static const char *digest_for(EVP_PKEY *pkey)
{
    return EVP_PKEY_is_a(pkey, "ED25519") || EVP_PKEY_is_a(pkey, "ED448") ? NULL : "SHA256";
}

/* Signs msg with the token key; returns the signature's length, 0 on failure. */
static size_t sign(EVP_PKEY *pkey, const char *msg, unsigned char *sig)
{
    size_t len = MAX_SIG;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestSignInit_ex(ctx, NULL, digest_for(pkey), NULL, NULL, pkey, NULL) != 1 ||
        EVP_DigestSign(ctx, sig, &len, (const unsigned char *)msg, strlen(msg)) != 1)
        len = 0;
    EVP_MD_CTX_free(ctx);
    return len;
}

/* 1 when sig is pub's signature of msg, checked by the default provider alone. */
static int verify(EVP_PKEY *pub, const char *msg, const unsigned char *sig, size_t len)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx != NULL &&
             EVP_DigestVerifyInit_ex(ctx, NULL, digest_for(pub), NULL, "provider=default", pub, NULL) == 1 &&
             EVP_DigestVerify(ctx, sig, len, (const unsigned char *)msg, strlen(msg)) == 1;
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    return ok;
}

static void sign_and_verify(EVP_PKEY *pkey, EVP_PKEY *pub, const char *msg)
{
    unsigned char sig[MAX_SIG];
    size_t len = sign(pkey, msg, sig);
    if (len == 0)
        die(msg);
    if (!verify(pub, msg, sig, len))
        die("a parent's signature does not verify");
    printf("%s: signed and verified\n", msg);
}

static void wait_child(pid_t pid, int want, const char *what)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            die("waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != want) {
        printf("FAIL: %s: child status 0x%x, expected exit %d\n", what, status, want);
        exit(1);
    }
}

/* fork; the child signs "child N" with the parent's key object and writes the signature to a
 * pipe; the parent verifies it. */
static void child_round(EVP_PKEY *pkey, EVP_PKEY *pub, int round)
{
    char msg[64], other[64];
    int fds[2];
    snprintf(msg, sizeof msg, "child %d", round);
    snprintf(other, sizeof other, "child %d?", round);
    if (pipe(fds) != 0)
        die("pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        unsigned char sig[MAX_SIG];
        close(fds[0]);
        size_t len = sign(pkey, msg, sig);
        if (len == 0) {
            ERR_print_errors_fp(stdout);
            fflush(stdout);
            exit(2);
        }
        if (write(fds[1], sig, len) != (ssize_t)len)
            exit(3);
        close(fds[1]);
        EVP_PKEY_free(pkey);
        EVP_PKEY_free(pub);
        exit(0);
    }
    close(fds[1]);
    unsigned char sig[MAX_SIG];
    size_t len = 0;
    ssize_t n;
    while ((n = read(fds[0], sig + len, sizeof sig - len)) > 0)
        len += (size_t)n;
    close(fds[0]);
    wait_child(pid, 0, msg);
    if (len == 0)
        die("the child sent no signature");
    if (!verify(pub, msg, sig, len))
        die("the child's signature does not verify");
    if (verify(pub, other, sig, len))
        die("the child's signature verifies another message too");
    printf("%s: signature from the child verified by the parent\n", msg);
}

/* A signature begun before fork: the child cannot finish it, the parent can. */
static void fork_mid_operation(EVP_PKEY *pkey, EVP_PKEY *pub)
{
    const char *msg = "begun before fork";
    unsigned char sig[MAX_SIG];
    size_t len = sizeof sig;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestSignInit_ex(ctx, NULL, "SHA256", NULL, NULL, pkey, NULL) != 1 ||
        EVP_DigestSignUpdate(ctx, msg, strlen(msg)) != 1)
        die("start a signature");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        int finished = EVP_DigestSignFinal(ctx, sig, &len) == 1;
        exit(finished ? 5 : 0);
    }
    wait_child(pid, 0, "the child finishing a signature begun before fork (exit 5: it succeeded)");
    if (EVP_DigestSignFinal(ctx, sig, &len) != 1)
        die("the parent finishing its signature after fork");
    EVP_MD_CTX_free(ctx);
    if (!verify(pub, msg, sig, len))
        die("the parent's signature begun before fork does not verify");
    printf("%s: the child could not finish it, the parent's verified\n", msg);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        printf("usage: provider-fork KEY PUBLIC-KEY-FILE ROUNDS\n");
        return 64;
    }
    int rounds = atoi(argv[3]);
    EVP_PKEY *pkey = load_private(argv[1]);
    EVP_PKEY *pub = load_public(argv[2]);
    const OSSL_PROVIDER *prov = EVP_PKEY_get0_provider(pkey);
    printf("key: %s held by %s\n", EVP_PKEY_get0_type_name(pkey), prov ? OSSL_PROVIDER_get0_name(prov) : "(none)");
    if (prov == NULL || strcmp(OSSL_PROVIDER_get0_name(prov), "pkcs11") != 0)
        die("the key is not the pkcs11 provider's");

    sign_and_verify(pkey, pub, "parent 0");
    for (int i = 1; i <= rounds; i++) {
        char msg[64];
        child_round(pkey, pub, i);
        snprintf(msg, sizeof msg, "parent %d", i);
        sign_and_verify(pkey, pub, msg);
    }
    if (digest_for(pkey) != NULL)
        fork_mid_operation(pkey, pub);
    EVP_PKEY_free(pkey);
    EVP_PKEY_free(pub);
    printf("done\n");
    return 0;
}
