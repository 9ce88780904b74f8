import KeychainCore
import KeychainCrypto

// Looking items up in a keychain: one by its unique ID, or those whose attributes match.
extension SecretService {
    /// The item's row and object; NoSuchObject when it is gone, not a password, or one whose
    /// access control asks a credential at each use (user presence, an application password):
    /// the Secret Service has no way to ask it, so such items are not served over D-Bus.
    /// Damage found on the way is reported, not hidden as a missing item.
    func item(_ collection: KeychainCollection, uniqueID: String, keychain: Keychain, master: MasterKey?) throws(Failure) -> (row: Int64, object: ObjectAttributes) {
        do {
            let rows = try keychain.find([(.uniqueID, Array(uniqueID.utf8)), (.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue))], master: master)
            guard let row = rows.first else { throw Failure.noSuchObject }
            var object = try keychain.object(id: row.id, master: master)
            guard Self.isServed(object) else {
                object.wipeValues()
                throw Failure.noSuchObject
            }
            return (row.id, object)
        } catch let failure as Failure {
            throw failure
        } catch let error as KeychainError where error.code == .recordCorrupted {
            throw .failed("keychain '\(printable(collection.label))' is damaged or was altered: \(error.reason) (keychainctl verify)")
        } catch {
            throw .noSuchObject
        }
    }

    /// Items whose secret needs nothing beyond the unlocked keychain.
    static func isServed(_ object: ObjectAttributes) -> Bool { object.requiredCredential == .none }

    /// Items of `collection` showing every pair of `wanted` (those served over D-Bus).
    func search(_ collection: KeychainCollection, _ wanted: [String: String], keychain: Keychain, master: MasterKey?) throws(Failure) -> [String] {
        var seen: Set<Int64> = []
        var paths: [String] = []
        do {
            for template in SecretServiceItems.searchTemplates(wanted) {
                for row in try keychain.find(template, master: master) where !seen.contains(row.id) {
                    seen.insert(row.id)
                    guard var object = try? keychain.object(id: row.id, master: master) else { continue }
                    defer { object.wipeValues() }
                    guard Self.isServed(object), SecretServiceItems.matches(object, wanted), let path = itemPath(collection, object) else { continue }
                    paths.append(path)
                }
            }
        } catch {
            throw .failed("keychain '\(printable(collection.label))' could not be searched: \(error.reason) (keychainctl verify)")
        }
        return paths
    }

    func contentType(_ object: ObjectAttributes) -> String {
        guard let bytes = object[.contentType], !bytes.isEmpty else { return "text/plain" }
        return String(decoding: bytes, as: UTF8.self)
    }
}
