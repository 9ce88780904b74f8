# Damaged files beside a good keychain affect only themselves: a 64 KiB random file, a 3,000-byte
# truncated copy of the good keychain, a file holding only SQLite's 100-byte header and an empty
# file, all named *.keychain-db in the keychain folder, plus a whole copy of the good keychain
# (same salt, serial and slot ID) that is then written to. The good keychain keeps working through
# pkcs11-tool (login, list, create, read its data objects, public and private); keychainctl list
# names each damaged file with its reason; nothing is written to them (same bytes, no -wal/-shm).
. "$HERE/lib.sh"

so=12345678 pin=1234
new_keychain good "$so" "$pin"
good_slot=$(slot_of good)
echo "public value" >"$WORK/public.txt"
echo "private value" >"$WORK/private.txt"
p11 --slot "$good_slot" --login --pin "$pin" --write-object "$WORK/public.txt" --type data --label pub-1 >/dev/null || fail "write a public data object"
p11 --slot "$good_slot" --login --pin "$pin" --write-object "$WORK/private.txt" --type data --label priv-1 --private >/dev/null || fail "write a private data object"

dir=$KEYCHAIN_PKCS11_DIR
good_file=$(ls "$dir"/*.keychain-db)
head -c 65536 /dev/urandom >"$dir/junk.keychain-db"
head -c 3000 "$good_file" >"$dir/truncated.keychain-db"
head -c 100 "$good_file" >"$dir/header-only.keychain-db"
: >"$dir/empty.keychain-db"
chmod 600 "$dir"/*.keychain-db
damaged="junk truncated header-only empty"
(cd "$dir" && for name in $damaged; do sha256sum "$name.keychain-db"; done) >"$WORK/damaged.sums"

# list_data SLOT: the labels of the data objects of SLOT after login, one per line, sorted.
list_data() {
    p11 --slot "$1" --login --pin "$pin" -O --type data 2>"$WORK/list.err" | sed -n "s/^ *label: *'\(.*\)'$/\1/p" | LC_ALL=C sort
}

expect_eq "$(list_data "$good_slot" | tr '\n' ' ')" "priv-1 pub-1 " "the good keychain's data objects beside damaged files"
p11 --slot "$good_slot" --login --pin "$pin" --write-object "$WORK/private.txt" --type data --label priv-2 --private >/dev/null 2>"$WORK/write.err" ||
    fail "write to the good keychain beside damaged files: $(cat "$WORK/write.err")"
value=$(p11 --slot "$good_slot" --login --pin "$pin" --read-object --type data --label priv-2 2>/dev/null)
expect_eq "$value" "private value" "reading back the new private object"

# A whole copy of the good keychain beside it: its own slot, and writes to it leave the good one
# working (each file keeps its own rollback record).
cp "$good_file" "$dir/copy.keychain-db"
chmod 600 "$dir/copy.keychain-db"
copy_slot=$(p11 -L 2>/dev/null | awk '/^Slot [0-9]+ \(0x[0-9a-f]+\): .*copy.keychain-db/ { id = $3; gsub(/[():]/, "", id); print id; exit }')
[ -n "$copy_slot" ] || fail "the copy has no slot: $(p11 -L 2>&1)"
copy_slot=$(printf '%d' "$copy_slot")
[ "$copy_slot" != "$good_slot" ] || fail "the copy took the good keychain's slot ID"
p11 --slot "$copy_slot" --login --pin "$pin" --write-object "$WORK/private.txt" --type data --label copy-only --private >/dev/null 2>"$WORK/write.err" ||
    fail "write to the copy: $(cat "$WORK/write.err")"
expect_eq "$(list_data "$good_slot" | tr '\n' ' ')" "priv-1 priv-2 pub-1 " "the good keychain after a write to its copy ($(cat "$WORK/list.err"))"
p11 --slot "$good_slot" --login --pin "$pin" --write-object "$WORK/public.txt" --type data --label pub-2 >/dev/null || fail "write to the good keychain after its copy changed"
expect_eq "$(list_data "$copy_slot" | tr '\n' ' ')" "copy-only priv-1 priv-2 pub-1 " "the copy after a write to the original ($(cat "$WORK/list.err"))"

# keychainctl names each damaged file with its reason, and still lists both keychains.
out=$(kc list 2>&1)
echo "$out"
expect_contains "$out" "unreadable: $dir/junk.keychain-db: not a keychain: not an SQLite database" "list: the random file"
expect_contains "$out" "unreadable: $dir/truncated.keychain-db: damaged: 3000 bytes is not a whole number" "list: the truncated copy"
expect_contains "$out" "unreadable: $dir/header-only.keychain-db: damaged: 100 bytes" "list: the header-only file"
expect_contains "$out" "unreadable: $dir/empty.keychain-db: not a keychain: the file is empty" "list: the empty file"
expect_contains "$out" "good.keychain-db" "list: the good keychain"
expect_contains "$out" "copy.keychain-db" "list: the copy"
json=$(kc list --json)
for name in $damaged; do
    expect_contains "$json" "\"file\":\"$dir/$name.keychain-db\"" "list --json names $name"
done
# The module leaves them out of its slots; the log says why.
slots=$(KEYCHAIN_PKCS11_LOG=warning p11 -L 2>"$WORK/module.log")
expect_not_contains "$slots" "junk.keychain-db" "pkcs11-tool -L"
expect_eq "$(echo "$slots" | grep -c '^Slot ')" 3 "slots: the good keychain, its copy and the empty slot"
expect_contains "$(cat "$WORK/module.log")" "truncated.keychain-db: damaged: 3000 bytes" "the module's log line for the truncated copy"
expect_contains "$(cat "$WORK/module.log")" "junk.keychain-db: not a keychain" "the module's log line for the random file"

# Nothing was written to the damaged files.
(cd "$dir" && sha256sum -c --quiet "$WORK/damaged.sums") || fail "a damaged file changed"
for name in $damaged; do
    for side in -wal -shm -journal; do
        [ ! -e "$dir/$name.keychain-db$side" ] || fail "SQLite side file $name.keychain-db$side was created"
    done
done
echo "figure: good keychain unaffected by 4 damaged files and a diverging copy; nothing written to the damaged ones"
