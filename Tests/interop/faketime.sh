#!/usr/bin/env bash
# Runs interop tests under a faked clock (Debian's libfaketime), to catch expectations that hold
# only on some days: dates formatted for comparison, validity windows that cross a month or a year.
# Usage: Tests/interop/faketime.sh 'YYYY-MM-DD HH:MM:SS' MODULE_PATH KEYCHAINCTL_PATH TEST_NAME...
# The time is UTC. Every process of the run (the tests, openssl, certtool, p11tool, pkcs11-tool,
# java, keychainctl, the module inside each client) sees the real clock moved by one fixed
# offset: the clock starts at that time and runs on, and all processes agree on it. (A program
# started with a cleared environment, env -i, would see the real clock; the tests given here must
# not do that.) A preflight first checks that the tools see the faked date (a certificate's
# notBefore from openssl, certtool and keytool; an object's creation time as the module records
# it inside pkcs11-tool); lib.sh checks it again in every test (KEYCHAIN_TEST_FAKE_DATE). The
# preflight counts as one test. Prints "faketime TIME UTC: N passed, N failed" as its last line.
set -u
here=$(cd "$(dirname "$0")" && pwd)
when=$1 module=$2 keychainctl=$3
shift 3
tests=$#
day=${when%% *}
passed=0
failed=0
result() {
    echo "faketime $when UTC: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
}
# preflight_failed WHY: the clock is not what the tests would need; they are not run, and count
# as failed with the preflight.
preflight_failed() {
    echo "FAIL  faketime preflight: $*"
    failed=$((failed + 1 + tests))
    result
}

command -v faketime >/dev/null || preflight_failed "no faketime command (Debian package faketime, scripts/install-deps.sh)"
[ "$(TZ=UTC date -d "$when" '+%F %T' 2>/dev/null)" = "$when" ] || preflight_failed "'$when' is not YYYY-MM-DD HH:MM:SS"
# Through Debian's faketime wrapper, not LD_PRELOAD and FAKETIME set by hand: the wrapper gives
# the clock as a relative offset (FAKETIME=+N seconds: every process sees the same clock, which
# runs on; a start time, FAKETIME="@...", would start again in each new process) and makes the
# shared memory that libfaketime names in FAKETIME_SHARED. Without FAKETIME_SHARED, libfaketime
# calls setenv() in every process it loads into, which moves the environment, and Swift 6.3's
# runtime, which finds argv from there, then sees no arguments at all (keychainctl prints its help).
if [ -z "${FAKETIME_SHARED:-}" ]; then
    exec faketime "$when UTC" "$0" "$when" "$module" "$keychainctl" "$@"
fi
[[ "${FAKETIME:-}" =~ ^[+-][0-9]+$ ]] || preflight_failed "FAKETIME=${FAKETIME:-} is not a relative offset"
[[ "${LD_PRELOAD:-}" == */libfaketime* ]] || preflight_failed "libfaketime is not preloaded (LD_PRELOAD=${LD_PRELOAD:-})"
export KEYCHAIN_TEST_FAKE_DATE=$day
echo "faketime: $when UTC asked (FAKETIME=$FAKETIME); date -u says $(date -u)"

# --- preflight: the tools see the faked date ----------------------------------------------------
scratch=$(mktemp -d /tmp/kc-faketime.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
notbefore() { date -u -d "$(openssl x509 -in "$1" -noout -startdate | sed 's/^notBefore=//')" +%F; }
[ "$(date -u +%F)" = "$day" ] || preflight_failed "date -u +%F says $(date -u +%F), not $day"
[ "$(date -u +%d)" = "${day##*-}" ] || preflight_failed "date -u +%d says $(date -u +%d), not ${day##*-}"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$scratch/o.key" -subj /CN=faketime -days 2 \
    -out "$scratch/o.pem" 2>/dev/null || preflight_failed "openssl req"
[ "$(notbefore "$scratch/o.pem")" = "$day" ] || preflight_failed "openssl made a certificate valid from $(notbefore "$scratch/o.pem")"
printf 'cn = "faketime"\nexpiration_days = 2\n' >"$scratch/c.tmpl"
certtool --generate-self-signed --load-privkey "$scratch/o.key" --template "$scratch/c.tmpl" --outfile "$scratch/c.pem" \
    >/dev/null 2>&1 || preflight_failed "certtool --generate-self-signed"
[ "$(notbefore "$scratch/c.pem")" = "$day" ] || preflight_failed "certtool made a certificate valid from $(notbefore "$scratch/c.pem")"
if command -v keytool >/dev/null; then
    keytool -genkeypair -keystore "$scratch/k.p12" -storetype PKCS12 -storepass faketime -alias k -keyalg EC -dname CN=faketime \
        -validity 2 >/dev/null 2>&1 &&
        keytool -exportcert -rfc -keystore "$scratch/k.p12" -storepass faketime -alias k -file "$scratch/k.pem" >/dev/null 2>&1 ||
        preflight_failed "keytool -genkeypair"
    [ "$(notbefore "$scratch/k.pem")" = "$day" ] || preflight_failed "keytool made a certificate valid from $(notbefore "$scratch/k.pem")"
fi
# The module, loaded by pkcs11-tool, stamps the object it creates with the faked time.
(
    export KEYCHAIN_PKCS11_DIR="$scratch/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$scratch/state/device-key" KEYCHAIN_PKCS11_KDF_LOG_N=10
    printf '12345678\n' >"$scratch/so.pin" && printf '1234\n' >"$scratch/user.pin" && printf 'x' >"$scratch/data" &&
        "$keychainctl" create --label faketime --so-pin-file "$scratch/so.pin" --pin-file "$scratch/user.pin" >/dev/null &&
        pkcs11-tool --module "$module" --token-label faketime --login --pin 1234 --write-object "$scratch/data" --type data \
            --label stamped >/dev/null 2>&1 &&
        "$keychainctl" show --label stamped --json --pin-file "$scratch/user.pin" >"$scratch/show.json"
) || preflight_failed "an object through pkcs11-tool and keychainctl show"
grep -q "\"created\":\"${day}T" "$scratch/show.json" || preflight_failed "the module dated its object otherwise: $(cat "$scratch/show.json")"
passed=$((passed + 1))
echo "ok    faketime preflight: date, openssl, certtool$(command -v keytool >/dev/null && echo ", keytool"), the module in pkcs11-tool"

# --- the tests, one run.sh each (=NAME: that test alone) ----------------------------------------
for name in "$@"; do
    if [ ! -f "$here/$name.sh" ]; then
        echo "FAIL  $name: no $here/$name.sh"
        failed=$((failed + 1))
        continue
    fi
    "$here/run.sh" "$module" "$keychainctl" "=$name" | tee "$scratch/run.log"
    line=$(tail -n 1 "$scratch/run.log")
    if [[ "$line" =~ ^interop:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]] && [ $((BASH_REMATCH[1] + BASH_REMATCH[2])) -eq 1 ]; then
        passed=$((passed + BASH_REMATCH[1]))
        failed=$((failed + BASH_REMATCH[2]))
    else
        echo "FAIL  $name: run.sh ran other than this one test: $line"
        failed=$((failed + 1))
    fi
done
result
