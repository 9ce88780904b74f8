# GnuTLS p11tool: --list-tokens with token URIs, --list-all by URI, with and without login.
. "$HERE/lib.sh"

PIN=123456
new_keychain gnutok 87654321 "$PIN"
new_keychain othertok 87654321 "$PIN"
slot=$(slot_of gnutok)
[ -n "$slot" ] || fail "no slot for keychain gnutok"
serial=$(p11 --slot "$slot" -T 2>/dev/null | sed -n "/token label        : gnutok$/,/serial num/s/^  serial num         : //p")
[[ "$serial" =~ ^[0-9a-f]{16}$ ]] || fail "serial from pkcs11-tool: [$serial]"

# --provider loads only this module; it needs an absolute path.
pt() { p11tool --provider "$MODULE" "$@"; }
unset GNUTLS_PIN GNUTLS_SO_PIN

# --list-tokens: both keychains, each with a URI carrying its label and serial.
out=$(pt --list-tokens 2>&1) || fail "p11tool --list-tokens exit $?: $out"
uri=$(sed -n 's/^\tURL: \(pkcs11:.*;token=gnutok\)$/\1/p' <<<"$out")
[ -n "$uri" ] || fail "no URI with token=gnutok in: $out"
expect_contains "$uri" "serial=$serial;" "token URI serial"
expect_contains "$uri" "manufacturer=Keychain%20PKCS%2311;" "token URI manufacturer"
expect_contains "$uri" "model=Keychain;" "token URI model"
expect_contains "$out" $'\tLabel: gnutok\n' "token label"
expect_contains "$out" $'\tSerial: '"$serial"$'\n' "token serial"
expect_contains "$out" $'\tManufacturer: Keychain PKCS#11\n' "token manufacturer"
expect_contains "$out" $'\tFlags: RNG, Requires login\n' "token flags"
expect_contains "$out" ";token=othertok" "second keychain listed"

# Objects: one public and one private data object.
head -c 500 /dev/urandom >"$WORK/pub.bin"
head -c 500 /dev/urandom >"$WORK/priv.bin"
p11 --slot "$slot" --write-object "$WORK/pub.bin" --type data --label pubdata >/dev/null 2>&1 || fail "write public object"
p11 --slot "$slot" --login --pin "$PIN" --write-object "$WORK/priv.bin" --type data --label privdata --private >/dev/null 2>&1 || fail "write private object"

# Without login only the public object is listed, by token label and by the full token URI.
for sel in "pkcs11:token=gnutok" "$uri"; do
    out=$(pt --list-all "$sel" 2>&1) || fail "p11tool --list-all $sel exit $?: $out"
    expect_contains "$out" $'\tURL: '"$uri"$';object=pubdata;type=data\n\tType: Data\n\tLabel: pubdata\n' "public object without login ($sel)"
    expect_not_contains "$out" "privdata" "private object listed without login ($sel)"
    expect_eq "$(grep -c '^Object ' <<<"$out")" 1 "objects listed without login ($sel)"
done

# The other keychain's URI selects none of these objects.
out=$(pt --list-all "pkcs11:token=othertok" 2>&1)
expect_eq "$out" "No matching objects found" "objects listed under othertok"

# With --login and GNUTLS_PIN both objects are listed; the private one is flagged CKA_PRIVATE.
out=$(GNUTLS_PIN="$PIN" pt --batch --login --list-all "pkcs11:token=gnutok" 2>&1) || fail "p11tool --login --list-all exit $?: $out"
expect_eq "$(grep -c '^Object ' <<<"$out")" 2 "objects listed after login"
expect_contains "$out" $'\tURL: '"$uri"$';object=privdata;type=data\n\tType: Data\n\tLabel: privdata\n\tFlags: CKA_PRIVATE; \n' "private object after login"
expect_contains "$out" $'\tLabel: pubdata\n' "public object after login"

# The same with --set-pin.
out=$(pt --batch --login --set-pin="$PIN" --list-all "pkcs11:token=gnutok;object=privdata" 2>&1) || fail "p11tool --set-pin exit $?: $out"
expect_eq "$(grep -c '^Object ' <<<"$out")" 1 "object selected by label after login"
expect_contains "$out" $'\tLabel: privdata\n' "private object selected by URI"

# A wrong PIN does not reveal the private object.
out=$(GNUTLS_PIN=000000 pt --batch --login --list-all "pkcs11:token=gnutok" 2>&1) && fail "p11tool login with a wrong PIN succeeded: $out"
expect_not_contains "$out" "privdata" "private object listed with a wrong PIN"
