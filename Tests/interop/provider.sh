# OpenSSL 3's pkcs11 provider over the module under test, for the test_openssl_provider*.sh tests
# (sourced after lib.sh). The provider is Debian's pkcs11-provider 1.0 (bookworm-backports on
# Debian 12), installed by scripts/install-deps.sh: its absence is a failure, not a skip.
modulesdir=$(openssl version -m | sed -n 's/^MODULESDIR: "\(.*\)"$/\1/p')
[ -f "$modulesdir/pkcs11.so" ] ||
    fail "no pkcs11 provider in [$modulesdir] (Debian package pkcs11-provider; scripts/install-deps.sh installs it)"

# provider_cnf [LINE...]: an OpenSSL config that loads the default provider and the pkcs11
# provider over $MODULE, each LINE (pkcs11-module-token-pin = file:..., another pkcs11-module-*
# option) in the pkcs11 section. A caller may append sections, and more [openssl_init] keys under
# a second [openssl_init] header: OpenSSL merges a section named twice.
provider_cnf() {
    cat <<EOF
openssl_conf = openssl_init

[openssl_init]
providers = provider_sect

[provider_sect]
default = default_sect
pkcs11 = pkcs11_sect

[default_sect]
activate = 1

[pkcs11_sect]
module = $modulesdir/pkcs11.so
pkcs11-module-path = $MODULE
EOF
    [ "$#" -eq 0 ] || printf '%s\n' "$@"
    echo "activate = 1"
}

# trace_calls LOG: the module functions a provider trace (PKCS11_PROVIDER_DEBUG=file:LOG) shows
# called, "C_Name count" a line, sorted.
trace_calls() { grep -o 'Calling C_[A-Za-z]*' "$1" | sed 's/^Calling //' | sort | uniq -c | awk '{ print $2, $1 }'; }

# trace_errors LOG: "C_Name=CK_RV xcount" for each error the module returned in the trace LOG,
# less three that every run has and that are right: C_OpenSession on the empty slot,
# CKR_TOKEN_NOT_RECOGNIZED (225); C_GetAttributeValue of an attribute a key does not have,
# CKR_ATTRIBUTE_TYPE_INVALID (18); C_GetOperationState, CKR_FUNCTION_NOT_SUPPORTED (84).
trace_errors() {
    grep -o 'Error [0-9]* returned by C_[A-Za-z]*' "$1" |
        grep -v -x -e 'Error 225 returned by C_OpenSession' -e 'Error 18 returned by C_GetAttributeValue' \
            -e 'Error 84 returned by C_GetOperationState' |
        awk '{ print $5 "=" $2 }' | sort | uniq -c | awk '{ print $2, "x" $1 }'
}

# count_of CALLS NAME: how many times the trace_calls list CALLS has C_NAME called (0 if never).
count_of() { printf '%s\n' "$1" | awk -v f="$2" '$1 == f { n = $2 } END { print n + 0 }'; }
