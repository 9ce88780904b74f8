# The module and the Swift API write nothing to their host's standard error whatever the TPM does:
# tpm2-tss prints WARNING:/ERROR: lines on stderr by default, and both doors route them to our log
# (KEYCHAIN_PKCS11_LOG) instead, without touching the host's environment. A C host (PKCS#11:
# C_GenerateKeyPair with CKA_KC_TPM, C_Sign with a TPM key) and secitem (Apple's API:
# SecKeyCreateRandomKey with kSecAttrTokenIDSecureEnclave, SecKeyCreateSignature) run with no
# TPM, an unreachable one and one that refuses the key (another machine's swtpm): every CK_RV and
# OSStatus is as expected and stderr is empty (secitem's stderr holds only secitem's own line).
# With KEYCHAIN_PKCS11_LOG set the same lines appear in our log; a TSS2_LOGFILE the user set still
# receives tpm2-tss's lines.
. "$HERE/lib.sh"
. "$HERE/servers.sh"

if ! command -v swtpm >/dev/null 2>&1; then
    echo "skip: swtpm is missing (scripts/install-deps.sh installs swtpm and swtpm-tools)"
    exit 0
fi
SECITEM="$(dirname "$KEYCHAINCTL")/secitem"
[ -x "$SECITEM" ] || fail "no secitem (Apple's SecItem calls) beside $KEYCHAINCTL"
cd "$WORK" || fail "cd $WORK"
trap 'stop_swtpms' EXIT
unset TSS2_LOG TSS2_LOGFILE KEYCHAIN_PKCS11_LOG

gcc -Wall -Wextra -Werror -O1 -I"$HERE/../../Include" "$HERE/../c-host/tpm-quiet.c" -o tpm-quiet -ldl || fail "compile tpm-quiet.c"
host() { ./tpm-quiet "$MODULE" login "$PIN" "$@"; }

start_swtpm "$WORK/tpm-a"
tpm_a=$tcti
start_swtpm "$WORK/tpm-b"
tpm_b=$tcti
closed=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')

PIN=975310
echo "$PIN" >user.pin
echo 86420864 >so.pin
# secitem asks the prompt program for the keychain password, as a locked keychain asks on a Mac.
printf '#!/bin/sh\necho %s\n' "$PIN" >prompt.sh && chmod +x prompt.sh
export KEYCHAIN_PKCS11_PROMPT="$WORK/prompt.sh"
KEYCHAIN_PKCS11_TCTI=$tpm_a kc create --label login --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create"

# quiet WHAT EXPECTED-STDOUT EXPECTED-STDERR COMMAND...: runs COMMAND, compares both streams.
quiet() {
    local what=$1 want_out=$2 want_err=$3
    shift 3
    "$@" >out.txt 2>err.txt
    expect_eq "$(cat err.txt)" "$want_err" "$what: standard error"
    expect_eq "$(cat out.txt)" "$want_out" "$what: standard output"
}

# --- no TPM, and a TPM nobody answers at ---------------------------------------------------------
for t in none "mssim:host=127.0.0.1,port=$closed" "swtpm:host=127.0.0.1,port=$closed"; do
    export KEYCHAIN_PKCS11_TCTI=$t
    out=$(p11 -L 2>&1 >/dev/null)
    expect_eq "$out" "" "pkcs11-tool -L with TCTI $t: standard error"
    # CKR_ATTRIBUTE_VALUE_INVALID: CKA_KC_TPM where no TPM can be opened.
    quiet "C_GenerateKeyPair in the TPM with TCTI $t" "C_GenerateKeyPair: 0x13" "" host generate nothing
    # errSecUnimplemented where there is no TPM, as on a Mac without a Secure Enclave;
    # errSecInternalComponent where the TPM named does not answer.
    status=-2070
    [ "$t" = none ] && status=-4
    quiet "SecKeyCreateRandomKey in the Secure Enclave with TCTI $t" "" "secitem: SecKeyCreateRandomKey: OSStatus $status" \
        "$SECITEM" create-enclave nothing
done

# --- keys made in TPM A, used where TPM B answers: B refuses them ---------------------------------
export KEYCHAIN_PKCS11_TCTI=$tpm_a
quiet "C_GenerateKeyPair in TPM A" "C_GenerateKeyPair: 0x0" "" host generate tpm-key
quiet "C_Sign in TPM A" "C_Sign: 0x0" "" host sign tpm-key
quiet "SecKeyCreateRandomKey in TPM A" "" "" "$SECITEM" create-enclave se-key
echo message >message.txt
"$SECITEM" sign-enclave se-key <message.txt >sig.der 2>err.txt || fail "SecKeyCreateSignature in TPM A: $(cat err.txt)"
expect_eq "$(cat err.txt)" "" "SecKeyCreateSignature in TPM A: standard error"

export KEYCHAIN_PKCS11_TCTI=$tpm_b
host sign tpm-key >out.txt 2>err.txt
expect_eq "$(cat err.txt)" "" "C_Sign with TPM A's key on TPM B: standard error"
rv=$(sed -n 's/^C_Sign: //p' out.txt)
[ -n "$rv" ] && [ "$rv" != "0x0" ] || fail "C_Sign with TPM A's key on TPM B: $(cat out.txt)"
"$SECITEM" sign-enclave se-key <message.txt >/dev/null 2>err.txt && fail "SecKeyCreateSignature with TPM A's key on TPM B succeeded"
# (SecItemCopyMatching already fails: the keychain's device key is sealed by TPM A.)
expect_eq "$(wc -l <err.txt) $(grep -c '^secitem: SecItem[A-Za-z]*: OSStatus -2070$' err.txt)" "1 1" \
    "SecKeyCreateSignature on TPM B: secitem's own line alone on stderr: $(cat err.txt)"

# --- the lines are in our log when it is asked for, and in the user's TSS2_LOGFILE ------------------
KEYCHAIN_PKCS11_LOG=warning host sign tpm-key >out.txt 2>err.txt
expect_eq "$(sed -n 's/^C_Sign: //p' out.txt)" "$rv" "C_Sign on TPM B with the log on"
grep -q 'tpm2-tss: \(WARNING\|ERROR\):esys:' err.txt || fail "KEYCHAIN_PKCS11_LOG=warning: no tpm2-tss line in the log: $(cat err.txt)"
KEYCHAIN_PKCS11_LOG=warning "$SECITEM" sign-enclave se-key <message.txt >/dev/null 2>err.txt
grep -q 'keychain-pkcs11 tpm2-tss: \(WARNING\|ERROR\):esys:' err.txt || fail "secitem with KEYCHAIN_PKCS11_LOG=warning: no tpm2-tss line: $(cat err.txt)"
TSS2_LOGFILE="$WORK/tss.log" host sign tpm-key >out.txt 2>err.txt
expect_eq "$(cat err.txt)" "" "C_Sign with TSS2_LOGFILE set: standard error"
grep -q '^\(WARNING\|ERROR\):esys:' tss.log || fail "TSS2_LOGFILE set by the user received nothing: $(cat tss.log 2>/dev/null)"
