#!/usr/bin/env bash
# Side by side, each on its own private session bus: secretstorage get_secret and search_items
# calls (DH session; 200 each, or SS_BENCH_CALLS), secret-tool lookups (50, or SS_BENCH_LOOKUPS)
# and 8 concurrent clients x 50 get_secret calls (SS_BENCH_CLIENT_CALLS) against keychaind
# --secret-service and against gnome-keyring-daemon; then each row's ratio keychaind/gnome-keyring.
# Usage: scripts/secret-service-bench.sh [BIN_FOLDER] (default: the release build).
#
# It stops only the two daemons it started, by their PIDs. gnome-keyring-daemon runs with a HOME
# and an XDG_RUNTIME_DIR of the benchmark's own, so that it neither finds nor joins a
# gnome-keyring that already runs for this user (a desktop's own keyring): that one is left alone.
set -u
K=${1:-$(cat "$(dirname "$0")/../.build/release-path")}
calls=${SS_BENCH_CALLS:-200}
lookups=${SS_BENCH_LOOKUPS:-50}
clientcalls=${SS_BENCH_CLIENT_CALLS:-50}
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
ns=$(( ($(date +%s%N) - start) / $1 ))
printf 'secret-tool lookup ms/call %d.%03d\n' $((ns / 1000000)) $(( (ns / 1000) % 1000 ))
EOF
# 8 clients at once, each its own connection and DH session, 50 get_secret calls each: the
# wall time from the first call to the last, per call. Then the daemon's own CPU time (user and
# system, /proc/PID/stat) over the whole run, from its start, per client call made in it.
cat >"$w/concurrent.py" <<'EOF'
import multiprocessing, os, secretstorage, sys, time
clients, calls = int(sys.argv[1]), int(sys.argv[2])
def client(start, done):
    # The clients yield to the daemons (this one's and the bus's): eight Python clients on a
    # machine of two cores would otherwise measure mostly themselves.
    os.nice(10)
    conn = secretstorage.dbus_init()
    it = list(secretstorage.get_default_collection(conn).search_items({"bench": "1"}))[0]
    it.get_secret()
    start.wait()
    for _ in range(calls): it.get_secret()
    done.put(time.perf_counter())
def round():
    start, done = multiprocessing.Event(), multiprocessing.Queue()
    workers = [multiprocessing.Process(target=client, args=(start, done)) for _ in range(clients)]
    for w in workers: w.start()
    time.sleep(1)
    t = time.perf_counter()
    start.set()
    last = max(done.get() for _ in workers)
    for w in workers: w.join()
    return (last - t) * 1000 / (clients * calls)
if __name__ == "__main__":
    # The best of three rounds: the clients (Python) share the machine's cores with the daemon,
    # and one round's time is mostly theirs.
    print("%d clients x %d get_secret ms/call %.3f" % (clients, calls, min(round() for _ in range(3))))
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
{
K="$K" w="$w" venv="$venv" calls="$calls" lookups="$lookups" clientcalls="$clientcalls" dbus-run-session -- bash -c '
    "$K/keychaind" --foreground --secret-service 2>"$w/keychaind.log" &
    daemon=$!
    . "$w/common.sh"
    "$K/keychainctl" unlock --pin-file "$w/pin" >/dev/null && "$venv/bin/python" "$w/py.py" "$calls" && bash "$w/lookup.sh" "$lookups" && "$venv/bin/python" "$w/concurrent.py" 8 "$clientcalls" &&
    awk -v hz="$(getconf CLK_TCK)" -v n="$((2 * calls + lookups + 3 * 8 * clientcalls))" "{ printf \"daemon CPU, whole run ms/call %.3f\\n\", (\$14 + \$15) * 1000 / hz / n }" /proc/$daemon/stat' 2>"$w/run.err" ||
    { status=1; cat "$w/run.err" "$w/keychaind.log" >&2; }
} | tee "$w/keychaind.rows"
echo "== gnome-keyring"
{
printf pw >"$w/gkpw"
env -u GNOME_KEYRING_CONTROL HOME="$w/home" XDG_DATA_HOME="$w/home/data" XDG_CONFIG_HOME="$w/home/config" XDG_RUNTIME_DIR="$w/gkrun" \
    w="$w" venv="$venv" calls="$calls" lookups="$lookups" clientcalls="$clientcalls" dbus-run-session -- bash -c '
    gnome-keyring-daemon --foreground --unlock --components=secrets <"$w/gkpw" >"$w/gk.out" 2>"$w/gk.log" &
    daemon=$!
    . "$w/common.sh"
    "$venv/bin/python" "$w/py.py" "$calls" && bash "$w/lookup.sh" "$lookups" && "$venv/bin/python" "$w/concurrent.py" 8 "$clientcalls" &&
    awk -v hz="$(getconf CLK_TCK)" -v n="$((2 * calls + lookups + 3 * 8 * clientcalls))" "{ printf \"daemon CPU, whole run ms/call %.3f\\n\", (\$14 + \$15) * 1000 / hz / n }" /proc/$daemon/stat' 2>"$w/run.err" ||
    { status=1; cat "$w/run.err" "$w/gk.log" >&2; }
} | tee "$w/gnome-keyring.rows"
echo "== ratio (keychaind / gnome-keyring time per call; below 1.00: keychaind is faster)"
while IFS= read -r row; do
    name=${row% ms/call *}
    theirs=$(grep -F "$name ms/call " "$w/gnome-keyring.rows" | awk '{print $NF}')
    # A short run can leave a daemon under one clock tick of CPU (0.000): no ratio, but the row stays.
    [ -n "$theirs" ] && awk -v n="$name" -v a="${row##* }" -v b="$theirs" 'BEGIN { if (b > 0) printf "%-34s %.2f\n", n, a / b; else printf "%-34s n/a\n", n }'
done < <(grep " ms/call " "$w/keychaind.rows")
# Every row of both runs, or the run failed (a subshell's status does not reach this shell).
[ "$(grep -c " ms/call " "$w/keychaind.rows")" = 5 ] && [ "$(grep -c " ms/call " "$w/gnome-keyring.rows")" = 5 ] || status=1
exit $status
