# make install / make uninstall into a throwaway prefix, with the release build (the one that is
# shipped): every file in its place with its mode; the licence and the copyright file with the
# docs, the copyright file naming exactly the statically linked parts of each binary; the
# installed module self-contained (no Swift libraries needed, no RUNPATH into the toolchain) and
# exporting only C_* symbols; the installed keychainctl finding the installed module; pkcs11-tool
# and p11-kit loading it; the p11-kit module file pointing at it; the shell completions; and
# uninstall leaving no file behind.
. "$HERE/lib.sh"

case "$MODULE" in
    */release/*) ;;
    *) echo "skip: install is tested with the release build"; exit 0 ;;
esac

root=$(cd "$HERE/../.." && pwd)
prefix="$WORK/prefix"
# make runs scripts/build-release.sh (an incremental build: nothing to do when $MODULE is current).
make -C "$root" install PREFIX="$prefix" >"$WORK/install.log" 2>&1 || fail "make install: $(tail -n 30 "$WORK/install.log")"

so="$prefix/lib/pkcs11/libkeychain-pkcs11.so"
ctl="$prefix/bin/keychainctl"
docs="$prefix/share/doc/keychain-pkcs11"

# Each installed file with its mode.
for entry in \
    "$so 644" \
    "$ctl 755" \
    "$prefix/bin/keychaind 755" \
    "$prefix/lib/systemd/user/keychaind.socket 644" \
    "$prefix/lib/systemd/user/keychaind.service 644" \
    "$prefix/lib/$(gcc -print-multiarch)/security/pam_keychain.so 644" \
    "$prefix/include/keychain-pkcs11.h 644" \
    "$prefix/share/p11-kit/modules/keychain-pkcs11.module 644" \
    "$docs/README.md 644" \
    "$docs/LICENSE 644" \
    "$docs/copyright 644" \
    "$prefix/share/bash-completion/completions/keychainctl 644" \
    "$prefix/share/zsh/site-functions/_keychainctl 644" \
    "$prefix/share/fish/vendor_completions.d/keychainctl.fish 644" \
    "$prefix/share/man/man1/keychainctl.1 644" \
    "$prefix/share/man/man1/keychaind.1 644" \
    "$prefix/share/man/man1/keychainctl.migrate.1 644" \
    "$prefix/share/man/man1/keychainctl.find-generic-password.1 644"; do
    file=${entry% *}
    [ -f "$file" ] || fail "not installed: $file"
    expect_eq "$(stat -c %a "$file")" "${entry##* }" "mode of $file"
done
for doc in "$root"/Docs/*.md; do
    installed="$docs/Docs/$(basename "$doc")"
    cmp -s "$doc" "$installed" || fail "documentation not installed (or different): $installed"
    expect_eq "$(stat -c %a "$installed")" 644 "mode of $installed"
done
cmp -s "$root/LICENSE" "$docs/LICENSE" || fail "the installed LICENSE differs from the source's"
cmp -s "$root/debian/copyright" "$docs/copyright" || fail "the installed copyright file differs from debian/copyright"
expect_contains "$(head -n 4 "$docs/LICENSE")" "Apache License" "the installed LICENSE"
cmp -s "$MODULE" "$so" || fail "the installed module is not the release module under test"
cmp -s "$root/Include/keychain-pkcs11.h" "$prefix/include/keychain-pkcs11.h" || fail "installed header differs"
expect_contains "$(cat "$prefix/lib/systemd/user/keychaind.service")" "ExecStart=$prefix/bin/keychaind --foreground" "the unit runs the installed keychaind"
echo "ok: files installed with modes 0644 (0755 for keychainctl and keychaind)"

# Self-contained: no libswift* needed, and no RUNPATH/RPATH at all: not the toolchain's library
# folder (dangling on a machine without Swift), and not $ORIGIN, where a libcrypto.so.3 dropped
# beside the installed module would be loaded before the system's.
for binary in "$so" "$ctl" "$prefix/bin/keychaind"; do
    dyn=$(readelf -d "$binary") || fail "readelf -d $binary"
    expect_not_contains "$(grep NEEDED <<<"$dyn")" "libswift" "NEEDED entries of $binary"
    expect_eq "$(grep -E '\((RUNPATH|RPATH)\)' <<<"$dyn" || true)" "" "RUNPATH/RPATH entries of $binary"
    missing=$(ldd "$binary" | grep "not found" || true)
    expect_eq "$missing" "" "libraries ldd cannot find for $binary"
done
echo "ok: module and keychainctl need no Swift library and have no RUNPATH"

# The copyright file names what each binary contains besides this project's code (the Swift
# runtime and packages are linked statically): a part found in a binary and not in its row of the
# copyright file's table is a licence left out; a part in the row and not in the binary is stale.
# Each part is found by a string it leaves in the stripped binary (a Swift module's name, ICU's
# data, libdispatch's messages). BoringSSL leaves its prefixed function names (in assertion
# messages) and its source paths (in error records). XKCP's C code leaves no string of its own in
# the stripped module: it is found by the names of the swift-crypto types that call it
# (XKCPDigestImpl, XKCPDigestContext; in the executables XKCP's exported symbols match too), and
# the linker's map shows its code (83 KB) wherever those types are.
parts='^Swift$@the Swift runtime
^Logging$@swift-log
^ArgumentParser$@swift-argument-parser
^_StringProcessing$@_StringProcessing
^_RegexParser$@_RegexParser
^Synchronization$@Synchronization
^BUG in libdispatch: @libdispatch
^Foundation$@swift-corelibs-foundation
^FoundationEssentials$@swift-foundation
^_FoundationCollections$@swift-collections
^icudt[0-9]+l@swift-foundation-icu
^(Crypto|CryptoBoringWrapper|CryptoExtras|_CryptoExtras)$@swift-crypto
CCryptoBoringSSL_[A-Za-z]|/CCryptoBoringSSL/crypto/@BoringSSL
XKCP@XKCP'
pam="$prefix/lib/$(gcc -print-multiarch)/security/pam_keychain.so"
for binary in "$so" "$ctl" "$prefix/bin/keychaind" "$pam"; do
    name=$(basename "$binary")
    # The binary's row: from "  NAME  " to the next row or the end of the table, as one line.
    row=$(awk -v name="$name" '
        $0 ~ "^  " name "  " { on = 1; sub("^  " name " +", ""); printf "%s", $0; next }
        on && /^   +[^ ]/ { sub(/^ +/, " "); printf "%s", $0; next }
        on { exit }' "$docs/copyright")
    [ -n "$row" ] || fail "no row for $name in the copyright file's table"
    strings -a "$binary" >"$WORK/strings" || fail "strings $binary"
    while IFS='@' read -r marker part; do
        grep -qE "$marker" "$WORK/strings" && found=1 || found=0
        grep -qE "(^|[ (;,])$part([ ,;)]|$)" <<<"$row" && listed=1 || listed=0
        [ "$found" = 1 ] && [ "$listed" = 0 ] && fail "$name contains $part, which the copyright file does not list for it (row: $row)"
        [ "$found" = 0 ] && [ "$listed" = 1 ] && fail "the copyright file lists $part for $name, which does not contain it (row: $row)"
    done <<<"$parts"
done
echo "ok: the copyright file lists exactly the statically linked parts of the module, keychainctl, keychaind and pam_keychain.so"

# Hardening: every shipped ELF file is linked with full RELRO (relocations read-only and bound
# at load), as Debian's hardening flags ask.
for binary in "$so" "$ctl" "$prefix/bin/keychaind" "$prefix/lib/$(gcc -print-multiarch)/security/pam_keychain.so"; do
    headers=$(readelf -lW "$binary") || fail "readelf -l $binary"
    expect_contains "$headers" "GNU_RELRO" "program headers of $binary"
    expect_contains "$(readelf -dW "$binary")" "BIND_NOW" "dynamic section of $binary (-z now)"
done
echo "ok: full RELRO (GNU_RELRO, BIND_NOW) in the module, keychainctl, keychaind and pam_keychain.so"

# Exports: only C_* among the global dynamic symbols. (The .dynsym table also holds LOCAL Swift
# type metadata that plain `nm -D --defined-only` shows in lower case; those are not exported,
# hence --extern-only. test_c_host.sh checks the exact list of 72.)
exported=$(nm -D --defined-only --extern-only "$so" | awk '{ print $3 }') || fail "nm -D $so"
[ -n "$exported" ] || fail "no exported symbols in $so"
expect_eq "$(grep -v '^C_' <<<"$exported" || true)" "" "exported symbols that do not start with C_"
expect_contains "$exported" "C_GetFunctionList" "exported symbols"
echo "ok: the installed module exports only C_* ($(wc -l <<<"$exported") symbols)"

# The installed CLI finds the installed module (../lib/pkcs11 from its bin folder).
out=$("$ctl" module-path) || fail "installed keychainctl module-path: exit $?"
expect_eq "$out" "$so" "installed keychainctl module-path"

# The installed module works with a real client, and sees a keychain the installed CLI made.
out=$(pkcs11-tool --module "$so" -L 2>&1) || fail "pkcs11-tool -L on the installed module: $out"
expect_contains "$out" "Slot 0 (0x" "pkcs11-tool -L on the installed module"
expect_contains "$out" "token state:   uninitialized" "pkcs11-tool -L on the installed module (the empty slot)"
KEYCHAIN_PKCS11_SO_PIN=so-pin-0001 KEYCHAIN_PKCS11_PIN=user-pin-01 "$ctl" create --label installed >"$WORK/create.log" 2>&1 ||
    fail "installed keychainctl create: $(cat "$WORK/create.log")"
out=$(pkcs11-tool --module "$so" -L 2>&1) || fail "pkcs11-tool -L after create: $out"
expect_contains "$out" "token label        : installed" "pkcs11-tool -L after keychainctl create"
echo "ok: installed keychainctl module-path, create, and pkcs11-tool -L on the installed module"

# A library planted beside the installed module is not loaded in place of the system's: a file
# named libsqlite3.so.0 that is no library would make the load fail if the module searched there.
printf 'not a library\n' >"$(dirname "$so")/libsqlite3.so.0"
out=$(pkcs11-tool --module "$so" -L 2>&1) || fail "pkcs11-tool -L with a planted libsqlite3.so.0 beside the module: $out"
expect_contains "$out" "token label        : installed" "pkcs11-tool -L with a planted libsqlite3.so.0"
rm -f "$(dirname "$so")/libsqlite3.so.0"
echo "ok: a library planted beside the installed module is ignored"

# The p11-kit module file names the installed module by its absolute path.
modfile="$prefix/share/p11-kit/modules/keychain-pkcs11.module"
expect_eq "$(grep '^module:' "$modfile")" "module: $so" "module: line of the installed p11-kit file"
expect_eq "$(grep '^trust-policy:' "$modfile")" "trust-policy: no" "trust-policy: line of the installed p11-kit file"
# p11-kit itself loads it: as root, in a private mount namespace with the installed modules folder
# over the system one (p11-kit ignores per-user configuration for root; /usr is left untouched).
if [ "$(id -u)" = 0 ]; then
    out=$(unshare -m sh -c 'mount --bind "$1" /usr/share/p11-kit/modules && p11-kit list-modules' sh "$prefix/share/p11-kit/modules" 2>&1) ||
        fail "p11-kit list-modules with the installed module file: $out"
    expect_contains "$out" "keychain-pkcs11: $so" "p11-kit list-modules"
    expect_contains "$out" "token: installed" "p11-kit list-modules"
    echo "ok: p11-kit list-modules loads the installed module file"
else
    echo "note: not root, p11-kit list-modules with the installed module file not checked"
fi

# Shell completions: non-empty, the bash one valid bash (zsh and fish checked when installed).
for file in "$prefix/share/bash-completion/completions/keychainctl" "$prefix/share/zsh/site-functions/_keychainctl" \
    "$prefix/share/fish/vendor_completions.d/keychainctl.fish"; do
    [ -s "$file" ] || fail "empty completion script $file"
done
bash -n "$prefix/share/bash-completion/completions/keychainctl" || fail "bash -n rejects the bash completion script"
head -c 2 "$prefix/share/bash-completion/completions/keychainctl" | grep -q '#!' && fail "the bash completion script starts with #! (bash-completion sources it)"
expect_contains "$(cat "$prefix/share/bash-completion/completions/keychainctl")" "module-path" "bash completion script"
if command -v zsh >/dev/null; then zsh -n "$prefix/share/zsh/site-functions/_keychainctl" || fail "zsh -n rejects the zsh completion script"; fi
if command -v fish >/dev/null; then fish -n "$prefix/share/fish/vendor_completions.d/keychainctl.fish" || fail "fish -n rejects the fish completion script"; fi
echo "ok: completion scripts for bash (bash -n clean), zsh and fish"

# Manual pages, generated from the command definitions: one per command, each readable by man.
pages=$(ls "$prefix/share/man/man1" | wc -l)
commands=$("$ctl" --help | sed -n '/^SUBCOMMANDS:/,/^$/p' | grep -cE '^  [a-z]')
[ "$pages" -gt "$commands" ] || fail "$pages manual pages for $commands commands"
out=$(MANWIDTH=80 man -l "$prefix/share/man/man1/keychainctl.migrate.1" 2>&1) || fail "man cannot read keychainctl.migrate.1: $out"
expect_contains "$out" "--from-module" "the migrate page documents its options"
out=$(MANPATH="$prefix/share/man" MANWIDTH=80 man keychainctl 2>&1) || fail "man keychainctl through MANPATH: $out"
expect_contains "$out" "Exit codes" "man keychainctl shows the tool's description"
# whatis/apropos can read every page's NAME (lexgrog, as man-db's mandb and lintian do), and groff
# has nothing to warn about.
for page in "$prefix"/share/man/man1/*.1; do
    name=$(basename "$page" .1)
    out=$(lexgrog "$page" 2>&1) || fail "lexgrog cannot read the NAME of $name: $out"
    expect_contains "$out" "\"$name - " "whatis entry of $name"
    warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
    expect_eq "$warnings" "" "groff warnings for $name"
done
out=$(MANWIDTH=80 man -l "$prefix/share/man/man1/keychainctl.unlock.1" 2>&1)
expect_contains "$out" "keychainctl unlock [--keychain keychain]" "the synopsis shows the command as it is typed"
out=$(MANWIDTH=80 man -l "$prefix/share/man/man1/keychaind.1" 2>&1) || fail "man cannot read keychaind.1: $out"
expect_contains "$out" "--secret-service" "keychaind.1 documents its options"
echo "ok: $pages manual pages, each with a NAME whatis reads and no groff warning"

# Uninstall: no file left under the prefix, and the directories install created are gone.
make -C "$root" uninstall PREFIX="$prefix" >"$WORK/uninstall.log" 2>&1 || fail "make uninstall: $(cat "$WORK/uninstall.log")"
left=$(find "$prefix" ! -type d)
expect_eq "$left" "" "files left under the prefix after make uninstall"
expect_eq "$(find "$prefix" -mindepth 1)" "" "directories left under the prefix after make uninstall"
[ -d "$prefix" ] || fail "make uninstall removed the prefix itself"
echo "ok: make uninstall leaves nothing under the prefix (the prefix itself stays)"
