# keychainctl backup and restore: a whole keychain into one passphrase-encrypted file and back
# into a new keychain (new PINs) and into an existing one; ThisDeviceOnly items are left out and
# counted; the restored items work with pkcs11-tool and ssh-keygen. Errors: wrong passphrase,
# damaged file, not a backup, duplicates (all or nothing) — the target keychain never changes.
# Then p11-kit register / unregister, checked with p11-kit list-modules: as an ordinary user
# (p11-kit reads ~/.config/pkcs11/modules only for non-root users) and, in a private mount
# namespace, in a system folder.
. "$HERE/lib.sh"
cd "$WORK" || fail "cd $WORK"
items_of() { kc items -k "$1" --json --pin-file "$2" | python3 -c 'import json,sys; print(" ".join(sorted(i["kind"] + ":" + i["label"] for i in json.load(sys.stdin))))'; }
printf '%s\n' so-secret-1 >so.pin
printf '%s\n' user-pin-1 >user.pin
printf '%s\n' user-pin-2 >user2.pin
printf '%s\n' backup-pass-1 >backup.pass
printf '%s\n' wrong-pass >wrong.pass
printf 'secret-a' >a.txt
printf 'secret-b' >b.txt

kc create --label source --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create"
kc add-generic-password -k source -a alice -s github.com --pin-file user.pin --password-file a.txt >/dev/null || fail "add a"
kc add-internet-password -k source -a bob -s example.com -r htps --accessible after-first-unlock --pin-file user.pin --password-file b.txt >/dev/null || fail "add b"
kc add-generic-password -k source -a dev -s device.example --accessible when-unlocked-this-device-only --pin-file user.pin --password-file a.txt >/dev/null ||
    fail "add device-bound"
kc generate-key -k source --type ec --label backup-key --id 42 --pin-file user.pin >gen.out || fail "generate"
before=$(items_of source user.pin)

out=$(kc backup -k source -o source.kcbackup --passphrase-file backup.pass --pin-file user.pin) || fail "backup: $out"
expect_contains "$out" "Wrote 4 items of 'source'" "backup count (device-bound left out)"
expect_contains "$out" "Left out 1 item(s) bound to this device" "backup says what it left out"
[ "$(stat -c %a source.kcbackup)" = 600 ] || fail "backup file mode"
grep -q "secret-a" source.kcbackup && fail "a secret is readable in the backup file"
expect_status 3 "backup with a wrong PIN" kc backup -k source -o x.kcbackup --passphrase-file backup.pass --pin-file user2.pin

# Into a new keychain with its own PINs.
out=$(kc restore source.kcbackup --create -k copy --passphrase-file backup.pass --so-pin-file so.pin --pin-file user2.pin) || fail "restore --create: $out"
expect_contains "$out" "Restored 4 items from 'source' into 'copy'" "restore count"
expected=$(tr ' ' '\n' <<<"$before" | grep -v '^generic-password:device.example$' | tr '\n' ' ' | sed 's/ $//')
expect_eq "$(items_of copy user2.pin)" "$expected" "the restored keychain holds every item but the device-bound one"
out=$(kc find-generic-password -k copy -s github.com -w --pin-file user2.pin); expect_eq "$out" "secret-a" "restored password"
out=$(kc find-internet-password -k copy -s example.com -w --pin-file user2.pin); expect_eq "$out" "secret-b" "restored internet password"
printf 'data\n' >data.txt
p11 --token-label copy --login --pin user-pin-2 --sign --id 42 -m ECDSA-SHA256 -i data.txt -o sig.bin >/dev/null 2>&1 || fail "restored key signs"
p11 --token-label copy --read-object --type pubkey --id 42 -o pub.der >/dev/null 2>&1 || fail "restored public key"
p11 --token-label copy --verify --id 42 -m ECDSA-SHA256 -i data.txt --signature-file sig.bin --login --pin user-pin-2 >/dev/null 2>&1 ||
    fail "restored key verifies"

# A restore into a new keychain that fails (wrong passphrase) leaves no keychain behind.
expect_status 7 "restore --create with a wrong passphrase" kc restore source.kcbackup --create -k never --passphrase-file wrong.pass --so-pin-file so.pin --pin-file user2.pin
expect_status 6 "the keychain made for a failed restore is gone" kc info -k never

# Errors leave the target untouched.
kc create --label target --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create target"
expect_status 7 "restore with a wrong passphrase" kc restore source.kcbackup -k target --passphrase-file wrong.pass --pin-file user.pin
python3 - source.kcbackup damaged.kcbackup <<'PY' || fail "damage"
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[len(data) // 2] ^= 0x01
open(sys.argv[2], "wb").write(data)
PY
expect_status 7 "restore of a damaged file" kc restore damaged.kcbackup -k target --passphrase-file backup.pass --pin-file user.pin
expect_status 7 "restore of something else" kc restore data.txt -k target --passphrase-file backup.pass --pin-file user.pin
expect_eq "$(items_of target user.pin)" "" "failed restores added nothing"
kc add-generic-password -k target -a alice -s github.com --pin-file user.pin --password-file b.txt >/dev/null || fail "add conflicting"
expect_status 4 "restore over a duplicate" kc restore source.kcbackup -k target --passphrase-file backup.pass --pin-file user.pin
expect_eq "$(items_of target user.pin)" "generic-password:github.com" "a refused restore added nothing"
out=$(kc restore source.kcbackup -k target --skip-duplicates --passphrase-file backup.pass --pin-file user.pin) || fail "restore --skip-duplicates"
expect_contains "$out" "Restored 3 items from 'source' into 'target'; skipped 1 already present." "skip-duplicates count"
out=$(kc find-generic-password -k target -s github.com -w --pin-file user.pin); expect_eq "$out" "secret-b" "the existing item was kept"

# p11-kit register / unregister.
module_name=keychain-pkcs11
if id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
    # A home outside the test's 0700 scratch folder, which nobody cannot enter.
    home=$(mktemp -d /tmp/kc-home.XXXXXX) || fail "home"
    trap 'rm -rf "$home"' EXIT
    chmod 755 "$home" && chown nobody "$home" || fail "home owner"
    as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups env -i PATH="$PATH" HOME="$home" KEYCHAIN_PKCS11_DIR="$home/keychains" "$@"; }
    if as_nobody test -r "$MODULE" && as_nobody test -x "$KEYCHAINCTL"; then
        out=$(as_nobody p11-kit list-modules 2>&1); expect_not_contains "$out" "$module_name" "not registered yet"
        as_nobody "$KEYCHAINCTL" p11-kit register --module "$MODULE" >/dev/null || fail "register (user)"
        [ -f "$home/.config/pkcs11/modules/keychain-pkcs11.module" ] || fail "no user module file"
        out=$(as_nobody p11-kit list-modules 2>&1); expect_contains "$out" "$module_name" "p11-kit list-modules shows the registered module"
        expect_contains "$out" "Keychain PKCS#11" "p11-kit loaded it"
        as_nobody "$KEYCHAINCTL" p11-kit unregister >/dev/null || fail "unregister (user)"
        out=$(as_nobody p11-kit list-modules 2>&1); expect_not_contains "$out" "$module_name" "gone after unregister"
        expect_status 6 "unregister twice" as_nobody "$KEYCHAINCTL" p11-kit unregister
    else
        echo "note: the build folder is not readable by nobody; the per-user registration is checked by file only"
        HOME="$home" kc p11-kit register --module "$MODULE" >/dev/null || fail "register (user, file)"
        grep -qx "module: $MODULE" "$home/.config/pkcs11/modules/keychain-pkcs11.module" || fail "user module file content"
    fi
fi
expect_status 64 "a relative module path" kc p11-kit register --directory "$WORK/mods" --module libkeychain-pkcs11.so
# The system folder, in a private mount namespace so that the machine's configuration is untouched.
if unshare -m true 2>/dev/null; then
    mkdir -p "$WORK/system-modules"
    unshare -m bash -c '
        mount --bind "$1/system-modules" /usr/share/p11-kit/modules || exit 10
        "$2" p11-kit register --directory /usr/share/p11-kit/modules --module "$3" >/dev/null || exit 11
        P11_KIT_NO_USER_CONFIG=1 p11-kit list-modules 2>&1 | grep -q "^keychain-pkcs11: $3" || exit 12
        "$2" p11-kit unregister --directory /usr/share/p11-kit/modules >/dev/null || exit 13
        P11_KIT_NO_USER_CONFIG=1 p11-kit list-modules 2>&1 | grep -q "keychain-pkcs11" && exit 14
        # As root, a plain register goes to the system folder: p11-kit ignores root'"'"'s own configuration.
        mkdir -p /etc/pkcs11 "$1/etc-modules" || exit 15
        mount --bind "$1/etc-modules" /etc/pkcs11 || exit 16
        HOME="$1/roothome" "$2" p11-kit register --module "$3" >"$1/root-register.out" || exit 17
        grep -q "registered for the whole system" "$1/root-register.out" || exit 18
        [ -f /etc/pkcs11/modules/keychain-pkcs11.module ] || exit 19
        [ -e "$1/roothome/.config/pkcs11" ] && exit 20
        HOME="$1/roothome" p11-kit list-modules 2>&1 | grep -q "^keychain-pkcs11: $3" || exit 21
        HOME="$1/roothome" "$2" p11-kit unregister >/dev/null || exit 22
        [ -f /etc/pkcs11/modules/keychain-pkcs11.module ] && exit 23
        exit 0' _ "$WORK" "$KEYCHAINCTL" "$MODULE" || fail "system registration in a namespace (step $?)"
else
    echo "note: no mount namespace here; system registration not checked"
fi
echo "ok: backup and restore; p11-kit register and unregister"
