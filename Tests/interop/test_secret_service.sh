# The freedesktop Secret Service from keychaind (--secret-service) on a private session bus
# (dbus-run-session), driven by the real clients: secret-tool (libsecret) store/lookup/search/
# clear with a 0-byte and a 64 KiB secret and UTF-8 attributes; Python's secretstorage (from PyPI)
# over a DH-encrypted session creating, searching, changing and deleting items; git's
# credential-libsecret helper, built from the source Debian ships, storing and returning a
# credential. Cross-door: an item stored through D-Bus is found by keychainctl and by
# SecItemCopyMatching (the secitem executable), and passwords added by keychainctl and SecItemAdd
# are found through D-Bus. A locked keychain answers Unlock with a prompt
# object and GetSecret with IsLocked, never a secret; the prompt program unlocks it. Neither the
# secrets nor the attribute values appear in the keychain files. A second provider does not take
# the name: it says so and exits 1. keychainctl secret-service status names the owner.
# 'secret-service disable --stop' stops the keychaind that serves the bus and nothing else (not a
# keychaind of another bus, not the unlock session's own keychaind, not gnome-keyring), and
# keychaind obeys that Stop only from its own uid. Daemons started here are stopped by their PIDs.
. "$HERE/lib.sh"
. "$HERE/servers.sh"

for tool in dbus-run-session secret-tool gcc pkg-config python3; do
    command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs it)"
done
pkg-config --exists libsecret-1 glib-2.0 || fail "libsecret-1-dev / libglib2.0-dev are missing (scripts/install-deps.sh installs them)"
KEYCHAIND="$(dirname "$KEYCHAINCTL")/keychaind"
SECITEM="$(dirname "$KEYCHAINCTL")/secitem"
[ -x "$KEYCHAIND" ] || fail "no keychaind beside $KEYCHAINCTL"
[ -x "$SECITEM" ] || fail "no secitem (Apple's SecItem calls) beside $KEYCHAINCTL"
cd "$WORK" || fail "cd $WORK"

# secretstorage from PyPI, in a venv kept between runs.
secretstorage_venv

# git's libsecret credential helper, from the source Debian's git package ships.
helper_src=/usr/share/doc/git/contrib/credential/libsecret/git-credential-libsecret.c
[ -f "$helper_src" ] || fail "no $helper_src (Debian's git package ships it)"
# shellcheck disable=SC2046
gcc -O1 -o git-credential-libsecret "$helper_src" $(pkg-config --cflags --libs libsecret-1 glib-2.0) 2>gcc.log || fail "build git-credential-libsecret: $(cat gcc.log)"

export KEYCHAIN_PKCS11_AGENT="$WORK/run/agent.sock"
mkdir -p "$WORK/run" && chmod 700 "$WORK/run"
printf 'user-pin-1\n' >user.pin
kc create --label login --so-pin-file user.pin --pin-file user.pin >/dev/null || fail "create keychain"
cat >askpass <<'EOF'
#!/bin/sh
echo "$1" >>"$(dirname "$0")/asked"
# A person takes a moment to unlock: other clients must not wait for them.
case "$1" in Unlock*) sleep 2 ;; esac
echo user-pin-1
EOF
chmod 700 askpass

cat >inner.sh <<'EOF'
set -u
. "$HERE/lib.sh"
. "$HERE/servers.sh"
cd "$WORK" || exit 1
"$KEYCHAIND" --foreground --secret-service --socket "$KEYCHAIN_PKCS11_AGENT" 2>daemon.log &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null' EXIT
wait_for_log daemon.log "serving the Secret Service" "$daemon" 10
kc unlock --pin-file user.pin >/dev/null || fail "keychainctl unlock"

# secret-tool: store, lookup, search, clear.
printf 'hunter2' | secret-tool store --label='Example login' service example.org account alice || fail "secret-tool store"
expect_eq "$(secret-tool lookup service example.org account alice)" "hunter2" "secret-tool lookup"
out=$(secret-tool search service example.org 2>&1) || fail "secret-tool search"
expect_contains "$out" "label = Example login" "search shows the label"
expect_contains "$out" "secret = hunter2" "search shows the secret"
expect_contains "$out" "attribute.account = alice" "search shows the attributes"
# Cross-door: the D-Bus item is a generic password for keychainctl.
expect_eq "$(kc find-generic-password -s example.org -a alice -w)" "hunter2" "keychainctl finds the D-Bus item"
# ... and a keychainctl password is a Secret Service item.
printf 'from-keychainctl' >kc.txt
kc add-generic-password -a bob -s cli.example --password-file kc.txt >/dev/null || fail "keychainctl add"
expect_eq "$(secret-tool lookup service cli.example account bob)" "from-keychainctl" "secret-tool finds the keychainctl item"
# ... and Apple's SecItem API sees the D-Bus item, and the other way round.
expect_eq "$("$SECITEM" find example.org alice)" "hunter2" "SecItemCopyMatching finds the D-Bus item"
printf 'from-secitem' | "$SECITEM" add apple.example frank || fail "SecItemAdd"
expect_eq "$(secret-tool lookup service apple.example account frank)" "from-secitem" "secret-tool finds the SecItemAdd item"
# A 0-byte secret, a 64 KiB secret and UTF-8 attributes.
printf '' | secret-tool store --label=empty kind empty || fail "store a 0-byte secret"
expect_eq "$(secret-tool lookup kind empty | wc -c)" "0" "the 0-byte secret"
secret-tool lookup kind empty >/dev/null || fail "the 0-byte item is found"
# secret-tool store reads less than 8,192 bytes ("password is too long"): the 64 KiB secret is
# stored with secretstorage and read back with secret-tool, and 8,000 bytes go both ways.
head -c 49152 /dev/urandom | base64 -w 0 | head -c 65536 >big.txt
"$venv/bin/python" -c '
import secretstorage, sys
conn = secretstorage.dbus_init()
secretstorage.get_default_collection(conn).create_item("big", {"kind": "big"}, open("big.txt", "rb").read(), content_type="text/plain")
' || fail "store 64 KiB"
secret-tool lookup kind big >big.out || fail "lookup 64 KiB"
cmp -s big.txt big.out || fail "the 64 KiB secret came back different ($(wc -c <big.out) bytes)"
head -c 8000 big.txt >eight.txt
secret-tool store --label=eight kind eight <eight.txt 2>eight.err && [ ! -s eight.err ] || fail "store 8,000 bytes with secret-tool: $(cat eight.err)"
secret-tool lookup kind eight >eight.out && cmp -s eight.txt eight.out || fail "the 8,000-byte secret came back different"
printf 'ünïcødé ✓' | secret-tool store --label='Schlüssel ✓' 'größe' 'wert ✓ 値' || fail "store UTF-8"
expect_eq "$(secret-tool lookup 'größe' 'wert ✓ 値')" "ünïcødé ✓" "UTF-8 attributes"
secret-tool clear kind big || fail "secret-tool clear"
secret-tool lookup kind big >/dev/null && fail "cleared item still found"

# secretstorage: DH session, create/search/change/delete.
"$venv/bin/python" - <<'PY' || fail "secretstorage"
import secretstorage
from secretstorage.util import open_session
conn = secretstorage.dbus_init()
session = open_session(conn)
assert session.encrypted and len(session.aes_key) == 16, "no DH session"
collection = secretstorage.get_default_collection(conn)
assert collection.get_label() == "login", collection.get_label()
assert not collection.is_locked()
item = collection.create_item("py item", {"application": "pytest", "user": "carol"}, b"py-secret-1")
assert item.get_secret() == b"py-secret-1"
found = list(collection.search_items({"application": "pytest"}))
assert [i.item_path for i in found] == [item.item_path], found
item.set_secret(b"py-secret-2")
item.set_label("py item renamed")
item.set_attributes({"application": "pytest", "user": "dave"})
again = list(secretstorage.search_items(conn, {"user": "dave"}))
assert len(again) == 1 and again[0].get_secret() == b"py-secret-2" and again[0].get_label() == "py item renamed"
assert again[0].get_attributes() == {"application": "pytest", "user": "dave"}
assert again[0].get_created() > 0 and again[0].get_modified() >= again[0].get_created()
replaced = collection.create_item("py item renamed", {"application": "pytest", "user": "dave"}, b"py-secret-3", replace=True)
assert replaced.item_path == item.item_path, (replaced.item_path, item.item_path)
assert item.get_secret() == b"py-secret-3"
item.delete()
assert list(collection.search_items({"application": "pytest"})) == []
print("secretstorage: ok")
PY

# A new collection is a new keychain: its PINs are asked by the prompt (the prompt program);
# deleting it asks its SO PIN.
"$venv/bin/python" - <<'PY' || fail "secretstorage collections"
import secretstorage
conn = secretstorage.dbus_init()
work = secretstorage.create_collection(conn, "Work Keys")
assert work.collection_path == "/org/freedesktop/secrets/collection/Work_20Keys", work.collection_path
assert work.get_label() == "Work Keys" and not work.is_locked()
item = work.create_item("vpn", {"service": "vpn.example", "account": "gina"}, b"vpn-secret")
assert sorted(c.get_label() for c in secretstorage.get_all_collections(conn)) == ["Session", "Work Keys", "login"]
print("collection: ok")
PY

expect_contains "$(kc list)" "Work Keys" "the new collection is a keychain"
expect_eq "$(kc find-generic-password -k 'Work Keys' -s vpn.example -a gina -w)" "vpn-secret" "its item, through keychainctl"
expect_contains "$(cat asked)" "New keychain 'Work Keys': its SO PIN" "the prompt asked the SO PIN"
"$venv/bin/python" - <<'PY' || fail "delete a collection"
import secretstorage
conn = secretstorage.dbus_init()
work = [c for c in secretstorage.get_all_collections(conn) if c.get_label() == "Work Keys"][0]
work.delete()
assert sorted(c.get_label() for c in secretstorage.get_all_collections(conn)) == ["Session", "login"]
print("delete collection: ok")
PY
expect_not_contains "$(kc list)" "Work Keys" "the deleted collection's keychain is gone"

# A collection's Label is the keychain's display name: settable over D-Bus (also through the
# default alias), shown by keychainctl; the token label, the object path and the PKCS#11 URI stay.
"$venv/bin/python" - <<'PY' || fail "collection labels"
import secretstorage
conn = secretstorage.dbus_init()
login = secretstorage.get_default_collection(conn)
login.set_label("Mes mots de passe ✓")
assert login.get_label() == "Mes mots de passe ✓", login.get_label()
assert secretstorage.Collection(conn, "/org/freedesktop/secrets/collection/login").get_label() == "Mes mots de passe ✓"
print("label: ok")
PY
expect_contains "$(kc info)" "Display name   Mes mots de passe ✓" "keychainctl shows the display name"
expect_contains "$(kc info)" "token=login" "the PKCS#11 URI keeps the token label"
kc set-display-name --clear >/dev/null || fail "keychainctl set-display-name --clear"
expect_eq "$("$venv/bin/python" -c 'import secretstorage; print(secretstorage.get_default_collection(secretstorage.dbus_init()).get_label())')" "login" "cleared: the token label again"

# The session collection (libsecret's SECRET_COLLECTION_SESSION): in memory only. Nothing of its
# items reaches the keychain folder or the device key's folder.
snapshot() { find "$KEYCHAIN_PKCS11_DIR" "$(dirname "$KEYCHAIN_PKCS11_DEVICE_KEY")" -type f -exec sha256sum {} + | sort; }
before=$(snapshot)
printf 'session-secret-77' | secret-tool store --collection=session --label='In memory' scope session-only || fail "secret-tool store in the session collection"
expect_eq "$(secret-tool lookup scope session-only)" "session-secret-77" "secret-tool finds the session item"
"$venv/bin/python" - <<'PY' || fail "the session collection through secretstorage"
import secretstorage
conn = secretstorage.dbus_init()
session = secretstorage.Collection(conn, "/org/freedesktop/secrets/aliases/session")
assert session.collection_path == "/org/freedesktop/secrets/aliases/session"
items = list(session.search_items({"scope": "session-only"}))
assert len(items) == 1 and items[0].item_path.startswith("/org/freedesktop/secrets/collection/session/"), [i.item_path for i in items]
assert items[0].get_secret() == b"session-secret-77" and items[0].get_label() == "In memory"
assert not session.is_locked()
print("session collection: ok")
PY
[ "$(snapshot)" = "$before" ] || fail "storing in the session collection changed files on disk"
grep -rl "session-secret-77\|session-only" "$KEYCHAIN_PKCS11_DIR" "$(dirname "$KEYCHAIN_PKCS11_DEVICE_KEY")" 2>/dev/null && fail "the session item reached a file"
kc find-generic-password -l 'In memory' >/dev/null 2>&1 && fail "the session item is in a keychain"

# git credential-libsecret: store, get, erase.
printf 'protocol=https\nhost=git.example.org\nusername=erin\npassword=git-s3cret\n\n' | ./git-credential-libsecret store || fail "git credential store"
out=$(printf 'protocol=https\nhost=git.example.org\n\n' | ./git-credential-libsecret get) || fail "git credential get"
expect_contains "$out" "password=git-s3cret" "git credential get returns the password"
expect_contains "$out" "username=erin" "git credential get returns the user"
expect_eq "$(kc find-internet-password -s git.example.org -a erin -w)" "git-s3cret" "the git credential is an internet password"
printf 'protocol=https\nhost=git.example.org\nusername=erin\n\n' | ./git-credential-libsecret erase || fail "git credential erase"
out=$(printf 'protocol=https\nhost=git.example.org\n\n' | ./git-credential-libsecret get)
expect_not_contains "$out" "git-s3cret" "erased"

# A password whose access control asks the PIN at each use is not served over D-Bus (the
# Secret Service cannot ask it): not found, not listed.
printf 'guarded-secret' >guarded.txt
kc add-generic-password -a hidden -s guarded.example --access-control user-presence --password-file guarded.txt >/dev/null || fail "add a user-presence item"
secret-tool lookup service guarded.example account hidden >guarded.out && fail "a user-presence item was served: $(cat guarded.out)"
expect_eq "$(secret-tool search --all service guarded.example 2>&1)" "" "a user-presence item is not listed"

# Nothing of the secrets or attribute values in the files.
for needle in hunter2 ünïcødé 'wert ✓' example.org 'Example login' carol py-secret git-s3cret; do
    for file in "$KEYCHAIN_PKCS11_DIR"/login.keychain-db*; do
        grep -qaF -- "$needle" "$file" && fail "'$needle' is in $file in plain text"
    done
done

# A locked keychain: Unlock answers with a prompt, GetSecret with IsLocked, never a secret.
"$venv/bin/python" -c '
import secretstorage
conn = secretstorage.dbus_init()
print([i.item_path for i in secretstorage.search_items(conn, {"service": "example.org", "account": "alice"})][0])' >alice.path || fail "alice's item path"
kc lock >/dev/null || fail "keychainctl lock"
# A locked keychain's item is found (in SearchItems' locked list, through the locked-lookup
# index): secret-tool asks to unlock, the prompt program is run, and the secret comes back.
: >asked
expect_eq "$(secret-tool lookup service example.org account alice)" "hunter2" "secret-tool lookup on a locked keychain"
expect_contains "$(cat asked)" "Unlock the keychain 'login'" "the lookup ran the prompt"
# With the keychain's locked search off, a locked keychain shows nothing and asks nothing.
kc session-policy --pin-file user.pin --locked-search no >/dev/null || fail "locked search off"
kc lock >/dev/null || fail "keychainctl lock"
: >asked
secret-tool lookup service example.org account alice >locked.out && fail "locked search off, yet a secret: $(cat locked.out)"
[ -s asked ] && fail "locked search off, yet the prompt ran: $(cat asked)"
kc session-policy --pin-file user.pin --locked-search yes >/dev/null || fail "locked search on"
kc lock >/dev/null || fail "keychainctl lock"
"$venv/bin/python" - <<'PY' || fail "locked keychain through secretstorage"
import secretstorage
from secretstorage.exceptions import LockedException
from secretstorage.util import DBusAddressWrapper
conn = secretstorage.dbus_init()
collection = secretstorage.get_default_collection(conn)
assert collection.is_locked()
service = DBusAddressWrapper("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", conn)
path = open("alice.path").read().strip()
unlocked, locked = service.call("SearchItems", "a{ss}", {"service": "example.org", "account": "alice"})
assert unlocked == [] and locked == [path], (unlocked, locked)
unlocked, locked = service.call("SearchItems", "a{ss}", {"service": "example.org", "account": "nobody"})
assert unlocked == [] and locked == [], (unlocked, locked)
try:
    collection.set_label("renamed while locked")
    raise SystemExit("Label set on a locked keychain")
except LockedException:
    pass
unlocked, prompt = service.call("Unlock", "ao", [collection.collection_path])
assert unlocked == [] and prompt.startswith("/org/freedesktop/secrets/prompt/"), (unlocked, prompt)
try:
    collection.create_item("x", {"a": "b"}, b"c")
    raise SystemExit("CreateItem on a locked keychain succeeded")
except LockedException:
    pass
from jeepney.wrappers import DBusErrorResponse
path = open("alice.path").read().strip()
item = DBusAddressWrapper(path, "org.freedesktop.Secret.Item", conn)
session = secretstorage.util.open_session(conn)
try:
    item.call("GetSecret", "o", session.object_path)
    raise SystemExit("GetSecret on a locked keychain answered")
except DBusErrorResponse as error:
    assert error.name == "org.freedesktop.Secret.Error.IsLocked", error.name
assert secretstorage.Item(conn, path).is_locked()
print("locked: ok")
PY
# With a prompt program, secretstorage's unlock runs the prompt and the keychain opens.
"$venv/bin/python" - <<'PY' || fail "unlock through the prompt"
import secretstorage, threading, time
conn = secretstorage.dbus_init()
collection = secretstorage.get_default_collection(conn)
results = []
worker = threading.Thread(target=lambda: results.append(collection.unlock()))
worker.start()
time.sleep(0.5)
# While the prompt program waits 2 s for "the person", another client is answered at once.
other = secretstorage.dbus_init()
start = time.time()
locked = secretstorage.get_default_collection(other).is_locked()
took = time.time() - start
worker.join()
assert took < 1.0, "a call waited %.2f s for the prompt" % took
assert locked, "the keychain was already unlocked"
assert results == [False] and not collection.is_locked(), "the prompt did not unlock"
print("prompt unlock: ok (another client answered in %.3f s meanwhile)" % took)
PY
expect_contains "$(cat asked)" "Unlock the keychain 'login'" "the prompt program was asked"
expect_eq "$(secret-tool lookup service example.org account alice)" "hunter2" "unlocked again"

# Reading lock states is not a use: a keychain unlocked for 2 s locks although a client polls.
kc unlock --timeout 2s --pin-file user.pin >/dev/null || fail "unlock with a timeout"
"$venv/bin/python" - <<'PY' || fail "the idle timeout while a client polls Locked"
import secretstorage, time
conn = secretstorage.dbus_init()
collection = secretstorage.get_default_collection(conn)
assert not collection.is_locked()
deadline = time.time() + 6
while time.time() < deadline and not collection.is_locked():
    time.sleep(0.2)
assert collection.is_locked(), "polling Locked kept the keychain unlocked"
print("idle timeout: ok")
PY
kc unlock --pin-file user.pin >/dev/null || fail "unlock again"

# keychainctl secret-service status names the owner; a second provider does not take the name.
out=$(kc secret-service status) || fail "secret-service status"
expect_contains "$out" "keychaind" "status names keychaind as the owner"
expect_status 1 "second provider" "$KEYCHAIND" --foreground --secret-service --socket "$WORK/run2/agent.sock"
expect_contains "$(cat "$WORK/last.err")" "another Secret Service owns org.freedesktop.secrets" "the second provider says so"

# 'secret-service disable --stop' stops the keychaind that serves this session bus (asked over the
# bus, by its connection), and no other: a keychaind serving another session bus, on another
# socket, keeps running. Plain 'disable' names --stop.
activation="$WORK/ss-data/dbus-1/services/org.freedesktop.secrets.service"
XDG_DATA_HOME="$WORK/ss-data" kc secret-service enable >/dev/null || fail "secret-service enable"
expect_status 0 "disable" env XDG_DATA_HOME="$WORK/ss-data" "$KEYCHAINCTL" secret-service disable
expect_eq "$(cat "$WORK/last.out")" "Removed $activation. A running keychaind --secret-service keeps the name until it stops: 'keychainctl secret-service disable --stop' stops it (or log out)." "disable names --stop"
mkdir -p "$WORK/run4" && chmod 700 "$WORK/run4"
dbus-run-session -- bash -c '"$KEYCHAIND" --foreground --secret-service --socket "$WORK/run4/agent.sock" 2>other.log & echo $! >other.pid; wait' 2>/dev/null &
other_session=$!
trap 'kill $daemon "$(cat other.pid 2>/dev/null)" 2>/dev/null; wait $daemon $other_session 2>/dev/null' EXIT
for _ in $(seq 50); do [ -s other.pid ] && break; sleep 0.1; done
other=$(cat other.pid)
wait_for_log other.log "serving the Secret Service" "$other" 10
XDG_DATA_HOME="$WORK/ss-data" kc secret-service enable >/dev/null || fail "secret-service enable again"
expect_status 0 "disable --stop" env XDG_DATA_HOME="$WORK/ss-data" "$KEYCHAINCTL" secret-service disable --stop
expect_eq "$(cat "$WORK/last.out")" "Removed $activation.
Stopped keychaind (PID $daemon), which served org.freedesktop.secrets on this session bus." "disable --stop"
[ -e "$activation" ] && fail "disable --stop left the activation file"
wait "$daemon"
expect_eq "$?" "0" "the stopped keychaind's exit status"
expect_contains "$(cat daemon.log)" "keychaind: asked to stop over the session bus by PID " "the daemon says who stopped it"
expect_contains "$(cat daemon.log)" "keychaind: stopped; every keychain locked" "the daemon stopped cleanly"
[ -e "$KEYCHAIN_PKCS11_AGENT" ] && fail "the stopped keychaind left its socket"
expect_contains "$(kc secret-service status)" "org.freedesktop.secrets: nobody serves it now" "the name is released"
kill -0 "$other" 2>/dev/null || fail "disable --stop stopped the keychaind of another session bus"
expect_contains "$(KEYCHAIN_PKCS11_AGENT="$WORK/run4/agent.sock" kc status)" "keychaind: running on $WORK/run4/agent.sock" "the other keychaind still answers"
# Nothing left to do: no activation file, nobody serving.
expect_status 6 "disable --stop with nothing to do" env XDG_DATA_HOME="$WORK/ss-data" "$KEYCHAINCTL" secret-service disable --stop
expect_eq "$(cat "$WORK/last.err")" "keychainctl: $activation does not exist and no program serves org.freedesktop.secrets on this session bus: nothing was changed." "disable --stop with nothing to do"
kill "$other"
wait "$other_session"
expect_contains "$(cat other.log)" "keychaind: stopped; every keychain locked" "the other keychaind, stopped by its PID"
echo "ok: Secret Service"
EOF

mkdir -p "$WORK/run2" && chmod 700 "$WORK/run2"
KEYCHAIN_PKCS11_PROMPT="$WORK/askpass" WORK="$WORK" HERE="$HERE" venv="$venv" KEYCHAIND="$KEYCHAIND" SECITEM="$SECITEM" \
    timeout 240 dbus-run-session -- bash inner.sh || fail "the Secret Service session failed"

# keychaind obeys Stop only from its own uid, whatever the bus admits: on a session bus that lets
# every user connect (otherwise session.conf's policy), another uid (nobody, through setpriv: root only) gets AccessDenied and the
# daemon keeps serving; then disable --stop, with no activation file to remove, stops it.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    cat >anyuser.conf <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:abstract=$WORK/anyuser-bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
    cat >anyuser.sh <<'SCRIPT'
set -u
. "$HERE/lib.sh"
. "$HERE/servers.sh"
cd "$WORK" || exit 1
"$KEYCHAIND" --foreground --secret-service --socket "$WORK/run5/agent.sock" 2>anyuser.log &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null' EXIT
wait_for_log anyuser.log "serving the Secret Service" "$daemon" 10
expect_status 1 "Stop from another uid" setpriv --reuid=65534 --regid=65534 --clear-groups \
    dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets keychain_pkcs11.Daemon.Stop
expect_eq "$(cat "$WORK/last.err")" "Error org.freedesktop.DBus.Error.AccessDenied: only uid 0 may stop this keychaind" "Stop from another uid"
sleep 0.6
kill -0 "$daemon" 2>/dev/null || fail "keychaind stopped for another uid: $(cat anyuser.log)"
expect_contains "$(kc secret-service status)" "served by keychaind: " "keychaind still serves after another uid's Stop"
expect_status 0 "disable --stop with no activation file" env XDG_DATA_HOME="$WORK/anyuser-data" "$KEYCHAINCTL" secret-service disable --stop
expect_eq "$(cat "$WORK/last.out")" "Stopped keychaind (PID $daemon), which served org.freedesktop.secrets on this session bus." "disable --stop with no activation file"
wait "$daemon"
expect_eq "$?" "0" "keychaind's exit status after Stop"
echo "ok: Stop from another uid refused"
SCRIPT
    mkdir -p "$WORK/run5" && chmod 700 "$WORK/run5"
    WORK="$WORK" HERE="$HERE" KEYCHAIND="$KEYCHAIND" timeout 60 dbus-run-session --config-file="$WORK/anyuser.conf" -- bash anyuser.sh ||
        fail "Stop from another uid"
fi

# Switching from gnome-keyring: its items are imported through the API while it serves the name,
# keychaind refuses to take the name from it, and after it stops the activation file that
# 'keychainctl secret-service enable' writes starts keychaind for the next client (here beside a
# keychaind started by 'keychainctl unlock', whose keys it uses).
command -v gnome-keyring-daemon >/dev/null || fail "gnome-keyring is missing (scripts/install-deps.sh installs it)"
cat >switch.sh <<'EOF'
set -u
. "$HERE/lib.sh"
. "$HERE/servers.sh"
cd "$WORK" || exit 1
printf 'gnome-keyring-password' | gnome-keyring-daemon --unlock --components=secrets >gk.env 2>gk.log || fail "gnome-keyring-daemon: $(cat gk.log)"
for _ in $(seq 50); do kc secret-service status 2>/dev/null | grep -q gnome-keyring && break; sleep 0.1; done
gk=$(kc secret-service status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["owner"]["pid"])') || fail "gnome-keyring's PID"
# At the end: gnome-keyring, and the keychaind that 'keychainctl unlock' starts on run3 (found by
# its socket), each stopped by its PID.
trap 'kill $gk 2>/dev/null; stop_detached "$(socket_pid "$WORK/run3/agent.sock")"' EXIT
printf 'from-gnome-keyring' | secret-tool store --label='GK item' service gk.example account zed || fail "store in gnome-keyring"
printf 'protocol=https\nhost=gk-git.example\nusername=yan\npassword=gk-git-pass\n\n' | ./git-credential-libsecret store || fail "git credential into gnome-keyring"
out=$(kc secret-service status) || fail "status with gnome-keyring"
expect_contains "$out" "served by another provider: /usr/bin/gnome-keyring-daemon" "status names gnome-keyring"
expect_status 1 "keychaind while gnome-keyring owns the name" "$KEYCHAIND" --foreground --secret-service --socket "$WORK/run2/agent.sock"
expect_contains "$(cat "$WORK/last.err")" "another Secret Service owns org.freedesktop.secrets (PID $gk, /usr/bin/gnome-keyring-daemon)" "keychaind names the owner"
# disable --stop leaves another provider alone.
expect_status 6 "disable --stop while gnome-keyring serves" kc secret-service disable --stop
expect_eq "$(cat "$WORK/last.err")" "keychainctl: $XDG_DATA_HOME/dbus-1/services/org.freedesktop.secrets.service does not exist and /usr/bin/gnome-keyring-daemon (PID $gk) serves org.freedesktop.secrets, not keychaind (left running): nothing was changed." "disable --stop names gnome-keyring"
kill -0 "$gk" 2>/dev/null || fail "disable --stop stopped gnome-keyring"
out=$(kc import-secret-service -k imported --pin-file user.pin) || fail "import-secret-service: $out"
expect_contains "$out" "Imported 2 item(s) from 2 collection(s) of /usr/bin/gnome-keyring-daemon into keychain 'imported'; 0 already there." "import counts"
out=$(kc import-secret-service -k imported --pin-file user.pin) || fail "second import"
expect_contains "$out" "Imported 0 item(s)" "a second import copies nothing"
expect_contains "$out" "2 already there" "a second import finds both"
expect_eq "$(kc find-generic-password -k imported -s gk.example -a zed -w --pin-file user.pin)" "from-gnome-keyring" "imported item"
expect_eq "$(kc find-internet-password -k imported -s gk-git.example -a yan -w --pin-file user.pin)" "gk-git-pass" "imported git credential"
kill "$gk"
for _ in $(seq 50); do kill -0 "$gk" 2>/dev/null || break; sleep 0.1; done
# Switch: the activation file, a running unlock session, and the next client starts keychaind.
kc secret-service enable >enable.out || fail "secret-service enable"
activation="$XDG_DATA_HOME/dbus-1/services/org.freedesktop.secrets.service"
[ -f "$activation" ] || fail "no activation file"
grep -qx "Exec=$(realpath "$KEYCHAIND") --foreground --secret-service" "$activation" || fail "activation file Exec: $(cat "$activation")"
dbus-send --session --type=method_call --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.ReloadConfig || fail "ReloadConfig"
kc unlock -k imported --pin-file user.pin >/dev/null || fail "unlock imported"
expect_eq "$(secret-tool lookup service gk.example account zed)" "from-gnome-keyring" "keychaind, started by D-Bus activation, serves the imported item"
out=$(kc secret-service status); expect_contains "$out" "served by keychaind" "status after the switch"
# Back: disable --stop stops the activated keychaind (it serves with the unlock session's keys),
# not the unlock session's own keychaind, which 'keychainctl unlock' started.
served=$(kc secret-service status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["owner"]["pid"])') || fail "keychaind's PID"
unlock_daemon=$(socket_pid "$WORK/run3/agent.sock")
[ -n "$unlock_daemon" ] && [ "$unlock_daemon" != "$served" ] || fail "the unlock session's keychaind ($unlock_daemon) is not apart from the serving one ($served)"
expect_status 0 "disable --stop after the switch" kc secret-service disable --stop
expect_eq "$(cat "$WORK/last.out")" "Removed $activation.
Stopped keychaind (PID $served), which served org.freedesktop.secrets on this session bus.
The unlock session's keychaind still runs on $WORK/run3/agent.sock: 'keychainctl lock --all' locks its keychains." "disable --stop beside the unlock session"
[ -f "$activation" ] && fail "disable left the activation file"
for _ in $(seq 50); do kill -0 "$served" 2>/dev/null || break; sleep 0.1; done
kill -0 "$served" 2>/dev/null && fail "the activated keychaind ($served) still runs"
expect_contains "$(kc secret-service status)" "org.freedesktop.secrets: nobody serves it now" "the name is released"
expect_eq "$(socket_pid "$WORK/run3/agent.sock")" "$unlock_daemon" "the unlock session's keychaind still listens"
expect_contains "$(kc status)" "imported: unlocked" "the unlock session still holds the keychain"
echo "ok: switching from gnome-keyring"
EOF
mkdir -p "$WORK/run2" "$WORK/run3" && chmod 700 "$WORK/run2" "$WORK/run3"
kc create --label imported --so-pin-file user.pin --pin-file user.pin >/dev/null || fail "create the import target"
# The session bus reads the user's activation folder from its own environment (HOME, XDG_DATA_HOME).
mkdir -p "$WORK/gkhome/data"
WORK="$WORK" HERE="$HERE" KEYCHAIND="$KEYCHAIND" XDG_RUNTIME_DIR="$WORK/run3" HOME="$WORK/gkhome" XDG_DATA_HOME="$WORK/gkhome/data" \
    KEYCHAIN_PKCS11_AGENT="$WORK/run3/agent.sock" KEYCHAIN_PKCS11_DEFAULT=imported \
    timeout 240 dbus-run-session -- bash switch.sh || fail "switching from gnome-keyring failed"
