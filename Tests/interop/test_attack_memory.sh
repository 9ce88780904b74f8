# Memory hygiene (security issue, item 8), measured in a real host process (Tests/c-host/memscan.c):
# the module's keys and decrypted records live on pages left out of core dumps (MADV_DONTDUMP) and,
# within RLIMIT_MEMLOCK, locked out of swap; after C_Logout and after C_Finalize no copy of a
# private data object's value is left in the process (written, read back, all copies wiped). The
# scanner must see the known RSA prime while logged in (so that a miss means something); the
# pieces of it still found after C_Logout are reported as a figure (open work, Docs/security.md).
. "$HERE/lib.sh"

new_keychain scan 87654321 123456
memscan="$WORK/memscan"
gcc -Wall -Wextra -Werror -O1 -I"$HERE/../../Include" "$HERE/../c-host/memscan.c" -o "$memscan" -ldl || fail "compile memscan.c"
out=$("$memscan" "$MODULE" scan 123456) || fail "memscan: $out"
pages=$(sed -n 's/^secure-pages //p' <<<"$out")
dontdump=$(sed -E 's/dontdump=([0-9]+).*/\1/' <<<"$pages")
locked=$(sed -E 's/.*locked=([0-9]+)/\1/' <<<"$pages")
[ "$dontdump" -ge 64 ] || fail "pages left out of core dumps while logged in: ${dontdump} KiB, expected at least one 64 KiB chunk"
if [ "$(ulimit -l)" = unlimited ] || [ "$(ulimit -l)" -ge 1024 ]; then
    [ "$locked" -ge 64 ] || fail "locked pages with RLIMIT_MEMLOCK $(ulimit -l) KiB: ${locked} KiB"
fi
logged_in=$(sed -n 's/^logged-in //p' <<<"$out")
prime_in=$(sed -E 's/.*prime=([0-9]+)/\1/' <<<"$logged_in")
[ "$prime_in" -ge 1 ] || fail "the scanner did not find the RSA prime while logged in ($logged_in): it would miss copies too"
expect_eq "$(sed -n 's/^logged-out //p' <<<"$out" | sed -E 's/ prime=.*//')" "value=0" "copies of the data object's value after C_Logout"
expect_eq "$(sed -n 's/^finalized //p' <<<"$out" | sed -E 's/ prime=.*//')" "value=0" "copies of the data object's value after C_Finalize"
echo "figure: secret pages ${dontdump} KiB excluded from core dumps, ${locked} KiB locked (RLIMIT_MEMLOCK $(ulimit -l) KiB); copies found: $(sed -n 's/^logged-in //p;' <<<"$out") logged in, $(sed -n 's/^logged-out //p' <<<"$out") after C_Logout, $(sed -n 's/^finalized //p' <<<"$out") after C_Finalize"
