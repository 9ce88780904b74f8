import CPKCS11
import XCTest
@testable import PKCS11

/// Encryption, MACs, key wrapping, key derivation and certificates through the C API, with
/// published test vectors where they exist.
final class CipherAndTransportTests: ModuleTestCase {
    private func mechanism(_ type: UInt, bytes: [UInt8], _ body: (UnsafeMutablePointer<CK_MECHANISM>) -> CK_RV) -> CK_RV {
        var bytes = bytes
        return bytes.withUnsafeMutableBytes { buffer in
            var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(type), pParameter: buffer.baseAddress, ulParameterLen: CK_ULONG(buffer.count))
            return body(&mechanism)
        }
    }

    private func session() -> CK_SESSION_HANDLE {
        let session = openSession(makeToken(), readWrite: true)
        XCTAssertRV(login(session), CKR_OK)
        return session
    }

    /// C_Encrypt or C_Decrypt of `input` in one call, with a length query first.
    private func crypt(_ session: CK_SESSION_HANDLE, encrypt: Bool, _ input: [UInt8]) -> (CK_RV, [UInt8]) {
        var input = input
        var length: CK_ULONG = 0
        let call = encrypt ? p11.C_Encrypt! : p11.C_Decrypt!
        let query = call(session, &input, CK_ULONG(input.count), nil, &length)
        guard query == CK_RV(CKR_OK) else { return (query, []) }
        var output = [UInt8](repeating: 0, count: Int(length))
        let result = call(session, &input, CK_ULONG(input.count), &output, &length)
        return (result, Array(output.prefix(Int(length))))
    }

    func test_aes_ecb_matches_fips197_and_needs_whole_blocks() {
        let session = session()
        let key = secretKey(session, type: UInt(CKK_AES), value: hex("000102030405060708090a0b0c0d0e0f"))
        XCTAssertRV(mechanism(UInt(CKM_AES_ECB)) { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
        let (result, ciphertext) = crypt(session, encrypt: true, hex("00112233445566778899aabbccddeeff"))
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(ciphertext, hex("69c4e0d86a7b0430d8cdb78070b4c55a"))
        XCTAssertRV(mechanism(UInt(CKM_AES_ECB)) { p11.C_DecryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertEqual(crypt(session, encrypt: false, ciphertext).1, hex("00112233445566778899aabbccddeeff"))
        XCTAssertRV(mechanism(UInt(CKM_AES_ECB)) { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertRV(crypt(session, encrypt: true, [1, 2, 3]).0, CKR_DATA_LEN_RANGE)
        XCTAssertRV(mechanism(UInt(CKM_AES_CBC), bytes: [1, 2, 3]) { p11.C_EncryptInit!(session, $0, key) }, CKR_MECHANISM_PARAM_INVALID)
    }

    func test_aes_cbc_pad_multi_part_with_length_queries() {
        let session = session()
        let key = secretKey(session, type: UInt(CKK_AES), value: [UInt8](repeating: 7, count: 32))
        let iv = [UInt8](repeating: 9, count: 16)
        let plaintext = (0..<100).map { UInt8($0) }
        XCTAssertRV(mechanism(UInt(CKM_AES_CBC_PAD), bytes: iv) { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
        var ciphertext: [UInt8] = []
        for chunk in [plaintext[0..<7], plaintext[7..<40], plaintext[40..<100]] {
            var part = Array(chunk)
            var length: CK_ULONG = 0
            XCTAssertRV(p11.C_EncryptUpdate!(session, &part, CK_ULONG(part.count), nil, &length), CKR_OK)
            var out = [UInt8](repeating: 0, count: Int(length))
            XCTAssertRV(p11.C_EncryptUpdate!(session, &part, CK_ULONG(part.count), &out, &length), CKR_OK)
            ciphertext += out.prefix(Int(length))
        }
        var length: CK_ULONG = 0
        XCTAssertRV(p11.C_EncryptFinal!(session, nil, &length), CKR_OK)
        var tail = [UInt8](repeating: 0, count: Int(length))
        XCTAssertRV(p11.C_EncryptFinal!(session, &tail, &length), CKR_OK)
        ciphertext += tail.prefix(Int(length))
        XCTAssertEqual(ciphertext.count, 112)
        XCTAssertRV(mechanism(UInt(CKM_AES_CBC_PAD), bytes: iv) { p11.C_DecryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertEqual(crypt(session, encrypt: false, ciphertext).1, plaintext)
        XCTAssertRV(mechanism(UInt(CKM_AES_CBC_PAD), bytes: iv) { p11.C_DecryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertRV(crypt(session, encrypt: false, Array(ciphertext.prefix(100))).0, CKR_ENCRYPTED_DATA_LEN_RANGE)
    }

    func test_aes_gcm_authenticates() {
        let session = session()
        let key = secretKey(session, type: UInt(CKK_AES), value: [UInt8](repeating: 3, count: 16))
        var iv = [UInt8](repeating: 1, count: 12), aad = Array("header".utf8)
        func gcm(_ tagBits: CK_ULONG, _ body: (UnsafeMutablePointer<CK_MECHANISM>) -> CK_RV) -> CK_RV {
            iv.withUnsafeMutableBufferPointer { ivBuffer in
                aad.withUnsafeMutableBufferPointer { aadBuffer in
                    let params = CK_GCM_PARAMS(pIv: ivBuffer.baseAddress, ulIvLen: 12, ulIvBits: 96, pAAD: aadBuffer.baseAddress, ulAADLen: CK_ULONG(aadBuffer.count), ulTagBits: tagBits)
                    return mechanism(UInt(CKM_AES_GCM), parameter: params, body)
                }
            }
        }
        let plaintext = Array("secret message".utf8)
        XCTAssertRV(gcm(128) { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
        let (result, sealed) = crypt(session, encrypt: true, plaintext)
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(sealed.count, plaintext.count + 16)
        XCTAssertRV(gcm(128) { p11.C_DecryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertEqual(crypt(session, encrypt: false, sealed).1, plaintext)
        var tampered = sealed
        tampered[0] ^= 1
        XCTAssertRV(gcm(128) { p11.C_DecryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertRV(crypt(session, encrypt: false, tampered).0, CKR_ENCRYPTED_DATA_INVALID)
        XCTAssertRV(gcm(64) { p11.C_EncryptInit!(session, $0, key) }, CKR_MECHANISM_PARAM_INVALID)
    }

    /// One C_Encrypt/C_Decrypt call with room for any result (the path that writes straight into
    /// the caller's buffer).
    private func cryptOnce(_ session: CK_SESSION_HANDLE, encrypt: Bool, _ input: [UInt8]) -> (CK_RV, [UInt8]) {
        var input = input
        var output = [UInt8](repeating: 0, count: input.count + 64)
        var length = CK_ULONG(output.count)
        let rv = (encrypt ? p11.C_Encrypt! : p11.C_Decrypt!)(session, &input, CK_ULONG(input.count), &output, &length)
        return (rv, Array(output.prefix(Int(length))))
    }

    /// Operations on one key restart the key's AES context with a new IV (Token.idleCiphers): each
    /// result must be what a fresh context gives — published vectors, or a second key object with
    /// the same value — whatever the operation before it left behind.
    func test_operations_reusing_a_keys_context_start_clean() {
        let session = session()
        let zeroKey = [UInt8](repeating: 0, count: 32)
        let key = secretKey(session, type: UInt(CKK_AES), value: zeroKey)
        func gcm(_ ivBytes: [UInt8], aad aadBytes: [UInt8] = [], _ body: (UnsafeMutablePointer<CK_MECHANISM>) -> CK_RV) -> CK_RV {
            var iv = ivBytes, aad = aadBytes
            return iv.withUnsafeMutableBufferPointer { ivBuffer in
                aad.withUnsafeMutableBufferPointer { aadBuffer in
                    let params = CK_GCM_PARAMS(pIv: ivBuffer.baseAddress, ulIvLen: CK_ULONG(ivBuffer.count), ulIvBits: CK_ULONG(ivBuffer.count * 8),
                                               pAAD: aadBuffer.baseAddress, ulAADLen: CK_ULONG(aadBuffer.count), ulTagBits: 128)
                    return mechanism(UInt(CKM_AES_GCM), parameter: params, body)
                }
            }
        }
        // McGrew & Viega, "The Galois/Counter Mode of Operation", test cases 13 and 14 (AES-256,
        // zero key, zero 96-bit IV): an empty message, and one zero block.
        let zeroIV = [UInt8](repeating: 0, count: 12), zeroBlock = [UInt8](repeating: 0, count: 16)
        let case13 = hex("530f8afbc74536b9a963b4f1c4cb738b")
        let case14 = hex("cea7403d4d606b6e074ec5d3baf39d18") + hex("d0d1c8a799996bf0265b98b5d48ab919")
        for round in 0..<3 {
            XCTAssertRV(gcm(zeroIV) { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
            let sealed = cryptOnce(session, encrypt: true, zeroBlock)
            XCTAssertRV(sealed.0, CKR_OK)
            XCTAssertEqual(sealed.1, case14, "round \(round)")
            XCTAssertRV(gcm(zeroIV) { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
            XCTAssertEqual(cryptOnce(session, encrypt: true, []).1, case13, "round \(round)")
        }
        // A tag that fails ends that operation; the next decryption on the key is unaffected.
        var tampered = case14
        tampered[20] ^= 1
        XCTAssertRV(gcm(zeroIV) { p11.C_DecryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertRV(cryptOnce(session, encrypt: false, tampered).0, CKR_ENCRYPTED_DATA_INVALID)
        XCTAssertRV(gcm(zeroIV) { p11.C_DecryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertEqual(cryptOnce(session, encrypt: false, case14).1, zeroBlock)
        // Another IV length and additional data, then back: compared with a second key object of the
        // same value, whose first operation has a fresh context.
        let twin = secretKey(session, type: UInt(CKK_AES), value: zeroKey)
        let longIV = [UInt8](repeating: 0xa5, count: 16), aad = Array("header".utf8), message = Array("a longer message, three blocks or so".utf8)
        XCTAssertRV(gcm(longIV, aad: aad) { p11.C_EncryptInit!(session, $0, twin) }, CKR_OK)
        let fresh = cryptOnce(session, encrypt: true, message)
        XCTAssertRV(gcm(longIV, aad: aad) { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
        let reused = cryptOnce(session, encrypt: true, message)
        XCTAssertRV(reused.0, CKR_OK)
        XCTAssertEqual(reused.1, fresh.1)
        XCTAssertRV(gcm(zeroIV) { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertEqual(cryptOnce(session, encrypt: true, zeroBlock).1, case14)

        // CBC: a multi-part operation that fails half-way (a partial block at the end) does not leave
        // its state to the next one. NIST SP 800-38A F.2.5, CBC-AES256, first block.
        let cbcKey = secretKey(session, type: UInt(CKK_AES), value: hex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"))
        let nistIV = hex("000102030405060708090a0b0c0d0e0f"), block = hex("6bc1bee22e409f96e93d7e117393172a")
        XCTAssertRV(mechanism(UInt(CKM_AES_CBC), bytes: nistIV) { p11.C_EncryptInit!(session, $0, cbcKey) }, CKR_OK)
        var partial = [UInt8](repeating: 1, count: 20), out = [UInt8](repeating: 0, count: 64)
        var length = CK_ULONG(out.count)
        XCTAssertRV(p11.C_EncryptUpdate!(session, &partial, 20, &out, &length), CKR_OK)
        XCTAssertEqual(length, 16)
        length = CK_ULONG(out.count)
        XCTAssertRV(p11.C_EncryptFinal!(session, &out, &length), CKR_DATA_LEN_RANGE)
        for _ in 0..<2 {
            XCTAssertRV(mechanism(UInt(CKM_AES_CBC), bytes: nistIV) { p11.C_EncryptInit!(session, $0, cbcKey) }, CKR_OK)
            XCTAssertEqual(cryptOnce(session, encrypt: true, block).1, hex("f58c4c04d6e5f1ba779eabfb5f7bfbd6"))
        }

        // After a logout the contexts are gone with the key cache; the key still works after login.
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        XCTAssertRV(login(session), CKR_OK)
        XCTAssertRV(gcm(zeroIV) { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertEqual(cryptOnce(session, encrypt: true, zeroBlock).1, case14)
    }

    /// A session keeps its last AES context on a cached key and restarts it for the next
    /// operation on that key and mechanism without checking the key again (KeptCipher): every
    /// change that would make those checks answer differently must drop it, and every case the
    /// shortcut does not take must get the full path's answer.
    func test_kept_cipher_follows_every_change_to_its_key() {
        let slot = makeToken()
        let session = openSession(slot, readWrite: true)
        XCTAssertRV(login(session), CKR_OK)
        let zeroKey = [UInt8](repeating: 0, count: 32)
        let zeroIV = [UInt8](repeating: 0, count: 12), zeroBlock = [UInt8](repeating: 0, count: 16)
        // McGrew & Viega test case 14 (AES-256, zero key, IV and block): ciphertext, then tag.
        let case14 = hex("cea7403d4d606b6e074ec5d3baf39d18") + hex("d0d1c8a799996bf0265b98b5d48ab919")
        func gcm(_ tagBits: CK_ULONG = 128, _ body: (UnsafeMutablePointer<CK_MECHANISM>) -> CK_RV) -> CK_RV {
            var iv = zeroIV
            return iv.withUnsafeMutableBufferPointer { ivBuffer in
                let params = CK_GCM_PARAMS(pIv: ivBuffer.baseAddress, ulIvLen: 12, ulIvBits: 96, pAAD: nil, ulAADLen: 0, ulTagBits: tagBits)
                return mechanism(UInt(CKM_AES_GCM), parameter: params, body)
            }
        }
        func sealsCase14(_ session: CK_SESSION_HANDLE, _ key: CK_OBJECT_HANDLE, _ message: String, file: StaticString = #filePath, line: UInt = #line) {
            XCTAssertRV(gcm { p11.C_EncryptInit!(session, $0, key) }, CKR_OK, message, file: file, line: line)
            XCTAssertEqual(cryptOnce(session, encrypt: true, zeroBlock).1, case14, message, file: file, line: line)
        }
        let key = secretKey(session, type: UInt(CKK_AES), value: zeroKey)
        for round in 0..<3 { sealsCase14(session, key, "session key, round \(round)") }

        // An operation started on the kept context is an operation like any other.
        XCTAssertRV(gcm { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertRV(gcm { p11.C_EncryptInit!(session, $0, key) }, CKR_OPERATION_ACTIVE)
        var block = zeroBlock, length: CK_ULONG = 0
        XCTAssertRV(p11.C_Encrypt!(session, &block, 16, nil, &length), CKR_OK)
        XCTAssertEqual(length, 32)
        var out = [UInt8](repeating: 0, count: 31)
        length = 31
        XCTAssertRV(p11.C_Encrypt!(session, &block, 16, &out, &length), CKR_BUFFER_TOO_SMALL)
        XCTAssertEqual(length, 32)
        out = [UInt8](repeating: 0, count: 32)
        XCTAssertRV(p11.C_Encrypt!(session, &block, 16, &out, &length), CKR_OK)
        XCTAssertEqual(out, case14)
        XCTAssertRV(p11.C_Encrypt!(session, &block, 16, &out, &length), CKR_OPERATION_NOT_INITIALIZED)
        // Another tag length takes the full path, and the kept one still gives its own.
        XCTAssertRV(gcm(96) { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertEqual(cryptOnce(session, encrypt: true, zeroBlock).1, Array(case14.prefix(28)))
        sealsCase14(session, key, "after a 96-bit tag")
        // A NULL mechanism cancels an operation started on the kept context.
        XCTAssertRV(gcm { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertRV(p11.C_EncryptInit!(session, nil, key), CKR_OK)
        sealsCase14(session, key, "after a cancelled operation")

        // Its attributes change: the change is seen at once.
        let no: [(UInt, [UInt8])] = [(UInt(CKA_ENCRYPT), [0])], yes: [(UInt, [UInt8])] = [(UInt(CKA_ENCRYPT), [1])]
        XCTAssertRV(withTemplate(no) { p11.C_SetAttributeValue!(session, key, $0, $1) }, CKR_OK)
        XCTAssertRV(gcm { p11.C_EncryptInit!(session, $0, key) }, CKR_KEY_FUNCTION_NOT_PERMITTED)
        XCTAssertRV(withTemplate(yes) { p11.C_SetAttributeValue!(session, key, $0, $1) }, CKR_OK)
        sealsCase14(session, key, "allowed again")

        // A second session on the same key has its own context.
        let second = openSession(slot, readWrite: true)
        for round in 0..<2 { sealsCase14(second, key, "second session, round \(round)") }
        XCTAssertRV(p11.C_CloseSession!(second), CKR_OK)
        sealsCase14(session, key, "after the second session closed")

        // A token key: a change written to the keychain is seen too.
        let tokenKey = secretKey(session, type: UInt(CKK_AES), value: zeroKey, extra: [(UInt(CKA_TOKEN), [1]), (UInt(CKA_MODIFIABLE), [1])])
        for round in 0..<2 { sealsCase14(session, tokenKey, "token key, round \(round)") }
        XCTAssertRV(withTemplate(no) { p11.C_SetAttributeValue!(session, tokenKey, $0, $1) }, CKR_OK)
        XCTAssertRV(gcm { p11.C_EncryptInit!(session, $0, tokenKey) }, CKR_KEY_FUNCTION_NOT_PERMITTED)
        XCTAssertRV(withTemplate(yes) { p11.C_SetAttributeValue!(session, tokenKey, $0, $1) }, CKR_OK)
        sealsCase14(session, tokenKey, "token key allowed again")

        // A logout: the private key is not there for a public session, and after the login it is.
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        XCTAssertRV(gcm { p11.C_EncryptInit!(session, $0, tokenKey) }, CKR_KEY_HANDLE_INVALID)
        XCTAssertRV(login(session), CKR_OK)
        sealsCase14(session, tokenKey, "after logging in again")

        // Destroyed: the handle is invalid at once.
        XCTAssertRV(p11.C_DestroyObject!(session, tokenKey), CKR_OK)
        XCTAssertRV(gcm { p11.C_EncryptInit!(session, $0, tokenKey) }, CKR_KEY_HANDLE_INVALID)
        XCTAssertRV(p11.C_DestroyObject!(session, key), CKR_OK)
        XCTAssertRV(gcm { p11.C_EncryptInit!(session, $0, key) }, CKR_KEY_HANDLE_INVALID)
    }

    func test_hmac_and_cmac_match_their_rfc_vectors() {
        let session = session()
        let jefe = secretKey(session, type: UInt(CKK_GENERIC_SECRET), value: Array("Jefe".utf8))
        var data = Array("what do ya want for nothing?".utf8)
        XCTAssertRV(mechanism(UInt(CKM_SHA256_HMAC)) { p11.C_SignInit!(session, $0, jefe) }, CKR_OK)
        var mac = [UInt8](repeating: 0, count: 32)
        var length: CK_ULONG = 32
        XCTAssertRV(p11.C_Sign!(session, &data, CK_ULONG(data.count), &mac, &length), CKR_OK)
        XCTAssertEqual(mac, hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
        XCTAssertRV(mechanism(UInt(CKM_SHA256_HMAC)) { p11.C_VerifyInit!(session, $0, jefe) }, CKR_OK)
        XCTAssertRV(p11.C_Verify!(session, &data, CK_ULONG(data.count), &mac, 32), CKR_OK)
        mac[0] ^= 1
        XCTAssertRV(mechanism(UInt(CKM_SHA256_HMAC)) { p11.C_VerifyInit!(session, $0, jefe) }, CKR_OK)
        XCTAssertRV(p11.C_Verify!(session, &data, CK_ULONG(data.count), &mac, 32), CKR_SIGNATURE_INVALID)
        let aes = secretKey(session, type: UInt(CKK_AES), value: hex("2b7e151628aed2a6abf7158809cf4f3c"))
        XCTAssertRV(mechanism(UInt(CKM_AES_CMAC)) { p11.C_SignInit!(session, $0, aes) }, CKR_OK)
        var cmac = [UInt8](repeating: 0, count: 16)
        length = 16
        XCTAssertRV(p11.C_Sign!(session, nil, 0, &cmac, &length), CKR_OK)
        XCTAssertEqual(cmac, hex("bb1d6929e95937287fa37d129b756746"), "RFC 4493 example 1")
        XCTAssertRV(mechanism(UInt(CKM_SHA256_HMAC)) { p11.C_SignInit!(session, $0, aes) }, CKR_KEY_TYPE_INCONSISTENT)
    }

    func test_aes_key_wrap_matches_rfc3394_and_respects_extractability() {
        let session = session()
        // A key-transport key (wrap and unwrap asked for: the default is the data roles), and a
        // target that is extractable and not sensitive (sensitive keys need a trusted wrapping key).
        let kek = secretKey(session, type: UInt(CKK_AES), value: hex("000102030405060708090a0b0c0d0e0f"), extra: [(UInt(CKA_WRAP), [1]), (UInt(CKA_UNWRAP), [1])])
        let target = secretKey(session, type: UInt(CKK_AES), value: hex("00112233445566778899aabbccddeeff"), extra: [(UInt(CKA_EXTRACTABLE), [1]), (UInt(CKA_SENSITIVE), [0])])
        var length: CK_ULONG = 0
        XCTAssertRV(mechanism(UInt(CKM_AES_KEY_WRAP)) { p11.C_WrapKey!(session, $0, kek, target, nil, &length) }, CKR_OK)
        XCTAssertEqual(length, 24)
        var wrapped = [UInt8](repeating: 0, count: 24)
        XCTAssertRV(mechanism(UInt(CKM_AES_KEY_WRAP)) { p11.C_WrapKey!(session, $0, kek, target, &wrapped, &length) }, CKR_OK)
        XCTAssertEqual(wrapped, hex("1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5"))
        var unwrapped: CK_OBJECT_HANDLE = 0
        let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_AES)))]
        XCTAssertRV(withTemplate(template) { t, c in
            mechanism(UInt(CKM_AES_KEY_WRAP)) { p11.C_UnwrapKey!(session, $0, kek, &wrapped, 24, t, c, &unwrapped) }
        }, CKR_OK)
        XCTAssertEqual(value(session, unwrapped, UInt(CKA_CHECK_VALUE)).1, value(session, target, UInt(CKA_CHECK_VALUE)).1)
        XCTAssertEqual(value(session, unwrapped, UInt(CKA_ALWAYS_SENSITIVE)).1, [0])
        wrapped[5] ^= 1
        XCTAssertRV(withTemplate(template) { t, c in
            mechanism(UInt(CKM_AES_KEY_WRAP)) { p11.C_UnwrapKey!(session, $0, kek, &wrapped, 24, t, c, &unwrapped) }
        }, CKR_WRAPPED_KEY_INVALID)
        let locked = secretKey(session, type: UInt(CKK_AES), value: [UInt8](repeating: 1, count: 16), extra: [(UInt(CKA_SENSITIVE), [0])])
        XCTAssertRV(mechanism(UInt(CKM_AES_KEY_WRAP)) { p11.C_WrapKey!(session, $0, kek, locked, nil, &length) }, CKR_KEY_UNEXTRACTABLE)
    }

    func test_rsa_oaep_and_ecdh_agree_between_keys() {
        let session = session()
        var publicKey: CK_OBJECT_HANDLE = 0, privateKey: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_MODULUS_BITS), Self.ulong(2048))]) { pt, pc in
            mechanism(UInt(CKM_RSA_PKCS_KEY_PAIR_GEN)) { p11.C_GenerateKeyPair!(session, $0, pt, pc, nil, 0, &publicKey, &privateKey) }
        }, CKR_OK)
        let oaep = CK_RSA_PKCS_OAEP_PARAMS(hashAlg: CK_MECHANISM_TYPE(CKM_SHA256), mgf: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA256), source: 0, pSourceData: nil, ulSourceDataLen: 0)
        XCTAssertRV(mechanism(UInt(CKM_RSA_PKCS_OAEP), parameter: oaep) { p11.C_EncryptInit!(session, $0, publicKey) }, CKR_OK)
        let (result, ciphertext) = crypt(session, encrypt: true, Array("oaep".utf8))
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(ciphertext.count, 256)
        XCTAssertRV(mechanism(UInt(CKM_RSA_PKCS_OAEP), parameter: oaep) { p11.C_DecryptInit!(session, $0, privateKey) }, CKR_OK)
        XCTAssertEqual(crypt(session, encrypt: false, ciphertext).1, Array("oaep".utf8))
        XCTAssertRV(mechanism(UInt(CKM_RSA_PKCS_OAEP), parameter: oaep) { p11.C_DecryptInit!(session, $0, privateKey) }, CKR_OK)
        XCTAssertRV(crypt(session, encrypt: false, [UInt8](repeating: 1, count: 256)).0, CKR_ENCRYPTED_DATA_INVALID)
        XCTAssertRV(mechanism(UInt(CKM_RSA_PKCS_OAEP), parameter: oaep) { p11.C_DecryptInit!(session, $0, privateKey) }, CKR_OK)
        XCTAssertRV(crypt(session, encrypt: false, [1, 2, 3]).0, CKR_ENCRYPTED_DATA_LEN_RANGE)

        // ECDH: A's secret with B's point equals B's secret with A's point.
        let p256: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
        var keys: [(CK_OBJECT_HANDLE, CK_OBJECT_HANDLE)] = []
        for _ in 0..<2 {
            var pub: CK_OBJECT_HANDLE = 0, priv: CK_OBJECT_HANDLE = 0
            XCTAssertRV(withTemplate([(UInt(CKA_EC_PARAMS), p256)]) { pt, pc in
                mechanism(UInt(CKM_EC_KEY_PAIR_GEN)) { p11.C_GenerateKeyPair!(session, $0, pt, pc, nil, 0, &pub, &priv) }
            }, CKR_OK)
            keys.append((pub, priv))
        }
        let ab = agreedSecret(session, mine: keys[0].1, theirs: keys[1].0, kdf: UInt(CKD_SHA256_KDF), length: 32)
        let ba = agreedSecret(session, mine: keys[1].1, theirs: keys[0].0, kdf: UInt(CKD_SHA256_KDF), length: 32)
        XCTAssertRV(ab.0, CKR_OK)
        XCTAssertRV(ba.0, CKR_OK)
        let secrets = [ab.1, ba.1]
        XCTAssertEqual(secrets[0].count, 32)
        XCTAssertEqual(secrets[0], secrets[1])
    }

    func test_certificate_attributes_come_from_the_der() {
        let session = session()
        let der = hex("3082017230820119a00302010202021234300a06082a8648ce3d04030230183116301406035504030c0d4b6579636861696e2054657374301e170d3236313132323030303033305a170d3336313131393030303033305a30183116301406035504030c0d4b6579636861696e20546573743059301306072a8648ce3d020106082a8648ce3d03010703420004107fcdb8e7fbf82b1566890d0acb4da2ad558f7980c15b64f9cf323ccfda98c10825484e4b72b12aaf5e4f7368367a6a49a6cba7c260b1708c8449aff754ad90a3533051301d0603551d0e0416041492b4d707a0d234f073091439f8f6e1f9895e5e1d301f0603551d2304183016801492b4d707a0d234f073091439f8f6e1f9895e5e1d300f0603551d130101ff040530030101ff300a06082a8648ce3d04030203470030440220060173d81ef7f58f296d292af7144e0b98e33280edb5fc2672a0d724d32cbc4b0220312f287399395789b084fa6a8891dd8453d0e076e6fb16600f535adc42cc607e")
        var base: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_CERTIFICATE))), (UInt(CKA_CERTIFICATE_TYPE), Self.ulong(UInt(CKC_X_509))),
                                       (UInt(CKA_VALUE), der), (UInt(CKA_TOKEN), [1])]
        let name = hex("30183116301406035504030c0d4b6579636861696e2054657374")
        var certificate: CK_OBJECT_HANDLE = 0
        // X.509 certificate objects: CKA_SUBJECT must be given at creation; issuer and serial come from the DER.
        XCTAssertRV(withTemplate(base) { p11.C_CreateObject!(session, $0, $1, &certificate) }, CKR_TEMPLATE_INCOMPLETE)
        base.append((UInt(CKA_SUBJECT), name))
        XCTAssertRV(withTemplate(base) { p11.C_CreateObject!(session, $0, $1, &certificate) }, CKR_OK)
        XCTAssertEqual(value(session, certificate, UInt(CKA_SUBJECT)).1, name)
        XCTAssertEqual(value(session, certificate, UInt(CKA_ISSUER)).1, name)
        XCTAssertEqual(value(session, certificate, UInt(CKA_SERIAL_NUMBER)).1, [0x02, 0x02, 0x12, 0x34])
        XCTAssertEqual(value(session, certificate, UInt(CKA_ID)).1, hex("92b4d707a0d234f073091439f8f6e1f9895e5e1d"), "SHA-1 of 04‖X‖Y")
        XCTAssertEqual(value(session, certificate, UInt(CKA_PRIVATE)).1, [0], "certificates are public by default")
        XCTAssertEqual(value(session, certificate, UInt(CKA_CHECK_VALUE)).1?.count, 3)
        XCTAssertEqual(find(session, [(UInt(CKA_SERIAL_NUMBER), [0x02, 0x02, 0x12, 0x34])]), [certificate])
        var other: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate(base + [(UInt(CKA_CHECK_VALUE), [1, 2, 3])]) { p11.C_CreateObject!(session, $0, $1, &other) }, CKR_ATTRIBUTE_VALUE_INVALID)
        XCTAssertRV(withTemplate(base + [(UInt(CKA_TRUSTED), [1])]) { p11.C_CreateObject!(session, $0, $1, &other) }, CKR_ATTRIBUTE_READ_ONLY,
                    "only the SO marks certificates trusted")
        XCTAssertRV(withTemplate([(UInt(CKA_VALUE), [1])]) { p11.C_SetAttributeValue!(session, certificate, $0, $1) }, CKR_ATTRIBUTE_READ_ONLY)
        // Java's SunPKCS11 writes the serial's bare INTEGER content: accepted, stored as DER.
        var bare: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate(base + [(UInt(CKA_SERIAL_NUMBER), [0x12, 0x34])]) { p11.C_CreateObject!(session, $0, $1, &bare) }, CKR_OK)
        XCTAssertEqual(value(session, bare, UInt(CKA_SERIAL_NUMBER)).1, [0x02, 0x02, 0x12, 0x34])
        XCTAssertRV(withTemplate(base + [(UInt(CKA_SERIAL_NUMBER), [0x12, 0x35])]) { p11.C_CreateObject!(session, $0, $1, &other) }, CKR_ATTRIBUTE_VALUE_INVALID,
                    "a serial that is not the certificate's")
    }
}

extension CipherAndTransportTests {
    func test_wrap_template_is_stored_returned_and_enforced() {
        let session = openSession(makeToken(), readWrite: true)
        XCTAssertRV(login(session), CKR_OK)
        // A wrapping key whose CKA_WRAP_TEMPLATE admits only keys labelled "ok".
        var okLabel = Array("ok".utf8)
        var kek: CK_OBJECT_HANDLE = 0
        let createResult = okLabel.withUnsafeMutableBytes { labelBytes -> CK_RV in
            var inner = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_LABEL), pValue: labelBytes.baseAddress, ulValueLen: 2)]
            return inner.withUnsafeMutableBytes { innerBytes in
                var value = [UInt8](repeating: 0x11, count: 16)
                return value.withUnsafeMutableBytes { valueBytes in
                    var klass = CK_OBJECT_CLASS(CKO_SECRET_KEY), type = CK_KEY_TYPE(CKK_AES), yes = CK_BBOOL(CK_TRUE)
                    return withUnsafeMutableBytes(of: &klass) { classBytes in
                        withUnsafeMutableBytes(of: &type) { typeBytes in
                            var template = [
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_CLASS), pValue: classBytes.baseAddress, ulValueLen: CK_ULONG(classBytes.count)),
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_KEY_TYPE), pValue: typeBytes.baseAddress, ulValueLen: CK_ULONG(typeBytes.count)),
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_VALUE), pValue: valueBytes.baseAddress, ulValueLen: 16),
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_WRAP_TEMPLATE), pValue: innerBytes.baseAddress, ulValueLen: CK_ULONG(innerBytes.count)),
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_WRAP), pValue: &yes, ulValueLen: 1),
                            ]
                            return p11.C_CreateObject!(session, &template, 5, &kek)
                        }
                    }
                }
            }
        }
        XCTAssertRV(createResult, CKR_OK)
        // Call-twice, one level down: the count, then the nested length, then the bytes.
        var outer = CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_WRAP_TEMPLATE), pValue: nil, ulValueLen: 0)
        XCTAssertRV(p11.C_GetAttributeValue!(session, kek, &outer, 1), CKR_OK)
        XCTAssertEqual(outer.ulValueLen, CK_ULONG(MemoryLayout<CK_ATTRIBUTE>.stride))
        var nested = [CK_ATTRIBUTE(type: 0, pValue: nil, ulValueLen: 0)]
        var label = [UInt8](repeating: 0, count: 8)
        nested.withUnsafeMutableBytes { nestedBytes in
            outer.pValue = nestedBytes.baseAddress
            XCTAssertRV(p11.C_GetAttributeValue!(session, kek, &outer, 1), CKR_OK)
            let entry = nestedBytes.load(as: CK_ATTRIBUTE.self)
            XCTAssertEqual(entry.type, CK_ATTRIBUTE_TYPE(CKA_LABEL))
            XCTAssertEqual(entry.ulValueLen, 2)
            label.withUnsafeMutableBytes { labelBytes in
                nestedBytes.storeBytes(of: CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_LABEL), pValue: labelBytes.baseAddress, ulValueLen: 8), as: CK_ATTRIBUTE.self)
                XCTAssertRV(p11.C_GetAttributeValue!(session, kek, &outer, 1), CKR_OK)
            }
        }
        XCTAssertEqual(Array(label.prefix(2)), Array("ok".utf8))
        // Only a key matching the template may be wrapped with it.
        var handle: CK_OBJECT_HANDLE = 0
        func makeTarget(_ name: String) -> CK_OBJECT_HANDLE {
            let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_AES))),
                                               (UInt(CKA_VALUE), [UInt8](repeating: 5, count: 16)), (UInt(CKA_EXTRACTABLE), [1]), (UInt(CKA_SENSITIVE), [0]),
                                               (UInt(CKA_LABEL), Array(name.utf8))]
            XCTAssertRV(withTemplate(template) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_OK)
            return handle
        }
        let allowed = makeTarget("ok"), refused = makeTarget("other")
        var length: CK_ULONG = 0
        var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(UInt(CKM_AES_KEY_WRAP)), pParameter: nil, ulParameterLen: 0)
        XCTAssertRV(p11.C_WrapKey!(session, &mechanism, kek, allowed, nil, &length), CKR_OK)
        XCTAssertRV(p11.C_WrapKey!(session, &mechanism, kek, refused, nil, &length), CKR_KEY_NOT_WRAPPABLE)
    }
}
