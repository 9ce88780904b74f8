#!/usr/bin/env bash
# Measures the release module: dlopen+C_Initialize time and find time among N objects.
# Usage: scripts/measure.sh [N objects, default 10000]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
[ -f .build/release-path ] || scripts/build-release.sh >/dev/null
module=$(cat .build/release-path)/libkeychain-pkcs11.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -Wall -Wextra -IInclude Benchmarks/measure.c -o "$work/measure" -ldl
KEYCHAIN_PKCS11_DIR="$work/keychains" "$work/measure" "$module" load 50
KEYCHAIN_PKCS11_DIR="$work/keychains" KEYCHAIN_PKCS11_KDF_LOG_N=10 "$work/measure" "$module" find "$n"
