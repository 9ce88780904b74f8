# "Porting" in Docs/keychain-api.md: a program written for Apple platforms whose only import is
# Foundation (Tests/porting-package) builds unchanged against this repository's Security module
# with the one build setting the doc gives (Security as an implicit import), and its SecItemAdd,
# SecItemCopyMatching (by attributes and by persistent reference alone), SecRandomCopyBytes and
# SecItemDelete (kSecMatchLimitAll) answer as on Apple platforms. Beside it, a program written for
# Apple's 2025 CryptoKit whose only imports are CryptoKit and Foundation (QuantumCheck, in
# the same package) builds unchanged against this repository's CryptoKit module, with no setting,
# and its ML-DSA signatures with a context, ML-KEM shared secrets and X-Wing HPKE messages come out
# as on Apple platforms ("Quantum-secure keys" in Docs/keychain-api.md).
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
# The CryptoKit program imports only CryptoKit and Foundation, as Apple code does, and its target has no setting.
expect_eq "$(grep -h '^import ' "$package"/Sources/QuantumCheck/*.swift | sort -u)" "import CryptoKit
import Foundation" "QuantumCheck's imports"
expect_eq "$(grep -c 'unsafeFlags' "$package/Package.swift")" "1" "unsafeFlags in Package.swift (PortingCheck's setting only)"
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

# Apple's quantum-secure CryptoKit (2025), compiled unchanged: sizes are the FIPS 203/204 and
# X-Wing ones; the key of seed 00..1f has the public key pyca/cryptography 48 derives from it.
out=$("$root/.build/porting-package/debug/QuantumCheck" 2>&1) || fail "QuantumCheck: $out"
expect_eq "$out" "ML-DSA-65 public key 1952 bytes, signature 3309 bytes
valid in its context: yes
invalid in another context: yes
invalid for a changed document: yes
ML-DSA-65 key of seed 00..1f: d666806e11cee19a7c989f7445f90dd419cf4d2d51db8c0fdb4c0f0a542238c9
restored from its integrity-checked representation: yes
ML-DSA-87 signature 4627 bytes
ML-DSA-87 valid in its context: yes
ML-KEM-768 ciphertext 1088 bytes, shared secret 256 bits
both sides hold the same secret: yes
AES-GCM with the derived key: meet at noon
ML-KEM-1024 ciphertext 1568 bytes
ML-KEM-1024 secret recovered: yes
X-Wing public key 1216 bytes, encapsulated key 1120 bytes
opened: first message
opened: second message
another key cannot open it: yes" "QuantumCheck's results"
