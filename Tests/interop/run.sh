#!/usr/bin/env bash
# Runs every Tests/interop/test_*.sh against a built module and prints "N passed, N failed".
# Usage: Tests/interop/run.sh MODULE_PATH KEYCHAINCTL_PATH [test-name-filter]
# The filter runs the tests whose name contains it; =NAME runs the one test NAME (test_nss).
set -u
here=$(cd "$(dirname "$0")" && pwd)
module=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
keychainctl=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
filter=${3:-}
passed=0
failed=0
failures=()
for test in "$here"/test_*.sh; do
    name=$(basename "$test" .sh)
    case $filter in
        "") ;;
        =*) [ "$name" = "${filter#=}" ] || continue ;;
        *) [[ "$name" == *"$filter"* ]] || continue ;;
    esac
    scratch=$(mktemp -d /tmp/kc-interop.XXXXXX)
    mkdir -p "$scratch/keychains" "$scratch/work"
    start=$(date +%s%N)
    # One locale for every test, the CI machine's: the tests compare the English output of
    # clients (keytool and jarsigner, GNU tools' messages) and sorted lists, which another
    # locale translates or orders otherwise. LANGUAGE would still translate under C.UTF-8.
    if env -u LANGUAGE LC_ALL=C.UTF-8 MODULE="$module" KEYCHAINCTL="$keychainctl" KEYCHAIN_PKCS11_DIR="$scratch/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$scratch/state/device-key" \
        KEYCHAIN_PKCS11_KDF_LOG_N=10 WORK="$scratch/work" HERE="$here" \
        timeout 600 bash "$test" >"$scratch/log" 2>&1; then
        passed=$((passed + 1))
        printf 'ok    %-40s %6d ms\n' "$name" $((($(date +%s%N) - start) / 1000000))
        # Measured figures a test reports ("figure: ...") are shown even when it passes.
        sed -n 's/^figure: /      /p' "$scratch/log"
        rm -rf "$scratch"
    else
        failed=$((failed + 1))
        failures+=("$name")
        printf 'FAIL  %-40s (log: %s/log)\n' "$name" "$scratch"
        sed 's/^/      /' "$scratch/log" | tail -n 40
    fi
done
echo "interop: ${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
