# Keys made by openssl imported with pkcs11-tool --write-object: RSA 2048/3072, EC P-256/P-384/P-521.
# Each private key is written with its public key (two --write-object calls, as clients do: the
# module invents no public-key object), signs so that the original openssl public key verifies,
# and its private value cannot be read. RSA-512 is refused;
# an RSA public key imported alone verifies; a key imported without --id gets SHA-1(04||X||Y).
# Client quirk: pkcs11-tool 0.23 --read-object --type privkey never asks the module (it prints
# "sorry, reading private keys not (yet) supported" and exits 0), so the refusal is checked with
# C_GetAttributeValue through python3 ctypes (attrs.py below).
. "$HERE/lib.sh"

PIN=123456
new_keychain import 87654321 "$PIN"
slot=$(slot_of import)
[ -n "$slot" ] || fail "no slot for keychain import"
serial=$(p11 --slot "$slot" -T 2>/dev/null | sed -n "/token label        : import$/,/serial num/s/^  serial num         : //p")
[[ "$serial" =~ ^[0-9a-f]{16}$ ]] || fail "serial from pkcs11-tool: [$serial]"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }
pt() { GNUTLS_PIN="$PIN" p11tool --batch --provider "$MODULE" "$@"; }
cd "$WORK" || fail "cd $WORK"

# attrs.py CLASS ID_HEX ATTR...: logs in, finds the single object of CLASS (private|public) with
# that CKA_ID and prints "ATTR rv=0xRV len=LEN value=HEX" per attribute (LEN -1 when the module
# reports CK_UNAVAILABLE_INFORMATION).
cat >attrs.py <<'EOF'
import ctypes, sys
UL = ctypes.c_ulong
UNAVAILABLE = UL(-1).value
class Attr(ctypes.Structure):
    _fields_ = [("type", UL), ("pValue", ctypes.c_void_p), ("ulValueLen", UL)]
lib = ctypes.CDLL(sys.argv[1])
for f in ("C_Initialize", "C_OpenSession", "C_Login", "C_FindObjectsInit", "C_FindObjects",
          "C_FindObjectsFinal", "C_GetAttributeValue", "C_Finalize"):
    getattr(lib, f).restype = UL
def ck(rv, what):
    if rv != 0:
        sys.exit(f"{what}: rv=0x{rv:x}")
slot, pin = int(sys.argv[2]), sys.argv[3].encode()
cls = UL({"private": 3, "public": 2}[sys.argv[4]])
oid = bytes.fromhex(sys.argv[5])
ck(lib.C_Initialize(None), "C_Initialize")
h = UL()
ck(lib.C_OpenSession(UL(slot), UL(4), None, None, ctypes.byref(h)), "C_OpenSession")
ck(lib.C_Login(h, UL(1), ctypes.c_char_p(pin), UL(len(pin))), "C_Login")
idbuf = ctypes.create_string_buffer(oid, len(oid))
tmpl = (Attr * 2)(Attr(0, ctypes.cast(ctypes.byref(cls), ctypes.c_void_p), ctypes.sizeof(cls)),
                  Attr(0x102, ctypes.cast(idbuf, ctypes.c_void_p), len(oid)))
ck(lib.C_FindObjectsInit(h, tmpl, UL(2)), "C_FindObjectsInit")
objs, n = (UL * 4)(), UL()
ck(lib.C_FindObjects(h, objs, UL(4), ctypes.byref(n)), "C_FindObjects")
ck(lib.C_FindObjectsFinal(h), "C_FindObjectsFinal")
if n.value != 1:
    sys.exit(f"found {n.value} objects")
for name in sys.argv[6:]:
    a = Attr(int(name, 16), None, 0)
    rv = lib.C_GetAttributeValue(h, objs[0], ctypes.byref(a), UL(1))
    value = ""
    if rv == 0 and a.ulValueLen != UNAVAILABLE:
        buf = ctypes.create_string_buffer(max(a.ulValueLen, 1))
        a.pValue = ctypes.cast(buf, ctypes.c_void_p)
        rv = lib.C_GetAttributeValue(h, objs[0], ctypes.byref(a), UL(1))
        value = buf.raw[:a.ulValueLen].hex()
    length = -1 if a.ulValueLen == UNAVAILABLE else a.ulValueLen
    print(f"{name} rv=0x{rv:x} len={length} value={value}")
ck(lib.C_Finalize(None), "C_Finalize")
EOF
attrs() { python3 attrs.py "$MODULE" "$slot" "$PIN" "$@"; }

# tamper IN OUT: OUT is IN with the lowest bit of its last byte flipped.
tamper() {
    { head -c -1 "$1"; printf '%b' "\\x$(printf %02x $((0x$(tail -c 1 "$1" | xxd -p) ^ 1)))"; } >"$2" || fail "tamper $1"
}

head -c 2000 /dev/urandom >data.bin

# --- keys from openssl, in the formats its different commands write ----------------------------
openssl genrsa -out rsa2048.pem 2048 2>/dev/null || fail "genrsa 2048"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072 -out rsa3072.pem 2>/dev/null || fail "genpkey RSA 3072"
openssl ecparam -name prime256v1 -genkey -noout -out p256.pem || fail "ecparam P-256"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384 -out p384.pem || fail "genpkey P-384"
openssl ecparam -name secp521r1 -genkey -out p521.pem || fail "ecparam P-521" # with an EC PARAMETERS block
openssl genrsa -out rsa512.pem 512 2>/dev/null || fail "genrsa 512"
for k in rsa2048 rsa3072 p256 p384 p521; do
    openssl pkey -in $k.pem -pubout -out $k.pub.pem || fail "openssl public key of $k"
    openssl pkey -in $k.pem -pubout -outform DER -out $k.pub.der || fail "openssl public key of $k"
done

# import FILE ID LABEL: --write-object as a private key; checks pkcs11-tool's report.
import() {
    local out
    out=$(user --write-object "$1" --type privkey --id "$2" --label "$3" 2>&1) || fail "import $1: $out"
    expect_contains "$out" $'Created private key:\nPrivate Key Object; ' "import $1"
    expect_contains "$out" $'\n  label:      '"$3"$'\n  ID:         '"$2"$'\n' "label/ID of imported $1"
    # Sensitive, not extractable (pkcs11-tool would print "extractable"), and having existed
    # outside the token never "always sensitive" or "never extractable".
    expect_contains "$out" $'\n  Access:     sensitive\n' "access flags of imported $1"
    out=$(user --write-object "${1%.pem}.pub.der" --type pubkey --id "$2" --label "$3" 2>&1) || fail "import the public key of $1: $out"
}
import rsa2048.pem 0a01 imp-rsa2048
import rsa3072.pem 0a02 imp-rsa3072
import p256.pem 0a03 imp-p256
import p384.pem 0a04 imp-p384
import p521.pem 0a05 imp-p521

# pub_block LABEL: the lines -O prints for the public key labelled LABEL.
pub_block() {
    awk -v l="  label:      $1" '
        /^[^ ]/ { if (hit) { printf "%s", blk; hit = 0; exit } blk = ""; pub = /^Public Key Object/ }
        { blk = blk $0 "\n"; if (pub && $0 == l) hit = 1 }
        END { if (hit) printf "%s", blk }' <<<"$listing"
}

# -O: each private key and its public key, with the same ID and label, and no third object.
out=$(user -O 2>&1) || fail "-O exit $?: $out"
expect_eq "$(grep -c '^Private Key Object' <<<"$out")" 5 "private keys listed"
expect_eq "$(grep -c '^Public Key Object' <<<"$out")" 5 "public keys listed"
listing=$out
for k in "0a01 imp-rsa2048 RSA 2048 bits" "0a02 imp-rsa3072 RSA 3072 bits" "0a03 imp-p256 EC  EC_POINT 256 bits" \
    "0a04 imp-p384 EC  EC_POINT 384 bits" "0a05 imp-p521 EC  EC_POINT 528 bits"; do
    read -r id label header <<<"$k"
    pub=$(pub_block "$label")
    expect_contains "$pub" "Public Key Object; $header" "public key of $label"
    expect_contains "$pub" $'\n  ID:         '"$id"$'\n' "ID of the public key of $label"
    expect_contains "$pub" $'\n  Usage:      ' "usage of the public key of $label"
    expect_contains "$(grep '^  Usage:' <<<"$pub")" "verify" "public key of $label verifies"
done

# The token's public keys are the openssl ones (p11tool exports all; pkcs11-tool 0.23 all but P-384).
for k in 0a01:rsa2048 0a02:rsa3072 0a03:p256 0a04:p384 0a05:p521; do
    id=${k%%:*} name=${k#*:}
    out=$(pt --export-pubkey "pkcs11:token=import;serial=$serial;object=imp-$name;type=public" --outfile "$name.token.pem" 2>&1) ||
        fail "p11tool --export-pubkey imp-$name: $out"
    openssl pkey -pubin -in "$name.token.pem" -outform DER -out "$name.token.der" 2>/dev/null || fail "exported key of $name"
    cmp -s "$name.token.der" "$name.pub.der" || fail "public key of imp-$name (p11tool) differs from openssl's"
    [ "$name" = p384 ] && continue
    user --read-object --type pubkey --id "$id" -o "$name.tool.der" >/dev/null 2>&1 || fail "pkcs11-tool --read-object pubkey $id"
    cmp -s "$name.tool.der" "$name.pub.der" || fail "public key of imp-$name (pkcs11-tool) differs from openssl's"
done

# Token signatures verify against the original openssl public keys.
sign_verify() { # ID MECH DGST-ARGS...
    local id=$1 mech=$2 out
    shift 2
    user --sign --id "$id" -m "$mech" --signature-format openssl -i data.bin -o "$id.sig" >/dev/null 2>&1 || fail "sign $mech with $id"
    out=$(openssl dgst "$@" -signature "$id.sig" data.bin 2>&1) || fail "openssl does not verify $mech by $id: $out"
    expect_eq "$out" "Verified OK" "openssl verify $mech by $id"
    tamper "$id.sig" "$id.bad"
    out=$(openssl dgst "$@" -signature "$id.bad" data.bin 2>&1) && fail "openssl verifies a tampered $mech signature by $id"
}
sign_verify 0a01 SHA256-RSA-PKCS -sha256 -verify rsa2048.pub.pem
sign_verify 0a02 SHA384-RSA-PKCS-PSS -sha384 -verify rsa3072.pub.pem -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:48
sign_verify 0a03 ECDSA-SHA256 -sha256 -verify p256.pub.pem
sign_verify 0a04 ECDSA-SHA384 -sha384 -verify p384.pub.pem
sign_verify 0a05 ECDSA-SHA512 -sha512 -verify p521.pub.pem

# --- the private values stay inside --------------------------------------------------------------
rm -f priv.out
out=$(user --read-object --type privkey --id 0a01 -o priv.out 2>&1)
[ -s priv.out ] && fail "pkcs11-tool wrote a private key: $(head -c 64 priv.out | od -An -tx1 | head -2)"
# C_GetAttributeValue: CKA_PRIVATE_EXPONENT, CKA_PRIME_1/2, CKA_EXPONENT_1/2, CKA_COEFFICIENT, and
# an EC CKA_VALUE, are CKR_ATTRIBUTE_SENSITIVE (0x11) with CK_UNAVAILABLE_INFORMATION; CKA_SENSITIVE
# is TRUE, CKA_EXTRACTABLE FALSE, CKA_LOCAL FALSE (imported), CKA_MODULUS/PUBLIC_EXPONENT readable.
out=$(attrs private 0a01 0x123 0x124 0x125 0x126 0x127 0x128 0x103 0x162 0x163 0x122 2>&1) || fail "attrs of 0a01: $out"
expect_eq "$out" "0x123 rv=0x11 len=-1 value=
0x124 rv=0x11 len=-1 value=
0x125 rv=0x11 len=-1 value=
0x126 rv=0x11 len=-1 value=
0x127 rv=0x11 len=-1 value=
0x128 rv=0x11 len=-1 value=
0x103 rv=0x0 len=1 value=01
0x162 rv=0x0 len=1 value=00
0x163 rv=0x0 len=1 value=00
0x122 rv=0x0 len=3 value=010001" "sensitive attributes of the imported RSA key"
modulus=$(openssl rsa -in rsa2048.pem -noout -modulus 2>/dev/null | sed 's/^Modulus=//' | tr 'A-F' 'a-f')
expect_eq "$(attrs private 0a01 0x120)" "0x120 rv=0x0 len=256 value=$modulus" "CKA_MODULUS of the imported RSA key"
for id in 0a03 0a04 0a05; do
    out=$(attrs private $id 0x11 0x103 0x162 2>&1) || fail "attrs of $id: $out"
    expect_eq "$out" "0x11 rv=0x11 len=-1 value=
0x103 rv=0x0 len=1 value=01
0x162 rv=0x0 len=1 value=00" "sensitive attributes of the imported EC key $id"
done

# --- refused and public-only imports -------------------------------------------------------------
out=$(user --write-object rsa512.pem --type privkey --id 0a06 --label imp-rsa512 2>&1) && fail "RSA-512 key imported: $out"
expect_contains "$out" "C_CreateObject failed" "RSA-512 import"
out=$(user -O 2>&1)
expect_not_contains "$out" "imp-rsa512" "object left by the refused RSA-512 import"
expect_eq "$(grep -c '^Private Key Object' <<<"$out") $(grep -c '^Public Key Object' <<<"$out")" "5 5" "key objects after the refused import"

openssl genrsa -out signer.pem 2048 2>/dev/null || fail "genrsa signer"
openssl pkey -in signer.pem -pubout -outform DER -out signer.pub.der || fail "signer public key"
out=$(user --write-object signer.pub.der --type pubkey --id 0b01 --label imp-rsapub 2>&1) || fail "import RSA public key: $out"
expect_contains "$out" $'Created public key:\nPublic Key Object; RSA 2048 bits\n  label:      imp-rsapub\n  ID:         0b01\n' "RSA public key import"
out=$(user -O 2>&1)
expect_eq "$(grep -c '^Private Key Object' <<<"$out") $(grep -c '^Public Key Object' <<<"$out")" "5 6" "key objects after the public key import"
expect_contains "$out" $'Public Key Object; RSA 2048 bits\n  label:      imp-rsapub\n  ID:         0b01\n' "imported RSA public key listed"
openssl dgst -sha256 -sign signer.pem -out signer.sig data.bin || fail "openssl sign"
out=$(user --verify --id 0b01 -m SHA256-RSA-PKCS -i data.bin --signature-file signer.sig 2>/dev/null) || fail "verify with the imported public key exit $?"
expect_eq "$out" "Signature is valid" "verify with the imported public key"
out=$(p11 --slot "$slot" --verify --id 0b01 -m SHA256-RSA-PKCS -i data.bin --signature-file signer.sig 2>/dev/null) || fail "verify without login exit $?"
expect_eq "$out" "Signature is valid" "verify with the imported public key without login"
out=$(user --verify --id 0b01 -m SHA256-RSA-PKCS -i rsa2048.pem --signature-file signer.sig 2>/dev/null)
expect_eq "$out" "Invalid signature" "verify other data with the imported public key"

# --- default CKA_ID: SHA-1 of the public key (EC: of the uncompressed point 04||X||Y) -----------
openssl ecparam -name prime256v1 -genkey -noout -out noid.pem || fail "ecparam noid"
want=$(openssl ec -in noid.pem -pubout -outform DER 2>/dev/null | tail -c 65 | openssl sha1 -r | cut -c1-40)
[[ "$want" =~ ^[0-9a-f]{40}$ ]] || fail "SHA-1 of the point: [$want]"
out=$(user --write-object noid.pem --type privkey --label imp-noid 2>&1) || fail "import without --id: $out"
expect_contains "$out" $'\n  label:      imp-noid\n  ID:         '"$want"$'\n' "ID of a private key imported without --id"
listing=$(user -O 2>&1)
expect_eq "$(pub_block imp-noid)" "" "a public-key object the client did not write"
user --sign --id "$want" -m ECDSA-SHA256 --signature-format openssl -i data.bin -o noid.sig >/dev/null 2>&1 || fail "sign by the default ID"
openssl pkey -in noid.pem -pubout -out noid.pub.pem || fail "noid public key"
out=$(openssl dgst -sha256 -verify noid.pub.pem -signature noid.sig data.bin 2>&1) || fail "verify noid: $out"
