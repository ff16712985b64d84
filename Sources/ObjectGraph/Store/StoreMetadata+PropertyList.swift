import Foundation

/// Reads and writes store metadata as the binary property list Core Data keeps
/// in `Z_METADATA.Z_PLIST`.
package enum StoreMetadataCoding {
    /// The metadata in a property list.
    ///
    /// - Throws: ``PersistentStoreError`` (``PersistentStoreError/Code/notAStore``)
    ///   naming `url` when the data is missing or not a dictionary property
    ///   list. Core Data always writes one, and so does this store: damaged
    ///   metadata must not open as empty metadata (it would lose the model's
    ///   version hashes and every key the app keeps there).
    package static func decode(_ data: Data?, of url: URL?) throws -> StoreMetadata {
        guard let data, !data.isEmpty else {
            throw PersistentStoreError(.notAStore, url: url, message: "the store's metadata (Z_METADATA.Z_PLIST) is missing or damaged")
        }
        let plist: Any
        do {
            plist = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
        } catch {
            throw PersistentStoreError(.notAStore, url: url, message: "the store's metadata (Z_METADATA.Z_PLIST) is damaged: it is not a property list", underlying: error)
        }
        guard let dictionary = plist as? [String: Any] else {
            throw PersistentStoreError(.notAStore, url: url, message: "the store's metadata (Z_METADATA.Z_PLIST) is damaged: it is not a dictionary")
        }
        return dictionary.compactMapValues(sendable)
    }

    /// The metadata as a binary property list; values that are not property-list types are left out.
    package static func encode(_ metadata: StoreMetadata) throws -> Data {
        let plist = metadata.compactMapValues(propertyListValue)
        return try PropertyListSerialization.data(fromPropertyList: plist, format: .binary, options: 0)
    }

    private static func sendable(_ value: Any) -> (any Sendable)? {
        switch value {
        case let v as String: return v
        case let v as Bool: return v
        case let v as Int: return v
        case let v as Int64: return v
        case let v as Double: return v
        case let v as Data: return v
        case let v as Date: return v
        case let v as NSNumber: return v.intValue as Int
        case let v as [Any]: return v.compactMap(sendable)
        case let v as [String: Any]: return v.compactMapValues(sendable)
        default: return nil
        }
    }

    private static func propertyListValue(_ value: any Sendable) -> Any? {
        switch value {
        case let v as String: return v
        case let v as Bool: return v
        case let v as Int: return v
        case let v as Int64: return Int(v)
        case let v as Double: return v
        case let v as Data: return v
        case let v as Date: return v
        case let v as [any Sendable]: return v.compactMap(propertyListValue)
        case let v as [String: any Sendable]: return v.compactMapValues(propertyListValue)
        case let v as [String: Data]: return v
        case let v as [String]: return v
        default: return nil
        }
    }
}
