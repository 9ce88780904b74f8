import Foundation

/// A SecItem failure as a Swift error: the OSStatus and Apple's message for it.
public struct KeychainServicesError: Error, Equatable, CustomStringConvertible {
    public let status: OSStatus

    public init(_ status: OSStatus) { self.status = status }

    public var description: String { (SecCopyErrorMessageString(status, nil) as String?) ?? "OSStatus \(status)" }
}

/// A thin typed layer over the dictionaries: a generic password identified by service and
/// account, as `SecItem…` stores it (kSecClassGenericPassword).
public struct GenericPassword: Sendable, Equatable {
    public let service: String
    public let account: String
    /// The keychain to use (its label); nil means the configured default.
    public var keychain: String?

    public init(service: String, account: String, keychain: String? = nil) {
        self.service = service
        self.account = account
        self.keychain = keychain
    }

    private var query: [String: Any] {
        var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                    kSecAttrAccount as String: account]
        if let keychain { query[kSecUseKeychainLabel as String] = keychain }
        return query
    }

    /// Stores `secret`, replacing the one stored before.
    public func save(_ secret: Data, label: String? = nil) throws {
        var add = query
        add[kSecValueData as String] = secret
        if let label { add[kSecAttrLabel as String] = label }
        var status = SecItemAdd(add, nil)
        if status == errSecDuplicateItem {
            var changes: [String: Any] = [kSecValueData as String: secret]
            if let label { changes[kSecAttrLabel as String] = label }
            status = SecItemUpdate(query, changes)
        }
        guard status == errSecSuccess else { throw KeychainServicesError(status) }
    }

    /// The stored secret, or nil when there is none.
    public func read() throws -> Data? { try StoredSecret.read(query) }

    /// Removes the password; removing one that is not there is not an error.
    public func delete() throws { try StoredSecret.delete(query) }
}

/// An internet password identified by server, account and optional protocol, port and path.
public struct InternetPassword: Sendable, Equatable {
    public let server: String
    public let account: String
    /// A four-character protocol code such as "http" or "htps" (kSecAttrProtocol).
    public var protocolCode: String?
    public var port: Int?
    public var path: String?

    public init(server: String, account: String, protocolCode: String? = nil, port: Int? = nil, path: String? = nil) {
        self.server = server
        self.account = account
        self.protocolCode = protocolCode
        self.port = port
        self.path = path
    }

    private var query: [String: Any] {
        var query: [String: Any] = [kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: server,
                                    kSecAttrAccount as String: account]
        if let protocolCode { query[kSecAttrProtocol as String] = protocolCode }
        if let port { query[kSecAttrPort as String] = port }
        if let path { query[kSecAttrPath as String] = path }
        return query
    }

    public func save(_ secret: Data) throws {
        var add = query
        add[kSecValueData as String] = secret
        var status = SecItemAdd(add, nil)
        if status == errSecDuplicateItem { status = SecItemUpdate(query, [kSecValueData as String: secret]) }
        guard status == errSecSuccess else { throw KeychainServicesError(status) }
    }

    /// The stored secret, or nil when there is none.
    public func read() throws -> Data? { try StoredSecret.read(query) }

    /// Removes the password; removing one that is not there is not an error.
    public func delete() throws { try StoredSecret.delete(query) }
}

/// Reading and removing the secret of a typed password item by its identifying query.
private enum StoredSecret {
    static func read(_ query: [String: Any]) throws -> Data? {
        var read = query
        read[kSecReturnData as String] = true
        var result: CFTypeRef?
        let status = SecItemCopyMatching(read, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess else { throw KeychainServicesError(status) }
        return result as? Data
    }

    static func delete(_ query: [String: Any]) throws {
        let status = SecItemDelete(query)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw KeychainServicesError(status) }
    }
}
