# pkcs11-tool data objects: write (private and public), list, read back byte-identical, delete.
. "$HERE/lib.sh"

PIN=123456
new_keychain objs 87654321 "$PIN"
slot=$(slot_of objs)
[ -n "$slot" ] || fail "no slot for keychain objs"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }
anon() { p11 --slot "$slot" "$@"; }

head -c 3000 /dev/urandom >"$WORK/secret.bin"
head -c 1000 /dev/urandom >"$WORK/public.bin"
head -c 257 /dev/urandom >"$WORK/app.bin"

# A fresh keychain has no objects.
out=$(user -O 2>/dev/null) || fail "-O on an empty keychain"
expect_eq "$out" "" "objects of a new keychain"

# Private data object.
out=$(user --write-object "$WORK/secret.bin" --type data --label secret1 --private 2>&1) || fail "write private object: $out"
expect_contains "$out" "Created Data Object:" "write private object message"
expect_contains "$out" "label:          'secret1'" "write private object label"
expect_contains "$out" "flags:           modifiable private" "write private object flags"

# Invisible without login, listed after login.
out=$(anon -O 2>&1) || fail "-O without login exit $?"
expect_not_contains "$out" "secret1" "private object listed without login"
expect_not_contains "$out" "Data object" "any object listed without login"
out=$(user -O 2>&1) || fail "-O with login exit $?"
expect_contains "$out" $'Data object 1\n  label:          \'secret1\'\n  application:    \'\'\n  app_id:         <empty>\n  flags:           modifiable private' "private object listed after login"
expect_eq "$(grep -c '^Data object' <<<"$out")" 1 "object count after login"

# Read back byte-identical after login; not readable without login.
user --read-object --type data --label secret1 -o "$WORK/secret.out" >/dev/null 2>&1 || fail "read private object"
cmp "$WORK/secret.bin" "$WORK/secret.out" || fail "private object differs"
rm -f "$WORK/secret.nologin"
out=$(anon --read-object --type data --label secret1 -o "$WORK/secret.nologin" 2>&1) && fail "private object read without login"
expect_contains "$out" "object not found" "private object read without login"
[ -s "$WORK/secret.nologin" ] && fail "data written for a private object without login"

# Public data object: written without --private (pkcs11-tool then sets CKA_PRIVATE=FALSE),
# even in a public session, and listed and readable without login.
out=$(anon --write-object "$WORK/public.bin" --type data --label public1 2>&1) || fail "write public object: $out"
expect_eq "$(grep 'flags:' <<<"$out")" "  flags:           modifiable" "public object flags"
out=$(anon -O 2>&1) || fail "-O without login exit $?"
expect_contains "$out" $'Data object 1\n  label:          \'public1\'\n  application:    \'\'\n  app_id:         <empty>\n  flags:           modifiable' "public object listed without login"
expect_eq "$(grep -c '^Data object' <<<"$out")" 1 "objects listed without login"
expect_not_contains "$out" "secret1" "private object listed without login"
anon --read-object --type data --label public1 -o "$WORK/public.out" >/dev/null 2>&1 || fail "read public object"
cmp "$WORK/public.bin" "$WORK/public.out" || fail "public object differs"
out=$(user -O 2>&1) || fail "-O with login exit $?"
expect_eq "$(grep -c '^Data object' <<<"$out")" 2 "objects listed after login"

# CKA_APPLICATION and CKA_OBJECT_ID (--application-label, --application-id).
out=$(user --write-object "$WORK/app.bin" --type data --label app1 --application-label "my app" \
    --application-id 1.2.840.113549.1.7.1 --private 2>&1) || fail "write object with application: $out"
expect_contains "$out" "application:    'my app'" "application label on create"
expect_contains "$out" "app_id:         1.2.840.113549.1.7.1" "application id on create"
out=$(user -O 2>&1) || fail "-O with login exit $?"
expect_contains "$out" $'  label:          \'app1\'\n  application:    \'my app\'\n  app_id:         1.2.840.113549.1.7.1\n  flags:           modifiable private' "application attributes listed"
user --read-object --type data --application-label "my app" -o "$WORK/app.out" >/dev/null 2>&1 || fail "read by application label"
cmp "$WORK/app.bin" "$WORK/app.out" || fail "object read by application label differs"
rm -f "$WORK/app.out"
user --read-object --type data --application-id 1.2.840.113549.1.7.1 -o "$WORK/app.out" >/dev/null 2>&1 || fail "read by application id"
cmp "$WORK/app.bin" "$WORK/app.out" || fail "object read by application id differs"
out=$(user --read-object --type data --application-label "other app" -o "$WORK/none.out" 2>&1) && fail "read by a wrong application label succeeded"
expect_contains "$out" "object not found" "wrong application label"

# Delete: the object is gone, the others stay.
user --delete-object --type data --label secret1 >/dev/null 2>&1 || fail "delete private object"
out=$(user -O 2>&1) || fail "-O after delete exit $?"
expect_not_contains "$out" "secret1" "deleted object still listed"
expect_eq "$(grep -c '^Data object' <<<"$out")" 2 "objects after delete"
out=$(user --read-object --type data --label secret1 -o "$WORK/gone.out" 2>&1) && fail "deleted object still readable"
expect_contains "$out" "object not found" "read of a deleted object"
out=$(user --delete-object --type data --label secret1 2>&1) && fail "deleting a deleted object succeeded"
expect_contains "$out" "object not found" "second delete"
user --read-object --type data --label public1 -o "$WORK/public2.out" >/dev/null 2>&1 || fail "public object after delete"
cmp "$WORK/public.bin" "$WORK/public2.out" || fail "public object differs after delete"

user --delete-object --type data --label public1 >/dev/null 2>&1 || fail "delete public object"
user --delete-object --type data --label app1 >/dev/null 2>&1 || fail "delete app1"
out=$(user -O 2>/dev/null) || fail "-O at the end"
expect_eq "$out" "" "objects after deleting all"
