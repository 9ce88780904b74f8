import CPKCS11
import KeychainCore
import KeychainCrypto

/// A slot: a keychain file, or the one empty slot where C_InitToken creates a keychain.
final class Slot {
    let id: CK_SLOT_ID
    let path: String?
    var token: Token?

    init(id: CK_SLOT_ID, path: String?, token: Token?) {
        self.id = id
        self.path = path
        self.token = token
    }
}

/// The slots of this process, with IDs that stay with their keychain (DESIGN §3 Slots).
struct SlotTable {
    private var slots = HandleMap<Slot>()
    private(set) var emptySlotID: CK_SLOT_ID = 1
    /// Slots that appeared or went away since C_WaitForSlotEvent last reported.
    var events: [CK_SLOT_ID] = []

    subscript(_ id: CK_SLOT_ID) -> Slot? {
        if id == emptySlotID, slots[id] == nil { return Slot(id: id, path: nil, token: nil) }
        return slots[id]
    }

    /// Keychain slots in ID order, then the empty slot.
    var all: [Slot] {
        slots.keys.sorted().compactMap { slots[$0] } + [Slot(id: emptySlotID, path: nil, token: nil)]
    }

    /// Adds a keychain just created in the empty slot, and moves the empty slot on.
    mutating func adopt(_ keychain: Keychain, slotID: CK_SLOT_ID, directory: KeychainDirectory) {
        slots[slotID] = Slot(id: slotID, path: keychain.path, token: Token(slotID: slotID, keychain: keychain))
        updateEmptySlot(directory: directory)
    }

    /// Re-reads the keychain folder: new files become slots (keeping the ID stored in the file),
    /// vanished files lose their slot unless a session is still open on it.
    mutating func refresh(directory: KeychainDirectory, keepingSlotsWith busy: Set<CK_SLOT_ID>) {
        let files = directory.keychainFiles()
        var byPath: [String: Slot] = [:]
        for slot in slots.values { if let path = slot.path { byPath[path] = slot } }
        var refreshed = HandleMap<Slot>()
        var opened: [(path: String, keychain: Keychain, stored: CK_SLOT_ID?)] = []
        for path in files {
            if let slot = byPath[path] {
                refreshed[slot.id] = slot
                continue
            }
            do {
                let keychain = try Keychain.open(at: path)
                opened.append((path, keychain, (try? keychain.info(countingObjects: false).slotID).flatMap { $0 }.map { CK_SLOT_ID($0) }))
            } catch {
                logger.warning("skipping \(path): \(error.reason)")
            }
        }
        // Of two files claiming one ID (a keychain and a copy of it), the file the ID was given
        // to keeps it, whatever the names' order; the other gets an ID of its own.
        let holders = opened.filter { $0.keychain.holdsSlotID() }.map(\.path)
        opened = opened.filter { holders.contains($0.path) } + opened.filter { !holders.contains($0.path) }
        for (path, keychain, stored) in opened {
            let id: CK_SLOT_ID?
            if let stored, stored < CK_SLOT_ID(KeychainDirectory.maximumSlotID), refreshed[stored] == nil,
               slots[stored].map({ $0.path == path }) ?? true {
                id = stored
            } else {
                // No ID yet, or a copy of another keychain's file: give it an ID of its own.
                id = try? directory.withNextSlotID { next in (next, next + 1) }
                if let id { try? keychain.assignSlotID(UInt(id)) }
            }
            guard let id else { continue }
            refreshed[id] = Slot(id: id, path: path, token: Token(slotID: id, keychain: keychain))
            events.append(id)
        }
        for (id, slot) in slots where refreshed[id] == nil {
            if busy.contains(id) { refreshed[id] = slot } else { events.append(id) }
        }
        slots = refreshed
        updateEmptySlot(directory: directory)
    }

    private mutating func updateEmptySlot(directory: KeychainDirectory) {
        let floor = (slots.keys.max() ?? 0) + 1
        let previous = emptySlotID
        emptySlotID = (try? directory.emptySlotID(above: UInt(floor))).map { CK_SLOT_ID($0) } ?? max(floor, emptySlotID)
        if previous != emptySlotID, slots[previous] == nil { events.append(emptySlotID) }
    }
}
