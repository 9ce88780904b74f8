# Storage faults, through pkcs11-tool: a full disk, a read-only file system, and truncated or
# damaged keychain files. Each gives a precise CKR, never a crash, and loses nothing stored.
# The full disk and the read-only mount are a 4 MiB tmpfs in a private mount namespace (root
# only: CI runs as root); the damaged files need nothing special.
. "$HERE/lib.sh"

if [ "$(id -u)" = 0 ] && [ -z "${FAULTS_IN_NAMESPACE:-}" ]; then
    exec env FAULTS_IN_NAMESPACE=1 unshare -m bash "$0"
fi

pin=1234
# read_back LABEL FILE: the data object's value must equal FILE.
read_back() {
    p11 --slot "$slot" --login --pin "$pin" --read-object --type data --label "$1" -o "$WORK/read.bin" >/dev/null 2>&1 ||
        fail "reading $1 back"
    cmp -s "$WORK/read.bin" "$2" || fail "$1 changed"
}
# no_crash STATUS WHAT: pkcs11-tool must have ended normally (a signal would be >= 128).
no_crash() {
    [ "$1" -lt 128 ] || fail "$2: pkcs11-tool ended with status $1 (killed by a signal)"
}

if [ -n "${FAULTS_IN_NAMESPACE:-}" ]; then
    mount -t tmpfs -o size=4m,mode=0700 tmpfs "$KEYCHAIN_PKCS11_DIR" || fail "mount a 4 MiB tmpfs on the keychain folder"
    new_keychain faults 12345678 "$pin"
    slot=$(slot_of faults)
    for i in 1 2 3; do
        head -c $((1000 * i)) /dev/urandom >"$WORK/keep$i.bin"
        p11 --slot "$slot" --login --pin "$pin" --write-object "$WORK/keep$i.bin" --type data --label "keep$i" --private >/dev/null 2>&1 ||
            fail "store keep$i"
    done
    db=$(ls "$KEYCHAIN_PKCS11_DIR"/*.keychain-db)

    # --- a full disk ---------------------------------------------------------------------------
    dd if=/dev/zero of="$KEYCHAIN_PKCS11_DIR/filler" bs=16k 2>/dev/null || true
    expect_eq "$(df --output=avail "$KEYCHAIN_PKCS11_DIR" | tail -n 1 | tr -d ' ')" "0" "free space after filling the tmpfs"
    # (pkcs11-tool --write-object takes at most 5,000 bytes of a file)
    head -c 4000 /dev/urandom >"$WORK/big.bin"
    out=$(p11 --slot "$slot" --write-object "$WORK/big.bin" --type data --label big 2>&1)
    status=$?
    no_crash "$status" "writing on a full disk"
    [ "$status" -ne 0 ] || fail "a 4 KB object was stored on a full disk"
    expect_contains "$out" "CKR_DEVICE_MEMORY" "writing on a full disk"
    # A login attempt that cannot be counted is not evaluated (security issue, item 1): with the
    # disk full even the right PIN is refused, with CKR_DEVICE_MEMORY.
    out=$(p11 --slot "$slot" --login --pin "$pin" -O 2>&1) && fail "a login that could not be counted succeeded"
    expect_contains "$out" "CKR_DEVICE_MEMORY" "login on a full disk"
    expect_eq "$(sqlite3 "$db" 'PRAGMA integrity_check')" "ok" "integrity after the full disk"
    rm -f "$KEYCHAIN_PKCS11_DIR/filler"
    for i in 1 2 3; do read_back "keep$i" "$WORK/keep$i.bin"; done
    p11 --slot "$slot" --login --pin "$pin" --write-object "$WORK/big.bin" --type data --label big >/dev/null 2>&1 ||
        fail "store the big object once there is room"
    read_back big "$WORK/big.bin"
    echo "figure: full disk -> writes and (uncounted) logins CKR_DEVICE_MEMORY, nothing lost, all works again with room"

    # --- a read-only file system ---------------------------------------------------------------
    mount -o remount,ro "$KEYCHAIN_PKCS11_DIR" || fail "remount read-only"
    info=$(p11 --slot "$slot" -T 2>&1) || fail "token info on a read-only file system: $info"
    expect_contains "$info" "faults" "the token on a read-only file system"
    # A login attempt that cannot be counted is not evaluated (security issue, item 1): on a
    # read-only file system even the right PIN gets CKR_DEVICE_ERROR, and no guess is free.
    out=$(p11 --slot "$slot" --login --pin "$pin" -O 2>&1) && fail "a login that could not be counted succeeded"
    expect_contains "$out" "CKR_DEVICE_ERROR" "login on a read-only file system"
    out=$(p11 --slot "$slot" --write-object "$WORK/keep1.bin" --type data --label more 2>&1)
    status=$?
    no_crash "$status" "writing on a read-only file system"
    [ "$status" -ne 0 ] || fail "an object was stored on a read-only file system"
    expect_contains "$out" "CKR_TOKEN_WRITE_PROTECTED" "writing on a read-only file system"
    mount -o remount,rw "$KEYCHAIN_PKCS11_DIR" || fail "remount read-write"
    for i in 1 2 3; do read_back "keep$i" "$WORK/keep$i.bin"; done
    read_back big "$WORK/big.bin"
    echo "figure: read-only file system -> token visible, logins refused uncounted (CKR_DEVICE_ERROR), writes CKR_TOKEN_WRITE_PROTECTED, nothing lost"
    cp "$db" "$WORK/good.keychain-db"
    umount "$KEYCHAIN_PKCS11_DIR"
else
    echo "note: not root: the full-disk and read-only cases need a private tmpfs mount and are left out"
    new_keychain faults 12345678 "$pin"
    slot=$(slot_of faults)
    head -c 1000 /dev/urandom >"$WORK/keep1.bin"
    p11 --slot "$slot" --login --pin "$pin" --write-object "$WORK/keep1.bin" --type data --label keep1 --private >/dev/null 2>&1 || fail "store keep1"
    cp "$(ls "$KEYCHAIN_PKCS11_DIR"/*.keychain-db)" "$WORK/good.keychain-db"
fi

# --- truncated and damaged files ----------------------------------------------------------------
# Each variant is the only keychain in a fresh folder; every client step must end with a CKR
# error or success, never a signal.
size=$(stat -c %s "$WORK/good.keychain-db")
variants="empty short header half"
for seed in $(seq 1 12); do variants="$variants flip$seed"; done
for variant in $variants; do
    dir="$WORK/damaged-$variant"
    mkdir -p "$dir"
    file="$dir/faults.keychain-db"
    cp "$WORK/good.keychain-db" "$file"
    case $variant in
        empty) : >"$file" ;;
        short) truncate -s 100 "$file" ;;
        header) printf 'this is not a database, just some text.' | dd of="$file" conv=notrunc 2>/dev/null ;;
        half) truncate -s $((size / 2)) "$file" ;;
        flip*) python3 - "$file" "${variant#flip}" <<'PYEOF'
import random, sys
path, seed = sys.argv[1], int(sys.argv[2])
data = bytearray(open(path, 'rb').read())
rng = random.Random(seed)
for _ in range(8 * seed):
    data[rng.randrange(100, len(data))] ^= 1 << rng.randrange(8)
open(path, 'wb').write(bytes(data))
PYEOF
        ;;
    esac
    for step in "-L" "-T" "--login --pin $pin -O" "--login --pin $pin --read-object --type data --label keep1 -o $WORK/out.bin"; do
        # shellcheck disable=SC2086
        KEYCHAIN_PKCS11_DIR="$dir" pkcs11-tool --module "$MODULE" $step >"$WORK/out" 2>&1
        no_crash $? "$variant: pkcs11-tool $step"
        grep -o 'CKR_[A-Z_]*' "$WORK/out" >>"$WORK/codes" || true
    done
done
codes=$(sort -u "$WORK/codes" 2>/dev/null | tr '\n' ' ')
echo "figure: $(echo $variants | wc -w) damaged or truncated keychain files, 4 pkcs11-tool steps each: no crash; errors seen: ${codes:-none}"
