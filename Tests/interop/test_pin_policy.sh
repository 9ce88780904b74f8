# A keychain keeps the PIN policy it was created with (lengths and tries), pkcs11-tool sees it in
# the token info, and every PIN set later is held to it. `keychainctl raise-kdf` raises the scrypt
# cost; each PIN moves to it at its next successful login, and the cost never goes down.
. "$HERE/lib.sh"

SO=so-pin-0001
PIN=user-pin-01
export KEYCHAIN_PKCS11_PIN_MIN_LENGTH=8 KEYCHAIN_PKCS11_PIN_MAX_LENGTH=16 KEYCHAIN_PKCS11_PIN_MAX_FAILURES=3

# A PIN shorter than the policy is refused before anything is written (exit 3 = PIN problem).
out=$(KEYCHAIN_PKCS11_SO_PIN="$SO" KEYCHAIN_PKCS11_PIN=short "$KEYCHAINCTL" create --label strict 2>&1)
expect_eq "$?" "3" "exit status of create with a 5-byte PIN"
expect_contains "$out" "the user PIN must have 8 to 16 bytes" "create with a short PIN"
expect_eq "$(ls "$KEYCHAIN_PKCS11_DIR" | grep -c '\.keychain-db$')" "0" "keychain files after a refused create"

KEYCHAIN_PKCS11_SO_PIN="$SO" KEYCHAIN_PKCS11_PIN="$PIN" "$KEYCHAINCTL" create --label strict >/dev/null || fail "create strict"
# The policy is the keychain's own: later processes without the variables still see and apply it.
unset KEYCHAIN_PKCS11_PIN_MIN_LENGTH KEYCHAIN_PKCS11_PIN_MAX_LENGTH KEYCHAIN_PKCS11_PIN_MAX_FAILURES
slot=$(slot_of strict)
[ -n "$slot" ] || fail "no slot for keychain strict"
expect_eq "$(p11 --slot "$slot" -T 2>/dev/null | sed -n 's/^  pin min\/max *: //p')" "8/16" "pin min/max of strict"

out=$(p11 --slot "$slot" --login --pin "$PIN" --change-pin --new-pin 1234567 2>&1) && fail "changed to a 7-byte PIN"
expect_contains "$out" "CKR_PIN_LEN_RANGE" "change to a 7-byte PIN"
out=$(p11 --slot "$slot" --login --pin "$PIN" --change-pin --new-pin 12345678901234567 2>&1) && fail "changed to a 17-byte PIN"
expect_contains "$out" "CKR_PIN_LEN_RANGE" "change to a 17-byte PIN"

# Three tries, not ten.
for i in 1 2 3; do
    out=$(p11 --slot "$slot" --login --pin wrong-pin-$i -O 2>&1) && fail "wrong login $i succeeded"
    expect_contains "$out" "CKR_PIN_INCORRECT" "wrong login $i"
done
out=$(p11 --slot "$slot" --login --pin "$PIN" -O 2>&1) && fail "login after three failures succeeded"
expect_contains "$out" "CKR_PIN_LOCKED" "login after three failures"
p11 --slot "$slot" --init-pin --login --login-type so --so-pin "$SO" --pin "$PIN" >/dev/null 2>&1 || fail "SO re-sets the user PIN"
echo "ok: policy 8-16 bytes, 3 tries, kept in the keychain"

# raise-kdf: run.sh creates keychains at log2 N = 10.
kdf_column() { "$KEYCHAINCTL" list | awk '$3 == "strict" { print $7 }'; }
expect_eq "$(kdf_column)" "2^10" "KDF column before raising"
out=$("$KEYCHAINCTL" raise-kdf -k strict --log-n 12) || fail "raise-kdf to 12"
expect_contains "$out" "N = 2^12" "raise-kdf report"
expect_eq "$(kdf_column)" "2^10→2^12" "KDF column while the raise waits for a login"
out=$(p11 --slot "$slot" --login --pin wrong-pin-4 -O 2>&1) && fail "wrong login after raise succeeded"
expect_eq "$(kdf_column)" "2^10→2^12" "KDF column after a wrong PIN"
p11 --slot "$slot" --login --pin "$PIN" -O >/dev/null 2>&1 || fail "login after raise"
expect_eq "$(kdf_column)" "2^12" "KDF column after the user's login"
p11 --slot "$slot" --login --pin "$PIN" -O >/dev/null 2>&1 || fail "second login after raise"

out=$("$KEYCHAINCTL" raise-kdf -k strict --log-n 11 2>&1) && fail "lowered the KDF cost"
expect_contains "$out" "the cost can only be raised" "raise-kdf to a lower cost"
out=$("$KEYCHAINCTL" raise-kdf -k nosuch --log-n 14 2>&1) && fail "raise-kdf of a missing keychain"
expect_contains "$out" "no keychain labelled 'nosuch'" "raise-kdf of a missing keychain"
expect_eq "$(kdf_column)" "2^12" "KDF column after refused changes"
echo "ok: raise-kdf re-wraps at the next login and never lowers"
