import Foundation

// The `@Managed` initializers that declare a model (``ManagedObjectModel/init(classes:)``).
//
// A property initializer runs for every object made, every fault a fetch
// makes included: each initializer here is inlined into it and costs one
// relaxed atomic load while no model is being derived. The options are
// constants or autoclosures, read only in the recorder's slow path.

extension Managed {
    /// Declares an attribute (or a relationship with an inferred inverse).
    ///
    /// - Parameters:
    ///   - options: ``AttributeOptions``: unique, indexed, spotlight, external storage, transient…
    ///   - originalName: the property's name in the previous model version,
    ///     for lightweight migration (``PropertyDescription/renamingIdentifier``).
    ///   - hashModifier: a version hash modifier (``PropertyDescription/versionHashModifier``).
    ///   - minimumValue: the smallest number or date saved (``AttributeDescription/minimumValue``).
    ///   - maximumValue: the largest number or date saved (``AttributeDescription/maximumValue``).
    ///   - minimumLength: the shortest string or data saved (``AttributeDescription/minimumLength``).
    ///   - maximumLength: the longest string or data saved (``AttributeDescription/maximumLength``).
    ///   - regularExpression: a pattern string values must match (``AttributeDescription/regularExpression``).
    ///   - userInfo: the property's user info (``PropertyDescription/userInfo``), as Xcode's
    ///     model editor writes it — for what other layers read from the model, such as
    ///     DataStackSync's merge policy: `@Managed(userInfo: .sync(.hubWins))`.
    @inlinable
    public init(_ options: AttributeOptions = [], originalName: String? = nil, hashModifier: String? = nil,
                minimumValue: @autoclosure () -> (any ManagedAttributeValue)? = nil,
                maximumValue: @autoclosure () -> (any ManagedAttributeValue)? = nil,
                minimumLength: Int? = nil, maximumLength: Int? = nil, regularExpression: String? = nil,
                userInfo: @autoclosure () -> [String: String] = [:]) {
        if ManagedDeclarationRecorder.isRecording {
            tag = ManagedDeclarationRecorder.recordAttribute(
                Value.self, options: options, originalName: originalName, hashModifier: hashModifier,
                minimumValue: minimumValue, maximumValue: maximumValue, minimumLength: minimumLength,
                maximumLength: maximumLength, regularExpression: regularExpression, userInfo: userInfo, initialValue: { nil })
        }
    }

    /// Declares an attribute whose initial value is its default
    /// (``AttributeDescription/defaultValue``): `@Managed var name: String = ""`.
    ///
    /// The value is evaluated only while a model is derived: an object's
    /// starting values come from its entity, as every object's do.
    @inlinable
    public init(wrappedValue: @autoclosure () -> Value, _ options: AttributeOptions = [],
                originalName: String? = nil, hashModifier: String? = nil,
                minimumValue: @autoclosure () -> (any ManagedAttributeValue)? = nil,
                maximumValue: @autoclosure () -> (any ManagedAttributeValue)? = nil,
                minimumLength: Int? = nil, maximumLength: Int? = nil, regularExpression: String? = nil,
                userInfo: @autoclosure () -> [String: String] = [:]) {
        if ManagedDeclarationRecorder.isRecording {
            tag = ManagedDeclarationRecorder.recordAttribute(
                Value.self, options: options, originalName: originalName, hashModifier: hashModifier,
                minimumValue: minimumValue, maximumValue: maximumValue, minimumLength: minimumLength,
                maximumLength: maximumLength, regularExpression: regularExpression, userInfo: userInfo,
                initialValue: { Value._declaredPropertyValue(wrappedValue()) })
        }
    }
}

extension Managed where Value: _ManagedRelationshipValue {
    /// Declares a relationship and its inverse, a key path on the destination
    /// class: `@Managed(inverse: \.company, deleteRule: .cascade) var updates: Set<StockUpdate>`.
    ///
    /// Declaring the inverse on one side is enough; the other side's is inferred.
    /// A `Set` is a to-many, an `Array` an ordered to-many, an optional class a to-one.
    ///
    /// - Parameters:
    ///   - inverse: the destination's relationship back to this class.
    ///   - deleteRule: what deleting the object does to its related objects. The default is `.nullify`.
    ///   - minimumCount: the fewest objects a to-many may hold when saved (0: no minimum).
    ///   - maximumCount: the most objects a to-many may hold when saved (0: no maximum).
    ///   - originalName: the relationship's name in the previous model version.
    ///   - hashModifier: a version hash modifier.
    ///   - userInfo: the relationship's user info (``PropertyDescription/userInfo``).
    @inlinable
    public init<Inverse: _ManagedRelationshipValue>(
        inverse: @autoclosure () -> KeyPath<Value._Destination, Inverse>, deleteRule: DeleteRule = .nullify,
        minimumCount: Int = 0, maximumCount: Int = 0, originalName: String? = nil, hashModifier: String? = nil,
        userInfo: @autoclosure () -> [String: String] = [:]
    ) {
        if ManagedDeclarationRecorder.isRecording {
            tag = ManagedDeclarationRecorder.recordRelationship(
                Value.self, inverse: { inverse() }, deleteRule: deleteRule, minimumCount: minimumCount,
                maximumCount: maximumCount, originalName: originalName, hashModifier: hashModifier, userInfo: userInfo)
        }
    }

    /// Declares a relationship whose inverse is inferred: the destination
    /// class declares it, or has exactly one relationship back to this class.
    @inlinable
    public init(deleteRule: DeleteRule, minimumCount: Int = 0, maximumCount: Int = 0,
                originalName: String? = nil, hashModifier: String? = nil, userInfo: @autoclosure () -> [String: String] = [:]) {
        if ManagedDeclarationRecorder.isRecording {
            tag = ManagedDeclarationRecorder.recordRelationship(
                Value.self, inverse: { nil }, deleteRule: deleteRule, minimumCount: minimumCount,
                maximumCount: maximumCount, originalName: originalName, hashModifier: hashModifier, userInfo: userInfo)
        }
    }
}

// MARK: - What a Swift type declares

/// What a `@Managed` property's Swift type declares in a derived model. Not
/// API: the hook behind ``ManagedPropertyValue``'s underscored requirements.
public indirect enum _ManagedValueKind: Sendable {
    /// An attribute of this type.
    case attribute(AttributeType)
    /// An optional of the kind (`isOptional`).
    case optional(_ManagedValueKind)
    /// A to-one relationship to this class.
    case toOne(ManagedObject.Type)
    /// A to-many relationship to this class; `Array` is ordered.
    case toMany(ManagedObject.Type, isOrdered: Bool)
    /// Nothing a model can store.
    case unsupported
}

/// A relationship's Swift type: `Set`, `Array` or `Optional` of a managed
/// class. Not API: it types the `inverse:` key path of `@Managed`.
public protocol _ManagedRelationshipValue {
    /// The destination class.
    associatedtype _Destination: ManagedObject
}

extension Set: _ManagedRelationshipValue where Element: ManagedObject {
    public typealias _Destination = Element
}

extension Array: _ManagedRelationshipValue where Element: ManagedObject {
    public typealias _Destination = Element
}

extension Optional: _ManagedRelationshipValue where Wrapped: ManagedObject {
    public typealias _Destination = Wrapped
}

extension ManagedPropertyValue {
    /// Nothing a model can store, unless the type says otherwise.
    public static var _managedValueKind: _ManagedValueKind { .unsupported }
    public static func _declaredPropertyValue(_ value: Self) -> PropertyValue? { nil }
}

extension ManagedAttributeValue {
    /// The attribute type of ``defaultManagedValue``'s slot value: a type of
    /// one's own that stores a `Double` is a double attribute.
    public static var _managedValueKind: _ManagedValueKind {
        switch defaultManagedValue.propertyValue {
        case .integer: .attribute(.integer64)
        case .double: .attribute(.double)
        case .bool: .attribute(.boolean)
        case .string: .attribute(.string)
        case .date: .attribute(.date)
        case .data: .attribute(.binaryData)
        case .uuid: .attribute(.uuid)
        case .uri: .attribute(.uri)
        case .decimal: .attribute(.decimal)
        case .null, .object, .objects: .unsupported
        }
    }

    public static func _declaredPropertyValue(_ value: Self) -> PropertyValue? { value.propertyValue }
}

extension TransformableValue {
    /// A transformable attribute, stored as ``TransformableCoding`` encodes it.
    public static var _managedValueKind: _ManagedValueKind { .attribute(.transformable) }
}
