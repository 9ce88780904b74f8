#!/usr/bin/env bash
# Side by side, each on its own private session bus: 200 secretstorage get_secret and search_items
# calls (DH session) and 50 secret-tool lookups against keychaind --secret-service and against
# gnome-keyring-daemon. Usage: scripts/secret-service-bench.sh [BIN_FOLDER] (default: the release build).
set -u
K=${1:-$(cat "$(dirname "$0")/../.build/release-path")}
venv=${SECRETSTORAGE_VENV:-/tmp/keychain-pkcs11-secretstorage}   # made by Tests/interop/test_secret_service.sh
w=$(mktemp -d /tmp/ssbench.XXXXXX); mkdir -p $w/keys $w/run $w/home; chmod 700 $w/run
export KEYCHAIN_PKCS11_DIR=$w/keys KEYCHAIN_PKCS11_DEVICE_KEY=$w/dk KEYCHAIN_PKCS11_KDF_LOG_N=10 KEYCHAIN_PKCS11_AGENT=$w/run/agent.sock
printf 'pin-1234\n' > $w/pin
$K/keychainctl create --label login --so-pin-file $w/pin --pin-file $w/pin >/dev/null
cat > $w/py.py <<'EOF'
import secretstorage, time
conn = secretstorage.dbus_init()
c = secretstorage.get_default_collection(conn)
it = c.create_item("bench", {"bench": "1"}, b"x" * 32, replace=True)
t = time.perf_counter()
for _ in range(200): it.get_secret()
print("get_secret ms/call %.3f" % ((time.perf_counter() - t) * 1000 / 200))
t = time.perf_counter()
for _ in range(200): list(c.search_items({"bench": "1"}))
print("search_items ms/call %.3f" % ((time.perf_counter() - t) * 1000 / 200))
EOF
cat > $w/lookup.sh <<'EOF'
start=$(date +%s%N); for i in $(seq 50); do secret-tool lookup bench 1 >/dev/null; done
echo "secret-tool lookup ms/call $(( ($(date +%s%N) - start) / 50000000 ))"
EOF
echo "== keychaind"
dbus-run-session -- bash -c "$K/keychaind --foreground --secret-service 2>/dev/null & sleep 1; $K/keychainctl unlock --pin-file $w/pin >/dev/null; $venv/bin/python $w/py.py; bash $w/lookup.sh; kill %1" 2>/dev/null
echo "== gnome-keyring"
HOME=$w/home XDG_DATA_HOME=$w/home/data dbus-run-session -- bash -c "printf pw | gnome-keyring-daemon --unlock --components=secrets >/dev/null; sleep 1; $venv/bin/python $w/py.py; bash $w/lookup.sh; pkill -f gnome-keyring-daemon" 2>/dev/null
rm -rf $w
