import KeychainCrypto

/// How two versions of one item settle (Docs/sync.md, "Merging"): a total order, the same on every
/// device — the later modification wins, then the higher writer id, then the higher version, then
/// a delete. Settling is taking the greater, so devices that have seen the same versions agree,
/// whatever order they saw them in.
public enum SyncMerge {
    public static func wins(_ a: SyncItemState, over b: SyncItemState) -> Bool {
        if a.modified != b.modified { return a.modified > b.modified }
        if a.writer != b.writer { return a.writer.lexicographicallyPrecedes(b.writer) == false }
        if a.version != b.version { return a.version > b.version }
        return a.deleted && !b.deleted
    }

    /// The state that stays of `a` and `b` (of one item).
    public static func settle(_ a: SyncItemState, _ b: SyncItemState) -> SyncItemState {
        wins(b, over: a) ? b : a
    }
}

/// The checks of a fetched remote before anything is applied (Docs/sync.md, "Manifest"):
/// no device's counter went back, no listed file is missing or older than listed, no file is
/// there that no manifest lists.
public enum RemoteCheck {
    public struct Result: Sendable {
        /// The newest entry any manifest lists, by file name.
        public let listed: [String: SyncManifest.Entry]
        /// The highest counter seen per device (hex), to remember after the sync.
        public let counters: [String: UInt64]
    }

    /// `manifests`: every manifest of the remote, opened (signatures checked). `remembered`: the
    /// highest counter this device saw from each device (hex id), including devices whose
    /// manifest must still be there. `files`: every item file of the remote by name.
    /// `digests` holds the files' SHA-256 digests where the caller has them already.
    public static func check(manifests: [SyncManifest], remembered: [String: UInt64], files: [String: [UInt8]],
                             digests known: [String: [UInt8]] = [:]) throws(SyncError) -> Result {
        var counters = remembered
        var present = Set<String>()
        for manifest in manifests {
            let device = Hex.string(manifest.device)
            present.insert(device)
            if let seen = remembered[device], manifest.counter < seen {
                throw SyncError(.rolledBack, "manifests/\(device) has counter \(manifest.counter), this device saw \(seen) before: the remote was rolled back")
            }
            counters[device] = max(counters[device] ?? 0, manifest.counter)
        }
        for device in remembered.keys.sorted() where !present.contains(device) {
            throw SyncError(.withheld, "manifests/\(device) is missing, this device saw it before: the remote withholds it")
        }
        // The newest version of each file any manifest lists, and every digest listed for it (two
        // devices that settled one conflict each list the winner, sealed by each of them).
        var listed: [String: SyncManifest.Entry] = [:]
        var digests: [String: [[UInt8]]] = [:]
        var listedBy: [String: String] = [:]
        for manifest in manifests {
            for entry in manifest.entries {
                let newest = listed[entry.name]?.version ?? 0
                if listed[entry.name] == nil || entry.version > newest {
                    listed[entry.name] = entry
                    digests[entry.name] = [entry.digest]
                    listedBy[entry.name] = Hex.string(manifest.device)
                } else if entry.version == newest {
                    digests[entry.name, default: []].append(entry.digest)
                }
            }
        }
        for name in listed.keys.sorted() {
            guard let entry = listed[name], let by = listedBy[name] else { continue }
            guard let file = files[name] else {
                throw SyncError(.withheld, "items/\(name) is listed by manifests/\(by) (version \(entry.version)) but the remote does not have it")
            }
            let digest: [UInt8]
            if let given = known[name] { digest = given } else { digest = try SyncManifest.digest(of: file) }
            guard !(digests[name] ?? []).contains(digest) else { continue }
            if let header = try? SyncItemFile.header(file, name: name), header.version < entry.version {
                throw SyncError(.replayed, "items/\(name) holds version \(header.version) of its item, manifests/\(by) lists version \(entry.version) (an old file put back)")
            }
            throw SyncError(.tampered, "items/\(name) is not the file manifests/\(by) lists")
        }
        for name in files.keys.sorted() where listed[name] == nil {
            throw SyncError(.tampered, "items/\(name) is listed by no device's manifest")
        }
        return Result(listed: listed, counters: counters)
    }
}
