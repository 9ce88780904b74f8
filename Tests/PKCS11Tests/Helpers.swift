import KeychainCore
import KeychainCrypto

enum KeychainDirectoryForTests {
    static func create(directory: String, so: UnsafeRawBufferPointer) throws -> Keychain {
        try KeychainDirectory(path: directory).createKeychain(slotID: nil, label: "elsewhere", soPIN: so, userPIN: nil,
                                                              kdf: ScryptParameters(logN: 8, blockSize: 8, parallelism: 1))
    }
}
