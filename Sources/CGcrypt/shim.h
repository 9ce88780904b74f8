/* libgcrypt: EdDSA with a context or a prehash (Ed25519ctx, Ed25519ph, Ed448 with a context,
 * Ed448ph), which OpenSSL 3.0 does not offer. */
#include <gcrypt.h>

/* Prepares libgcrypt inside a host that may not have: unless the host finished its own
 * initialisation, libgcrypt is told not to drop a setuid host's privileges nor to print
 * warnings when it sets up its secure memory (which it does at the first secure allocation).
 * gcry_control is variadic, so Swift calls it through here. Nonzero when libgcrypt ≥ 1.9. */
static inline int kc_gcry_prepare(void) {
    if (!gcry_control(GCRYCTL_INITIALIZATION_FINISHED_P)) {
        gcry_control(GCRYCTL_DISABLE_PRIV_DROP, 0);
        gcry_control(GCRYCTL_DISABLE_SECMEM_WARN, 0);
    }
    return gcry_check_version("1.9.0") != NULL;
}
