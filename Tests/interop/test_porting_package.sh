# "Porting" in Docs/keychain-api.md: a program written for Apple platforms whose only import is
# Foundation (Tests/porting-package) builds unchanged against this repository's Security module
# with the one build setting the doc gives (Security as an implicit import), and its SecItemAdd,
# SecItemCopyMatching (by attributes and by persistent reference alone), SecRandomCopyBytes and
# SecItemDelete (kSecMatchLimitAll) answer as on Apple platforms.
#
# The package is built from source, not from the module under test, so it runs with the debug
# module only (the release pass skips it). Its build folder is the repository's
# .build/porting-package, kept between runs: the first build compiles the Security module's
# targets (minutes), later ones only what changed. The time is reported as a figure.
. "$HERE/lib.sh"

case "$KEYCHAINCTL" in
    */release/*) echo "skipped: the porting package is built from source, once, with the debug module"; exit 0 ;;
esac
command -v swift >/dev/null || fail "swift is missing"
root=$(cd "$HERE/../.." && pwd)
package="$root/Tests/porting-package"
setting='swiftSettings: [.unsafeFlags(["-Xfrontend", "-import-module", "-Xfrontend", "Security"])]'

# The program imports Foundation only, and the setting is the documented one, word for word.
expect_eq "$(grep -h '^import ' "$package"/Sources/PortingCheck/*.swift | sort -u)" "import Foundation" "the program's imports"
grep -qF "$setting" "$package/Package.swift" || fail "Package.swift does not carry the setting: $setting"
grep -qF "$setting" "$root/Docs/keychain-api.md" || fail "Docs/keychain-api.md does not give the setting: $setting"

start=$(date +%s%N)
swift build --package-path "$package" --scratch-path "$root/.build/porting-package" >"$WORK/build.log" 2>&1 ||
    fail "swift build of the porting package: $(tail -n 30 "$WORK/build.log")"
echo "figure: porting package built in $((($(date +%s%N) - start) / 1000000)) ms (swift build, incremental after the first run)"
program="$root/.build/porting-package/debug/PortingCheck"
[ -x "$program" ] || fail "no $program"

cat >"$WORK/askpass" <<'EOS'
#!/bin/sh
echo user-pin-1
EOS
chmod 700 "$WORK/askpass"
printf 'user-pin-1\n' >"$WORK/user.pin"
kc create --label login --so-pin-file "$WORK/user.pin" --pin-file "$WORK/user.pin" >/dev/null || fail "create the login keychain"

out=$(KEYCHAIN_PKCS11_PROMPT="$WORK/askpass" "$program" porting.example 2>&1) || fail "PortingCheck: $out"
expect_eq "$out" "SecItemAdd: 0
SecItemCopyMatching: 0
password: ported secret
SecItemCopyMatching by persistent reference: 0
SecRandomCopyBytes: 0
SecItemDelete: 0
after delete: -25300" "PortingCheck's calls and results"
# The items were this keychain's: the one SecItemDelete removed is gone for keychainctl too.
expect_status 6 "the deleted item is gone for keychainctl too" kc find-generic-password -s porting.example -a alice -w --pin-file "$WORK/user.pin"
