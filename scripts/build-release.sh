#!/usr/bin/env bash
# Builds the shipped artifacts: a self-contained libkeychain-pkcs11.so (Swift standard library
# linked statically, symbols stripped) and keychainctl. Writes the output folder to .build/release-path.
set -euo pipefail
cd "$(dirname "$0")/.."
flags=(-c release -Xswiftc -static-stdlib -Xlinker -s)
swift build "${flags[@]}"
bin=$(swift build "${flags[@]}" --show-bin-path)
# SwiftPM writes RUNPATH=$ORIGIN: a libcrypto.so.3 or libsqlite3.so.0 dropped beside the installed
# module would be loaded before the system's. The shipped artifacts need no RUNPATH at all.
command -v patchelf >/dev/null || { echo "build-release: patchelf is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
patchelf --remove-rpath "$bin/libkeychain-pkcs11.so" "$bin/keychainctl" "$bin/keychaind"
echo "$bin" > .build/release-path
echo "release module: $bin/libkeychain-pkcs11.so"
