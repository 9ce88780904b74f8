# A real desktop application keeps its secret in keychaind: Chromium (Debian's package), headless,
# with --password-store=gnome-libsecret, on a private session bus where keychaind serves the
# Secret Service. Chromium 156 no longer goes through libsecret: its own D-Bus client
# (OSCrypt's FreedesktopSecretKeyProvider) reads the default alias, unlocks the collection
# (Service.Unlock, then the prompt), opens a plain session, searches the collection for
# application=chromium and, the first time, creates the item "Chromium Safe Storage"
# (xdg:schema chrome_libsecret_os_crypt_password_v2) holding the key its cookies and saved
# passwords are encrypted with (their "v11" prefix; "v10" is the fixed key of the basic store).
#   1. A fresh profile loads a page on 127.0.0.1 that sets a cookie: the item appears, once, in
#      keychaind (secret-tool and keychainctl agree on its secret) and the cookie is stored "v11".
#   2. keychaind restarted on a new bus with the keychain locked: a second Chromium on the same
#      profile has the collection unlocked through the prompt program, reads the same key and
#      the page reads the cookie back; no second item.
#   3. Control: the item deleted with keychainctl, a third Chromium cannot decrypt the cookie
#      (the page sees none) and stores a new key: the cookie did depend on keychaind's item.
. "$HERE/lib.sh"
. "$HERE/servers.sh"

for tool in chromium dbus-run-session secret-tool sqlite3 python3; do
    command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs it)"
done
KEYCHAIND="$(dirname "$KEYCHAINCTL")/keychaind"
[ -x "$KEYCHAIND" ] || fail "no keychaind beside $KEYCHAINCTL"
cd "$WORK" || fail "cd $WORK"

export KEYCHAIN_PKCS11_AGENT="$WORK/run/agent.sock" XDG_RUNTIME_DIR="$WORK/run"
# Chromium's own files (NSS database, caches) in a home of this test's, not the user's.
export HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" XDG_CACHE_HOME="$WORK/home/.cache"
mkdir -p "$WORK/run" "$WORK/home" "$WORK/site" && chmod 700 "$WORK/run"
printf 'user-pin-1\n' >user.pin
kc create --label login --so-pin-file user.pin --pin-file user.pin >/dev/null || fail "create keychain"
cat >askpass <<'EOF'
#!/bin/sh
echo "$1" >>"$(dirname "$0")/asked"
cat "$(dirname "$0")/user.pin"
EOF
chmod 700 askpass
export KEYCHAIN_PKCS11_PROMPT="$WORK/askpass"

# The pages: one sets a cookie for a day, one shows the cookies it can read.
cat >site/set.html <<'EOF'
<html><body><script>document.cookie = "probe=kc-cookie-42; max-age=86400; path=/"; document.write("set:" + document.cookie)</script></body></html>
EOF
cat >site/get.html <<'EOF'
<html><body><script>document.write("got:[" + document.cookie + "]")</script></body></html>
EOF

# One Chromium run on a private bus: keychaind started (and, when asked, unlocked with keychainctl),
# a web server on 127.0.0.1 for the page, Chromium printing the page's DOM; every process stopped
# by its PID. browse.sh UNLOCK(yes|no) PAGE OUT
cat >browse.sh <<'EOF'
set -u
. "$HERE/lib.sh"
. "$HERE/servers.sh"
cd "$WORK" || exit 1
"$KEYCHAIND" --foreground --secret-service --socket "$KEYCHAIN_PKCS11_AGENT" 2>>daemon.log &
daemon=$!
http=
trap 'stop_pid "$http"; stop_pid "$daemon"' EXIT
wait_for_log daemon.log "serving the Secret Service" "$daemon" 10
if [ "$1" = yes ]; then kc unlock --pin-file user.pin >/dev/null || fail "keychainctl unlock"; fi
port=$(free_port)
(cd site && exec python3 -m http.server "$port" --bind 127.0.0.1) >http.log 2>&1 &
http=$!
for _ in $(seq 100); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break; sleep 0.1; done
start=$(date +%s%N)
timeout 120 chromium --headless=new --no-sandbox --password-store=gnome-libsecret --user-data-dir="$WORK/profile" \
    --no-first-run --disable-gpu --dump-dom "http://127.0.0.1:$port/$2" >"$3" 2>>chromium.log || fail "chromium on $2: $(tail -n 5 chromium.log)"
echo "figure: headless chromium, $2: $((($(date +%s%N) - start) / 1000000)) ms"
secret-tool search --all application chromium >"$3.items" 2>&1
EOF
browse() {
    WORK="$WORK" HERE="$HERE" KEYCHAIND="$KEYCHAIND" timeout 240 dbus-run-session -- bash browse.sh "$@" 2>>bus.log ||
        fail "the Chromium session ($*) failed: $(tail -n 5 bus.log)"
}
# items FILE: the Secret Service paths secret-tool listed; secret FILE: the (one) secret listed.
items() { grep -c '^\[/' "$1"; }
secret() { sed -n 's/^secret = //p' "$1"; }

# 1. A fresh profile: the key is created in keychaind.
browse yes set.html first.dom
expect_contains "$(cat first.dom)" "set:probe=kc-cookie-42" "the page set its cookie"
expect_eq "$(items first.dom.items)" 1 "one Chromium item in keychaind after the first run"
listing=$(cat first.dom.items)
expect_contains "$listing" "label = Chromium Safe Storage" "the item's label"
expect_contains "$listing" "schema = chrome_libsecret_os_crypt_password_v2" "the item's schema"
key=$(secret first.dom.items)
[ -n "$key" ] || fail "the Chromium key is empty"
expect_eq "$(kc find-generic-password -l 'Chromium Safe Storage' -w)" "$key" "keychainctl finds Chromium's key"
cookies="$WORK/profile/Default/Cookies"
[ -f "$cookies" ] || fail "no Cookies database in the profile"
expect_eq "$(sqlite3 "$cookies" "select substr(encrypted_value, 1, 3) from cookies where name = 'probe'")" "v11" \
    "the cookie is encrypted with the keyring's key (v11), not the basic store's (v10)"
grep -qaF kc-cookie-42 "$cookies" && fail "the cookie's value is in the Cookies database in plain text"
kc status | grep -q "login: unlocked" && fail "the keychain stayed unlocked after keychaind stopped"

# 2. keychaind restarted, the keychain locked: the prompt unlocks it, the same key is read.
rm -f asked
browse no get.html second.dom
expect_contains "$(cat second.dom)" "got:[probe=kc-cookie-42]" "the second run decrypts the cookie with the key from keychaind"
expect_eq "$(items second.dom.items)" 1 "still one Chromium item after the second run"
expect_eq "$(secret second.dom.items)" "$key" "the second run kept the same key"
[ -f asked ] || fail "the locked keychain was not unlocked through the prompt program"
expect_contains "$(cat asked)" "Unlock the keychain 'login'" "Chromium's Unlock ran the prompt"

# 3. Control: without the item the cookie cannot be read, and Chromium stores a new key.
kc delete-generic-password -l 'Chromium Safe Storage' --pin-file user.pin >/dev/null || fail "delete Chromium's key"
browse yes get.html third.dom
expect_contains "$(cat third.dom)" "got:[]" "without keychaind's item the old cookie is unreadable"
expect_eq "$(items third.dom.items)" 1 "a new Chromium item after the key was deleted"
[ "$(secret third.dom.items)" != "$key" ] || fail "the new key equals the deleted one"
echo "ok: Chromium keeps its Safe Storage key in keychaind"
