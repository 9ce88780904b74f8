#!/usr/bin/env bash
# The main job on a fresh Debian 12 + Swift machine: installs the packages, builds the release
# module and keychainctl, creates the keychain "login" in the default folder (if it is not there
# yet), stores a generic password and an SSH key with keychainctl, and shows real clients using
# them: pkcs11-tool lists the token and reads the password, ssh-keygen -D lists the key.
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

pin_args=()
[ -n "${KEYCHAIN_PKCS11_PIN:-}" ] && pin_args=(--pin "$KEYCHAIN_PKCS11_PIN")

echo
echo "== keychainctl: a generic password and an SSH key in 'login'"
password="demo password $(date -u +%FT%TZ)"
printf '%s' "$password" | "$keychainctl" add-generic-password -U -k login -a demo -s demo.example --password-file -
if ! "$keychainctl" show -k login --label demo-ssh --type public-key --public-only >/dev/null 2>&1; then
    "$keychainctl" generate-key -k login --type ec --label demo-ssh
fi
"$keychainctl" items -k login

echo
echo "== pkcs11-tool --list-slots"
pkcs11-tool --module "$module" --list-slots

echo
echo "== pkcs11-tool reads the password keychainctl stored (a private CKO_DATA, CKA_APPLICATION = service)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkcs11-tool --module "$module" --token-label login --login "${pin_args[@]}" \
    --read-object --type data --application-label demo.example --output-file "$work/password.txt"
[ "$(cat "$work/password.txt")" = "$password" ] && echo "pkcs11-tool read back exactly the password keychainctl stored"

echo
echo "== ssh-keygen -D lists the SSH key, as keychainctl export prints it"
ssh-keygen -D "$module" </dev/null 2>/dev/null | grep "demo-ssh" || true
"$keychainctl" export -k login --label demo-ssh --type public-key --format ssh --public-only

echo
echo "Module: $module"
echo "Use it with any PKCS#11 client, for example: pkcs11-tool --module $module -L"
