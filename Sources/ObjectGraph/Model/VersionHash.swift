import Foundation

/// Version hashes: the bytes an entity's or a property's hash is computed
/// from, and the model-level values Core Data derives from the entity hashes.
///
/// The per-entity and per-property hashes are this implementation's own.
/// Apple does not document the byte encoding of its hashes, and none of the
/// encodings tried against the fixture stores (see
/// `VersionHashFixtureTests`) reproduced them, so no property kind is
/// verified against Apple's: an entity hash here never equals Core Data's for
/// the same entity, and compatibility never depends on it (a store written by
/// Core Data is checked by its tables, columns and indexes instead).
///
/// The model-level values are Core Data's, verified against every fixture
/// store that carries them: ``digest(of:)`` (`NSStoreModelVersionHashesDigest`)
/// and ``checksum(of:)`` (`NSStoreModelVersionChecksumKey`,
/// `NSManagedObjectModel.versionChecksum`).
package enum VersionHash {
    /// The version of this implementation's hash encoding, recorded in a
    /// store's metadata (``StoreMetadataKey/versionHashFormat``): a store
    /// whose hashes were computed another way is checked by its schema and
    /// never judged by a hash that could not match.
    package static let format = 2

    /// The length of every entity version hash: a SHA-256 digest.
    package static let byteCount = 32

    /// `NSStoreModelVersionHashesDigest`: base64 of SHA-512 over the entities
    /// sorted by name (byte-wise), each as UTF-8(name) followed by its hash.
    package static func digest(of hashes: [String: Data]) -> String {
        var bytes: [UInt8] = []
        for name in sortedNames(hashes) {
            bytes += Array(name.utf8)
            bytes += Array(hashes[name] ?? Data())
        }
        return Data(SHA512.hash(bytes)).base64EncodedString()
    }

    /// `NSStoreModelVersionChecksumKey` and Core Data's `versionChecksum`:
    /// base64 of SHA-256 over the entity hashes, in the entities' name order
    /// (byte-wise).
    package static func checksum(of hashes: [String: Data]) -> String {
        var bytes: [UInt8] = []
        for name in sortedNames(hashes) { bytes += Array(hashes[name] ?? Data()) }
        return Data(SHA256.hash(bytes)).base64EncodedString()
    }

    private static func sortedNames(_ hashes: [String: Data]) -> [String] {
        hashes.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// An unambiguous byte encoding of a list of fields: each field carries
    /// its kind and length, so no two different lists give the same bytes
    /// (a name that contains a separator cannot shift the fields after it).
    struct Encoder {
        private(set) var bytes: [UInt8] = []

        mutating func append(_ text: String) { appendField(kind: 0x53, Array(text.utf8)) }
        mutating func append(_ data: Data) { appendField(kind: 0x44, Array(data)) }
        mutating func append(_ flag: Bool) { appendField(kind: 0x42, [flag ? 1 : 0]) }
        mutating func append(_ number: Int) {
            appendField(kind: 0x49, (0..<8).map { UInt8(truncatingIfNeeded: Int64(number) >> (56 - 8 * $0)) })
        }

        /// The SHA-256 digest of the fields appended so far.
        var hash: Data { Data(SHA256.hash(bytes)) }

        private mutating func appendField(kind: UInt8, _ field: [UInt8]) {
            bytes.append(kind)
            let count = UInt32(field.count)
            bytes += (0..<4).map { UInt8(truncatingIfNeeded: count >> (24 - 8 * UInt32($0))) }
            bytes += field
        }
    }
}

extension ManagedObjectModel {
    /// The model's version checksum, as Core Data computes it from the entity
    /// version hashes (Core Data: `NSManagedObjectModel.versionChecksum`):
    /// base64 of SHA-256 over ``entityVersionHashesByName`` in name order.
    ///
    /// A store records it under `NSStoreModelVersionChecksumKey`; a staged
    /// migration can name a model version by it. Since the entity hashes are
    /// this implementation's own, so is the checksum of a model: it identifies
    /// a model version among this implementation's stores, not Apple's.
    public var versionChecksum: String {
        VersionHash.checksum(of: entityVersionHashesByName)
    }
}
