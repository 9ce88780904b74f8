# Several processes share one keychain, and slot IDs are stable across processes and keychain
# additions/removals (DESIGN.md §3 "Slots").
. "$HERE/lib.sh"

PIN=123456

# The empty slot's ID becomes the first keychain's ID.
empty0=$(empty_slot)
[ -n "$empty0" ] || fail "no empty slot"
new_keychain first 87654321 "$PIN"
s_first=$(slot_of first)
expect_eq "$s_first" "$empty0" "first keychain takes the empty slot's ID"

# Objects written by one process are read byte-identical by others (private and public).
head -c 4096 /dev/urandom >"$WORK/a.bin"
head -c 77 /dev/urandom >"$WORK/b.bin"
p11 --slot "$s_first" --login --pin "$PIN" --write-object "$WORK/a.bin" --type data --label shared --private >/dev/null 2>&1 \
    || fail "write private object"
p11 --slot "$s_first" --write-object "$WORK/b.bin" --type data --label sharedpub >/dev/null 2>&1 || fail "write public object"
p11 --slot "$s_first" --login --pin "$PIN" --read-object --type data --label shared -o "$WORK/a.out" >/dev/null 2>&1 \
    || fail "read private object in another process"
cmp "$WORK/a.bin" "$WORK/a.out" || fail "private object read by another process differs"
p11 --slot "$s_first" --read-object --type data --label sharedpub -o "$WORK/b.out" >/dev/null 2>&1 \
    || fail "read public object in another process"
cmp "$WORK/b.bin" "$WORK/b.out" || fail "public object read by another process differs"

# Concurrent writers: four processes each write an object at the same time; all land.
pids=()
for i in 1 2 3 4; do
    head -c $((100 * i)) /dev/urandom >"$WORK/c$i.bin"
    p11 --slot "$s_first" --login --pin "$PIN" --write-object "$WORK/c$i.bin" --type data --label "conc$i" --private \
        >"$WORK/c$i.log" 2>&1 &
    pids+=($!)
done
for i in 1 2 3 4; do
    wait "${pids[$((i - 1))]}" || fail "concurrent writer $i: $(cat "$WORK/c$i.log")"
done
for i in 1 2 3 4; do
    p11 --slot "$s_first" --login --pin "$PIN" --read-object --type data --label "conc$i" -o "$WORK/c$i.out" >/dev/null 2>&1 \
        || fail "read conc$i"
    cmp "$WORK/c$i.bin" "$WORK/c$i.out" || fail "conc$i differs"
done
out=$(p11 --slot "$s_first" --login --pin "$PIN" -O 2>/dev/null) || fail "-O"
expect_eq "$(grep -c '^Data object' <<<"$out")" 6 "objects after concurrent writes"

# A second keychain gets the next empty slot's ID; the first keeps its ID.
empty1=$(empty_slot)
[ -n "$empty1" ] || fail "no empty slot after first keychain"
[ "$empty1" != "$s_first" ] || fail "empty slot reuses the first keychain's ID"
new_keychain second 87654321 "$PIN"
s_second=$(slot_of second)
expect_eq "$s_second" "$empty1" "second keychain takes the empty slot's ID"
expect_eq "$(slot_of first)" "$s_first" "first keychain's slot ID after creating the second"
empty2=$(empty_slot)
[ -n "$empty2" ] || fail "no empty slot after second keychain"
[ "$empty2" != "$s_first" ] && [ "$empty2" != "$s_second" ] || fail "empty slot $empty2 reuses a keychain's ID"

head -c 600 /dev/urandom >"$WORK/s.bin"
p11 --slot "$s_second" --login --pin "$PIN" --write-object "$WORK/s.bin" --type data --label insecond --private >/dev/null 2>&1 \
    || fail "write into second keychain"

# Removing the first-created keychain's file leaves the second keychain's slot ID unchanged.
rm -f "$KEYCHAIN_PKCS11_DIR/first.keychain-db" "$KEYCHAIN_PKCS11_DIR/first.keychain-db-wal" \
    "$KEYCHAIN_PKCS11_DIR/first.keychain-db-shm"
out=$(p11 -L 2>&1) || fail "-L after removing first"
expect_not_contains "$out" "token label        : first" "removed keychain still listed"
expect_eq "$(slot_of second)" "$s_second" "second keychain's slot ID after removing the first"
[ "$(empty_slot)" != "$s_second" ] || fail "empty slot takes the second keychain's ID"
expect_eq "$(grep -c '^Slot ' <<<"$out")" 2 "slots after removing first"

# A third keychain gets an ID of its own; the second keeps its ID and its object.
new_keychain third 87654321 "$PIN"
s_third=$(slot_of third)
[ -n "$s_third" ] || fail "no slot for third"
[ "$s_third" != "$s_second" ] || fail "third keychain took the second keychain's ID"
expect_eq "$(slot_of second)" "$s_second" "second keychain's slot ID after creating a third"
p11 --slot "$s_second" --login --pin "$PIN" --read-object --type data --label insecond -o "$WORK/s.out" >/dev/null 2>&1 \
    || fail "read from second keychain by its stable slot ID"
cmp "$WORK/s.bin" "$WORK/s.out" || fail "second keychain's object differs"
out=$(p11 --slot "$s_third" --login --pin "$PIN" -O 2>/dev/null) || fail "-O on third"
expect_eq "$out" "" "objects of the new third keychain"
