# scripts/secret-service-bench.sh beside a gnome-keyring of the user's own: a gnome-keyring-daemon
# started first, on its own session bus, with the HOME and XDG_RUNTIME_DIR the benchmark inherits
# (as on a desktop), still runs afterwards, still serves its item and keeps its control socket;
# the benchmark's own keychaind and gnome-keyring-daemon are gone, and so is its folder. Its
# figures are checked for form, with a few calls (SS_BENCH_CALLS, SS_BENCH_LOOKUPS).
. "$HERE/lib.sh"

for tool in dbus-run-session dbus-send gnome-keyring-daemon secret-tool python3; do
    command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs it)"
done
secretstorage_venv
root=$(cd "$HERE/../.." && pwd)
bin=$(dirname "$KEYCHAINCTL")
[ -x "$bin/keychaind" ] || fail "no keychaind beside $KEYCHAINCTL"
cd "$WORK" || fail "cd $WORK"
mkdir -p home run tmp && chmod 700 run
export HOME="$WORK/home" XDG_RUNTIME_DIR="$WORK/run" XDG_DATA_HOME="$WORK/home/data"
unset GNOME_KEYRING_CONTROL

# The user's own gnome-keyring, on its own session bus (address kept), with an item.
printf 'own-password' >own.pw
dbus-run-session -- bash -c 'echo "$DBUS_SESSION_BUS_ADDRESS" >own.bus
    gnome-keyring-daemon --foreground --unlock --components=secrets <own.pw >own.out 2>own.log & echo $! >own.pid; wait' 2>/dev/null &
own_session=$!
for _ in $(seq 50); do [ -s own.pid ] && [ -s own.bus ] && break; sleep 0.1; done
own=$(cat own.pid) || fail "the first gnome-keyring-daemon did not start"
trap 'kill "$own" 2>/dev/null; wait "$own_session" 2>/dev/null' EXIT
own_bus() { DBUS_SESSION_BUS_ADDRESS=$(cat "$WORK/own.bus") "$@"; }
for _ in $(seq 50); do
    own_bus dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner \
        string:org.freedesktop.secrets 2>/dev/null | grep -q 'boolean true' && break
    kill -0 "$own" 2>/dev/null || fail "the first gnome-keyring-daemon exited: $(cat own.log)"
    sleep 0.1
done
printf 'own-secret' | own_bus secret-tool store --label='own item' owner first || fail "store in the first gnome-keyring: $(cat own.log)"
[ -S run/keyring/control ] || fail "the first gnome-keyring-daemon has no control socket in $XDG_RUNTIME_DIR/keyring"

expect_status 0 "secret-service-bench.sh" env TMPDIR="$WORK/tmp" SS_BENCH_CALLS=5 SS_BENCH_LOOKUPS=3 SS_BENCH_CLIENT_CALLS=2 SECRETSTORAGE_VENV="$venv" \
    "$root/scripts/secret-service-bench.sh" "$bin"
# (A daemon's CPU time is counted in clock ticks: with these few calls gnome-keyring's can be 0, and
# that ratio row then says n/a.)
expect_eq "$(sed -E 's/[0-9]+(\.[0-9]+)?$/N/; s/^(daemon CPU, whole run) +n\/a$/\1 N/; s/ +N$/ N/' last.out)" "== keychaind
get_secret ms/call N
search_items ms/call N
secret-tool lookup ms/call N
8 clients x 2 get_secret ms/call N
daemon CPU, whole run ms/call N
== gnome-keyring
get_secret ms/call N
search_items ms/call N
secret-tool lookup ms/call N
8 clients x 2 get_secret ms/call N
daemon CPU, whole run ms/call N
== ratio (keychaind / gnome-keyring time per call; below 1.00: keychaind is faster)
get_secret N
search_items N
secret-tool lookup N
8 clients x 2 get_secret N
daemon CPU, whole run N" "the benchmark's figures"

kill -0 "$own" 2>/dev/null || fail "the benchmark stopped the gnome-keyring-daemon that ran before it"
expect_eq "$(own_bus secret-tool lookup owner first)" "own-secret" "the first gnome-keyring still serves its item"
[ -S run/keyring/control ] || fail "the first gnome-keyring-daemon lost its control socket"
# The benchmark's own daemons are gone (their environment names its folder), and the folder too.
for pid in $(pgrep -x gnome-keyring-d) $(pgrep -x keychaind); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qF "$WORK/tmp/ssbench." && fail "the benchmark left PID $pid running: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
done
expect_eq "$(ls -A tmp)" "" "the benchmark's folder is removed"

# The first gnome-keyring-daemon, stopped by its PID.
kill "$own"
wait "$own_session"
kill -0 "$own" 2>/dev/null && fail "the first gnome-keyring-daemon did not stop"
echo "ok: the benchmark stops only its own providers"
