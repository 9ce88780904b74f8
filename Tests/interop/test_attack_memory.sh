# Memory hygiene (security issue, item 8), measured in a real host process (Tests/c-host/memscan.c):
# the module's keys and decrypted records live on pages left out of core dumps (MADV_DONTDUMP) and,
# within RLIMIT_MEMLOCK, locked out of swap; after C_Logout, and after C_Finalize, no copy of a
# private data object's value nor of an RSA prime (both written, read back and used) is left in
# the process's writable memory. The scanner proves itself on a canary: the value put back in
# clear on purpose must be found once.
. "$HERE/lib.sh"

new_keychain scan 87654321 123456
memscan="$WORK/memscan"
gcc -Wall -Wextra -Werror -O1 -I"$HERE/../../Include" "$HERE/../c-host/memscan.c" -o "$memscan" -ldl || fail "compile memscan.c"
out=$("$memscan" "$MODULE" scan 123456) || fail "memscan: $out"
expect_eq "$(sed -n 's/^canary //p' <<<"$out")" "value=1" "the scanner finds the canary"
pages=$(sed -n 's/^secure-pages //p' <<<"$out")
dontdump=$(sed -E 's/dontdump=([0-9]+).*/\1/' <<<"$pages")
locked=$(sed -E 's/.*locked=([0-9]+)/\1/' <<<"$pages")
[ "$dontdump" -ge 64 ] || fail "pages left out of core dumps while logged in: ${dontdump} KiB, expected at least one 64 KiB chunk"
if [ "$(ulimit -l)" = unlimited ] || [ "$(ulimit -l)" -ge 1024 ]; then
    [ "$locked" -ge 64 ] || fail "locked pages with RLIMIT_MEMLOCK $(ulimit -l) KiB: ${locked} KiB"
fi
expect_eq "$(sed -n 's/^logged-out //p' <<<"$out")" "value=0 prime=0" "copies of the value and the prime after C_Logout"
expect_eq "$(sed -n 's/^finalized //p' <<<"$out")" "value=0 prime=0" "copies of the value and the prime after C_Finalize"
echo "figure: secret pages ${dontdump} KiB excluded from core dumps, ${locked} KiB locked (RLIMIT_MEMLOCK $(ulimit -l) KiB); copies found logged in: $(sed -n 's/^logged-in //p' <<<"$out"), after C_Logout: $(sed -n 's/^logged-out //p' <<<"$out"), after C_Finalize: $(sed -n 's/^finalized //p' <<<"$out")"

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
