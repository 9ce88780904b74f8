# pkcs11-tool token management: -I, -L, -T, -M, --init-token, --init-pin, --change-pin (user and SO).
. "$HERE/lib.sh"

SO=87654321
PIN=123456

# -I: library information.
out=$(p11 -I 2>&1) || fail "pkcs11-tool -I exit $?"
expect_contains "$out" $'\nManufacturer     Keychain PKCS#11\n' "C_GetInfo manufacturer"

# Before any keychain exists: exactly one slot, the empty one, and -T lists no token.
out=$(p11 -L 2>&1) || fail "pkcs11-tool -L exit $?"
expect_eq "$(grep -c '^Slot ' <<<"$out")" 1 "number of slots with no keychain"
expect_contains "$out" "token state:   uninitialized" "the empty slot is listed"
empty=$(empty_slot)
[ -n "$empty" ] || fail "no empty slot found"

# --init-token on the empty slot creates the keychain file; its slot keeps the empty slot's ID.
out=$(p11 --slot "$empty" --init-token --label tok1 --so-pin "$SO" 2>&1) || fail "init-token exit $?: $out"
expect_contains "$out" "Token successfully initialized" "init-token message"
[ -f "$KEYCHAIN_PKCS11_DIR/tok1.keychain-db" ] || fail "tok1.keychain-db not created: $(ls "$KEYCHAIN_PKCS11_DIR")"
slot=$(slot_of tok1)
expect_eq "$slot" "$empty" "slot ID of the new keychain"
new_empty=$(empty_slot)
[ -n "$new_empty" ] || fail "no new empty slot after init-token"
[ "$new_empty" != "$slot" ] || fail "new empty slot reuses ID $slot"
out=$(p11 -L 2>&1) || fail "pkcs11-tool -L exit $?"
expect_eq "$(grep -c '^Slot ' <<<"$out")" 2 "number of slots with one keychain"

# Before --init-pin, the user PIN is not initialised.
out=$(p11 --slot "$slot" -T 2>&1) || fail "-T exit $?"
expect_contains "$out" "token flags        : login required, rng, token initialized"$'\n' "flags before init-pin"

# --init-pin as SO.
out=$(p11 --slot "$slot" --init-pin --login --login-type so --so-pin "$SO" --pin "$PIN" 2>&1) || fail "init-pin exit $?: $out"
expect_contains "$out" "User PIN successfully initialized" "init-pin message"

# -T: the keychain's token (and the empty slot's uninitialised one), with the expected fields.
out=$(p11 -T 2>&1) || fail "pkcs11-tool -T exit $?"
expect_eq "$(grep -c '^Slot ' <<<"$out")" 2 "-T slot count"
expect_eq "$(grep -c '^  token label ' <<<"$out")" 1 "-T initialised token count"
expect_contains "$out" "Slot 0 ($(printf '0x%x' "$slot")): " "slot line"
expect_contains "$out" $'\n  token label        : tok1\n' "token label"
expect_contains "$out" $'\n  token manufacturer : Keychain PKCS#11\n' "token manufacturer"
expect_contains "$out" $'\n  token flags        : login required, rng, token initialized, PIN initialized\n' "token flags"
expect_contains "$out" $'\n  pin min/max        : 4/256' "PIN length range"
serial=$(sed -n 's/^  serial num         : //p' <<<"$out")
[[ "$serial" =~ ^[0-9a-f]{16}$ ]] || fail "serial is not 16 hex characters: [$serial]"
# The serial is stable across processes.
out=$(p11 -T 2>&1) || fail "pkcs11-tool -T exit $?"
expect_eq "$(sed -n 's/^  serial num         : //p' <<<"$out")" "$serial" "serial in a second process"

# -M: the mechanism list with exact sizes and flags for a few (the compatible key policy:
# RSA from 1,024 bits, P-192 and up); key_policy = modern raises them and drops the legacy ones.
out=$(p11 --slot "$slot" -M 2>/dev/null); rc=$?
expect_eq "$rc" 0 "-M exit code"
expect_contains "$out" $'\n  RSA-PKCS-KEY-PAIR-GEN, keySize={1024,8192}, hw, generate_key_pair\n' "-M RSA key generation"
expect_contains "$out" $'\n  SHA256, hw, digest\n' "-M SHA-256"
expect_contains "$out" $'\n  ECDSA-SHA256, keySize={192,521}, hw, sign, verify, EC F_P, EC OID, EC uncompressed\n' "-M ECDSA-SHA256"
out=$(KEYCHAIN_PKCS11_KEY_POLICY=modern p11 --slot "$slot" -M 2>/dev/null) || fail "-M under key_policy = modern"
expect_contains "$out" $'\n  RSA-PKCS-KEY-PAIR-GEN, keySize={2048,8192}, hw, generate_key_pair\n' "-M RSA key generation (modern)"
expect_contains "$out" $'\n  ECDSA-SHA256, keySize={224,521}, hw, sign, verify, EC F_P, EC OID, EC uncompressed\n' "-M ECDSA-SHA256 (modern)"
expect_not_contains "$out" "MD5" "-M offers no MD5 (modern)"
expect_not_contains "$out" "DES" "-M offers no DES (modern)"

# Login works with the user PIN, not with a wrong one.
p11 --slot "$slot" --login --pin "$PIN" -O >/dev/null 2>&1 || fail "login with the user PIN"
out=$(p11 --slot "$slot" --login --pin 999999 -O 2>&1) && fail "login with a wrong PIN succeeded"
expect_contains "$out" "CKR_PIN_INCORRECT" "wrong PIN error"
p11 --slot "$slot" --login --pin "$PIN" -O >/dev/null 2>&1 || fail "login after one wrong PIN"

# --change-pin (user): the old PIN stops working, the new one works.
NEWPIN=24681357
out=$(p11 --slot "$slot" --change-pin --pin "$PIN" --new-pin "$NEWPIN" 2>&1) || fail "change-pin exit $?: $out"
expect_contains "$out" "PIN successfully changed" "change-pin message"
out=$(p11 --slot "$slot" --login --pin "$PIN" -O 2>&1) && fail "old user PIN still logs in"
expect_contains "$out" "CKR_PIN_INCORRECT" "old user PIN error"
p11 --slot "$slot" --login --pin "$NEWPIN" -O >/dev/null 2>&1 || fail "new user PIN does not log in"

# --change-pin with a wrong old PIN fails and changes nothing.
out=$(p11 --slot "$slot" --change-pin --pin 11119999 --new-pin 22223333 2>&1) && fail "change-pin with a wrong old PIN succeeded"
expect_contains "$out" "CKR_PIN_INCORRECT" "change-pin with a wrong old PIN"
p11 --slot "$slot" --login --pin 22223333 -O >/dev/null 2>&1 && fail "PIN changed despite a wrong old PIN"
p11 --slot "$slot" --login --pin "$NEWPIN" -O >/dev/null 2>&1 || fail "PIN lost after a failed change"

# PIN length limits 4..256.
out=$(p11 --slot "$slot" --change-pin --pin "$NEWPIN" --new-pin 123 2>&1) && fail "3-character PIN accepted"
expect_contains "$out" "CKR_PIN_LEN_RANGE" "3-character PIN"
long=$(printf 'x%.0s' $(seq 257))
out=$(p11 --slot "$slot" --change-pin --pin "$NEWPIN" --new-pin "$long" 2>&1) && fail "257-character PIN accepted"
expect_contains "$out" "CKR_PIN_LEN_RANGE" "257-character PIN"
max=$(printf 'y%.0s' $(seq 256))
p11 --slot "$slot" --change-pin --pin "$NEWPIN" --new-pin "$max" >/dev/null 2>&1 || fail "256-character PIN refused"
p11 --slot "$slot" --change-pin --pin "$max" --new-pin 4321 >/dev/null 2>&1 || fail "4-character PIN refused"
p11 --slot "$slot" --login --pin 4321 -O >/dev/null 2>&1 || fail "login with the 4-character PIN"

# SO PIN change: log in as SO and C_SetPIN; the old SO PIN then fails, the new one works.
NEWSO=11223344
out=$(p11 --slot "$slot" --login --login-type so --so-pin "$SO" --change-pin --new-pin "$NEWSO" 2>&1) || fail "SO change-pin exit $?: $out"
expect_contains "$out" "PIN successfully changed" "SO change-pin message"
out=$(p11 --slot "$slot" --session-rw --login --login-type so --so-pin "$SO" -O 2>&1) && fail "old SO PIN still logs in"
expect_contains "$out" "CKR_PIN_INCORRECT" "old SO PIN error"
p11 --slot "$slot" --session-rw --login --login-type so --so-pin "$NEWSO" -O >/dev/null 2>&1 || fail "new SO PIN does not log in"
# The user PIN is unaffected by the SO PIN change; the new SO PIN can re-set it.
p11 --slot "$slot" --login --pin 4321 -O >/dev/null 2>&1 || fail "user PIN after SO PIN change"
p11 --slot "$slot" --init-pin --login --login-type so --so-pin "$NEWSO" --pin 56785678 >/dev/null 2>&1 || fail "init-pin with the new SO PIN"
p11 --slot "$slot" --login --pin 56785678 -O >/dev/null 2>&1 || fail "user PIN set by the new SO PIN"

# Final state.
out=$(p11 --slot "$slot" -T 2>&1) || fail "-T exit $?"
expect_contains "$out" $'\n  token flags        : login required, rng, token initialized, PIN initialized\n' "final token flags"
