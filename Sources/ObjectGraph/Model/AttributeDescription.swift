import Foundation

/// An attribute of an entity (Core Data: `NSAttributeDescription`).
///
/// ```swift
/// let symbol = AttributeDescription(name: "symbol", type: .string, isOptional: false)
/// symbol.maximumLength = 8
/// let price = AttributeDescription(name: "price", type: .double, defaultValue: 0)
/// price.minimumValue = 0
/// ```
///
/// Validation rules are checked when a context saves; a value that breaks one
/// makes the save throw a ``ValidationError`` naming the object and the key.
public final class AttributeDescription: PropertyDescription, @unchecked Sendable {
    /// How values of this attribute are held and stored.
    public var type: AttributeType { didSet { checkMutable() } }
    /// The value a newly inserted object starts with.
    public var defaultValue: PropertyValue { didSet { checkMutable() } }

    /// The smallest value allowed (numbers and dates), checked on save.
    public var minimumValue: PropertyValue? { didSet { checkMutable() } }
    /// The largest value allowed (numbers and dates), checked on save.
    public var maximumValue: PropertyValue? { didSet { checkMutable() } }
    /// The shortest string (in characters) or data (in bytes) allowed, checked on save.
    public var minimumLength: Int? { didSet { checkMutable() } }
    /// The longest string (in characters) or data (in bytes) allowed, checked on save.
    public var maximumLength: Int? { didSet { checkMutable() } }
    /// A regular expression that string values must match as a whole, checked on save.
    public var regularExpression: String? { didSet { checkMutable(); compiledExpression = nil } }
    /// For a transformable attribute: the name of the value transformer in the source model.
    ///
    /// nil, empty, and the names of Core Data's keyed-archive transformers
    /// (`NSKeyedUnarchiveFromData`, `NSSecureUnarchiveFromData`,
    /// `NSSecureUnarchiveFromDataTransformer`, and the `…TransformerName`
    /// spellings Xcode writes) make ``ManagedObject/value(forKey:)`` hand back the
    /// unarchived Foundation value and ``ManagedObject/setValue(_:forKey:)``
    /// archive one (see ``archivesValues``). Any other name keeps the stored bytes
    /// as `Data`: there is no transformer registry here, and an app's transformer
    /// class does not exist on Linux.
    public var valueTransformerName: String? { didSet { checkMutable() } }
    /// Whether a SQLite store may keep a binary or transformable value in a file
    /// beside the store instead of in its column (Core Data:
    /// `allowsExternalBinaryDataStorage`, Xcode's "Allows External Storage").
    ///
    /// The column then holds a tagged blob: `0x01` and the bytes, or `0x02` and
    /// the name of a file in `.<store name>_SUPPORT/_EXTERNAL_DATA/`. Values larger
    /// than 100 KB (102 400 bytes) go to a file. Reading resolves the
    /// file; a missing one is an error, never empty data. Other store types
    /// ignore the flag, as Core Data does. Outside the version hash, as in Core Data.
    public var allowsExternalBinaryDataStorage: Bool = false { didSet { checkMutable() } }
    /// Whether an index is kept on the column (Core Data's "Indexed").
    public var isIndexed: Bool = false { didSet { checkMutable() } }
    /// Whether a store with persistent history keeps this attribute's last value
    /// in the history of the object's deletion (Core Data:
    /// `preservesValueInHistoryOnDeletion`, Xcode's "Preserve After Deletion"):
    /// a reader of the history learns which object went, by a key of its own
    /// (a UUID, a server ID), after the row is gone. Read back as
    /// ``PersistentHistoryChange/tombstone``. Outside the version hash, as in Core Data.
    public var preservesValueInHistoryOnDeletion: Bool = false { didSet { checkMutable() } }

    // Compiled lazily; the model is frozen by then, so the cache is written once per thread at worst.
    nonisolated(unsafe) var compiledExpression: NSRegularExpression?

    /// Creates an attribute.
    ///
    /// - Parameters:
    ///   - name: the key of the attribute.
    ///   - type: how its values are held and stored.
    ///   - isOptional: whether nil may be saved. The default is true, as in Core Data.
    ///   - defaultValue: what a new object starts with. The default is nil.
    public init(name: String, type: AttributeType, isOptional: Bool = true, defaultValue: PropertyValue = .null) {
        self.type = type
        self.defaultValue = defaultValue
        super.init(name: name, isOptional: isOptional)
    }

    /// Creates an attribute whose default is given as a Swift value (`0`, `"USD"`, `Date()`).
    public convenience init(name: String, type: AttributeType, isOptional: Bool = true, defaultValue: Any?) {
        self.init(name: name, type: type, isOptional: isOptional, defaultValue: .null)
        if let defaultValue, let value = try? PropertyValue(defaultValue, for: type, key: name) {
            self.defaultValue = value
        }
    }

    /// The property's fields and the attribute type (Core Data's code, 100…1800).
    override package var versionHashComponents: [String] {
        super.versionHashComponents + ["attribute", String(type.coreDataCode)]
    }

    /// The transformer names that mean Core Data's keyed archiving (besides nil and "").
    package static let keyedArchiveTransformerNames: Set<String> = [
        "NSKeyedUnarchiveFromData", "NSKeyedUnarchiveFromDataTransformerName",
        "NSSecureUnarchiveFromData", "NSSecureUnarchiveFromDataTransformer", "NSSecureUnarchiveFromDataTransformerName",
    ]

    /// Whether this is a transformable attribute whose transformer is one of Core
    /// Data's keyed-archive transformers (see ``valueTransformerName``).
    package var archivesValues: Bool {
        guard type == .transformable else { return false }
        guard let name = valueTransformerName, !name.isEmpty else { return true }
        return Self.keyedArchiveTransformerNames.contains(name)
    }

    /// Whether a SQLite store tags this attribute's column for external storage:
    /// the flag is set and the type holds bytes.
    package var storesExternalBinaryData: Bool {
        allowsExternalBinaryDataStorage && (type == .binaryData || type == .transformable)
    }

    package func regex() throws -> NSRegularExpression? {
        guard let regularExpression else { return nil }
        if let compiledExpression { return compiledExpression }
        let compiled = try NSRegularExpression(pattern: regularExpression)
        compiledExpression = compiled
        return compiled
    }
}
