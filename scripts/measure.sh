#!/usr/bin/env bash
# Measures the release module: dlopen+C_Initialize time, find time among N objects, and
# signatures per second through C_Sign next to `openssl speed` in the same run.
# Usage: scripts/measure.sh [N objects, default 10000] [seconds per signature test, default 3]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
seconds=${2:-3}
[ -f .build/release-path ] || scripts/build-release.sh >/dev/null
module=$(cat .build/release-path)/libkeychain-pkcs11.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -Wall -Wextra -IInclude Benchmarks/measure.c -o "$work/measure" -ldl
KEYCHAIN_PKCS11_DIR="$work/keychains" "$work/measure" "$module" load 50
KEYCHAIN_PKCS11_DIR="$work/keychains" KEYCHAIN_PKCS11_KDF_LOG_N=10 "$work/measure" "$module" find "$n"
KEYCHAIN_PKCS11_DIR="$work/keychains-sign" KEYCHAIN_PKCS11_KDF_LOG_N=10 "$work/measure" "$module" sign "$seconds"
echo "openssl speed, same machine, same run:"
openssl speed -seconds "$seconds" rsa2048 ecdsap256 ed25519 2>/dev/null | grep -E '^rsa 2048|^ *256 bits ecdsa|^ *253 bits EdDSA'
