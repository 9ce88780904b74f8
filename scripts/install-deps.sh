#!/usr/bin/env bash
# Installs the Debian packages Keychain PKCS#11 builds against and tests with.
# Run as root (or with sudo available). Idempotent.
set -euo pipefail

packages=(
    # build: system headers and libraries the Swift targets link
    libssl-dev libgcrypt20-dev libsqlite3-dev libp11-kit-dev pkg-config gcc libc6-dev
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
    # python-pkcs11's own test suite (scripts/python-pkcs11-tests.sh): a venv and its Cython build;
    # the venvs of test_modern_mechanisms.sh and test_pq_pyca.sh (wheels from PyPI)
    python3-venv python3-dev
    # PyKCS11's own test suite (scripts/pykcs11-tests.sh): SWIG and a C++ compiler build its extension
    swig g++
    # the plot in Docs/performance.md (scripts/bench.sh)
    gnuplot-nox
    # pam_keychain.so: its headers, and pamtester to drive it (test_pam.sh)
    libpam0g-dev pamtester
    # keychaind follows logind's sleep and session-lock signals through sd-bus; dbus-daemon and
    # dbus-send stand in for the system bus in test_unlock_session.sh
    libsystemd-dev dbus-daemon dbus-bin
    # the TPM (KeychainTPM): tpm2-tss's ESAPI, TCTI loader and marshalling to build against, and
    # swtpm as the TPM of the tests (Tests/KeychainTPMTests start one per test on 127.0.0.1)
    libtss2-dev swtpm swtpm-tools
    # tpm2_getcap counts the objects a process leaves loaded in the TPM (test_tpm_keys.sh, PKCS11Tests)
    tpm2-tools
    # the TPM benchmark's peer, tpm2-pkcs11 (scripts/tpm-bench.sh): Debian's libtpm2-pkcs11-1 is
    # NOT installed (its p11-kit module file would make every p11-kit program load it); the
    # benchmark fetches it with `apt-get download` and unpacks it into .build/tpm2-pkcs11. Its one
    # library dependency that libtss2-dev does not bring:
    libyaml-0-2
    # man reads the generated manual pages in test_install.sh
    man-db
    # a faked clock (libfaketime) for the calendar-sensitive interop tests (Tests/interop/faketime.sh)
    faketime
    # the user guide's recipes (Tests/interop/recipes): curl with a TLS client key, git signing
    curl git
    # the Secret Service's clients and the provider it replaces (test_secret_service.sh): secret-tool,
    # libsecret and GLib headers to build git's credential-libsecret helper, gnome-keyring
    libsecret-tools libsecret-1-dev libglib2.0-dev gnome-keyring
    # SecretStorage's and keyring's own test suites (scripts/secret-service-suites.sh): keyring's
    # libsecret backend imports gi.repository.Secret, which Debian's PyGObject and the Secret
    # typelib provide to a venv made with --system-site-packages
    python3-gi gir1.2-secret-1
    # a real desktop application keeping its key through the Secret Service (test_desktop_app.sh):
    # headless Chromium (about 117 MB to download, 375 MB installed, 19 packages on Debian 12)
    chromium
    # the Debian package (debian/, Tests/interop/test_debian_package.sh): debhelper and
    # dpkg-buildpackage build it, lintian checks it
    debhelper dpkg-dev lintian
    # a real TLS server with its key in a keychain (test_nginx.sh, scripts/tls-bench.sh): Debian's
    # nginx through pkcs11-provider; systemd-creds seals the PIN the server starts with
    nginx systemd
)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for package in "${packages[@]}"; do
    installed "$package" || missing+=("$package")
done

# OpenSSL 3's pkcs11 provider (test_openssl_provider.sh). Debian 12 ships it only in
# bookworm-backports: that suite is added (Debian's own archive and keyring) and only this package
# is taken from it; backports have pin priority 100, so nothing else is upgraded. Debian 13 and
# later have it in main.
provider=pkcs11-provider
provider_target=
if ! installed "$provider"; then
    if [ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" = bookworm ]; then
        provider_target=$provider/bookworm-backports
    else
        missing+=("$provider")
    fi
fi

if [ ${#missing[@]} -eq 0 ] && [ -z "$provider_target" ]; then
    echo "install-deps: all packages present"
    exit 0
fi

run() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
echo "install-deps: installing ${missing[*]}${missing[*]:+${provider_target:+ }}$provider_target"
export DEBIAN_FRONTEND=noninteractive
if [ -n "$provider_target" ] &&
    ! grep -qsE '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; then
    printf '%s\n' "Types: deb" "URIs: http://deb.debian.org/debian" "Suites: bookworm-backports" "Components: main" \
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" |
        run tee /etc/apt/sources.list.d/keychain-pkcs11-backports.sources >/dev/null
fi
run apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
    run apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ -n "$provider_target" ]; then
    run apt-get install -y -qq --no-install-recommends "$provider_target" >/dev/null
fi
