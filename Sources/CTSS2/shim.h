/* tpm2-tss (Debian libtss2-dev): ESAPI, the TCTI loader, marshalling and Tss2_RC_Decode.
 * tss2_tpm2_types.h spells its constants as casts (`((TPM2_ALG_ID) 0x0023)`), which Swift does
 * not import: the ones KeychainTPM uses are re-exported here as typed constants, under the
 * header's own names with a `kc_` prefix. */
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>

/* Algorithms (TPM 2.0 Part 2, §6.3) */
static const TPM2_ALG_ID kc_TPM2_ALG_NULL = TPM2_ALG_NULL;
static const TPM2_ALG_ID kc_TPM2_ALG_RSA = TPM2_ALG_RSA;
static const TPM2_ALG_ID kc_TPM2_ALG_ECC = TPM2_ALG_ECC;
static const TPM2_ALG_ID kc_TPM2_ALG_KEYEDHASH = TPM2_ALG_KEYEDHASH;
static const TPM2_ALG_ID kc_TPM2_ALG_AES = TPM2_ALG_AES;
static const TPM2_ALG_ID kc_TPM2_ALG_CFB = TPM2_ALG_CFB;
static const TPM2_ALG_ID kc_TPM2_ALG_SHA1 = TPM2_ALG_SHA1;
static const TPM2_ALG_ID kc_TPM2_ALG_SHA256 = TPM2_ALG_SHA256;
static const TPM2_ALG_ID kc_TPM2_ALG_SHA384 = TPM2_ALG_SHA384;
static const TPM2_ALG_ID kc_TPM2_ALG_SHA512 = TPM2_ALG_SHA512;
static const TPM2_ALG_ID kc_TPM2_ALG_ECDSA = TPM2_ALG_ECDSA;
static const TPM2_ALG_ID kc_TPM2_ALG_RSASSA = TPM2_ALG_RSASSA;
static const TPM2_ALG_ID kc_TPM2_ALG_RSAPSS = TPM2_ALG_RSAPSS;

/* Curves (§6.4) */
static const TPM2_ECC_CURVE kc_TPM2_ECC_NIST_P256 = TPM2_ECC_NIST_P256;
static const TPM2_ECC_CURVE kc_TPM2_ECC_NIST_P384 = TPM2_ECC_NIST_P384;

/* Object attributes (§8.3) */
static const TPMA_OBJECT kc_TPMA_OBJECT_FIXEDTPM = TPMA_OBJECT_FIXEDTPM;
static const TPMA_OBJECT kc_TPMA_OBJECT_FIXEDPARENT = TPMA_OBJECT_FIXEDPARENT;
static const TPMA_OBJECT kc_TPMA_OBJECT_SENSITIVEDATAORIGIN = TPMA_OBJECT_SENSITIVEDATAORIGIN;
static const TPMA_OBJECT kc_TPMA_OBJECT_USERWITHAUTH = TPMA_OBJECT_USERWITHAUTH;
static const TPMA_OBJECT kc_TPMA_OBJECT_NODA = TPMA_OBJECT_NODA;
static const TPMA_OBJECT kc_TPMA_OBJECT_RESTRICTED = TPMA_OBJECT_RESTRICTED;
static const TPMA_OBJECT kc_TPMA_OBJECT_DECRYPT = TPMA_OBJECT_DECRYPT;
static const TPMA_OBJECT kc_TPMA_OBJECT_SIGN_ENCRYPT = TPMA_OBJECT_SIGN_ENCRYPT;

/* Session attributes (§8.4) and types */
static const TPMA_SESSION kc_TPMA_SESSION_CONTINUESESSION = TPMA_SESSION_CONTINUESESSION;
static const TPMA_SESSION kc_TPMA_SESSION_DECRYPT = TPMA_SESSION_DECRYPT;
static const TPMA_SESSION kc_TPMA_SESSION_ENCRYPT = TPMA_SESSION_ENCRYPT;
static const TPM2_SE kc_TPM2_SE_HMAC = TPM2_SE_HMAC;

/* Capabilities, tickets, handles */
static const TPM2_CAP kc_TPM2_CAP_ALGS = TPM2_CAP_ALGS;
static const TPM2_CAP kc_TPM2_CAP_ECC_CURVES = TPM2_CAP_ECC_CURVES;
static const TPM2_ST kc_TPM2_ST_HASHCHECK = TPM2_ST_HASHCHECK;
static const TPM2_RH kc_TPM2_RH_NULL = TPM2_RH_NULL;
static const TPM2_KEY_BITS kc_TPM2_AES_128 = 128;

/* Response codes (§6.6, TSS 2.0 Overview §3.1) */
static const TSS2_RC kc_TSS2_RC_LAYER_MASK = TSS2_RC_LAYER_MASK;
static const TSS2_RC kc_TSS2_BASE_RC_TRY_AGAIN = TSS2_BASE_RC_TRY_AGAIN;
static const TSS2_RC kc_TSS2_ESYS_RC_TRY_AGAIN = TSS2_ESYS_RC_TRY_AGAIN;
