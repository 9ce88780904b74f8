# Private objects are sealed at rest (DESIGN.md §6): no plaintext value or label in the database
# file, its WAL or its SQL dump, and a tampered record gives CKR_DEVICE_ERROR for that object only,
# never altered data.
. "$HERE/lib.sh"

PIN=123456
new_keychain atrest 87654321 "$PIN"
slot=$(slot_of atrest)
[ -n "$slot" ] || fail "no slot for keychain atrest"
db="$KEYCHAIN_PKCS11_DIR/atrest.keychain-db"
[ -f "$db" ] || fail "no database file $db"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }

rand_hex() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }
value=$(rand_hex)
label=$(rand_hex)
[ ${#value} -eq 32 ] && [ ${#label} -eq 32 ] || fail "random strings"
printf '%s' "$value" >"$WORK/value.txt"
head -c 2000 /dev/urandom >"$WORK/other.bin"

# Hold a connection open so that the WAL is not checkpointed away when pkcs11-tool exits and
# the writes below can be inspected in it.
python3 -c 'import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1])
c.execute("select count(*) from objects").fetchone()
open(sys.argv[2], "w").close()
time.sleep(120)' "$db" "$WORK/holding" &
holder=$!
trap 'kill "$holder" 2>/dev/null' EXIT
for _ in $(seq 100); do [ -e "$WORK/holding" ] && break; sleep 0.05; done
[ -e "$WORK/holding" ] || fail "holder connection did not start"

max_id() { python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print(c.execute("select coalesce(max(id), 0) from objects").fetchone()[0])' "$db"; }
before=$(max_id) || fail "read max(id)"
user --write-object "$WORK/value.txt" --type data --label "$label" --private >/dev/null 2>&1 || fail "write distinctive object"
target=$(max_id) || fail "read max(id)"
[ "$target" -gt "$before" ] || fail "no new row for the written object"
user --write-object "$WORK/other.bin" --type data --label other --private >/dev/null 2>&1 || fail "write second object"
user --read-object --type data --label "$label" -o "$WORK/value.out" >/dev/null 2>&1 || fail "read distinctive object"
cmp "$WORK/value.txt" "$WORK/value.out" || fail "distinctive object differs before tampering"

# Neither string appears in the database file or its WAL (kept by the holder connection).
[ -s "$db-wal" ] || fail "no WAL to inspect"
for f in "$db" "$db-wal"; do
    for s in "$value" "$label"; do
        n=$(grep -c -a -F -e "$s" "$f")
        expect_eq "$n" 0 "plaintext [$s] in $(basename "$f")"
    done
done
kill "$holder" && wait "$holder" 2>/dev/null
trap - EXIT
# Nor in the SQL dump, as text or as blob hex (.dump writes blobs as X'..').
dump=$(sqlite3 "$db" .dump) || fail "sqlite3 .dump"
[ -n "$dump" ] || fail "empty dump"
for s in "$value" "$label"; do
    hex=$(printf '%s' "$s" | od -An -tx1 | tr -d ' \n')
    expect_eq "$(grep -c -i -F -e "$s" <<<"$dump")" 0 "plaintext [$s] in the SQL dump"
    expect_eq "$(grep -c -i -F -e "$hex" <<<"$dump")" 0 "hex of [$s] in the SQL dump"
done

# Flip one byte in the middle of the target's sealed record.
python3 - "$db" "$target" <<'EOF' || fail "tamper with the record"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
(rec,) = c.execute("select record from objects where id = ?", (int(sys.argv[2]),)).fetchone()
b = bytearray(rec)
b[len(b) // 2] ^= 0x40
c.execute("update objects set record = ? where id = ?", (bytes(b), int(sys.argv[2])))
c.commit()
c.close()
EOF

rm -f "$WORK/tampered.out"
out=$(user --read-object --type data --label "$label" -o "$WORK/tampered.out" 2>&1) && fail "tampered object was read: $out"
expect_contains "$out" "CKR_DEVICE_ERROR" "error for the tampered object"
[ -s "$WORK/tampered.out" ] && fail "data written for the tampered object: $(od -c "$WORK/tampered.out" | head -3)"

# The other object is unaffected, and listing the token still works.
user --read-object --type data --label other -o "$WORK/other.out" >/dev/null 2>&1 || fail "read the untouched object"
cmp "$WORK/other.bin" "$WORK/other.out" || fail "untouched object differs"
out=$(user -O 2>/dev/null); rc=$?
expect_eq "$rc" 0 "-O exit code with a tampered object present"
expect_contains "$out" "label:          'other'" "untouched object listed"
expect_not_contains "$out" "$value" "tampered value listed"

expect_eq "$(sqlite3 "$db" 'PRAGMA integrity_check')" "ok" "SQLite integrity"

# Undoing the flip makes the object readable again (the failure came from the record alone).
python3 - "$db" "$target" <<'EOF' || fail "restore the record"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
(rec,) = c.execute("select record from objects where id = ?", (int(sys.argv[2]),)).fetchone()
b = bytearray(rec)
b[len(b) // 2] ^= 0x40
c.execute("update objects set record = ? where id = ?", (bytes(b), int(sys.argv[2])))
c.commit()
c.close()
EOF
rm -f "$WORK/value.out"
user --read-object --type data --label "$label" -o "$WORK/value.out" >/dev/null 2>&1 || fail "read the restored object"
cmp "$WORK/value.txt" "$WORK/value.out" || fail "restored object differs"

# Swapping two objects' sealed records (each a valid seal, but for another object) is detected.
python3 - "$db" "$target" <<'EOF' || fail "swap records"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
target = int(sys.argv[2])
(rec,) = c.execute("select record from objects where id = ?", (target,)).fetchone()
(other_id, other_rec) = c.execute("select id, record from objects where id > ? order by id limit 1", (target,)).fetchone()
c.execute("update objects set record = ? where id = ?", (other_rec, target))
c.execute("update objects set record = ? where id = ?", (rec, other_id))
c.commit()
c.close()
EOF
rm -f "$WORK/swap1.out" "$WORK/swap2.out"
out=$(user --read-object --type data --label "$label" -o "$WORK/swap1.out" 2>&1) && fail "swapped-in record was read"
expect_contains "$out" "CKR_DEVICE_ERROR" "error for a swapped record"
[ -s "$WORK/swap1.out" ] && fail "data returned for a swapped record"
out=$(user --read-object --type data --label other -o "$WORK/swap2.out" 2>&1) && fail "swapped-in record was read"
expect_contains "$out" "CKR_DEVICE_ERROR" "error for a swapped record"
[ -s "$WORK/swap2.out" ] && fail "data returned for a swapped record"
expect_eq "$(sqlite3 "$db" 'PRAGMA integrity_check')" "ok" "SQLite integrity after swap"
