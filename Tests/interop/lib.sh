# Shared helpers for the interop tests. Each test_*.sh is run by run.sh in its own temporary
# keychain directory with these variables set:
#   MODULE       absolute path of libkeychain-pkcs11.so under test
#   KEYCHAINCTL  absolute path of the keychainctl binary
#   KEYCHAIN_PKCS11_DIR   an empty temporary directory for this test's keychains
#   KEYCHAIN_PKCS11_KDF_LOG_N  a low scrypt cost so that tests run quickly
#   WORK         a scratch directory for the test's own files
set -u

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# Under a faked clock (Tests/interop/faketime.sh sets KEYCHAIN_TEST_FAKE_DATE), a test that does
# not see the faked date fails instead of passing on the real one.
if [ -n "${KEYCHAIN_TEST_FAKE_DATE:-}" ] && [ "$(date -u +%F)" != "$KEYCHAIN_TEST_FAKE_DATE" ]; then
    fail "the clock is not faked: date -u says $(date -u +%F), expected $KEYCHAIN_TEST_FAKE_DATE (FAKETIME=${FAKETIME:-} LD_PRELOAD=${LD_PRELOAD:-})"
fi

# expect_eq ACTUAL EXPECTED MESSAGE
expect_eq() {
    [ "$1" = "$2" ] || fail "$3: expected [$2], got [$1]"
}

# expect_contains HAYSTACK NEEDLE MESSAGE
expect_contains() {
    case "$1" in
        *"$2"*) ;;
        *) fail "$3: [$2] not found in output: $1" ;;
    esac
}

# expect_not_contains HAYSTACK NEEDLE MESSAGE
expect_not_contains() {
    case "$1" in
        *"$2"*) fail "$3: [$2] unexpectedly found" ;;
        *) ;;
    esac
}

# kc ARGS...: the keychainctl under test.
kc() {
    "$KEYCHAINCTL" "$@"
}

# expect_status STATUS MESSAGE COMMAND...: runs COMMAND (output kept in $WORK/last.out and
# $WORK/last.err) and checks its exit status.
expect_status() {
    local want=$1 message=$2 status
    shift 2
    "$@" >"$WORK/last.out" 2>"$WORK/last.err"
    status=$?
    [ "$status" = "$want" ] || fail "$message: exit $status, expected $want; stderr: $(cat "$WORK/last.err")"
}

p11() {
    pkcs11-tool --module "$MODULE" "$@"
}

# new_keychain LABEL SO_PIN USER_PIN: initialises the empty slot through pkcs11-tool and
# sets the user PIN; prints nothing.
new_keychain() {
    local slot
    slot=$(empty_slot)
    p11 --slot "$slot" --init-token --label "$1" --so-pin "$2" >/dev/null || fail "init-token $1"
    slot=$(slot_of "$1")
    p11 --slot "$slot" --init-pin --login --login-type so --so-pin "$2" --pin "$3" >/dev/null || fail "init-pin $1"
}

# _slot_hex LABEL: the slot ID (hex, as pkcs11-tool -L prints it) of the token labelled LABEL,
# or of the uninitialised token when LABEL is empty. Plain POSIX awk (Debian's default is mawk).
_slot_hex() {
    p11 -L 2>/dev/null | awk -v label="$1" '
        /^Slot [0-9]+ \(0x[0-9a-f]+\)/ { id = $3; gsub(/[():]/, "", id) }
        label == "" && /token state: +uninitialized/ { print id; exit }
        label != "" && /token label *:/ { sub(/^[^:]*: /, ""); if ($0 == label) { print id; exit } }'
}

# empty_slot: the slot ID (decimal) of the uninitialised slot.
empty_slot() {
    local h
    h=$(_slot_hex "")
    [ -n "$h" ] && printf '%d\n' "$h"
}

# slot_of LABEL: the slot ID (decimal) of the token labelled LABEL.
slot_of() {
    local h
    h=$(_slot_hex "$1")
    [ -n "$h" ] && printf '%d\n' "$h"
}

# build_stress: compiles Tests/c-host/stress.c into $WORK/stress and makes the "stress" keychain
# with its token key pair (the crash-safety and concurrency tests).
build_stress() {
    stress="$WORK/stress"
    gcc -Wall -Wextra -Werror -O1 -pthread -I"$HERE/../../Include" "$HERE/../c-host/stress.c" -o "$stress" -ldl -lsqlite3 ||
        fail "compile stress.c"
    "$stress" "$MODULE" setup || fail "stress setup"
}

# socket_pid SOCKET: the PID of the process listening on the Unix socket SOCKET (the SO_PEERCRED
# of a connection to it), empty when nothing listens. Tests stop a daemon they caused to start in
# the background (keychaind forks away from 'keychainctl unlock' and PAM) by this PID, never by
# its name: a name also matches other users' and other tests' daemons.
socket_pid() {
    python3 -c 'import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
print(struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0])' "$1" 2>/dev/null
}

# stop_detached PID: terminates PID (a process this test started that is not its child, so it
# cannot be waited for) and waits until it is gone, 5 s at most; nothing when PID is empty.
stop_detached() {
    [ -n "${1:-}" ] || return 0
    kill "$1" 2>/dev/null || return 0
    for _ in $(seq 100); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.05
    done
    return 1
}

# secretstorage_venv: a venv with Python's secretstorage from PyPI, kept between runs in
# $SECRETSTORAGE_VENV (default /tmp/keychain-pkcs11-secretstorage); sets venv to it.
secretstorage_venv() {
    venv=${SECRETSTORAGE_VENV:-/tmp/keychain-pkcs11-secretstorage}
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import secretstorage' 2>/dev/null; then
        rm -rf "$venv"
        python3 -m venv "$venv" && "$venv/bin/pip" install -q secretstorage >"$WORK/pip.log" 2>&1 ||
            fail "pip install secretstorage: $(tail -5 "$WORK/pip.log")"
    fi
}
