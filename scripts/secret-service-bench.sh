#!/usr/bin/env bash
# Side by side, each on its own private session bus: secretstorage get_secret and search_items
# calls (DH session; 200 each, or SS_BENCH_CALLS) and secret-tool lookups (50, or
# SS_BENCH_LOOKUPS) against keychaind --secret-service and against gnome-keyring-daemon.
# Usage: scripts/secret-service-bench.sh [BIN_FOLDER] (default: the release build).
#
# It stops only the two daemons it started, by their PIDs. gnome-keyring-daemon runs with a HOME
# and an XDG_RUNTIME_DIR of the benchmark's own, so that it neither finds nor joins a
# gnome-keyring that already runs for this user (a desktop's own keyring): that one is left alone.
set -u
K=${1:-$(cat "$(dirname "$0")/../.build/release-path")}
calls=${SS_BENCH_CALLS:-200}
lookups=${SS_BENCH_LOOKUPS:-50}
venv=${SECRETSTORAGE_VENV:-/tmp/keychain-pkcs11-secretstorage}   # made by Tests/interop/test_secret_service.sh
[ -x "$venv/bin/python" ] || { echo "secret-service-bench: no secretstorage venv at $venv (Tests/interop/test_secret_service.sh makes it)" >&2; exit 1; }
w=$(mktemp -d "${TMPDIR:-/tmp}/ssbench.XXXXXX")
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/keys" "$w/run" "$w/home" "$w/gkrun"
chmod 700 "$w/run" "$w/gkrun"
export KEYCHAIN_PKCS11_DIR=$w/keys KEYCHAIN_PKCS11_DEVICE_KEY=$w/dk KEYCHAIN_PKCS11_KDF_LOG_N=10 KEYCHAIN_PKCS11_AGENT=$w/run/agent.sock
printf 'pin-1234\n' >"$w/pin"
"$K/keychainctl" create --label login --so-pin-file "$w/pin" --pin-file "$w/pin" >/dev/null || exit 1
cat >"$w/py.py" <<'EOF'
import secretstorage, sys, time
calls = int(sys.argv[1])
conn = secretstorage.dbus_init()
c = secretstorage.get_default_collection(conn)
it = c.create_item("bench", {"bench": "1"}, b"x" * 32, replace=True)
t = time.perf_counter()
for _ in range(calls): it.get_secret()
print("get_secret ms/call %.3f" % ((time.perf_counter() - t) * 1000 / calls))
t = time.perf_counter()
for _ in range(calls): list(c.search_items({"bench": "1"}))
print("search_items ms/call %.3f" % ((time.perf_counter() - t) * 1000 / calls))
EOF
cat >"$w/lookup.sh" <<'EOF'
start=$(date +%s%N); for _ in $(seq "$1"); do secret-tool lookup bench 1 >/dev/null || exit 1; done
echo "secret-tool lookup ms/call $(( ($(date +%s%N) - start) / ($1 * 1000000) ))"
EOF
# Sourced by both runs (inside dbus-run-session): $daemon is the PID of the provider started there.
cat >"$w/common.sh" <<'EOF'
set -u
# Stops the provider this run started (its PID, nothing found by name), when the run ends.
trap 'kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null' EXIT
# Waits (5 s at most) until the provider owns org.freedesktop.secrets on this private bus.
for _ in $(seq 50); do
    kill -0 "$daemon" 2>/dev/null || { echo "secret-service-bench: the provider exited" >&2; exit 1; }
    dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner \
        string:org.freedesktop.secrets 2>/dev/null | grep -q 'boolean true' && return 0
    sleep 0.1
done
echo "secret-service-bench: org.freedesktop.secrets has no owner after 5 s" >&2
exit 1
EOF
status=0
echo "== keychaind"
K="$K" w="$w" venv="$venv" calls="$calls" lookups="$lookups" dbus-run-session -- bash -c '
    "$K/keychaind" --foreground --secret-service 2>"$w/keychaind.log" &
    daemon=$!
    . "$w/common.sh"
    "$K/keychainctl" unlock --pin-file "$w/pin" >/dev/null && "$venv/bin/python" "$w/py.py" "$calls" && bash "$w/lookup.sh" "$lookups"' 2>"$w/run.err" ||
    { status=1; cat "$w/run.err" "$w/keychaind.log" >&2; }
echo "== gnome-keyring"
printf pw >"$w/gkpw"
env -u GNOME_KEYRING_CONTROL HOME="$w/home" XDG_DATA_HOME="$w/home/data" XDG_CONFIG_HOME="$w/home/config" XDG_RUNTIME_DIR="$w/gkrun" \
    w="$w" venv="$venv" calls="$calls" lookups="$lookups" dbus-run-session -- bash -c '
    gnome-keyring-daemon --foreground --unlock --components=secrets <"$w/gkpw" >"$w/gk.out" 2>"$w/gk.log" &
    daemon=$!
    . "$w/common.sh"
    "$venv/bin/python" "$w/py.py" "$calls" && bash "$w/lookup.sh" "$lookups"' 2>"$w/run.err" ||
    { status=1; cat "$w/run.err" "$w/gk.log" >&2; }
exit $status
