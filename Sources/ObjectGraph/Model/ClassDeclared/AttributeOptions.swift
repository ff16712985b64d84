/// What a `@Managed` attribute declares beyond its Swift type, for a model
/// derived from its classes (``ManagedObjectModel/init(classes:)``).
///
/// SwiftData's words where it has them (`@Attribute(.unique)`,
/// `.externalStorage`, `.spotlight`, `.preserveValueOnDeletion`), Core Data's
/// otherwise:
///
/// ```swift
/// final class Company: ManagedObject {
///     @Managed(.unique) var symbol: String
///     @Managed([.indexed, .spotlight]) var name: String = ""
///     @Managed(.externalStorage) var logo: Data?
/// }
/// ```
///
/// An option set rather than a variadic list, so that nothing is allocated
/// when an object is made.
public struct AttributeOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8

    /// Creates options from their bits.
    @inlinable public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The attribute's values are unique among the entity's objects: a
    /// uniqueness constraint of this attribute alone
    /// (``EntityDescription/uniquenessConstraints``; SwiftData's `.unique`).
    public static let unique = AttributeOptions(rawValue: 1 << 0)
    /// The store keeps an index on the attribute (``AttributeDescription/isIndexed``).
    public static let indexed = AttributeOptions(rawValue: 1 << 1)
    /// Full-text search indexes the attribute
    /// (``PropertyDescription/isIndexedBySpotlight``, which the SQLite store's
    /// `MATCHES[search]` predicates use; SwiftData's `.spotlight`).
    public static let spotlight = AttributeOptions(rawValue: 1 << 2)
    /// A large binary or transformable value may live in a file beside the
    /// store (``AttributeDescription/allowsExternalBinaryDataStorage``;
    /// SwiftData's `.externalStorage`).
    public static let externalStorage = AttributeOptions(rawValue: 1 << 3)
    /// The attribute lives in memory only (``PropertyDescription/isTransient``;
    /// SwiftData's `@Transient`).
    public static let transient = AttributeOptions(rawValue: 1 << 4)
    /// Persistent history keeps the attribute's last value when the object is
    /// deleted (``AttributeDescription/preservesValueInHistoryOnDeletion``;
    /// SwiftData's `.preserveValueOnDeletion`).
    public static let preserveValueOnDeletion = AttributeOptions(rawValue: 1 << 5)
}
