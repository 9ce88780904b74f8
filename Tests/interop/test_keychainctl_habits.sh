# keychainctl against the habits people bring from security(1), softhsm2-util and other Unix
# tools: --version; --json on list, info, items, show, find and status with the documented keys;
# PIN errors without a terminal that name --pin-file, KEYCHAIN_PKCS11_PIN and the prompt program,
# and the prompt program answering when configured; `-w PASSWORD` explained; a missing --pin-file
# is exit 7; restore --create checks the passphrase before asking for PINs or creating anything;
# raise-kdf out of range states the range; a slow KDF shows a progress line on a terminal (script
# gives one); delete selecting only by type needs --yes without a terminal and a "y" on one.
. "$HERE/lib.sh"

cd "$WORK" || fail "cd $WORK"
export KEYCHAIN_PKCS11_AGENT=off
printf 'user-pin-1\n' >user.pin
printf 'so-pin-123\n' >so.pin
kc create --label login --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create"

# --version: keychainctl's, the module's (C_GetInfo of the module beside it), the schema.
out=$(kc --version) || fail "--version"
expect_contains "$out" "keychainctl 0." "--version names keychainctl"
expect_contains "$out" "module 0." "--version names the module's version"
expect_contains "$out" "(Keychain PKCS#11, Cryptoki " "--version read the module's CK_INFO"
expect_contains "$out" "keychain schema " "--version names the schema version"

# JSON: each prints one valid document with the documented keys.
json_keys() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d=eval(sys.argv[1]); print(",".join(sorted(d.keys())))' "$1"; }
keys=$(kc list --json | json_keys 'd["keychains"][0]') || fail "list --json"
for key in label slot serial file default publicItems privateItems userPIN soPIN pinLength kdf uri; do
    expect_contains ",$keys," ",$key," "list --json has $key"
done
expect_eq "$(kc info --json | json_keys 'd')" "$keys" "info --json has the same keys as each list --json entry"
printf 'p' >p.txt
kc add-generic-password -a alice -s example.org --pin-file user.pin --password-file p.txt >/dev/null || fail "add"
keys=$(kc find-generic-password -s example.org --json --pin-file user.pin | json_keys 'd') || fail "find --json"
expect_eq "$keys" "$(kc show --label example.org --json --pin-file user.pin | json_keys 'd')" "find --json and show --json agree"
for key in kind label service account protection created modified uniqueID uri; do expect_contains ",$keys," ",$key," "find --json has $key"; done
out=$(kc status --json | json_keys 'd') || fail "status --json"
expect_eq "$out" "keychaind,keychains" "status --json keys"
# A certificate: serial as openssl prints it, validity, in show and JSON; no internal names.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout c.key -subj /CN=habits -days 30 -set_serial 0x00ABCDEF0123 \
    -out c.pem 2>/dev/null || fail "openssl req"
out=$(kc import c.pem --label habits-cert --pin-file user.pin) || fail "import certificate"
expect_contains "$out" "(PEM certificate)" "import names the format in words"
serial=$(openssl x509 -in c.pem -noout -serial | sed 's/^serial=//')
out=$(kc show --label habits-cert --type certificate --pin-file user.pin)
grep -qxE "Serial +$serial" <<<"$out" || fail "show prints the serial as openssl x509 -serial does ($serial): $out"
json=$(kc show --label habits-cert --type certificate --json --pin-file user.pin)
expect_contains "$json" "\"serial\":\"$serial\"" "show --json has the serial"
expect_contains "$json" "\"notAfter\":\"" "show --json has the validity"
# The validity as the certificate has it, in UTC whatever the local zone: keychainctl runs 14 hours
# ahead of UTC (a POSIX TZ, no tzdata needed), which moves the local date most hours of the day.
# The expected text is made from openssl's dates (C locale, UTC), never from the calendar.
iso() { LC_ALL=C TZ=UTC date -u -d "$(openssl x509 -in c.pem -noout "-$1" | sed 's/^[a-zA-Z]*=//')" +%Y-%m-%dT%H:%M:%SZ; }
out=$(TZ=XXX-14 kc show --label habits-cert --type certificate --pin-file user.pin)
grep -qxE "Not before +$(iso startdate)" <<<"$out" || fail "show prints notBefore as openssl does ($(iso startdate), UTC): $out"
grep -qxE "Not after +$(iso enddate)" <<<"$out" || fail "show prints notAfter as openssl does ($(iso enddate), UTC): $out"
json=$(TZ=XXX-14 kc show --label habits-cert --type certificate --json --pin-file user.pin)
expect_contains "$json" "\"notBefore\":\"$(iso startdate)\",\"notAfter\":\"$(iso enddate)\"" "show --json validity in UTC"

# items: short URIs by default, full ones with --wide; a keychain label with an escape is shown escaped.
out=$(kc items --pin-file user.pin)
expect_contains "$out" "pkcs11:token=login;" "items prints the short URI"
expect_not_contains "$out" "manufacturer=" "no model/manufacturer/serial by default"
out=$(kc items --wide --pin-file user.pin)
expect_contains "$out" "pkcs11:model=Keychain;manufacturer=Keychain%20PKCS%2311;serial=" "items --wide prints the full URI"
evil=$'evil\033[2J'
kc create --label "$evil" --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create a keychain whose label has an escape"
for command in "info -k $evil" "list" "status"; do
    # shellcheck disable=SC2086
    out=$(kc $command 2>&1) || fail "$command"
    case "$out" in *$'\033'*) fail "$command printed a raw escape character" ;; esac
done
expect_contains "$(kc list)" 'evil\u{1b}[2J' "list shows the escape as \\u{1b}"
kc delete-keychain -k "$evil" --so-pin-file so.pin >/dev/null || fail "delete the escape keychain"

# Without a terminal (setsid: no controlling terminal), a missing PIN names every way to give one.
expect_status 3 "no PIN, no terminal" setsid -w "$KEYCHAINCTL" items </dev/null
err=$(cat "$WORK/last.err")
for way in "--pin-file FILE" "KEYCHAIN_PKCS11_PIN" "KEYCHAIN_PKCS11_PROMPT"; do expect_contains "$err" "$way" "the PIN error names $way"; done
# With a prompt program configured, keychainctl asks it (with the question as its argument).
cat >askpass <<'EOF'
#!/bin/sh
printf '%s\n' "$1" >>"$(dirname "$0")/asked"
echo user-pin-1
EOF
chmod 700 askpass
out=$(KEYCHAIN_PKCS11_PROMPT="$WORK/askpass" setsid -w "$KEYCHAINCTL" find-generic-password -s example.org -w </dev/null) ||
    fail "find with the prompt program"
expect_eq "$out" "p" "the prompt program's PIN unlocked the keychain"
expect_contains "$(cat asked)" "User PIN of keychain 'login'" "the prompt program was asked the question"

# security's -w PASSWORD habit gets an explanation, not "Unknown option".
expect_status 64 "-w PASSWORD" kc add-generic-password -a bob -s example.org -w hunter2
expect_contains "$(cat "$WORK/last.err")" "--password-file" "the -w explanation names --password-file"
expect_not_contains "$(cat "$WORK/last.err")" "Unknown option" "no bare Unknown option"

# A missing --pin-file is exit 7 (an input file that cannot be read), as documented.
expect_status 7 "missing --pin-file" kc items --pin-file "$WORK/no-such.pin"
expect_contains "$(cat "$WORK/last.err")" "no-such.pin" "the message names the file"

# restore --create checks the backup passphrase before it asks for PINs or creates anything:
# without PIN sources and without a terminal, a wrong passphrase is still exit 7, not a PIN error.
printf 'backup-pass\n' >backup.pass
printf 'wrong-pass\n' >wrong.pass
kc backup -o login.kcbackup --passphrase-file backup.pass --pin-file user.pin >/dev/null || fail "backup"
expect_status 7 "restore --create with a wrong passphrase" setsid -w "$KEYCHAINCTL" restore login.kcbackup --create --keychain restored \
    --passphrase-file wrong.pass </dev/null
expect_contains "$(cat "$WORK/last.err")" "wrong passphrase" "the passphrase is what is reported"
out=$(kc list); expect_not_contains "$out" "restored" "no keychain was created"
kc restore login.kcbackup --create --keychain restored --passphrase-file backup.pass --so-pin-file so.pin --pin-file user.pin >/dev/null ||
    fail "restore --create with the right passphrase"

# raise-kdf outside the bounds states them.
expect_status 64 "raise-kdf --log-n 30" kc raise-kdf --log-n 30
expect_contains "$(cat "$WORK/last.err")" "--log-n must be 1 to 22" "raise-kdf states the range"

# A KDF cost that takes seconds shows a progress line on a terminal (script(1) gives one).
out=$(KEYCHAIN_PKCS11_KDF_LOG_N=17 KEYCHAIN_PKCS11_PIN=user-pin-1 KEYCHAIN_PKCS11_SO_PIN=so-pin-123 \
    script -qec "$KEYCHAINCTL create --label slowkdf" /dev/null) || fail "create with 2^17 under script: $out"
expect_contains "$out" "deriving the key from the PIN (scrypt N = 2^17, 128 MiB)" "progress line on a terminal"
out=$(KEYCHAIN_PKCS11_PIN=user-pin-1 "$KEYCHAINCTL" items -k slowkdf 2>&1) || fail "items on slowkdf"
expect_not_contains "$out" "deriving" "no progress line without a terminal"

# delete that names no item (only a type): --yes without a terminal; a question on one.
expect_status 64 "delete --type without --yes" setsid -w "$KEYCHAINCTL" delete --type certificate --all --pin-file user.pin </dev/null
expect_contains "$(cat "$WORK/last.err")" "--yes" "the refusal names --yes"
out=$(script -qec "$KEYCHAINCTL delete --type certificate --all --pin-file $WORK/user.pin" /dev/null <<<"n") || fail "delete answered n: $out"
expect_contains "$out" "Delete the certificate 'habits-cert' from 'login'? [y/N]" "delete asks on a terminal"
expect_contains "$out" "Nothing deleted." "n keeps the item"
kc show --label habits-cert --type certificate --pin-file user.pin >/dev/null || fail "the certificate is still there"
kc delete --type certificate --all --yes --pin-file user.pin >/dev/null || fail "delete --yes"
expect_status 6 "deleted by type" kc show --label habits-cert --type certificate --pin-file user.pin
echo "ok: keychainctl habits"
