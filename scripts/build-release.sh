#!/usr/bin/env bash
# Builds the shipped artifacts: a self-contained libkeychain-pkcs11.so (Swift standard library
# linked statically, symbols stripped) and keychainctl. Writes the output folder to .build/release-path.
set -euo pipefail
cd "$(dirname "$0")/.."
flags=(-c release -Xswiftc -static-stdlib -Xlinker -s)
swift build "${flags[@]}"
bin=$(swift build "${flags[@]}" --show-bin-path)
echo "$bin" > .build/release-path
echo "release module: $bin/libkeychain-pkcs11.so"
