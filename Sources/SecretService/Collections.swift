import Glibc
import KeychainCore
import KeychainCrypto

// The collections: which there are, the default one, and the keychains kept open for them.

/// A collection as the interfaces see it. Every collection is a keychain today; one held in
/// memory (gnome-keyring's `session` collection) would be a second case, answered by the
/// switches of CollectionItems.swift, where the interfaces reach items.
enum SecretCollection: Equatable {
    case keychain(KeychainCollection)

    var label: String {
        switch self {
        case .keychain(let keychain): return keychain.label
        }
    }

    var path: String { ObjectPath.collectionPrefix + ObjectPath.element(label) }

    /// The path of its item with this unique ID.
    func itemPath(_ uniqueID: String) -> String { path + "/" + uniqueID }
}

/// A keychain of the keychain folder, as a collection: its file and its token label.
struct KeychainCollection: Equatable {
    let file: String
    let label: String
}

/// A keychain kept open while its file is the same one (device and inode): a Keychain reads
/// SQLite at each call, so it sees every other process's writes, and opening one per D-Bus call
/// cost most of a call's time.
struct OpenedKeychain {
    let device: UInt64
    let inode: UInt64
    let label: String
    let keychain: Keychain
}

extension SecretServiceServer {
    /// The collections: the keychains of the keychain folder that open. The cache of opened
    /// keychains (`opened`) keeps only these.
    func collections() -> [SecretCollection] {
        let files = KeychainDirectory(path: Configuration.current().directory).keychainFiles()
        var kept: [String: OpenedKeychain] = [:]
        var result: [SecretCollection] = []
        for file in files {
            guard let info = try? System.stat(file) else { continue }
            let device = UInt64(info.st_dev), inode = UInt64(info.st_ino)
            if let cached = opened[file], cached.device == device, cached.inode == inode {
                kept[file] = cached
            } else if let keychain = try? Keychain.open(at: file), let label = try? keychain.info(countingObjects: false).label {
                kept[file] = OpenedKeychain(device: device, inode: inode, label: label, keychain: keychain)
            } else {
                continue
            }
            if let entry = kept[file] { result.append(.keychain(KeychainCollection(file: file, label: entry.label))) }
        }
        opened = kept
        return result
    }

    /// The default collection, as keychainctl chooses the default keychain: the configured
    /// default, else "login", else the only one.
    func defaultCollection(_ all: [SecretCollection]) -> SecretCollection? {
        if let wanted = Configuration.current().defaultKeychain, let match = all.first(where: { $0.label == wanted }) { return match }
        if let login = all.first(where: { $0.label == "login" }) { return login }
        return all.count == 1 ? all.first : nil
    }

    /// The keychain of `collection`, from the cache when it is there.
    func keychain(_ collection: KeychainCollection) throws(BusError) -> Keychain {
        if let cached = opened[collection.file] { return cached.keychain }
        do { return try Keychain.open(at: collection.file) } catch {
            throw .failed("cannot open keychain '\(printable(collection.label))': \(error.reason)")
        }
    }
}
