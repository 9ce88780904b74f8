#!/usr/bin/env bash
# Builds the shipped artifacts: a self-contained libkeychain-pkcs11.so (Swift standard library
# linked statically, symbols stripped, full RELRO), keychainctl and keychaind. Writes the output folder to .build/release-path.
set -euo pipefail
cd "$(dirname "$0")/.."
# Full RELRO (-z relro -z now): the dynamic relocations are resolved at load and then made
# read-only, as Debian's hardening flags ask of every binary.
flags=(-c release -Xswiftc -static-stdlib -Xlinker -s -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now)
# The products by name: a plain `swift build` would also build every target, test support
# (Tests/TPMTestSupport imports XCTest, which release builds do not find) included.
for product in keychain-pkcs11 keychainctl keychaind secitem seckey-sign pq-limit; do
    swift build "${flags[@]}" --product "$product"
done
bin=$(swift build "${flags[@]}" --show-bin-path)
# SwiftPM writes RUNPATH=$ORIGIN: a libcrypto.so.3 or libsqlite3.so.0 dropped beside the installed
# module would be loaded before the system's. The shipped artifacts need no RUNPATH at all.
command -v patchelf >/dev/null || { echo "build-release: patchelf is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
patchelf --remove-rpath "$bin/libkeychain-pkcs11.so" "$bin/keychainctl" "$bin/keychaind"
# Manual pages from keychainctl's own command definitions (swift-argument-parser's generator,
# which reads `keychainctl --experimental-dump-help`): keychainctl.1 and one page per command.
swift build "${flags[@]}" --product generate-manual
date=$(git log -1 --format=%cs 2>/dev/null || date -u +%F)
rm -rf .build/man && mkdir -p .build/man
"$bin/generate-manual" "$bin/keychainctl" --multi-page --date "$date" --authors "Keychain PKCS#11 developers" -o .build/man
scripts/tidy-man.sh .build/man/*.1
echo "$bin" > .build/release-path
echo "release module: $bin/libkeychain-pkcs11.so"
