# Attacks with write access to the keychain folder but no PIN (security issue, items 2–5), end to
# end through keychainctl and pkcs11-tool on a real file: record sizes say nothing about secret
# lengths; swapped search entries are reported, not answered; an older copy of the whole file is
# refused until accepted on purpose. (Row rollback, removal, forged public records and the
# manifest are tested in Tests/KeychainCoreTests/TamperingTests.swift.)
. "$HERE/lib.sh"

cd "$WORK" || fail "cd"
printf '12345678' >so.pin
printf '123456' >user.pin
kc create --label tamper --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create"
db="$KEYCHAIN_PKCS11_DIR/tamper.keychain-db"
sql() { python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); r = c.execute(sys.argv[2]).fetchall(); print("\n".join(" ".join(str(v) for v in row) for row in r))' "$db" "$1"; }

# Item 5: a 1-byte and a 41-byte password seal to records of the same size.
printf 'x' | kc add-generic-password -a short -s example.org --pin-file user.pin --password-file - >/dev/null || fail "add short"
head -c 41 /dev/zero | tr '\0' 'y' | kc add-generic-password -a long -s example.org --pin-file user.pin --password-file - >/dev/null || fail "add long"
sizes=$(sql "SELECT DISTINCT length(record) FROM objects")
expect_eq "$(wc -l <<<"$sizes")" "1" "distinct record sizes of a 1-byte and a 41-byte password ($sizes)"

# Item 2: swap the search entries of two data objects; a search for one must not answer the other.
slot=$(slot_of tamper)
printf 'value of alpha' >alpha.bin
printf 'value of beta' >beta.bin
p11 --slot "$slot" --login --pin 123456 --write-object alpha.bin --type data --label alpha --private >/dev/null 2>&1 || fail "write alpha"
p11 --slot "$slot" --login --pin 123456 --write-object beta.bin --type data --label beta --private >/dev/null 2>&1 || fail "write beta"
cp "$db" before-swap.keychain-db
alpha=$(sql "SELECT max(id) - 1 FROM objects")
beta=$(sql "SELECT max(id) FROM objects")
sql "UPDATE object_index SET object_id = CASE object_id WHEN $alpha THEN $beta ELSE $alpha END WHERE object_id IN ($alpha, $beta)" >/dev/null
out=$(p11 --slot "$slot" --login --pin 123456 --read-object --type data --label alpha -o read.bin 2>&1) && fail "the swapped search answered: $(cat read.bin)"
expect_contains "$out" "CKR_DEVICE_ERROR" "search for alpha after the swap"
expect_status 5 "keychainctl verify after the swap" kc verify --pin-file user.pin
expect_contains "$(cat "$WORK/last.err")" "altered" "keychainctl verify message"
cp before-swap.keychain-db "$db"
rm -f "$db-wal" "$db-shm"
p11 --slot "$slot" --login --pin 123456 --read-object --type data --label alpha -o read.bin >/dev/null 2>&1 || fail "read alpha once repaired"
cmp -s read.bin alpha.bin || fail "alpha differs once repaired"

# Item 4, whole file: an older copy of the file replaces the current one.
cp "$db" older.keychain-db
printf 'later' | kc add-generic-password -a later -s example.org --pin-file user.pin --password-file - >/dev/null || fail "add later"
cp older.keychain-db "$db"
rm -f "$db-wal" "$db-shm"
out=$(p11 --slot "$slot" --login --pin 123456 --read-object --type data --label alpha -o read.bin 2>&1) && fail "an older copy of the file was used"
expect_contains "$out" "CKR_DEVICE_ERROR" "reading from an older copy of the file"
expect_status 5 "keychainctl verify of an older copy" kc verify --pin-file user.pin
expect_contains "$(cat "$WORK/last.err")" "replaced by an older copy" "keychainctl verify message for an older copy"
out=$(kc verify --accept-older-copy --pin-file user.pin) || fail "verify --accept-older-copy: $out"
expect_contains "$out" "integrity manifest verified" "verify --accept-older-copy output"
p11 --slot "$slot" --login --pin 123456 --read-object --type data --label alpha -o read.bin >/dev/null 2>&1 || fail "read alpha once accepted"
cmp -s read.bin alpha.bin || fail "alpha differs once accepted"
