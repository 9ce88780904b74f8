import Glibc
@testable import KeychainCore
import KeychainStore
import KeychainCrypto
import XCTest
@testable import KeychainSync

/// What the sync tests share: a temporary folder with a bare repository as the circle's remote
/// (file://), and devices as users meet them, in one process — each a keychain with its own
/// master and device key and its own git work tree.
class SyncTestCase: XCTestCase {
    var root = ""
    let kdf = ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)
    let soPIN = Array("so-secret".utf8), userPIN = Array("1234".utf8)
    var remote: String { "file://" + root + "/remote.git" }

    struct Device {
        let keychain: Keychain
        let master: MasterKey
        let engine: SyncEngine
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        var template = Array("/tmp/kc-sync-test.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let base = buffer.baseAddress, mkdtemp(base) != nil else { return nil }
            return String(cString: base)
        }
        root = try XCTUnwrap(made)
        XCTAssertTrue(try Subprocess.run(["git", "init", "-q", "--bare", "-b", "main", root + "/remote.git"]).succeeded)
    }

    override func tearDownWithError() throws {
        _ = try Subprocess.run(["rm", "-rf", root])
        try super.tearDownWithError()
    }

    func device(_ name: String) throws -> Device {
        let keychain = try soPIN.withUnsafeBytes { so in
            try userPIN.withUnsafeBytes {
                try Keychain.create(at: root + "/" + name + ".keychain", slotID: 1, label: "login", soPIN: so, userPIN: $0, kdf: kdf,
                                    deviceKey: DeviceKeyFile(path: root + "/\(name)-state/device-key"))
            }
        }
        let master = try userPIN.withUnsafeBytes { try keychain.unlock(.user, pin: $0) }
        return Device(keychain: keychain, master: master, engine: SyncEngine(keychain: keychain, master: master, workTree: root + "/\(name)-sync"))
    }

    /// A generic password for example.com; returns its uid.
    @discardableResult
    func addPassword(_ device: Device, account: String, secret: String, sync: Bool = true) throws -> [UInt8] {
        let id = try UniqueID.random()
        let template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.token, [1]), (.isPrivate, [1]),
                                  (.itemClass, AttributeValue.ulong(ItemClass.genericPassword.rawValue)), (.label, Array(account.utf8)),
                                  (.account, Array(account.utf8)), (.application, Array("example.com".utf8)), (.value, Array(secret.utf8)),
                                  (.synchronizable, AttributeValue.bool(sync))]
        _ = try device.keychain.add(try ObjectTemplate.create(template, uniqueID: id.text, policy: .compatible), uid: id.bytes, master: device.master)
        return id.bytes
    }

    /// Account → secret of every synchronizable item.
    func secrets(_ device: Device) throws -> [String: String] {
        var result: [String: String] = [:]
        for item in try device.keychain.synchronizableItems(master: device.master) {
            let object = ObjectAttributes(recordAttributes: try item.record.withUnsafeBytes { try AttributeRecord.decode($0) })
            result[String(decoding: object[.account] ?? [], as: UTF8.self)] = String(decoding: object[.value] ?? [], as: UTF8.self)
        }
        return result
    }
}
