# Encryption and key agreement through pkcs11-tool, checked against plain openssl: RSA PKCS#1
# v1.5 and OAEP (openssl encrypts, the token decrypts), AES-CBC-PAD with a key of known value in
# both directions, and ECDH whose shared secret equals openssl's.
. "$HERE/lib.sh"

PIN=123456
new_keychain crypt 87654321 "$PIN"
slot=$(slot_of crypt)
[ -n "$slot" ] || fail "no slot for keychain crypt"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }
cd "$WORK" || fail "cd $WORK"

# --- RSA -------------------------------------------------------------------------------------
openssl genrsa -out rsa.pem 2048 2>/dev/null || fail "genrsa"
openssl rsa -in rsa.pem -pubout -out rsa.pub.pem 2>/dev/null || fail "rsa pubout"
user --write-object rsa.pem --type privkey --id c1 --label rsa >/dev/null 2>&1 || fail "import RSA key"
head -c 100 /dev/urandom >secret.bin

# openssl encrypts with the public key, the token decrypts.
openssl pkeyutl -encrypt -pubin -inkey rsa.pub.pem -in secret.bin -out pkcs1.bin || fail "openssl PKCS#1 encrypt"
user --decrypt --id c1 -m RSA-PKCS -i pkcs1.bin -o pkcs1.out >/dev/null 2>&1 || fail "token RSA-PKCS decrypt"
cmp -s secret.bin pkcs1.out || fail "RSA-PKCS decryption differs"
openssl pkeyutl -encrypt -pubin -inkey rsa.pub.pem -pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 \
    -pkeyopt rsa_mgf1_md:sha256 -in secret.bin -out oaep.bin || fail "openssl OAEP encrypt"
user --decrypt --id c1 -m RSA-PKCS-OAEP --hash-algorithm SHA256 --mgf MGF1-SHA256 -i oaep.bin -o oaep.out >/dev/null 2>&1 ||
    fail "token OAEP decrypt"
cmp -s secret.bin oaep.out || fail "OAEP decryption differs"
# A ciphertext for another key does not decrypt: the token refuses, it returns nothing.
openssl genrsa -out other.pem 2048 2>/dev/null
openssl pkeyutl -encrypt -inkey other.pem -in secret.bin -out wrong.bin || fail "encrypt for another key"
out=$(user --decrypt --id c1 -m RSA-PKCS -i wrong.bin -o wrong.out 2>&1) && fail "decrypted a ciphertext of another key"
expect_contains "$out" "CKR_ENCRYPTED_DATA_INVALID" "decrypting another key's ciphertext"

# (pkcs11-tool 0.23 --encrypt takes secret keys only, so token-side RSA encryption is checked by
# the in-process tests: an OAEP round trip and CKR codes.)

# --- AES with a key of known value ------------------------------------------------------------
head -c 32 /dev/urandom >aes.key
key_hex=$(xxd -p -c 64 aes.key)
iv=000102030405060708090a0b0c0d0e0f
user --write-object aes.key --type secrkey --key-type AES:32 --id c2 --label aes --private >/dev/null 2>&1 || fail "import AES key"
head -c 1000 /dev/urandom >plain.bin
user --encrypt --id c2 -m AES-CBC-PAD --iv "$iv" -i plain.bin -o cbc.bin >/dev/null 2>&1 || fail "token AES-CBC-PAD encrypt"
openssl enc -aes-256-cbc -K "$key_hex" -iv "$iv" -in plain.bin -out cbc.openssl || fail "openssl AES-CBC"
cmp -s cbc.bin cbc.openssl || fail "AES-CBC-PAD ciphertext differs from openssl's"
user --decrypt --id c2 -m AES-CBC-PAD --iv "$iv" -i cbc.openssl -o cbc.out >/dev/null 2>&1 || fail "token AES-CBC-PAD decrypt"
cmp -s plain.bin cbc.out || fail "AES-CBC-PAD decryption differs"
# The imported key's value stays inside: CKA_VALUE of a sensitive key is not readable.
out=$(user --read-object --type secrkey --id c2 -o leaked.bin 2>&1) && [ -s leaked.bin ] && fail "read a sensitive AES key's value"

# --- ECDH ----------------------------------------------------------------------------------------
openssl ecparam -name prime256v1 -genkey -noout -out ec.pem || fail "EC key"
openssl ec -in ec.pem -pubout -outform DER -out ec.pub.der 2>/dev/null
user --write-object ec.pem --type privkey --id c3 --label ec >/dev/null 2>&1 || fail "import EC key"
openssl ecparam -name prime256v1 -genkey -noout -out peer.pem
openssl ec -in peer.pem -pubout -outform DER -out peer.pub.der 2>/dev/null
user --derive --id c3 -m ECDH1-DERIVE --input-file peer.pub.der --output-file token-shared.bin >/dev/null 2>&1 || fail "token ECDH"
openssl pkeyutl -derive -inkey peer.pem -peerkey ec.pub.der -peerform DER -out openssl-shared.bin || fail "openssl ECDH"
expect_eq "$(stat -c %s token-shared.bin)" 32 "ECDH secret length"
cmp -s token-shared.bin openssl-shared.bin || fail "ECDH secrets differ"
