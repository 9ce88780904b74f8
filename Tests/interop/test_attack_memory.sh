# Memory hygiene (security issue, item 8), measured in a real host process (Tests/c-host/memscan.c):
# the module's keys and decrypted records live on pages left out of core dumps (MADV_DONTDUMP) and,
# within RLIMIT_MEMLOCK, locked out of swap; the OpenSSL key objects of keys in use keep their
# private numbers in OpenSSL's secure heap, which the module makes (`openssl_secure_heap`).
# While logged in, what a core dump would hold is exactly the residue Docs/security.md (4b)
# names: one copy of an RSA prime (OpenSSL's Montgomery context) and of an Ed25519 private key
# (OpenSSL 3.0 imports raw keys onto the ordinary heap), nothing of the private exponent, the EC
# scalar or a data object's value; with the secure heap off, the exponent and the scalar are
# there too. After C_Logout, and after C_Finalize, no copy of any of them is left anywhere in
# the process's writable memory. The scanner proves itself on canaries: the value and the
# byte-reversed prime put back on purpose must each be found once. The host clears the buffers
# OpenSSL 3.0's decoders free uncleared (each holds a whole key's DER; what the next allocations
# leave of them changes from run to run) and counts them: two copies of each RSA and EC key it
# decodes, as security.md (4b) says; every other copy, live or freed, is counted in the scans.
. "$HERE/lib.sh"

new_keychain scan 87654321 123456
memscan="$WORK/memscan"
gcc -Wall -Wextra -Werror -O1 -I"$HERE/../../Include" "$HERE/../c-host/memscan.c" -o "$memscan" -ldl -lcrypto || fail "compile memscan.c"
out=$("$memscan" "$MODULE" scan 123456) || fail "memscan: $out"
expect_eq "$(sed -n 's/^canary //p' <<<"$out")" "value=1 reversed=1" "the scanner finds the canaries"
expect_eq "$(sed -n 's/^decoder-copies //p' <<<"$out")" "value=0 prime=2 exponent=2 ec=2 ed25519=0" "copies OpenSSL's decoders freed uncleared (cleared by the host)"
pages=$(sed -n 's/^secure-pages //p' <<<"$out")
dontdump=$(sed -E 's/dontdump=([0-9]+).*/\1/' <<<"$pages")
locked=$(sed -E 's/.*locked=([0-9]+)/\1/' <<<"$pages")
# Our own 64 KiB chunks and OpenSSL's 1 MiB secure heap.
[ "$dontdump" -ge 1088 ] || fail "pages left out of core dumps while logged in: ${dontdump} KiB, expected at least 64 KiB + 1 MiB"
if [ "$(ulimit -l)" = unlimited ] || [ "$(ulimit -l)" -ge 2048 ]; then
    [ "$locked" -ge 1088 ] || fail "locked pages with RLIMIT_MEMLOCK $(ulimit -l) KiB: ${locked} KiB"
fi
expect_eq "$(sed -n 's/^logged-in-dumpable //p' <<<"$out")" "value=0 prime=1 exponent=0 ec=0 ed25519=1" "copies in dumpable memory while logged in"
expect_eq "$(sed -n 's/^logged-out //p' <<<"$out")" "value=0 prime=0 exponent=0 ec=0 ed25519=0" "copies after C_Logout"
expect_eq "$(sed -n 's/^finalized //p' <<<"$out")" "value=0 prime=0 exponent=0 ec=0 ed25519=0" "copies after C_Finalize"
echo "figure: secret pages ${dontdump} KiB excluded from core dumps, ${locked} KiB locked (RLIMIT_MEMLOCK $(ulimit -l) KiB); copies while logged in: $(sed -n 's/^logged-in //p' <<<"$out"), of them dumpable: $(sed -n 's/^logged-in-dumpable //p' <<<"$out"); after C_Logout: $(sed -n 's/^logged-out //p' <<<"$out"), after C_Finalize: $(sed -n 's/^finalized //p' <<<"$out"); freed uncleared by OpenSSL's decoders (cleared by the host): $(sed -n 's/^decoder-copies //p' <<<"$out")"

# The setting is what keeps them out: without the secure heap the exponent and the EC scalar
# are in dumpable memory while logged in (and still gone after C_Logout).
off=$(KEYCHAIN_PKCS11_OPENSSL_SECURE_HEAP=off "$memscan" "$MODULE" scan 123456) || fail "memscan with the secure heap off: $off"
expect_eq "$(sed -n 's/^decoder-copies //p' <<<"$off")" "value=0 prime=2 exponent=2 ec=2 ed25519=0" "copies OpenSSL's decoders freed uncleared with the secure heap off"
expect_eq "$(sed -n 's/^logged-in-dumpable //p' <<<"$off")" "value=0 prime=2 exponent=1 ec=1 ed25519=1" "dumpable copies with openssl_secure_heap = off"
expect_eq "$(sed -n 's/^logged-out //p' <<<"$off")" "value=0 prime=0 exponent=0 ec=0 ed25519=0" "copies after C_Logout with the secure heap off"
echo "figure: with openssl_secure_heap = off, dumpable copies while logged in: $(sed -n 's/^logged-in-dumpable //p' <<<"$off")"

# OpenSSL's secure heap fails allocations when full (no fallback), and the host's own keys share
# it: the module keeps at most half of it, dropping the keys it keeps ready. 32 RSA-2048 keys
# (about 1 KiB each) in one process with a 16 KiB heap: every signature is made.
crowd=$(KEYCHAIN_PKCS11_OPENSSL_SECURE_HEAP=16K "$memscan" "$MODULE" scan 123456 crowd 32 2>&1) || fail "memscan crowd: $crowd"
expect_eq "$crowd" "crowd signed=64" "signatures with 32 RSA keys in a 16 KiB secure heap"

# keychainctl never writes a core dump, whatever `ulimit -c` says: its RLIMIT_CORE is 0 (soft and
# hard) from its first instruction on. Checked on a keychainctl blocked reading a password.
printf '123456' >"$WORK/user.pin"
mkfifo "$WORK/password.fifo"
( ulimit -c unlimited 2>/dev/null || ulimit -c 1024; kc add-generic-password -a coretest -s example.org --pin-file "$WORK/user.pin" --password-file "$WORK/password.fifo" ) >"$WORK/add.out" 2>&1 &
adder=$!
limits=""
for _ in $(seq 100); do
    pid=$(pgrep -n -f "keychainctl add-generic-password -a coretest") && limits=$(grep "Max core file size" "/proc/$pid/limits" 2>/dev/null)
    [ "$(awk '{print $5, $6}' <<<"$limits")" = "0 0" ] && break
    sleep 0.05
done
printf 'not-in-a-core-dump' >"$WORK/password.fifo"
wait "$adder" || fail "keychainctl add-generic-password: $(cat "$WORK/add.out")"
expect_eq "$(awk '{print $5, $6}' <<<"$limits")" "0 0" "keychainctl's core file size limit (soft, hard)"
