# Shared by the scripts that run a third-party PKCS#11 test suite against a module
# (python-pkcs11-tests.sh, pykcs11-tests.sh): sourced, not run.
#
# suite_arguments NAME "$@"   MODULE (absolute), softhsm (true when MODULE is SoftHSM's), and for
#                             our module KEYCHAINCTL; a usage error exits 64.
# suite_token LABEL SO_PIN USER_PIN
#                             a private WORK folder (removed at exit) with a fresh keychain folder
#                             (cheap PIN KDF) and SoftHSM's own token folder, and the token LABEL
#                             made in the module under test: by keychainctl's interop helpers for
#                             ours, by softhsm2-util for SoftHSM.

suite_arguments() {
    local name=$1
    shift
    [ $# -ge 1 ] || { echo "usage: $0 MODULE_PATH KEYCHAINCTL_PATH" >&2; exit 64; }
    MODULE=$(realpath "$1")
    [ -f "$MODULE" ] || { echo "$name: no module at $1" >&2; exit 64; }
    softhsm=false
    [ "$(basename "$MODULE")" = libsofthsm2.so ] && softhsm=true
    if ! $softhsm; then
        [ $# -ge 2 ] && [ -x "$2" ] || { echo "usage: $0 MODULE_PATH KEYCHAINCTL_PATH" >&2; exit 64; }
        KEYCHAINCTL=$(realpath "$2")
    fi
}

suite_token() {
    local label=$1 so_pin=$2 user_pin=$3
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    export KEYCHAIN_PKCS11_DIR="$WORK/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/state/device-key"
    export KEYCHAIN_PKCS11_KDF_LOG_N=10
    mkdir "$WORK/tokens"
    printf 'directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\n' "$WORK/tokens" >"$WORK/softhsm2.conf"
    export SOFTHSM2_CONF="$WORK/softhsm2.conf"
    if $softhsm; then
        softhsm2-util --init-token --free --label "$label" --so-pin "$so_pin" --pin "$user_pin" >/dev/null
    else
        # The token made as the interop tests make theirs.
        export MODULE KEYCHAINCTL WORK
        # shellcheck source=../Tests/interop/lib.sh
        . "$(dirname "${BASH_SOURCE[0]}")/../Tests/interop/lib.sh"
        new_keychain "$label" "$so_pin" "$user_pin"
        kc list | grep -q -- "$label" || fail "keychainctl list does not show the keychain $label"
    fi
}

# suite_pytest NAME FOLDER TESTS PYTHON LOG JUNIT: runs pytest on FOLDER/TESTS (120 s per test;
# an outer timeout guards a hang inside a C call), output in LOG, results in JUNIT; sets
# pytest_status. Without a JUNIT file it prints the log's tail and exits 1.
suite_pytest() {
    local name=$1 folder=$2 tests=$3 python=$4 log=$5 junit=$6
    rm -f "$junit"
    pytest_status=0
    (cd "$folder" && timeout --kill-after=30 1800 "$python" -m pytest "$tests" \
        -p no:cacheprovider --timeout 120 -rfEs -v --junitxml "$junit") >"$log" 2>&1 || pytest_status=$?
    echo "$name: full pytest output in $log"
    if [ ! -f "$junit" ]; then
        tail -n 20 "$log" >&2
        echo "$name: pytest ended with status $pytest_status and no results"
        exit 1
    fi
}

# suite_counts PYTHON JUNIT KNOWN LABEL: prints "passed failed skipped known" from a JUnit file.
# KNOWN holds lines "classname|name|text|reason": a failure of that test whose message contains
# that very text is counted apart (and listed on stderr as "NAME: LABEL, not counted as a failure:
# … reason"); the same test failing another way is a failure.
suite_counts() {
    local python=$1 junit=$2 known=$3 label=$4
    KNOWN="$known" LABEL="$label" "$python" - "$junit" <<'PYEOF'
import os, sys, xml.etree.ElementTree as ET
known = [line.split("|", 3) for line in os.environ["KNOWN"].splitlines() if line]
root = ET.parse(sys.argv[1]).getroot()
passed = failed = skipped = apart = 0
for case in root.iter("testcase"):
    outcome = [c for c in case if c.tag in ("failure", "error", "skipped")]
    if not outcome:
        passed += 1
        continue
    if outcome[0].tag == "skipped":
        skipped += 1
        continue
    text = (outcome[0].get("message") or "") + (outcome[0].text or "")
    match = [k for k in known if k[0] == case.get("classname") and k[1] == case.get("name") and k[2] in text]
    if match:
        apart += 1
        print("%s, not counted as a failure: %s::%s: %s" % (os.environ["LABEL"], case.get("classname"), case.get("name"), match[0][3]), file=sys.stderr)
    else:
        failed += 1
print(passed, failed, skipped, apart)
PYEOF
}
