# pkcs11-tool loads the module and lists the empty slot.
. "$HERE/lib.sh"
out=$(p11 -I) || fail "pkcs11-tool -I"
expect_contains "$out" "Keychain PKCS#11" "manufacturer in C_GetInfo"
out=$(p11 -L) || fail "pkcs11-tool -L"
expect_contains "$out" "token state:   uninitialized" "the empty slot is listed"
