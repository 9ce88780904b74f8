# Concurrency (Tests/c-host/stress.c): 4 processes x 4 threads, each thread in its own session,
# creating, finding, signing with one shared token key, verifying and destroying token objects on
# one keychain for STRESS_SECONDS (default 15); afterwards the token must hold exactly the objects
# created and not destroyed, each once and intact. Any error (a busy database included) fails the
# worker; a worker still running two minutes after its time counts as a deadlock.
. "$HERE/lib.sh"

build_stress
out=$("$stress" "$MODULE" concurrency 4 4 "${STRESS_SECONDS:-15}" 2>&1)
status=$?
echo "$out"
echo "$out" | sed -n "s/^ok: /figure: /p"
[ "$status" -eq 0 ] || fail "4 x 4 concurrency (exit $status)"
expect_contains "$out" "ok: 4 processes x 4 threads" "the summary"
expect_not_contains "$out" "FAIL" "the concurrency run"
