# keychainctl on a temporary keychain folder: keychains (create, list, info, set-default, change
# and reset the PIN, delete), generic and internet passwords (add, find, -w, update, -U, delete),
# and items (list as a table and JSON, show and delete by PKCS#11 URI), each with its error paths
# and exit codes: wrong PIN 3, already exists 4, not found 6, usage 64; nothing stored changes on
# an error. pkcs11-tool reads what keychainctl stored, and keychainctl what pkcs11-tool stored.
. "$HERE/lib.sh"
cd "$WORK" || fail "cd $WORK"
# sq COMMAND...: keychainctl's output with runs of spaces squeezed (aligned name/value columns).
sq() { "$KEYCHAINCTL" "$@" | tr -s " "; }
printf '%s\n' so-secret-1 >so.pin
printf '%s\n' user-pin-1 >user.pin
printf '%s\n' wrong-pin >wrong.pin
printf '%s\n' 12 >short.pin

# Keychains.
out=$(kc list); expect_contains "$out" "No keychains yet" "empty folder"
expect_status 6 "items without a keychain" kc items --pin-file user.pin
expect_status 3 "too short a user PIN" kc create --label login --so-pin-file so.pin --pin-file short.pin
[ -z "$(ls "$KEYCHAIN_PKCS11_DIR"/*.keychain-db 2>/dev/null)" ] || fail "a refused create left a file"
out=$(kc create --label login --so-pin-file so.pin --pin-file user.pin) || fail "create login"
expect_contains "$out" "Created keychain 'login'" "create"
expect_status 4 "second keychain labelled login" kc create --label login --so-pin-file so.pin --pin-file user.pin
expect_status 64 "label too long" kc create --label 0123456789012345678901234567890123 --so-pin-file so.pin --pin-file user.pin
out=$(sq info); expect_contains "$out" "User PIN ok, 0 of 10 failed tries" "info PIN line"
expect_contains "$out" "PKCS#11 URI pkcs11:model=Keychain;manufacturer=Keychain%20PKCS%2311;serial=" "info URI"
expect_contains "$out" "PIN KDF scrypt N = 2^10, r = 8, p = 1" "info KDF"
p11 -L | grep -q "token label *: login" || fail "pkcs11-tool does not see the keychain"

# Generic passwords.
printf 'hunter2' | kc add-generic-password -a alice -s github.com -j "work account" --pin-file user.pin --password-file - >add.out ||
    fail "add-generic-password: $(cat add.out)"
expect_contains "$(cat add.out)" "Added pkcs11:model=Keychain;" "add prints the URI"
expect_contains "$(cat add.out)" ";object=github.com;type=data" "the label defaults to the service"
out=$(kc find-generic-password -a alice -s github.com -w --pin-file user.pin); expect_eq "$out" "hunter2" "find -w"
out=$(sq find-generic-password -s github.com --pin-file user.pin)
expect_contains "$out" "Account alice" "find shows the account"
expect_contains "$out" "Comment work account" "find shows the comment"
expect_not_contains "$out" "hunter2" "find without -w never prints the secret"
printf 'other' >other.txt
expect_status 4 "duplicate generic password" kc add-generic-password -a alice -s github.com --pin-file user.pin --password-file other.txt
out=$(kc find-generic-password -a alice -s github.com -w --pin-file user.pin); expect_eq "$out" "hunter2" "a refused duplicate changed nothing"
expect_status 3 "wrong PIN" kc find-generic-password -a alice -s github.com -w --pin-file wrong.pin
out=$(sq info); expect_contains "$out" "User PIN count low, 1 of 10 failed tries" "the wrong PIN was counted"
expect_status 6 "no such password" kc find-generic-password -a bob -s github.com -w --pin-file user.pin
expect_status 64 "internet options on a generic password" kc find-generic-password -s github.com -P 443 --pin-file user.pin
# -U updates only the item with the same identity: without -a it is another item (empty account).
printf 'bob-pass' >bob.txt
kc add-generic-password -a bob -s github.com --pin-file user.pin --password-file bob.txt >/dev/null || fail "add bob"
kc add-generic-password -s github.com -l no-account -U --pin-file user.pin --password-file bob.txt >/dev/null || fail "add -U without an account"
out=$(kc find-generic-password -a alice -s github.com -w --pin-file user.pin); expect_eq "$out" "hunter2" "-U without -a left alice's password alone"
out=$(kc find-generic-password -s github.com -l no-account -w --pin-file user.pin); expect_eq "$out" "bob-pass" "-U without -a added an item"
expect_status 64 "three items match -s github.com" kc delete-generic-password -s github.com --pin-file user.pin
out=$(kc find-generic-password -s github.com -j "work account" -w --pin-file user.pin); expect_eq "$out" "hunter2" "-j narrows the search"
kc delete-generic-password -a bob -s github.com --pin-file user.pin >/dev/null || fail "delete bob"
kc delete-generic-password -s github.com -l no-account --pin-file user.pin >/dev/null || fail "delete the account-less item"
kc add-generic-password -a alice -s github.com -U --pin-file user.pin --password-file other.txt >/dev/null || fail "add -U"
out=$(kc find-generic-password -a alice -s github.com -w --pin-file user.pin); expect_eq "$out" "other" "add -U updated the password"
printf 'third' >third.txt
kc update-generic-password -a alice -s github.com --password-file third.txt --new-comment rotated --pin-file user.pin >/dev/null || fail "update"
out=$(sq find-generic-password -a alice -s github.com --json --pin-file user.pin)
expect_contains "$out" '"comment":"rotated"' "update changed the comment"
out=$(kc find-generic-password -a alice -s github.com -w --pin-file user.pin); expect_eq "$out" "third" "update changed the password"
expect_status 64 "update without a change" kc update-generic-password -a alice -s github.com --pin-file user.pin
# pkcs11-tool reads the password keychainctl stored (a private CKO_DATA, CKA_APPLICATION = service).
p11 --login --pin user-pin-1 --token-label login --read-object --type data --application-label github.com -o p11.out >/dev/null 2>&1 ||
    fail "pkcs11-tool --read-object"
expect_eq "$(cat p11.out)" "third" "pkcs11-tool reads the keychainctl password"

# Internet passwords.
printf 's3cret' >inet.txt
kc add-internet-password -a alice -s example.com -r htps -P 443 -p /login --pin-file user.pin --password-file inet.txt >/dev/null ||
    fail "add-internet-password"
kc add-internet-password -a alice -s example.com -r "ftp" -P 21 --pin-file user.pin --password-file other.txt >/dev/null ||
    fail "a second internet password differing in protocol and port"
out=$(kc find-internet-password -a alice -s example.com -r htps -w --pin-file user.pin); expect_eq "$out" "s3cret" "find-internet-password -w"
out=$(kc find-internet-password -s example.com -r "ftp" -w --pin-file user.pin); expect_eq "$out" "other" "ftp password (space-padded code)"
expect_status 64 "two internet passwords match" kc find-internet-password -s example.com -w --pin-file user.pin
expect_status 4 "duplicate internet password" kc add-internet-password -a alice -s example.com -r htps -P 443 -p /login --pin-file user.pin --password-file other.txt
out=$(sq find-internet-password -a alice -s example.com -r htps --pin-file user.pin)
expect_contains "$out" "Protocol htps" "protocol shown"
expect_contains "$out" "Port 443" "port shown"
expect_contains "$out" "Path /login" "path shown"
expect_status 6 "generic search does not find internet passwords" kc find-generic-password -s example.com --pin-file user.pin
kc delete-internet-password -a alice -s example.com -r "ftp" --pin-file user.pin >/dev/null || fail "delete-internet-password"
expect_status 6 "deleted internet password" kc find-internet-password -s example.com -r "ftp" --pin-file user.pin

# A data object pkcs11-tool wrote is an item too.
printf 'from pkcs11-tool' >obj.txt
p11 --login --pin user-pin-1 --token-label login --write-object obj.txt --type data --label p11-object --private >/dev/null 2>&1 || fail "write-object"

# Items: table, JSON, show, delete by URI.
out=$(sq items --pin-file user.pin)
expect_contains "$out" "generic-password github.com alice @ github.com when-unlocked no pkcs11:" "items lists the generic password"
expect_contains "$out" "internet-password example.com alice @ example.com when-unlocked no pkcs11:" "items lists the internet password"
expect_contains "$out" "generic-password p11-object" "items lists pkcs11-tool's data object as a generic password"
out=$(kc find-generic-password -l p11-object -w --pin-file user.pin) || fail "find-generic-password finds pkcs11-tool's data object"
expect_eq "$out" "from pkcs11-tool" "the data object's value through find-generic-password"
out=$(kc items --public-only); expect_contains "$out" "No items in 'login' visible without login." "public-only hides private items"
json=$(kc items --json --pin-file user.pin)
count=$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$json") || fail "items --json is not JSON: $json"
expect_eq "$count" "3" "items --json count"
uri=$(python3 -c 'import json,sys; print([i["uri"] for i in json.loads(sys.argv[1]) if i["label"] == "p11-object"][0])' "$json")
expect_contains "$uri" ";object=p11-object;type=data" "URI of the data object"
out=$(sq show "$uri" --pin-file user.pin); expect_contains "$out" "Kind generic-password" "show by URI"
expect_not_contains "$out" "from pkcs11-tool" "show never prints the value"
expect_status 64 "not a URI" kc show "http://example.com" --pin-file user.pin
expect_status 64 "an unknown URI attribute" kc delete "pkcs11:token=login;objekt=p11-object" --all --pin-file user.pin
expect_status 64 "a repeated URI attribute" kc show "pkcs11:token=login;object=a;object=b" --pin-file user.pin
expect_status 64 "a PIN in the URI" kc show "pkcs11:token=login;object=p11-object?pin-value=user-pin-1" --pin-file user.pin
expect_status 64 "a bare token URI selects nothing to delete" kc delete "pkcs11:token=login" --all --pin-file user.pin
expect_status 64 "--type against the URI's type" kc show "$uri" --type private-key --pin-file user.pin
expect_status 6 "URI of another token" kc show "pkcs11:token=nosuch;object=p11-object" --pin-file user.pin
expect_status 6 "URI matching nothing" kc show "pkcs11:token=login;object=nothing" --pin-file user.pin
kc delete "$uri" --pin-file user.pin >/dev/null || fail "delete by URI"
expect_status 6 "deleted item" kc show "$uri" --pin-file user.pin
out=$(p11 --login --pin user-pin-1 --token-label login -O 2>/dev/null)
expect_not_contains "$out" "p11-object" "pkcs11-tool no longer sees the deleted object"

# Two generic passwords of one service: each printed URI names one item (id= from its unique ID),
# the ambiguous answer lists those URIs, and each of them shows and deletes exactly its item.
printf 'one' >one.txt; printf 'two' >two.txt
kc add-generic-password -a first -s shared.example --pin-file user.pin --password-file one.txt >/dev/null || fail "add first shared"
kc add-generic-password -a second -s shared.example --pin-file user.pin --password-file two.txt >/dev/null || fail "add second shared"
json=$(kc items --label shared.example --json --pin-file user.pin)
uris=$(python3 -c 'import json,sys; print("\n".join(sorted(i["uri"] for i in json.loads(sys.argv[1]))))' "$json")
expect_eq "$(sort -u <<<"$uris" | wc -l)" "2" "two distinct URIs for two passwords of one service"
expect_contains "$uris" ";id=%" "the URIs carry id="
expect_status 64 "show of an ambiguous label" kc show --label shared.example --pin-file user.pin
expect_contains "$(cat "$WORK/last.err")" "2 items match; name one by giving its URI" "the ambiguous answer offers the way out"
listed=$(sed -n 's/^  generic-password: //p' "$WORK/last.err")
expect_eq "$(wc -l <<<"$listed")" "2" "both candidates listed"
second_uri=$(head -n 1 <<<"$listed")
out=$(kc show "$second_uri" --json --pin-file user.pin) || fail "show by a listed URI"
account=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["account"])' "$out")
kc delete "$second_uri" --pin-file user.pin >/dev/null || fail "delete by a listed URI"
left=$(kc items --label shared.example --json --pin-file user.pin)
expect_eq "$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$left")" "1" "one shared password left"
expect_not_contains "$left" "\"account\":\"$account\"" "the deleted one was the one named"
out=$(sq items --label shared.example --pin-file user.pin)
expect_not_contains "$out" ";id=%" "a URI that is unique again drops the unique ID"
kc delete --label shared.example --pin-file user.pin >/dev/null || fail "delete the last shared password"
out=$(kc items --label nothing-here --pin-file user.pin)
expect_eq "$out" "No items in 'login' match label 'nothing-here'." "an empty filtered list says what was filtered"

# Labels with control characters are shown escaped, never raw.
printf 'evil\033[2Jlabel' >evil.label
kc add-generic-password -a esc -s "$(cat evil.label)" --pin-file user.pin --password-file one.txt >/dev/null || fail "add escape label"
out=$(kc items --pin-file user.pin)
case "$out" in *$'\033'*) fail "items printed a raw escape character" ;; esac
expect_contains "$out" 'evil\u{1b}[2Jlabel' "the escape shown as \\u{1b}"
kc delete-generic-password -a esc --pin-file user.pin >/dev/null || fail "delete escape label"

# Protection: an Always password is readable without a login; pkcs11-tool sees it as public.
kc add-generic-password -a svc -s always.example --accessible always --pin-file user.pin --password-file other.txt >/dev/null || fail "add Always"
out=$(sq items --public-only); expect_contains "$out" "generic-password always.example svc @ always.example always no pkcs11:" "Always item listed without login"
# An application password seals the item: find -w needs it.
printf 'app-pass-1' >app.txt
kc add-generic-password -a sealed -s sealed.example --access-control application-password --application-password-file app.txt \
    --pin-file user.pin --password-file other.txt >/dev/null || fail "add with an application password"
out=$(kc find-generic-password -s sealed.example -w --application-password-file app.txt --pin-file user.pin); expect_eq "$out" "other" "sealed item opens"
expect_status 3 "wrong application password" kc find-generic-password -s sealed.example -w --application-password-file wrong.pin --pin-file user.pin
expect_status 8 "a sealed item's password cannot be updated in place" kc update-generic-password -s sealed.example --password-file third.txt --pin-file user.pin
expect_status 64 "unknown access-control flag" kc add-generic-password -a x -s y --access-control biometry --pin-file user.pin --password-file other.txt
# KeychainCore's AccessPolicy judges the flags for keychainctl as for SecItem: an application
# password beside user presence needs and/or; either one then opens an `or` item.
expect_status 64 "application password with presence needs and/or" kc add-generic-password -a x -s y --access-control user-presence,application-password \
    --application-password-file app.txt --pin-file user.pin --password-file other.txt
expect_status 64 "a conjunction of nothing" kc add-generic-password -a x -s y --access-control or --pin-file user.pin --password-file other.txt
kc add-generic-password -a either -s either.example --access-control user-presence,application-password,or --application-password-file app.txt \
    --pin-file user.pin --password-file other.txt >/dev/null || fail "add with user presence or an application password"
out=$(kc find-generic-password -s either.example -w --pin-file user.pin); expect_eq "$out" "other" "an or item opens with the PIN"

# A second keychain, the default, and PIN changes.
kc create --label work --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create work"
out=$(sq info); expect_contains "$out" "Label login" "login is the default while it exists"
expect_status 6 "set-default to a missing keychain" kc set-default nosuch
kc set-default work >/dev/null || fail "set-default"
out=$(sq info); expect_contains "$out" "Label work" "the default moved"
expect_status 6 "the new default has no such password" kc find-generic-password -a alice -s github.com --pin-file user.pin
out=$(kc find-generic-password -k login -a alice -s github.com -w --pin-file user.pin); expect_eq "$out" "third" "--keychain picks another"
expect_status 64 "--keychain against the URI's token" kc show -k work "pkcs11:token=login;object=github.com" --pin-file user.pin
printf '%s\n' user-pin-2 >new.pin
expect_status 3 "change-pin with a wrong old PIN" kc change-pin --old-pin-file wrong.pin --new-pin-file new.pin
kc change-pin --old-pin-file user.pin --new-pin-file new.pin >/dev/null || fail "change-pin"
expect_status 3 "old PIN after the change" kc items --pin-file user.pin
kc items --pin-file new.pin >/dev/null || fail "new PIN after the change"
# Lock the user PIN of work (10 tries), then the SO resets it.
for _ in 1 2 3 4 5 6 7 8 9 10; do kc items --pin-file wrong.pin >/dev/null 2>&1; done
out=$(sq info); expect_contains "$out" "User PIN LOCKED" "locked after 10 wrong PINs"
expect_status 3 "locked PIN refuses the right PIN" kc items --pin-file new.pin
expect_status 3 "reset-pin with a wrong SO PIN" kc reset-pin --so-pin-file wrong.pin --new-pin-file user.pin
kc reset-pin --so-pin-file so.pin --new-pin-file user.pin >/dev/null || fail "reset-pin"
out=$(sq info); expect_contains "$out" "User PIN ok, 0 of 10 failed tries" "reset unlocks"
kc items --pin-file user.pin >/dev/null || fail "the reset PIN works"

# Deleting a keychain needs its SO PIN.
expect_status 64 "delete-keychain without --keychain" kc delete-keychain --so-pin-file so.pin
expect_status 3 "delete-keychain with a wrong SO PIN" kc delete-keychain -k work --so-pin-file wrong.pin
kc info -k work >/dev/null || fail "a refused delete kept the keychain"
kc delete-keychain -k work --so-pin-file so.pin >/dev/null || fail "delete-keychain"
expect_status 6 "deleted keychain" kc info -k work
out=$(sq info); expect_contains "$out" "Label login" "default falls back to login"
out=$(kc list); expect_not_contains "$out" " work " "list no longer shows work"

# Help: every command has examples.
for command in create list info set-default delete-keychain change-pin reset-pin raise-kdf add-generic-password find-generic-password \
    update-generic-password delete-generic-password add-internet-password find-internet-password update-internet-password \
    delete-internet-password generate-key import export items show delete backup restore "p11-kit register" "p11-kit unregister" module-path; do
    # shellcheck disable=SC2086
    out=$(kc $command --help) || fail "$command --help"
    expect_contains "$out" "keychainctl" "$command --help"
    expect_contains "$out" "Examples:" "$command --help has examples"
done
out=$(kc --generate-completion-script bash); expect_contains "$out" "add-generic-password" "bash completion"
echo "ok: keychainctl keychains, passwords and items"
