# keychainctl with ML-DSA and ML-KEM keys (issue 44): generate-key --type ml-dsa-65|ml-dsa-87|
# ml-kem-768|ml-kem-1024; export of the public keys as SubjectPublicKeyInfo in the IETF LAMPS
# encodings (PEM and DER), read by openssl asn1parse: the OID (2.16.840.1.101.3.4.3.18/19,
# 2.16.840.1.101.3.4.4.2/3) with no parameters and a BIT STRING of the key's length plus one;
# items and show naming the parameter set; sign and verify-signature (a tampered file, a tampered
# signature and another context fail with status 1); import of PKCS#8 keys in the seed form built
# here byte by byte from NIST ACVP key-generation seeds, whose exported public keys must be ACVP's
# (checked by SHA-256) and the same when the seed is imported twice; and the refusals, each with
# its exact message and status: ML-DSA-44 and ML-KEM-512 (not in the library), an expanded-only
# PKCS#8 key (no seed), signing with a key of another kind, exporting a lattice private key.
. "$HERE/lib.sh"
cd "$WORK" || fail "cd $WORK"
export KEYCHAIN_PKCS11_AGENT=off
printf '%s\n' so-secret-1 >so.pin
printf '%s\n' user-pin-1 >user.pin
kc create --label pq --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create"
serial=$(kc info --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serial"])') || fail "info --json"
full="pkcs11:model=Keychain;manufacturer=Keychain%20PKCS%2311;serial=$serial;token=pq"
count_items() { kc items --json --pin-file user.pin | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }

# check_spki FILE FORM OID KEY-LENGTH: FILE (PEM or DER) is SEQUENCE { SEQUENCE { OID }, BIT STRING
# (no unused bits) of KEY-LENGTH bytes }, as openssl asn1parse reads it. OpenSSL 3.5 and later
# name the OIDs; they are mapped back to numbers so that the expectation holds there too.
check_spki() {
    local file=$1 form=$2 oid=$3 length=$4 parsed expected
    parsed=$(openssl asn1parse -inform "$form" -in "$file" | sed -E 's/ +$//; s/:ML-DSA-65$/:2.16.840.1.101.3.4.3.18/;
        s/:ML-DSA-87$/:2.16.840.1.101.3.4.3.19/; s/:ML-KEM-768$/:2.16.840.1.101.3.4.4.2/; s/:ML-KEM-1024$/:2.16.840.1.101.3.4.4.3/') ||
        fail "openssl asn1parse $file"
    expected=$(printf '    0:d=0  hl=4 l=%4d cons: SEQUENCE\n    4:d=1  hl=2 l=  11 cons: SEQUENCE\n    6:d=2  hl=2 l=   9 prim: OBJECT            :%s\n   17:d=1  hl=4 l=%4d prim: BIT STRING' \
        $((length + 18)) "$oid" $((length + 1)))
    expect_eq "$parsed" "$expected" "asn1parse of $file"
}

# Generated keys, one per offered parameter set: the output, the exported public key.
while read -r type name oid length id; do
    out=$(kc generate-key --type "$type" --label "pq-$type" --id "$id" --pin-file user.pin) || fail "generate-key --type $type"
    expect_eq "$out" "Generated $name 'pq-$type'
Private key: $full;id=%$id;object=pq-$type;type=private
Public key:  $full;id=%$id;object=pq-$type;type=public" "generate-key --type $type output"
    kc export --label "pq-$type" --type public-key --public-only -o "$type.pub.pem" >/dev/null || fail "export $type PEM"
    kc export --label "pq-$type" --type public-key --public-only --format der -o "$type.pub.der" >/dev/null || fail "export $type DER"
    expect_eq "$(head -n 1 "$type.pub.pem")" "-----BEGIN PUBLIC KEY-----" "$type PEM label"
    expect_eq "$(tail -n 1 "$type.pub.pem")" "-----END PUBLIC KEY-----" "$type PEM end"
    expect_eq "$(sed '1d;$d' "$type.pub.pem" | awk 'length > 64' | wc -l)" "0" "$type PEM lines of 64 columns"
    check_spki "$type.pub.pem" PEM "$oid" "$length"
    check_spki "$type.pub.der" DER "$oid" "$length"
    openssl base64 -d -in "$type.pub.pem" -out "$type.pem.der" || fail "base64 of $type PEM"
    cmp -s "$type.pem.der" "$type.pub.der" || fail "$type: the PEM and DER exports differ"
    expect_eq "$(xxd -p -s 21 -l 1 "$type.pub.der")" "00" "$type BIT STRING without unused bits"
    # The private key's public half exports the same SubjectPublicKeyInfo.
    kc export --label "pq-$type" --type private-key --format der -o "$type.half.der" --pin-file user.pin >/dev/null || fail "export $type private key's public half"
    cmp -s "$type.half.der" "$type.pub.der" || fail "$type: the private key's public half differs from the public key"
done <<'EOF'
ml-dsa-65 ML-DSA-65 2.16.840.1.101.3.4.3.18 1952 65
ml-dsa-87 ML-DSA-87 2.16.840.1.101.3.4.3.19 2592 87
ml-kem-768 ML-KEM-768 2.16.840.1.101.3.4.4.2 1184 07
ml-kem-1024 ML-KEM-1024 2.16.840.1.101.3.4.4.3 1568 10
EOF

# items and show name the parameter set.
expect_eq "$(kc items --pin-file user.pin)" "KIND         LABEL           DETAILS      PROTECTION     SYNC  URI
private-key  pq-ml-dsa-65    ML-DSA-65    when-unlocked  no    pkcs11:token=pq;id=%65;object=pq-ml-dsa-65;type=private
public-key   pq-ml-dsa-65    ML-DSA-65    always         no    pkcs11:token=pq;id=%65;object=pq-ml-dsa-65;type=public
private-key  pq-ml-dsa-87    ML-DSA-87    when-unlocked  no    pkcs11:token=pq;id=%87;object=pq-ml-dsa-87;type=private
public-key   pq-ml-dsa-87    ML-DSA-87    always         no    pkcs11:token=pq;id=%87;object=pq-ml-dsa-87;type=public
private-key  pq-ml-kem-768   ML-KEM-768   when-unlocked  no    pkcs11:token=pq;id=%07;object=pq-ml-kem-768;type=private
public-key   pq-ml-kem-768   ML-KEM-768   always         no    pkcs11:token=pq;id=%07;object=pq-ml-kem-768;type=public
private-key  pq-ml-kem-1024  ML-KEM-1024  when-unlocked  no    pkcs11:token=pq;id=%10;object=pq-ml-kem-1024;type=private
public-key   pq-ml-kem-1024  ML-KEM-1024  always         no    pkcs11:token=pq;id=%10;object=pq-ml-kem-1024;type=public" "items"
# show: every line but the times, the unique ID and the URI (checked apart).
shown() { kc show "$@" --pin-file user.pin | grep -Ev '^(Created|Modified|Unique ID|URI) '; }
expect_eq "$(shown --label pq-ml-dsa-65 --type private-key)" "Kind            private-key
Label           pq-ml-dsa-65
Algorithm       ML-DSA-65
ID              65
Protection      when-unlocked
Private         yes
Synchronizable  no
Sensitive       yes
Extractable     no
Per-use PIN     no
In the TPM      no
Usage           sign" "show of an ML-DSA-65 private key"
expect_eq "$(shown --label pq-ml-kem-1024 --type private-key)" "Kind            private-key
Label           pq-ml-kem-1024
Algorithm       ML-KEM-1024
ID              10
Protection      when-unlocked
Private         yes
Synchronizable  no
Sensitive       yes
Extractable     no
Per-use PIN     no
In the TPM      no
Usage           decapsulate" "show of an ML-KEM-1024 private key"
expect_eq "$(shown --label pq-ml-dsa-87 --type public-key)" "Kind            public-key
Label           pq-ml-dsa-87
Algorithm       ML-DSA-87
ID              87
Protection      always
Private         no
Synchronizable  no" "show of an ML-DSA-87 public key"
expect_eq "$(kc show --label pq-ml-kem-768 --type public-key --public-only --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["algorithm"])')" \
    "ML-KEM-768" "show --json algorithm"

# sign and verify-signature.
printf 'release 1.0\n' >data.txt
for set in 65 87; do
    out=$(kc sign --label "pq-ml-dsa-$set" -i data.txt -o "data.$set.sig" --pin-file user.pin) || fail "sign with ML-DSA-$set"
    expect_eq "$out" "Signed data.txt with ML-DSA-$set key 'pq-ml-dsa-$set': $([ "$set" = 65 ] && echo 3309 || echo 4627)-byte signature in data.$set.sig." "sign output"
    expect_eq "$(stat -c %s "data.$set.sig")" "$([ "$set" = 65 ] && echo 3309 || echo 4627)" "ML-DSA-$set signature length"
    out=$(kc verify-signature --label "pq-ml-dsa-$set" -i data.txt --signature "data.$set.sig") || fail "verify-signature ML-DSA-$set"
    expect_eq "$out" "Good signature: data.$set.sig signs data.txt (ML-DSA-$set key 'pq-ml-dsa-$set')." "verify-signature output"
done
# Hedged: two signatures of the same file differ, and both verify.
kc sign --label pq-ml-dsa-65 -i data.txt -o again.sig --pin-file user.pin >/dev/null || fail "sign again"
cmp -s again.sig data.65.sig && fail "two ML-DSA signatures are equal (not hedged)"
expect_status 0 "the second signature verifies" kc verify-signature --label pq-ml-dsa-65 -i data.txt --signature again.sig
# A tampered file, a tampered signature, the other key, a truncated signature: status 1.
printf 'release 1.1\n' >tampered.txt
expect_status 1 "a tampered file" kc verify-signature --label pq-ml-dsa-65 -i tampered.txt --signature data.65.sig
expect_eq "$(cat "$WORK/last.err")" "keychainctl: bad signature: data.65.sig does not sign tampered.txt (ML-DSA-65 key 'pq-ml-dsa-65', empty context)." \
    "bad signature message"
expect_eq "$(cat "$WORK/last.out")" "" "nothing on standard output for a bad signature"
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[100] ^= 1; open(sys.argv[2], "wb").write(b)' data.65.sig flipped.sig
expect_status 1 "a tampered signature" kc verify-signature --label pq-ml-dsa-65 -i data.txt --signature flipped.sig
expect_status 1 "another key's signature" kc verify-signature --label pq-ml-dsa-87 -i data.txt --signature data.65.sig
head -c 3308 data.65.sig >short.sig
expect_status 1 "a truncated signature" kc verify-signature --label pq-ml-dsa-65 -i data.txt --signature short.sig
# A context binds the signature; standard input is the default input.
out=$(kc sign --label pq-ml-dsa-65 --context "release v1" -o ctx.sig --pin-file user.pin <data.txt) || fail "sign from standard input with a context"
expect_eq "$out" "Signed standard input with ML-DSA-65 key 'pq-ml-dsa-65': 3309-byte signature in ctx.sig." "sign from standard input"
expect_status 1 "a context signature without the context" kc verify-signature --label pq-ml-dsa-65 -i data.txt --signature ctx.sig
expect_status 1 "a context signature with another context" kc verify-signature --label pq-ml-dsa-65 -i data.txt --signature ctx.sig --context "release v2"
expect_eq "$(cat "$WORK/last.err")" "keychainctl: bad signature: ctx.sig does not sign data.txt (ML-DSA-65 key 'pq-ml-dsa-65', context 'release v2')." \
    "bad signature message with a context"
out=$(kc verify-signature --label pq-ml-dsa-65 --signature ctx.sig --context "release v1" <data.txt) || fail "verify with the context"
expect_eq "$out" "Good signature: ctx.sig signs standard input (ML-DSA-65 key 'pq-ml-dsa-65', context 'release v1')." "verify with the context"
expect_status 0 "verify with the private key's public half" \
    kc verify-signature --label pq-ml-dsa-65 --type private-key -i data.txt --signature data.65.sig --pin-file user.pin
expect_status 64 "a context of 256 bytes" kc sign --label pq-ml-dsa-65 -i data.txt -o x.sig --context "$(printf 'c%.0s' $(seq 256))" --pin-file user.pin
# A public key the PIN hides: verify-signature asks for the PIN only then.
kc generate-key --type ml-dsa-65 --label pq-hidden --hide-public-key --pin-file user.pin >/dev/null || fail "generate with --hide-public-key"
kc sign --label pq-hidden -i data.txt -o hidden.sig --pin-file user.pin >/dev/null || fail "sign with pq-hidden"
expect_status 3 "a hidden public key without a PIN" kc verify-signature --label pq-hidden -i data.txt --signature hidden.sig </dev/null
expect_status 0 "a hidden public key with the PIN" kc verify-signature --label pq-hidden -i data.txt --signature hidden.sig --pin-file user.pin
# Keys that do not sign here.
expect_status 64 "signing with an ML-KEM key" kc sign --label pq-ml-kem-768 -i data.txt -o x.sig --pin-file user.pin
expect_eq "$(cat "$WORK/last.err")" "keychainctl: 'pq-ml-kem-768' is an ML-KEM-768 key: it encapsulates keys, it does not sign." "ML-KEM sign message"
kc generate-key --type ec --label pq-ec --pin-file user.pin >/dev/null || fail "generate EC"
expect_status 64 "signing with an EC key" kc sign --label pq-ec -i data.txt -o x.sig --pin-file user.pin
expect_eq "$(cat "$WORK/last.err")" \
    "keychainctl: 'pq-ec' is an EC-P256 key: keychainctl signs with ML-DSA keys; use the module for others (pkcs11-tool, OpenSSL's pkcs11 provider)." \
    "EC sign message"
kc generate-key --type ml-dsa-65 --label pq-presence --access-control user-presence --pin-file user.pin >/dev/null || fail "generate with user presence"
expect_status 8 "signing with a per-use PIN key" kc sign --label pq-presence -i data.txt -o x.sig --pin-file user.pin
expect_eq "$(cat "$WORK/last.err")" \
    "keychainctl: the key 'pq-presence' asks for the PIN at each use (access control): sign with it through the module (pkcs11-tool --sign), which asks for it." \
    "per-use PIN sign message"
expect_status 6 "signing with no such key" kc sign --label nothing -i data.txt -o x.sig --pin-file user.pin
expect_eq "$(cat "$WORK/last.err")" "keychainctl: no item matches label 'nothing', type private-key in keychain 'pq'." "no key message"
[ -e x.sig ] && fail "a refused sign wrote x.sig"

# Export of the private keys: never (not extractable), and not by keychainctl (extractable).
expect_status 8 "exporting a lattice private key" kc export --label pq-ml-dsa-65 --type private-key --passphrase-file user.pin --pin-file user.pin
expect_eq "$(cat "$WORK/last.err")" \
    "keychainctl: the private key 'pq-ml-dsa-65' is not extractable: it never leaves the keychain (export its public key with --format pem or der)." \
    "export of a non-extractable lattice key"
kc generate-key --type ml-kem-768 --label pq-extractable --extractable --pin-file user.pin >/dev/null || fail "generate extractable ML-KEM"
expect_status 64 "exporting an extractable lattice private key" kc export --label pq-extractable --type private-key --passphrase-file user.pin --pin-file user.pin
expect_eq "$(cat "$WORK/last.err")" \
    "keychainctl: keychainctl does not export ML-KEM-768 private keys (a PKCS#11 client can wrap an extractable one); export the public key with --format pem or der." \
    "export of an extractable lattice key"
expect_status 64 "an ssh export of a lattice key" kc export --label pq-ml-dsa-65 --type public-key --public-only --format ssh
expect_eq "$(cat "$WORK/last.err")" "keychainctl: OpenSSH has no format for this key type." "ssh export message"

# ML-DSA-44 and ML-KEM-512 are refused before the PIN is asked, with status 64.
before=$(count_items)
expect_status 64 "generate-key --type ml-dsa-44" kc generate-key --type ml-dsa-44 --label x </dev/null
expect_eq "$(cat "$WORK/last.err")" "keychainctl: ML-DSA-44 is not offered: the library (swift-crypto) has no ML-DSA-44; use ml-dsa-65 or ml-dsa-87." \
    "ML-DSA-44 message"
expect_status 64 "generate-key --type ml-kem-512" kc generate-key --type ml-kem-512 --label x </dev/null
expect_eq "$(cat "$WORK/last.err")" "keychainctl: ML-KEM-512 is not offered: the library (swift-crypto) has no ML-KEM-512; use ml-kem-768 or ml-kem-1024." \
    "ML-KEM-512 message"
help=$(kc generate-key --help | tr '\n' ' ' | tr -s ' ')
expect_not_contains "$help" "ml-dsa-44" "generate-key --help offers ML-DSA-44"
expect_contains "$help" "(values: rsa, ec, ed25519, ml-dsa-65, ml-dsa-87, ml-kem-768, ml-kem-1024)" "generate-key --help values"

# Import of PKCS#8 in the seed form, built by hand: SEQUENCE { INTEGER 0, SEQUENCE { OID },
# OCTET STRING { [0] seed } }. The seeds are NIST ACVP-Server v1.1.0.43 key-generation cases
# (ML-DSA-keyGen-FIPS204 tcId 26 and 51, ML-KEM-keyGen-FIPS203 tcId 26 and 51: seed, d ‖ z), and
# the SHA-256 of the public key (pk, ek) each gives there.
pkcs8_seed() { # OID-LAST-TWO-BYTES SEED-HEX → the DER on standard output
    local n=$((${#2} / 2))
    printf '30%02x020100300b060960864801650304%s04%02x80%02x%s' $((n + 20)) "$1" $((n + 2)) "$n" "$2" | xxd -r -p
}
again=0
while read -r name oid seed digest; do
    pkcs8_seed "$oid" "$seed" >"$name.seed.der"
    out=$(kc import "$name.seed.der" --label "acvp-$name" --pin-file user.pin) || fail "import $name seed form: $out"
    id=$(kc show --label "acvp-$name" --type public-key --public-only --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
    uri_id=$(sed 's/../%&/g' <<<"$id")
    expect_eq "$out" "Imported from $name.seed.der (PKCS#8 private key, $(tr a-z A-Z <<<"$name")):
  private-key  $full;id=$uri_id;object=acvp-$name;type=private
  public-key   $full;id=$uri_id;object=acvp-$name;type=public" "import $name output"
    kc export --label "acvp-$name" --type public-key --public-only --format der -o "$name.acvp.der" >/dev/null || fail "export acvp-$name"
    expect_eq "$(tail -c +23 "$name.acvp.der" | sha256sum | cut -d' ' -f1)" "$digest" "$name public key from the ACVP seed"
    expect_eq "$id" "$(tail -c +23 "$name.acvp.der" | sha1sum | cut -d' ' -f1)" "$name CKA_ID is SHA-1 of the public key"
    # The same seed again, as PEM (another label and CKA_ID, one per key type: else it is the same item): the same public key.
    { echo "-----BEGIN PRIVATE KEY-----"; base64 -w 64 "$name.seed.der"; echo "-----END PRIVATE KEY-----"; } >"$name.seed.pem"
    again=$((again + 1))
    kc import "$name.seed.pem" --label "acvp-$name-again" --id "9$again" --pin-file user.pin >/dev/null || fail "import $name seed form as PEM"
    kc export --label "acvp-$name-again" --type public-key --public-only --format der -o "$name.again.der" >/dev/null || fail "export acvp-$name-again"
    cmp -s "$name.acvp.der" "$name.again.der" || fail "$name: the same seed imported twice gives two public keys"
    expect_status 4 "the same seed under the same label and ID" kc import "$name.seed.der" --label "acvp-$name" --pin-file user.pin
done <<'EOF'
ml-dsa-65 0312 a991fd42b071d49c48ae3e75c647459e0daad1e1ba356a04801912d3294bcff8 b1a7d0d2f0d7a04b9d5ffccd9bd578864dab4a01cdd7f70a05cd1f4f0672e43a
ml-dsa-87 0313 a16f5b0796703e2d1a0140a35cbf36efabe70e752ba59b6a9a0e9c4b05302f73 33f49649f05ec2fc3b050007b18ade043bbc8d1c0ded03a269d540486daaa5f4
ml-kem-768 0402 e582b7d75e6c80b05ae392a1fc9f7153b12390fd99930368cc67a768baebc8a01cdacb8740c0b87c4a379575f187b367cbfa3b300bf591b109f79816e9cbe8f0 4158f6afb5e516c99f1da07da8c651348422b17c1f4e9a08ad73fb1f91249b3e
ml-kem-1024 0403 f3a706faf090c03db506863ab0b20bd8a1627956318e88c67eb875e8e726600935d2bc43dd1cc879f765bf2a0c5e297889dde910e57e2bb0eae417b90ab7a275 b78619e4fceeeb86dee3fedb945eca6da61dae312771ef8fa871951d391bd7b6
EOF
# An imported ML-DSA key signs, and its exported public key is the one that verifies.
kc sign --label acvp-ml-dsa-65 -i data.txt -o acvp.sig --pin-file user.pin >/dev/null || fail "sign with the imported key"
kc import ml-dsa-65.acvp.der --label acvp-public-only --id 98 --pin-file user.pin >import.out || fail "import a public key alone: $(cat import.out)"
expect_eq "$(cat import.out)" "Imported from ml-dsa-65.acvp.der (DER public key, ML-DSA-65):
  public-key   $full;id=%98;object=acvp-public-only;type=public" "import of a public key"
expect_status 0 "the imported public key verifies" kc verify-signature --label acvp-public-only -i data.txt --signature acvp.sig

# Refused imports store nothing: ML-DSA-44, an expanded-only key (no seed), a bad seed length.
before=$(count_items)
pkcs8_seed 0311 a991fd42b071d49c48ae3e75c647459e0daad1e1ba356a04801912d3294bcff8 >ml-dsa-44.der
expect_status 7 "import of ML-DSA-44" kc import ml-dsa-44.der --label x --pin-file user.pin
expect_eq "$(cat "$WORK/last.err")" "keychainctl: cannot import ml-dsa-44.der: ML-DSA-44 is not offered: the library (swift-crypto) has no ML-DSA-44." \
    "ML-DSA-44 import message"
# SEQUENCE { INTEGER 0, SEQUENCE { id-ml-dsa-65 }, OCTET STRING { OCTET STRING (4032 bytes) } }.
{ printf '30820fd8020100300b060960864801650304031204820fc404820fc0' | xxd -r -p; head -c 4032 /dev/zero; } >expanded.der
openssl asn1parse -inform DER -in expanded.der >/dev/null || fail "expanded.der is not DER"
expect_status 7 "import of an expanded-only key" kc import expanded.der --label x --pin-file user.pin
expect_eq "$(cat "$WORK/last.err")" "keychainctl: cannot import expanded.der: this ML-DSA-65 private key holds only the expanded key, without its seed; a key with its seed is needed (PKCS#8 with the seed, or with the seed and the expanded key)." \
    "expanded-only import message"
pkcs8_seed 0312 "$(printf "%062d" 0)" >short-seed.der
expect_status 7 "import of a 31-byte ML-DSA seed" kc import short-seed.der --label x --pin-file user.pin
expect_eq "$(count_items)" "$before" "refused imports stored nothing"
echo "ok: ML-DSA-65/87 and ML-KEM-768/1024 generated, exported, listed, signed, verified and imported"
