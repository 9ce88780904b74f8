# PKCS#11 3.x mechanisms (ChaCha20 and its AEAD, AES CCM/CTS/OFB/CFB/XTS, the _GENERAL MACs,
# SHA-3 RSA and ECDSA, EdDSA variants, HKDF, PBKDF2, SP 800-108, ECDH KDFs, RSA-AES and AES key
# wrap) checked by Tests/interop/modern/test_modern.py, a ctypes client, against pycryptodome,
# `cryptography` and published vectors, with exact CK_RVs for bad parameters; then pkcs11-tool -M
# must list each of them (by name, or as mechtype-0x… when pkcs11-tool has no name for it).
# The Python packages come from PyPI into a venv made once and kept at $MODERN_VENV.
. "$HERE/lib.sh"

MODERN_VENV=${MODERN_VENV:-/tmp/keychain-pkcs11-modern-venv}
MARKER="$MODERN_VENV/.keychain-pkcs11-modern-ready"
PIN=123456

# The venv is usable when its marker exists and the modules the tests import load.
venv_ok() {
    [ -f "$MARKER" ] && "$MODERN_VENV/bin/python" -c \
        'import Crypto.Cipher.ChaCha20_Poly1305, Crypto.Signature.eddsa, cryptography.hazmat.primitives.kdf.kbkdf' 2>/dev/null
}

# make_venv: Debian's python3 venv with pycryptodome and cryptography from PyPI, built under a
# lock (two runs at once make it once) and marked ready only when complete.
make_venv() {
    exec 9>"$MODERN_VENV.lock" || fail "lock $MODERN_VENV.lock"
    flock 9 || fail "flock $MODERN_VENV.lock"
    if ! venv_ok; then
        echo "making $MODERN_VENV (pycryptodome, cryptography from PyPI)"
        rm -rf "$MODERN_VENV"
        /usr/bin/python3 -m venv "$MODERN_VENV" ||
            fail "/usr/bin/python3 -m venv failed (Debian needs the python3-venv package)"
        "$MODERN_VENV/bin/pip" install --quiet --disable-pip-version-check pycryptodome cryptography ||
            fail "pip install pycryptodome cryptography"
        "$MODERN_VENV/bin/python" -c 'import Crypto, cryptography; print("pycryptodome", Crypto.__version__, "cryptography", cryptography.__version__)' \
            >"$MARKER" || fail "the new venv cannot import its packages"
        venv_ok || fail "the new venv is not usable"
    fi
    exec 9>&-
}

make_venv
echo "using $MODERN_VENV: $(cat "$MARKER")"

new_keychain modern 87654321 "$PIN"
slot=$(slot_of modern)
[ -n "$slot" ] || fail "no slot for keychain modern"

failures=()

# --- the Python conformance tests ---------------------------------------------------------------
"$MODERN_VENV/bin/python" "$HERE/modern/test_modern.py" "$MODULE" modern "$PIN" ${MODERN_TESTS:-} >"$WORK/modern.out" 2>&1
status=$?
cat "$WORK/modern.out"
summary=$(grep -E '^modern: [0-9]+ passed, [0-9]+ failed' "$WORK/modern.out" | tail -n 1)
# run.sh shows "figure:" lines even when the test passes.
echo "figure: ${summary:-modern: no summary (the Python run died, exit $status)}"
if [ "$status" != 0 ] || [ -z "$summary" ]; then
    failures+=("test_modern.py: ${summary:-exit $status without a summary}; failing: $(grep -E '^FAIL ' "$WORK/modern.out" | cut -d: -f1 | sed 's/^FAIL //' | tr '\n' ' ')")
fi

# --- pkcs11-tool -M lists the mechanisms ----------------------------------------------------------
# hex (as pkcs11-tool prints unknown ones, upper case) and the names OpenSC gives those it knows.
mechanisms=(
    "1225 CHACHA20-KEY-GEN" "1226 CHACHA20" "4021 CHACHA20-POLY1305"
    "1087 AES-GCM" "1088 AES-CCM" "1089 AES-CTS" "2104 AES-OFB" "2106 AES-CFB8" "2107 AES-CFB128"
    "1071 AES-XTS" "1072 AES-XTS-KEY-GEN"
    "1083 AES-MAC" "1084 AES-MAC-GENERAL" "108B AES-CMAC-GENERAL"
    "222 SHA-1-HMAC-GENERAL" "257 SHA224-HMAC-GENERAL" "252 SHA256-HMAC-GENERAL" "262 SHA384-HMAC-GENERAL"
    "272 SHA512-HMAC-GENERAL" "2B7 SHA3-224-HMAC-GENERAL" "2B2 SHA3-256-HMAC-GENERAL" "2C2 SHA3-384-HMAC-GENERAL"
    "2D2 SHA3-512-HMAC-GENERAL"
    "60 SHA3-256-RSA-PKCS" "61 SHA3-384-RSA-PKCS" "62 SHA3-512-RSA-PKCS" "66 SHA3-224-RSA-PKCS"
    "63 SHA3-256-RSA-PKCS-PSS" "64 SHA3-384-RSA-PKCS-PSS" "65 SHA3-512-RSA-PKCS-PSS" "67 SHA3-224-RSA-PKCS-PSS"
    "D RSA-PKCS-PSS" "3 RSA-X-509"
    "1047 ECDSA-SHA3-224" "1048 ECDSA-SHA3-256" "1049 ECDSA-SHA3-384" "104A ECDSA-SHA3-512" "1057 EDDSA"
    "402A HKDF-DERIVE" "402B HKDF-DATA" "402C HKDF-KEY-GEN" "3B0 PKCS5-PBKD2"
    "3AC SP800-108-COUNTER-KDF" "3AD SP800-108-FEEDBACK-KDF" "3AE SP800-108-DOUBLE-PIPELINE-KDF"
    "1050 ECDH1-DERIVE" "1051 ECDH1-COFACTOR-DERIVE"
    "1054 RSA-AES-KEY-WRAP" "2109 AES-KEY-WRAP" "210A AES-KEY-WRAP-PAD"
)
p11 --slot "$slot" -M >"$WORK/mechanisms.txt" 2>&1 || failures+=("pkcs11-tool -M failed: $(tail -n 3 "$WORK/mechanisms.txt")")
missing=()
for entry in "${mechanisms[@]}"; do
    hex=${entry%% *}
    name=${entry#* }
    grep -qE "^  ($name|mechtype-0x$hex)," "$WORK/mechanisms.txt" || missing+=("$name (0x$hex)")
done
if [ "${#missing[@]}" -gt 0 ]; then
    failures+=("pkcs11-tool -M does not list: ${missing[*]}")
else
    echo "pkcs11-tool -M lists all ${#mechanisms[@]} mechanisms"
fi

if [ "${#failures[@]}" -gt 0 ]; then
    printf '%s\n' "${failures[@]}" >&2
    fail "${#failures[@]} check(s) failed"
fi
