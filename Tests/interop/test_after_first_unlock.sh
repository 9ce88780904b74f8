# AfterFirstUnlock across processes, with a small C client (Tests/c-host/items.c) because
# pkcs11-tool cannot set CKA_KC_ACCESSIBLE. The class is usable after the first user login in
# the process that hosts the module, until C_Finalize, even after C_Logout; a new process starts
# without it. p11-kit server runs a fresh p11-kit-remote process (hence a fresh module) for each
# client connection, so there the class lasts for one connection — checked here, so that the
# documentation says what really happens.
. "$HERE/lib.sh"

PIN=user-pin-01
new_keychain afu so-pin-0001 "$PIN"
items="$WORK/items"
gcc -Wall -Wextra -Werror -I"$HERE/../../Include" "$HERE/../c-host/items.c" -o "$items" -ldl || fail "compile items.c"

"$items" "$MODULE" create after-first 2 "$PIN" >/dev/null || fail "create an AfterFirstUnlock item"
"$items" "$MODULE" create when-unlocked 1 "$PIN" >/dev/null || fail "create a WhenUnlocked item"
"$items" "$MODULE" create always 3 "$PIN" >/dev/null || fail "create an Always item"

out=$("$items" "$MODULE" read after-first); expect_eq "$?:$out" "2:not found" "AfterFirstUnlock in a new process before any login"
out=$("$items" "$MODULE" read always); expect_eq "$out" "value of always" "Always in a new process"
out=$("$items" "$MODULE" unlock-read after-first "$PIN"); expect_eq "$out" "value of after-first" "AfterFirstUnlock after login and logout"
out=$("$items" "$MODULE" unlock-read when-unlocked "$PIN"); expect_eq "$?:$out" "2:not found" "WhenUnlocked after logout"

client=$(ls /usr/lib/*/pkcs11/p11-kit-client.so 2>/dev/null | head -1)
[ -n "$client" ] || fail "p11-kit-client.so not installed"
socket="$WORK/p11-kit.sock"
p11-kit server -f --provider "$MODULE" -n "$socket" "pkcs11:token=afu" >"$WORK/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 50); do [ -S "$socket" ] && break; sleep 0.1; done
[ -S "$socket" ] || fail "p11-kit server did not start: $(cat "$WORK/server.log")"
export P11_KIT_SERVER_ADDRESS="unix:path=$socket"
out=$("$items" "$client" unlock-read after-first "$PIN"); expect_eq "$out" "value of after-first" "through p11-kit server, one connection"
out=$("$items" "$client" read after-first); expect_eq "$?:$out" "2:not found" "through p11-kit server, the next connection"
out=$("$items" "$client" read always); expect_eq "$out" "value of always" "Always through p11-kit server"
echo "ok: AfterFirstUnlock lasts for the hosting process (one connection of p11-kit server)"
