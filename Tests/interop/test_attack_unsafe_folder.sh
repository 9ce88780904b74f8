# Attack (security issue, item 9): a keychain folder or file that other users can write, or that
# another user owns, is refused with a clear message (as OpenSSH refuses such a ~/.ssh), never
# used as is; and the installed module has no RUNPATH and exports exactly the C_* functions
# (checked on the built module here; the planted-library case is in test_install.sh).
. "$HERE/lib.sh"

new_keychain perms 87654321 123456
db="$KEYCHAIN_PKCS11_DIR/perms.keychain-db"
[ -f "$db" ] || fail "no database file $db"
visible() { p11 -L 2>/dev/null | grep -c "token label *: perms$"; }
expect_eq "$(visible)" "1" "the keychain in a private folder"

# A folder others can write: anyone could swap the file, roll it back or plant another one.
chmod 0775 "$KEYCHAIN_PKCS11_DIR"
expect_eq "$(visible)" "0" "the token of a group-writable folder"
out=$(kc list 2>&1)
expect_contains "$out" "refusing the keychain folder $KEYCHAIN_PKCS11_DIR: other users can write to it (mode 775); run chmod go-w" "keychainctl list"
expect_status 5 "keychainctl info in a group-writable folder" kc info -k perms
expect_contains "$(cat "$WORK/last.err")" "other users can write to it" "keychainctl info message"
chmod 0707 "$KEYCHAIN_PKCS11_DIR"
expect_eq "$(visible)" "0" "the token of a world-writable folder"
chmod 0700 "$KEYCHAIN_PKCS11_DIR"
expect_eq "$(visible)" "1" "the token once the folder is private again"

# A keychain file others can write.
chmod 0622 "$db"
expect_eq "$(visible)" "0" "a world-writable keychain file"
expect_contains "$(kc list 2>&1)" "refusing the keychain file $db: other users can write to it (mode 622)" "keychainctl list of a writable file"
chmod 0600 "$db"
expect_eq "$(visible)" "1" "the token once the file is 0600 again"

# Owned by another user (needs root to arrange; CI runs as root).
if [ "$(id -u)" = 0 ]; then
    chown nobody "$db"
    expect_eq "$(visible)" "0" "a keychain file owned by nobody"
    expect_contains "$(kc list 2>&1)" "refusing the keychain file $db: it belongs to another user (nobody)" "keychainctl list of another user's file"
    chown 0 "$db"
    expect_eq "$(visible)" "1" "the token once the file is root's again"
else
    echo "note: not root: the other-owner case needs chown and is left out"
fi

# The module: no RUNPATH, and the dynamic symbol table holds only C_* and undefined imports.
runpath=$(readelf -d "$MODULE" | grep -E "RUNPATH|RPATH" || true)
if [ -n "${RELEASE_MODULE_CHECKS:-}" ] || [[ "$MODULE" == *release* ]]; then
    expect_eq "$runpath" "" "RUNPATH of the release module"
    defined=$(readelf --dyn-syms -W "$MODULE" | awk 'NR > 3 && $7 != "UND" && $8 != "" { print $8 }' | sed 's/@.*//' | sort -u)
    others=$(grep -v '^C_' <<<"$defined" || true)
    expect_eq "$others" "" "defined dynamic symbols other than C_*"
fi
