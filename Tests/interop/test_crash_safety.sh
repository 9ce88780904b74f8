# Crash safety (Tests/c-host/stress.c): a process writing to the keychain — creating objects and
# now and then changing the PIN — is killed with SIGKILL at a random moment, 200 times; after each
# kill PRAGMA integrity_check must say ok, every creation acknowledged before the kill must be
# there once and intact, nothing but the one creation in flight may appear, and the acknowledged
# PIN (or the one being set) must open the keychain.
. "$HERE/lib.sh"

build_stress
out=$("$stress" "$MODULE" crash "${STRESS_KILLS:-200}" 2>&1)
status=$?
echo "$out"
echo "$out" | sed -n "s/^ok: /figure: /p"
[ "$status" -eq 0 ] || fail "crash cycles (exit $status)"
expect_contains "$out" "ok: ${STRESS_KILLS:-200} SIGKILL cycles" "the summary"
expect_not_contains "$out" "FAIL" "the crash cycles"
