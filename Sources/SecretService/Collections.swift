import Glibc
import KeychainCore
import KeychainCrypto

// The collections: which there are, the default one, and the keychains kept open for them.

/// A collection as the interfaces see it: a keychain, or the `session` collection held in this
/// daemon's memory (SessionCollection). The switches of CollectionItems.swift answer for each.
enum SecretCollection: Equatable {
    case keychain(KeychainCollection)
    case session

    /// Its identity: a keychain's token label (never its display name), or "session".
    var label: String {
        switch self {
        case .keychain(let keychain): return keychain.label
        case .session: return SessionCollection.name
        }
    }

    /// A keychain's path element comes from its token label; a keychain labelled "session" gets
    /// its first letter escaped (`_73ession`), which no other label gives, so that the session
    /// collection keeps the path libsecret and gnome-keyring use.
    var path: String {
        switch self {
        case .keychain(let keychain):
            let element = ObjectPath.element(keychain.label)
            return ObjectPath.collectionPrefix + (element == SessionCollection.name ? "_73ession" : element)
        case .session:
            return ObjectPath.collectionPrefix + SessionCollection.name
        }
    }

    /// The path of its item with this unique ID.
    func itemPath(_ uniqueID: String) -> String { path + "/" + uniqueID }
}

/// A keychain of the keychain folder, as a collection: its file and its token label.
struct KeychainCollection: Equatable {
    let file: String
    let label: String
}

/// What identifies the keychain folder's state: a listing made at one stamp holds while it stays.
struct FolderStamp: Equatable {
    let path: String
    let inode: UInt64
    let seconds: Int
    let nanoseconds: Int
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
    /// The collections: the keychains of the keychain folder that open, then the session
    /// collection. The cache of opened keychains (`opened`) keeps only these; while the folder
    /// and the configuration are unchanged (same inode and modification time: a file added,
    /// removed or renamed into place changes the folder's), the last listing is used as it is.
    func collections() -> [SecretCollection] {
        let directory = configuration().directory
        let folder = try? System.stat(directory)
        let stamp = folder.map { FolderStamp(path: directory, inode: UInt64($0.st_ino), seconds: Int($0.st_mtim.tv_sec), nanoseconds: Int($0.st_mtim.tv_nsec)) }
        if let stamp, let listed = listing, listed.stamp == stamp { return listed.collections }
        let files = KeychainDirectory(path: directory).keychainFiles()
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
        masters = masters.filter { kept[$0.key] != nil }
        lookupCache = lookupCache.filter { kept[$0.key] != nil }
        result.append(.session)
        // A listing whose folder changed while it was read is not kept (the next call reads again).
        if let stamp, let after = try? System.stat(directory), Int(after.st_mtim.tv_nsec) == stamp.nanoseconds, Int(after.st_mtim.tv_sec) == stamp.seconds {
            listing = (stamp, result)
        } else {
            listing = nil
        }
        return result
    }

    /// The configuration (Configuration.current: the environment, the configuration file, the
    /// folder's default-keychain file), read again when the last reading is 100 ms old: one D-Bus
    /// call looks up its object several times (sd-bus asks for each interface), and reading it
    /// each time was a sixth of a call's work. A change made meanwhile is seen 100 ms later.
    func configuration() -> Configuration {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let millis = Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
        if let kept = configurationRead, millis - kept.at < 100, millis >= kept.at { return kept.configuration }
        let fresh = Configuration.current()
        configurationRead = (millis, fresh)
        return fresh
    }

    /// The default collection, as keychainctl chooses the default keychain: the configured
    /// default, else "login", else the only one.
    func defaultCollection(_ all: [SecretCollection]) -> SecretCollection? {
        let all = all.filter { $0 != .session }
        if let wanted = configuration().defaultKeychain, let match = all.first(where: { $0.label == wanted }) { return match }
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
