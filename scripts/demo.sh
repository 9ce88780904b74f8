#!/usr/bin/env bash
# The main job on a fresh Debian 12 + Swift machine: installs the packages, builds the release
# module and keychainctl, creates the keychain "login" in the default folder (if it is not there
# yet), and shows pkcs11-tool listing the token and round-tripping a private data object.
#
# PINs: KEYCHAIN_PKCS11_SO_PIN and KEYCHAIN_PKCS11_PIN if set, otherwise keychainctl asks on the
# terminal (no echo) and pkcs11-tool asks for the user PIN.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/build-release.sh
bin=$(cat .build/release-path)
module="$bin/libkeychain-pkcs11.so"
keychainctl="$bin/keychainctl"

echo
echo "== keychains in the default folder"
if ! "$keychainctl" list | grep -qE '^[0-9]+ +[0-9a-f]{16} +login '; then
    "$keychainctl" create --label login
fi
"$keychainctl" list

slot=$(pkcs11-tool --module "$module" -L | awk '/^Slot [0-9]+ \(0x[0-9a-f]+\)/ { id = $3; gsub(/[():]/, "", id) } /token label *: login$/ { print id; exit }')
pin_args=()
[ -n "${KEYCHAIN_PKCS11_PIN:-}" ] && pin_args=(--pin "$KEYCHAIN_PKCS11_PIN")

echo
echo "== pkcs11-tool --list-slots"
pkcs11-tool --module "$module" --list-slots

echo
echo "== pkcs11-tool: write a private data object, read it back, delete it"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "keychain demo $(date -u +%FT%TZ)" >"$work/secret.txt"
pkcs11-tool --module "$module" --slot "$slot" --login "${pin_args[@]}" \
    --write-object "$work/secret.txt" --type data --label demo-secret --private
pkcs11-tool --module "$module" --slot "$slot" --login "${pin_args[@]}" \
    --read-object --type data --label demo-secret --output-file "$work/back.txt"
cmp "$work/secret.txt" "$work/back.txt" && echo "round trip: identical ($(wc -c <"$work/back.txt") bytes)"
pkcs11-tool --module "$module" --slot "$slot" --login "${pin_args[@]}" --delete-object --type data --label demo-secret

echo
echo "Module: $module"
echo "Use it with any PKCS#11 client, for example: pkcs11-tool --module $module -L"
