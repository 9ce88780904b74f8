#!/usr/bin/env bash
# Runs every test: Swift unit and in-process PKCS#11 tests, then the real clients
# (pkcs11-tool, p11tool, a C host) against the debug module and against the release module.
# Prints "N passed, N failed" as its last line.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh >/dev/null 2>&1 || echo "test.sh: could not install packages (not root?); continuing with what is installed"

total_passed=0
total_failed=0
count() {  # count PASSED FAILED
    total_passed=$((total_passed + $1))
    total_failed=$((total_failed + $2))
}

echo "== swift build"
if ! swift build; then
    echo "0 passed, 1 failed"
    exit 1
fi

echo "== swift test"
swift test 2>&1 | tee /tmp/keychain-pkcs11-swift-test.log | grep -E "error:|failed|Executed .* tests" | tail -n 20
summary=$(grep -E "^\s*Executed [0-9]+ tests?, with [0-9]+ failures?" /tmp/keychain-pkcs11-swift-test.log | tail -n 1)
executed=$(sed -E 's/.*Executed ([0-9]+) tests?.*/\1/' <<<"$summary")
failures=$(sed -E 's/.*with ([0-9]+) failures?.*/\1/' <<<"$summary")
if [ -z "$summary" ] || grep -q "Fatal error\|Crash:" /tmp/keychain-pkcs11-swift-test.log; then
    echo "swift test did not finish cleanly"
    executed=${executed:-0}
    failures=$((${failures:-0} + 1))
fi
count $((executed - failures)) "$failures"

bin=$(swift build --show-bin-path)
echo "== interop tests against the debug module"
Tests/interop/run.sh "$bin/libkeychain-pkcs11.so" "$bin/keychainctl" | tee /tmp/keychain-pkcs11-interop.log
line=$(tail -n 1 /tmp/keychain-pkcs11-interop.log)
count "$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line")" "$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")"

echo "== release module (self-contained, as shipped)"
if scripts/build-release.sh >/tmp/keychain-pkcs11-release.log 2>&1; then
    release=$(cat .build/release-path)
    Tests/interop/run.sh "$release/libkeychain-pkcs11.so" "$release/keychainctl" | tee /tmp/keychain-pkcs11-interop-release.log
    line=$(tail -n 1 /tmp/keychain-pkcs11-interop-release.log)
    count "$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line")" "$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")"
else
    tail -n 30 /tmp/keychain-pkcs11-release.log
    count 0 1
fi

echo "== benchmark smoke run (every measure of this module must report a number)"
if rm -f /tmp/keychain-pkcs11-bench.png && scripts/bench.sh 1 0.05 200 /tmp/keychain-pkcs11-bench.png >/tmp/keychain-pkcs11-bench.log 2>&1 && [ -s /tmp/keychain-pkcs11-bench.png ] && ! awk 'NR > 2 && $3 == "n/a" { bad = 1 } END { exit !bad }' /tmp/keychain-pkcs11-bench.log; then
    cat /tmp/keychain-pkcs11-bench.log
    count 1 0
else
    cat /tmp/keychain-pkcs11-bench.log
    count 0 1
fi

echo "${total_passed} passed, ${total_failed} failed"
[ "$total_failed" -eq 0 ]
