# Concurrency (Tests/c-host/stress.c): 4 processes x 4 threads, each thread in its own session
# logging in with the right PIN at the same moment (the keychain's PIN has the default scrypt
# cost, so that many checks are in flight at once), then creating, finding, signing with one
# shared token key, verifying and destroying token objects on one keychain for STRESS_SECONDS
# (default 15); afterwards the token must hold exactly the objects created and not destroyed,
# each once and intact. Any error (a refused right PIN or a busy database included) fails the
# worker; a worker still running two minutes after its time counts as a deadlock.
# Then 8 processes x 2 threads guess wrong PINs at the same moment: exactly the limit (10) may be
# evaluated, every other guess and the right PIN get CKR_PIN_LOCKED.
. "$HERE/lib.sh"

KEYCHAIN_PKCS11_KDF_LOG_N=15 build_stress
out=$("$stress" "$MODULE" concurrency 4 4 "${STRESS_SECONDS:-15}" 2>&1)
status=$?
echo "$out"
echo "$out" | sed -n "s/^ok: /figure: /p"
echo "figure: slowest of the 16 simultaneous right-PIN logins, per process: $(echo "$out" | sed -n 's/.*slowest login \([0-9]*\) ms$/\1/p' | tr '\n' ' ')ms"
[ "$status" -eq 0 ] || fail "4 x 4 concurrency with simultaneous logins (exit $status)"
expect_contains "$out" "ok: 4 processes x 4 threads" "the summary"
expect_not_contains "$out" "FAIL" "the concurrency run"

export KEYCHAIN_PKCS11_DIR="$WORK/guessing"
mkdir -p "$KEYCHAIN_PKCS11_DIR"
KEYCHAIN_PKCS11_KDF_LOG_N=14 "$stress" "$MODULE" setup >/dev/null || fail "setup of the guessing keychain"
out=$("$stress" "$MODULE" guess 8 2 10 2>&1)
status=$?
echo "$out"
echo "$out" | sed -n "s/^ok: /figure: /p"
[ "$status" -eq 0 ] || fail "8 x 2 concurrent guessers (exit $status)"
expect_contains "$out" "exactly 10 wrong PINs evaluated" "the guessing summary"
