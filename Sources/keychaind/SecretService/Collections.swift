import Glibc
import KeychainCore
import KeychainCrypto

// The keychains as collections: which there are, the default one, and opening one with its
// master key from the key source.
extension SecretService {
    /// A keychain as a collection.
    struct KeychainCollection: Equatable {
        let file: String
        let label: String
        var path: String { SecretService.collectionPrefix + SecretService.pathElement(label) }
    }

    /// The keychains of the keychain folder that open, as collections; the cache of opened
    /// keychains (`opened`) keeps only these.
    func collections() -> [KeychainCollection] {
        let files = KeychainDirectory(path: Configuration.current().directory).keychainFiles()
        var kept: [String: (device: UInt64, inode: UInt64, label: String, keychain: Keychain)] = [:]
        var result: [KeychainCollection] = []
        for file in files {
            guard let info = try? System.stat(file) else { continue }
            let device = UInt64(info.st_dev), inode = UInt64(info.st_ino)
            if let cached = opened[file], cached.device == device, cached.inode == inode {
                kept[file] = cached
            } else if let keychain = try? Keychain.open(at: file), let label = try? keychain.info(countingObjects: false).label {
                kept[file] = (device, inode, label, keychain)
            } else {
                continue
            }
            if let entry = kept[file] { result.append(KeychainCollection(file: file, label: entry.label)) }
        }
        opened = kept
        return result
    }

    private func keychain(_ collection: KeychainCollection) throws(Failure) -> Keychain {
        if let cached = opened[collection.file] { return cached.keychain }
        do { return try Keychain.open(at: collection.file) } catch { throw .failed("cannot open keychain '\(printable(collection.label))': \(error.reason)") }
    }

    /// The default keychain, as keychainctl chooses it: the configured default, else "login",
    /// else the only one.
    func defaultCollection(_ all: [KeychainCollection]) -> KeychainCollection? {
        if let wanted = Configuration.current().defaultKeychain, let match = all.first(where: { $0.label == wanted }) { return match }
        if let login = all.first(where: { $0.label == "login" }) { return login }
        return all.count == 1 ? all.first : nil
    }

    // MARK: keychains

    /// The open keychain and its master key (nil while locked).
    func open(_ collection: KeychainCollection) throws(Failure) -> (Keychain, MasterKey?) {
        let keychain = try keychain(collection)
        guard let key = keys.sessionKey(path: collection.file) else { return (keychain, nil) }
        return (keychain, try? keychain.masterKey(fromSession: key))
    }

    func unlocked(_ collection: KeychainCollection) throws(Failure) -> (Keychain, MasterKey) {
        let (keychain, master) = try open(collection)
        guard let master else { throw .isLocked("Keychain '\(collection.label)'") }
        return (keychain, master)
    }

    func isLocked(_ collection: KeychainCollection) -> Bool { !keys.isHeld(path: collection.file) }
}
