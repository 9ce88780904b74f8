# ML-DSA-65/87 and ML-KEM-768/1024 (PKCS#11 3.2, issue 44) against an independent implementation:
# pyca/cryptography from PyPI, whose wheel brings its own OpenSSL (4.x, with ML-DSA and ML-KEM;
# Debian 12's OpenSSL 3.0 has neither). Tests/interop/pq/pyca_interop.py, a ctypes client of the
# module's 3.2 function list, checks both directions: pyca verifies every signature the token
# makes (no context, an empty, a short and a 255-byte context; messages from empty to 70 KB;
# C_Sign and C_SignUpdate) and rejects altered ones; the token verifies pyca's signatures with
# pyca's public key imported by CKA_VALUE (C_Verify and C_VerifyUpdate), refusing altered ones
# with CKR_SIGNATURE_INVALID and a short one with CKR_SIGNATURE_LEN_RANGE; each side decapsulates
# the other's encapsulation to the same 32 bytes (C_EncapsulateKey/C_DecapsulateKey into a
# readable generic secret); CKA_PUBLIC_KEY_INFO loads in pyca and equals its SubjectPublicKeyInfo;
# a seed moves either way (pyca's as CKA_SEED; a non-sensitive token key's CKA_SEED into pyca) and
# gives the same key, down to ML-KEM's implicit-rejection secret; ML-DSA-44 and ML-KEM-512 are
# refused with CKR_PARAMETER_SET_NOT_SUPPORTED. Runs against the debug and the release module
# (a wheel, no build: the venv takes seconds to make, once).
# The venv ($PQ_PYCA_VENV, default /tmp/keychain-pkcs11-pyca-$version) is made once and kept.
. "$HERE/lib.sh"

version=51.0.1
PQ_PYCA_VENV=${PQ_PYCA_VENV:-/tmp/keychain-pkcs11-pyca-$version}
MARKER="$PQ_PYCA_VENV/.keychain-pkcs11-pyca-ready"
PIN=123456

# The venv is usable when its marker exists and the pinned cryptography has both algorithms.
venv_ok() {
    [ -f "$MARKER" ] && "$PQ_PYCA_VENV/bin/python" - "$version" 2>/dev/null <<'EOF'
import sys, cryptography
from cryptography.hazmat.backends.openssl.backend import backend
from cryptography.hazmat.primitives.asymmetric import mldsa, mlkem
sys.exit(0 if cryptography.__version__ == sys.argv[1] and backend.mldsa_supported() and backend.mlkem_supported() else 1)
EOF
}

# make_venv: Debian's python3 venv with the pinned cryptography wheel (never an sdist build, which
# would link Debian's OpenSSL 3.0), made under a lock (two runs at once make it once) and marked
# ready only when complete.
make_venv() {
    exec 9>"$PQ_PYCA_VENV.lock" || fail "lock $PQ_PYCA_VENV.lock"
    flock 9 || fail "flock $PQ_PYCA_VENV.lock"
    if ! venv_ok; then
        echo "making $PQ_PYCA_VENV (cryptography $version from PyPI)"
        rm -rf "$PQ_PYCA_VENV"
        /usr/bin/python3 -m venv "$PQ_PYCA_VENV" ||
            fail "/usr/bin/python3 -m venv failed (Debian needs the python3-venv package)"
        "$PQ_PYCA_VENV/bin/pip" install --quiet --disable-pip-version-check --only-binary :all: "cryptography==$version" \
            >"$WORK/pip.log" 2>&1 || fail "pip install cryptography==$version: $(tail -n 5 "$WORK/pip.log")"
        "$PQ_PYCA_VENV/bin/python" -c 'import cryptography
from cryptography.hazmat.backends.openssl.backend import backend
print("cryptography", cryptography.__version__, "with", backend.openssl_version_text())' >"$MARKER" ||
            fail "the new venv cannot import cryptography"
        venv_ok || fail "cryptography $version in $PQ_PYCA_VENV lacks ML-DSA or ML-KEM: $(cat "$MARKER")"
    fi
    exec 9>&-
}

make_venv
echo "using $PQ_PYCA_VENV: $(cat "$MARKER")"

new_keychain pq 87654321 "$PIN"
[ -n "$(slot_of pq)" ] || fail "no slot for keychain pq"

"$PQ_PYCA_VENV/bin/python" "$HERE/pq/pyca_interop.py" "$MODULE" pq "$PIN" ${PQ_PYCA_TESTS:-} >"$WORK/pyca.out" 2>&1
status=$?
cat "$WORK/pyca.out"
summary=$(grep -E '^pq-pyca: [0-9]+ passed, [0-9]+ failed' "$WORK/pyca.out" | tail -n 1)
# run.sh shows "figure:" lines even when the test passes.
echo "figure: ${summary:-pq-pyca: no summary (the Python run died, exit $status)}"
[ -n "$summary" ] || fail "pyca_interop.py ended without a summary (exit $status)"
[ "$status" = 0 ] || fail "pyca_interop.py: $summary; failing: $(grep -E '^FAIL ' "$WORK/pyca.out" | cut -d: -f1 | sed 's/^FAIL //' | tr '\n' ' ')"
# Every test ran (a filter given through PQ_PYCA_TESTS runs fewer).
[ -n "${PQ_PYCA_TESTS:-}" ] || expect_contains "$summary" "pq-pyca: 14 passed, 0 failed" "the number of tests run"
echo "test_pq_pyca: ok"
