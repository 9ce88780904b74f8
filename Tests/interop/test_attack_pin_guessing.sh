# Attack (security issue, item 1): parallel PIN guessing. Every attempt is charged to the failure
# counter before the PIN is evaluated, in one write transaction, so 8 processes guessing at once
# get exactly the limit (10) of wrong answers, never limit + P − 1. When the charge cannot be
# written (another connection holds the database past the busy timeout), the PIN is not
# evaluated: a wrong and a right PIN get the same CKR_DEVICE_ERROR, and nothing is counted.
. "$HERE/lib.sh"

SO=87654321
PIN=123456
WRONG=000000
new_keychain guess "$SO" "$PIN"
slot=$(slot_of guess)
db="$KEYCHAIN_PKCS11_DIR/guess.keychain-db"
[ -f "$db" ] || fail "no database file $db"
attack="$WORK/attack"
gcc -Wall -Wextra -Werror -O1 -I"$HERE/../../Include" "$HERE/../c-host/attack.c" -o "$attack" -ldl || fail "compile attack.c"
flags() { p11 --slot "$slot" -T 2>/dev/null | sed -n 's/^  token flags        : //p'; }
failures() { python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); r = c.execute("select value from meta where key = ?", (sys.argv[2],)).fetchone(); print(r[0] if r else "none")' "$db" "$1"; }

# 8 processes guess the user PIN at once.
out=$("$attack" "$MODULE" guess guess 8 "$WRONG") || fail "guessing run: $out"
expect_eq "$out" "incorrect=10 locked=8 ok=0 other=0" "user PIN guesses by 8 processes at once"
expect_eq "$(failures pin.user.failures)" "10" "stored user PIN failures"
expect_contains "$(flags)" "user PIN locked" "flags after the parallel guessing"
expect_eq "$("$attack" "$MODULE" login guess user "$PIN")" "0x000000a4" "right PIN after the lock (CKR_PIN_LOCKED)"

# The same for the SO PIN (with the user PIN locked, as an attacker would go on).
out=$("$attack" "$MODULE" guess guess 8 "$WRONG" 2>&1) || fail "second guessing run: $out"
expect_eq "$out" "incorrect=0 locked=8 ok=0 other=0" "user PIN stays locked"
so_out=$(python3 - "$attack" "$MODULE" <<'EOF'
import subprocess, sys
from concurrent.futures import ThreadPoolExecutor
attack, module = sys.argv[1], sys.argv[2]
def one(_):
    results = []
    for _ in range(20):
        rv = subprocess.run([attack, module, "login", "guess", "so", "00000000"], capture_output=True, text=True).stdout.strip()
        results.append(rv)
        if rv != "0x000000a0":
            break
    return results
with ThreadPoolExecutor(6) as pool:
    everything = [rv for run in pool.map(one, range(6)) for rv in run]
print("incorrect=%d locked=%d other=%d" % (everything.count("0x000000a0"), everything.count("0x000000a4"),
      len(everything) - everything.count("0x000000a0") - everything.count("0x000000a4")))
EOF
)
expect_eq "$so_out" "incorrect=10 locked=6 other=0" "SO PIN guesses by 6 processes at once"
expect_eq "$(failures pin.so.failures)" "10" "stored SO PIN failures"

# Fail closed: a fresh keychain, its database held by another connection longer than the busy
# timeout (10 s). Neither a wrong nor the right PIN is evaluated; both get CKR_DEVICE_ERROR.
new_keychain busy "$SO" "$PIN"
busy_db="$KEYCHAIN_PKCS11_DIR/busy.keychain-db"
python3 -c 'import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
open(sys.argv[2], "w").close()
time.sleep(14)
c.execute("ROLLBACK")' "$busy_db" "$WORK/held" &
holder=$!
trap 'kill "$holder" 2>/dev/null' EXIT
for _ in $(seq 100); do [ -e "$WORK/held" ] && break; sleep 0.05; done
[ -e "$WORK/held" ] || fail "the holding connection did not start"
"$attack" "$MODULE" login busy user "$WRONG" >"$WORK/wrong.rv" &
wrong=$!
"$attack" "$MODULE" login busy user "$PIN" >"$WORK/right.rv" &
right=$!
wait "$wrong" "$right"
expect_eq "$(cat "$WORK/wrong.rv")" "0x00000030" "wrong PIN while the database is held (CKR_DEVICE_ERROR)"
expect_eq "$(cat "$WORK/right.rv")" "0x00000030" "right PIN while the database is held (CKR_DEVICE_ERROR, no oracle)"
wait "$holder"
trap - EXIT
db="$busy_db"
expect_eq "$(failures pin.user.failures)" "0" "nothing counted while the database was held"
expect_eq "$("$attack" "$MODULE" login busy user "$PIN")" "0x00000000" "right PIN once the database is free"
