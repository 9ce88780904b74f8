#include <string.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>
#include <openssl/ec.h>
#include <openssl/dsa.h>
#include <openssl/dh.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/pkcs12.h>
#include <openssl/provider.h>
#include <openssl/kdf.h>

/* HMAC-SHA-256 (RFC 2104) from inner and outer states computed once per key. OpenSSL 3.0
 * deprecates the SHA256_* functions for EVP, whose MAC context copy, parameter handling and
 * provider dispatch cost several times the two hash blocks of a short message: the blind index
 * and the integrity manifest MAC every searchable value of every write and search. */
#include <openssl/sha.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static inline size_t kc_hmac_sha256_state_size(void) { return 2 * sizeof(SHA256_CTX); }

/* Writes the two states into `states` (kc_hmac_sha256_state_size() bytes); 1 on success. */
static inline int kc_hmac_sha256_prepare(void *states, const unsigned char *key, size_t key_length) {
    unsigned char block[64] = {0}, pad[64];
    SHA256_CTX *inner = (SHA256_CTX *)states, *outer = inner + 1;
    int ok = 1;
    if (key_length > sizeof block) {
        /* Not SHA256(): since OpenSSL 3.0 it is EVP_Q_digest in the host's default context. */
        SHA256_CTX hash;
        ok = SHA256_Init(&hash) && SHA256_Update(&hash, key, key_length) && SHA256_Final(block, &hash);
        OPENSSL_cleanse(&hash, sizeof hash);
    } else if (key_length > 0) {
        memcpy(block, key, key_length);
    }
    for (size_t i = 0; i < sizeof pad; i++) pad[i] = block[i] ^ 0x36;
    ok = ok && SHA256_Init(inner) && SHA256_Update(inner, pad, sizeof pad);
    for (size_t i = 0; i < sizeof pad; i++) pad[i] = block[i] ^ 0x5c;
    ok = ok && SHA256_Init(outer) && SHA256_Update(outer, pad, sizeof pad);
    OPENSSL_cleanse(block, sizeof block);
    OPENSSL_cleanse(pad, sizeof pad);
    return ok;
}

/* HMAC-SHA-256 of `data` under the prepared states, into `out` (32 bytes); 1 on success. */
static inline int kc_hmac_sha256(const void *states, const unsigned char *data, size_t length, unsigned char *out) {
    SHA256_CTX context = ((const SHA256_CTX *)states)[0];
    unsigned char inner[SHA256_DIGEST_LENGTH];
    int ok = SHA256_Update(&context, data, length) && SHA256_Final(inner, &context);
    context = ((const SHA256_CTX *)states)[1];
    ok = ok && SHA256_Update(&context, inner, sizeof inner) && SHA256_Final(out, &context);
    OPENSSL_cleanse(&context, sizeof context);
    OPENSSL_cleanse(inner, sizeof inner);
    return ok;
}
/* SHA-1 and SHA-256 of one buffer (`out`: 20 or 32 bytes); 1 on success. For short inputs —
 * a secret key's check value, a public key's CKA_ID — where EVP_Digest's context allocation and
 * provider dispatch cost more than the hash. */
static inline int kc_sha1(const unsigned char *data, size_t length, unsigned char *out) {
    SHA_CTX context;
    int ok = SHA1_Init(&context) && SHA1_Update(&context, data, length) && SHA1_Final(out, &context);
    OPENSSL_cleanse(&context, sizeof context);
    return ok;
}

static inline int kc_sha256(const unsigned char *data, size_t length, unsigned char *out) {
    SHA256_CTX context;
    int ok = SHA256_Init(&context) && SHA256_Update(&context, data, length) && SHA256_Final(out, &context);
    OPENSSL_cleanse(&context, sizeof context);
    return ok;
}
#pragma GCC diagnostic pop

/* PBKDF2 (RFC 8018 §5.2) with HMAC-`digest` through `kdf` (EVP_KDF "PBKDF2" fetched from the
 * module's library context), with the parameters PKCS5_PBKDF2_HMAC passes — which itself fetches
 * from the host's default context. 1 on success. */
static inline int kc_pbkdf2_hmac(EVP_KDF *kdf, const char *password, size_t password_length, const unsigned char *salt,
                                 size_t salt_length, int iterations, const char *digest, unsigned char *out, size_t length) {
    static const char empty[1] = {0};
    int pkcs5 = 1;  /* PKCS5_PBKDF2_HMAC's mode: no SP 800-132 lower bounds */
    OSSL_PARAM params[6];
    params[0] = OSSL_PARAM_construct_int(OSSL_KDF_PARAM_PKCS5, &pkcs5);
    params[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_PASSWORD, (void *)(password ? password : empty), password ? password_length : 0);
    params[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, salt_length);
    params[3] = OSSL_PARAM_construct_int(OSSL_KDF_PARAM_ITER, &iterations);
    params[4] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)digest, 0);
    params[5] = OSSL_PARAM_construct_end();
    EVP_KDF_CTX *context = EVP_KDF_CTX_new(kdf);
    if (context == NULL) return 0;
    int ok = EVP_KDF_derive(context, out, length, params) == 1;
    EVP_KDF_CTX_free(context);
    return ok;
}
