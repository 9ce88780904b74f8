/* libgcrypt: EdDSA with a context or a prehash (Ed25519ctx, Ed25519ph, Ed448 with a context,
 * Ed448ph), which OpenSSL 3.0 does not offer. */
#include <gcrypt.h>
