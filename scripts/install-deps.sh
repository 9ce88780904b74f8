#!/usr/bin/env bash
# Installs the Debian packages Keychain PKCS#11 builds against and tests with.
# Run as root (or with sudo available). Idempotent.
set -euo pipefail

packages=(
    # build: system headers and libraries the Swift targets link
    libssl-dev libsqlite3-dev libp11-kit-dev pkg-config gcc libc6-dev
    # strips the RUNPATH SwiftPM writes into the shipped module (scripts/build-release.sh)
    patchelf
    # real clients used by the demo and the tests
    opensc gnutls-bin p11-kit p11-kit-modules sqlite3 binutils python3 openssl openssh-client xxd diffutils procps
    # OpenSSL pkcs11 engine, throwaway sshd, NSS modutil/certutil (interop tests)
    libengine-pkcs11-openssl openssh-server libnss3-tools
    # OpenJDK's SunPKCS11 provider with keytool, jarsigner, javac and jar (test_java_sunpkcs11.sh)
    openjdk-17-jdk-headless
    # the peer the benchmark compares against
    softhsm2
    # python-pkcs11's own test suite (scripts/python-pkcs11-tests.sh): a venv and its Cython build
    python3-venv python3-dev
    # the plot in Docs/performance.md (scripts/bench.sh)
    gnuplot-nox
    # pam_keychain.so: its headers, and pamtester to drive it (test_pam.sh)
    libpam0g-dev pamtester
    # keychaind follows logind's sleep and session-lock signals through sd-bus; dbus-daemon and
    # dbus-send stand in for the system bus in test_unlock_session.sh
    libsystemd-dev dbus-daemon dbus-bin
)

missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all packages present"
    exit 0
fi

run() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
run apt-get update -qq
run apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
