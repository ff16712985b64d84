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
    public var valueTransformerName: String? { didSet { checkMutable() } }
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

    package func regex() throws -> NSRegularExpression? {
        guard let regularExpression else { return nil }
        if let compiledExpression { return compiledExpression }
        let compiled = try NSRegularExpression(pattern: regularExpression)
        compiledExpression = compiled
        return compiled
    }
}
