# Failed user logins count down to a lock (DESIGN.md §5): CKF_USER_PIN_COUNT_LOW after the first
# failure, CKF_USER_PIN_FINAL_TRY after the 9th, CKF_USER_PIN_LOCKED after the 10th; then even the
# right PIN gives CKR_PIN_LOCKED until the SO re-sets the user PIN, which keeps every object.
. "$HERE/lib.sh"

SO=87654321
PIN=123456
WRONG=000000
new_keychain lockme "$SO" "$PIN"
slot=$(slot_of lockme)
[ -n "$slot" ] || fail "no slot for keychain lockme"

# flags: the token flags line of our slot, as pkcs11-tool -T prints them.
flags() { p11 --slot "$slot" -T 2>/dev/null | sed -n 's/^  token flags        : //p'; }
NORMAL="login required, rng, token initialized, PIN initialized"
# wrong_login N: one failed user login; it must fail with CKR_PIN_INCORRECT.
wrong_login() {
    local out
    out=$(p11 --slot "$slot" --login --pin "$WRONG" -O 2>&1) && fail "login $1 with a wrong PIN succeeded"
    expect_contains "$out" "CKR_PIN_INCORRECT" "error of wrong login $1"
}

head -c 3000 /dev/urandom >"$WORK/keep.bin"
p11 --slot "$slot" --login --pin "$PIN" --write-object "$WORK/keep.bin" --type data --label keep --private >/dev/null 2>&1 \
    || fail "write private object"
expect_eq "$(flags)" "$NORMAL" "flags of a new keychain"

# A successful login resets the count.
wrong_login 0
expect_eq "$(flags)" "login required, rng, token initialized, user PIN count low, PIN initialized" "flags after one failure"
p11 --slot "$slot" --login --pin "$PIN" -O >/dev/null 2>&1 || fail "login after one failure"
expect_eq "$(flags)" "$NORMAL" "flags after a successful login"

# A failed SO login counts against the SO PIN only.
out=$(p11 --slot "$slot" --session-rw --login --login-type so --so-pin 00000000 -O 2>&1) && fail "SO login with a wrong PIN succeeded"
expect_contains "$out" "CKR_PIN_INCORRECT" "wrong SO PIN error"
f=$(flags)
expect_contains "$f" "SO PIN count low" "flags after a wrong SO PIN"
expect_not_contains "$f" "user PIN" "user PIN flags after a wrong SO PIN"
p11 --slot "$slot" --session-rw --login --login-type so --so-pin "$SO" -O >/dev/null 2>&1 || fail "SO login"
expect_eq "$(flags)" "$NORMAL" "flags after a successful SO login"

# Ten failures in separate processes: the count is kept in the keychain.
for i in 1 2 3 4 5 6 7 8; do
    wrong_login "$i"
    f=$(flags)
    expect_contains "$f" "user PIN count low" "flags after $i failures"
    expect_not_contains "$f" "final user PIN try" "flags after $i failures"
    expect_not_contains "$f" "user PIN locked" "flags after $i failures"
done
wrong_login 9
f=$(flags)
expect_contains "$f" "final user PIN try" "flags after 9 failures"
expect_not_contains "$f" "user PIN locked" "flags after 9 failures"

out=$(p11 --slot "$slot" --login --pin "$WRONG" -O 2>&1) && fail "10th wrong login succeeded"
f=$(flags)
expect_contains "$f" "user PIN locked" "flags after 10 failures"
expect_not_contains "$f" "final user PIN try" "flags after 10 failures"

# Locked: the right PIN and a wrong one both give CKR_PIN_LOCKED, and the count stays locked.
out=$(p11 --slot "$slot" --login --pin "$PIN" -O 2>&1) && fail "login with the right PIN while locked succeeded"
expect_contains "$out" "CKR_PIN_LOCKED" "right PIN while locked"
out=$(p11 --slot "$slot" --login --pin "$WRONG" -O 2>&1) && fail "login with a wrong PIN while locked succeeded"
expect_contains "$out" "CKR_PIN_LOCKED" "wrong PIN while locked"
out=$(p11 --slot "$slot" --change-pin --pin "$PIN" --new-pin 55556666 2>&1) && fail "change-pin while locked succeeded"
expect_contains "$out" "CKR_PIN_LOCKED" "change-pin while locked"
f=$(flags)
expect_contains "$f" "user PIN locked" "flags after attempts while locked"
# The private object is not readable without login.
out=$(p11 --slot "$slot" --read-object --type data --label keep -o "$WORK/nope.out" 2>&1) && fail "private object read while locked"
expect_contains "$out" "object not found" "private object read while locked"

# The SO re-sets the user PIN.
NEWPIN=24682468
out=$(p11 --slot "$slot" --init-pin --login --login-type so --so-pin "$SO" --new-pin "$NEWPIN" 2>&1) || fail "SO init-pin exit $?: $out"
expect_contains "$out" "User PIN successfully initialized" "SO init-pin message"
expect_eq "$(flags)" "$NORMAL" "flags after the SO reset"

# The old PIN no longer works; the new one does, and the object is intact.
out=$(p11 --slot "$slot" --login --pin "$PIN" -O 2>&1) && fail "old user PIN works after the SO reset"
expect_contains "$out" "CKR_PIN_INCORRECT" "old PIN after the SO reset"
out=$(p11 --slot "$slot" --login --pin "$NEWPIN" -O 2>&1) || fail "login with the new PIN: $out"
expect_contains "$out" "label:          'keep'" "object listed after the SO reset"
p11 --slot "$slot" --login --pin "$NEWPIN" --read-object --type data --label keep -o "$WORK/keep.out" >/dev/null 2>&1 \
    || fail "read object after the SO reset"
cmp "$WORK/keep.bin" "$WORK/keep.out" || fail "object differs after the SO reset"
expect_eq "$(flags)" "$NORMAL" "flags after logging in with the new PIN"
