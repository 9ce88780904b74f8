internal import COpenSSL
import Glibc

/// The libcrypto functions of PKCS#12 (pkcs12.h) and providers (provider.h), which the COpenSSL
/// shim does not include. They are looked up once in the libcrypto this module is linked to and
/// called through C function pointers with the prototypes of OpenSSL 3.0's headers. With those
/// two headers added to Sources/COpenSSL/shim.h, each member becomes a direct call.
struct PKCS12Functions {
    /// PKCS12 *d2i_PKCS12(PKCS12 **a, const unsigned char **in, long len)
    typealias Decode = @convention(c) (UnsafeMutablePointer<OpaquePointer?>?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, Int) -> OpaquePointer?
    let decode: Decode
    /// int i2d_PKCS12(const PKCS12 *a, unsigned char **out)
    typealias Encode = @convention(c) (OpaquePointer?, UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32
    let encode: Encode
    /// void PKCS12_free(PKCS12 *a)
    typealias Free = @convention(c) (OpaquePointer?) -> Void
    let free: Free
    /// int PKCS12_mac_present(const PKCS12 *p12)
    typealias MacPresent = @convention(c) (OpaquePointer?) -> Int32
    let macPresent: MacPresent
    /// void PKCS12_get0_mac(const ASN1_OCTET_STRING **pmac, const X509_ALGOR **pmacalg,
    ///                      const ASN1_OCTET_STRING **psalt, const ASN1_INTEGER **piter, const PKCS12 *p12)
    typealias MacParameters = @convention(c) (UnsafeMutablePointer<OpaquePointer?>?, UnsafeMutablePointer<OpaquePointer?>?,
                                        UnsafeMutablePointer<OpaquePointer?>?, UnsafeMutablePointer<OpaquePointer?>?, OpaquePointer?) -> Void
    let macParameters: MacParameters
    /// int PKCS12_verify_mac(PKCS12 *p12, const char *pass, int passlen)
    typealias VerifyMAC = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32) -> Int32
    let verifyMAC: VerifyMAC
    /// int PKCS12_parse(PKCS12 *p12, const char *pass, EVP_PKEY **pkey, X509 **cert, STACK_OF(X509) **ca)
    typealias Parse = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafeMutablePointer<OpaquePointer?>?, UnsafeMutablePointer<OpaquePointer?>?,
                               UnsafeMutablePointer<OpaquePointer?>?) -> Int32
    let parse: Parse
    /// PKCS12 *PKCS12_create(const char *pass, const char *name, EVP_PKEY *pkey, X509 *cert, STACK_OF(X509) *ca,
    ///                       int nid_key, int nid_cert, int iter, int mac_iter, int keytype)
    typealias Create = @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, OpaquePointer?, OpaquePointer?, OpaquePointer?,
                                Int32, Int32, Int32, Int32, Int32) -> OpaquePointer?
    let create: Create
    /// int PKCS12_set_mac(PKCS12 *p12, const char *pass, int passlen, unsigned char *salt, int saltlen, int iter, const EVP_MD *md_type)
    typealias SetMAC = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<UInt8>?, Int32, Int32, OpaquePointer?) -> Int32
    let setMAC: SetMAC
    /// OSSL_PROVIDER *OSSL_PROVIDER_try_load(OSSL_LIB_CTX *libctx, const char *name, int retain_fallbacks)
    typealias TryLoadProvider = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32) -> OpaquePointer?
    let tryLoadProvider: TryLoadProvider

    /// int OSSL_PROVIDER_unload(OSSL_PROVIDER *prov)
    typealias UnloadProvider = @convention(c) (OpaquePointer?) -> Int32
    let unloadProvider: UnloadProvider

    /// The functions, or nil if this libcrypto lacks one of them.
    static let shared: PKCS12Functions? = PKCS12Functions()

    private init?() {
        // The library already loaded (RTLD_NOLOAD); else the global scope, as a program linking libcrypto has it.
        let handle = dlopen("libcrypto.so.\(OPENSSL_VERSION_MAJOR)", RTLD_LAZY | RTLD_NOLOAD)
        func symbol<T>(_ name: String, _ type: T.Type) -> T? {
            guard let address = dlsym(handle, name) else { return nil }
            return unsafeBitCast(address, to: type)
        }
        guard let decode = symbol("d2i_PKCS12", Decode.self), let encode = symbol("i2d_PKCS12", Encode.self),
              let free = symbol("PKCS12_free", Free.self), let macPresent = symbol("PKCS12_mac_present", MacPresent.self),
              let macParameters = symbol("PKCS12_get0_mac", MacParameters.self),
              let verifyMAC = symbol("PKCS12_verify_mac", VerifyMAC.self), let parse = symbol("PKCS12_parse", Parse.self),
              let create = symbol("PKCS12_create", Create.self), let setMAC = symbol("PKCS12_set_mac", SetMAC.self),
              let tryLoadProvider = symbol("OSSL_PROVIDER_try_load", TryLoadProvider.self),
              let unloadProvider = symbol("OSSL_PROVIDER_unload", UnloadProvider.self) else { return nil }
        self.decode = decode
        self.encode = encode
        self.free = free
        self.macPresent = macPresent
        self.macParameters = macParameters
        self.verifyMAC = verifyMAC
        self.parse = parse
        self.create = create
        self.setMAC = setMAC
        self.tryLoadProvider = tryLoadProvider
        self.unloadProvider = unloadProvider
    }
}
