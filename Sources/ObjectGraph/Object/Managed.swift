import Foundation

/// A typed property of a ``ManagedObject`` subclass, stored in the object's slots
/// (Core Data: `@NSManaged`).
///
/// ```swift
/// final class Company: ManagedObject {
///     @Managed var symbol: String            // attribute "symbol"
///     @Managed var founded: Date?            // optional attribute
///     @Managed var updates: Set<StockUpdate> // to-many relationship
///     @Managed var headquarters: Office?     // to-one relationship
/// }
/// ```
///
/// The property's name is its key: nothing is repeated in a string. The key is
/// found once per entity, class and property (by reflection) and cached in a
/// table read without a lock, so an access is a lookup of the storage's offset
/// in the object and a slot read.
///
/// Declaring a `@Managed` property whose name the entity lacks, or of another
/// type, is an error when the class's model is set up: a coordinator checks
/// its classes when the first store is added
/// (``ManagedObjectModel/checkManagedObjectClasses()``) and throws
/// ``ModelDeclarationError`` naming the class, the property and the entity.
/// Relating objects of two different contexts through a typed property is a
/// programmer error and traps, as Core Data raises there;
/// `setValue(_:forKey:)` throws the same error instead.
/// A to-one property must be optional (`Company?`).
///
/// The declarations also describe the model: ``ManagedObjectModel/init(classes:)``
/// derives the entities from them, with the options given here (see
/// ``AttributeOptions`` and "Declaring a model in Swift"):
///
/// ```swift
/// final class Company: ManagedObject {
///     @Managed(.unique) var symbol: String
///     @Managed var name: String = ""
///     @Managed(inverse: \.company, deleteRule: .cascade) var updates: Set<StockUpdate>
/// }
/// ```
///
/// The wrapper holds one byte and its initializers cost one atomic load when
/// no model is being derived: the options are read only while one is.
@propertyWrapper
public struct Managed<Value: ManagedPropertyValue> {
    // One byte, as small as the wrapper can be: `markedForLookup` only while
    // the property's name is being looked up by reflection; while a model is
    // derived from the class (``ManagedObjectModel/init(classes:)``), the
    // number of the declaration the storage's initializer recorded
    // (1…`ManagedDeclarationRecorder.maximumCount`); 0 otherwise.
    @usableFromInline var tag: UInt8 = 0
    @usableFromInline static var markedForLookup: UInt8 { .max }

    /// Declares an attribute with no options, or a relationship whose
    /// inverse is inferred (see `Managed+Declaration.swift` for the others).
    @inlinable
    public init() {
        if ManagedDeclarationRecorder.isRecording {
            tag = ManagedDeclarationRecorder.recordAttribute(
                Value.self, options: [], originalName: nil, hashModifier: nil, minimumValue: { nil }, maximumValue: { nil },
                minimumLength: nil, maximumLength: nil, regularExpression: nil, userInfo: { [:] }, initialValue: { nil })
        }
    }

    // Set only while the property's name is being looked up by reflection.
    @usableFromInline var isMarked: Bool {
        get { tag == Self.markedForLookup }
        set { tag = newValue ? Self.markedForLookup : 0 }
    }

    @available(*, unavailable, message: "@Managed is available only on properties of ManagedObject subclasses")
    public var wrappedValue: Value {
        get { fatalError("unavailable") }
        set { fatalError("unavailable") } // swiftlint:disable:this unused_setter_value
    }

    // Inlined into each class's accessors, where the optimizer drops the unused
    // `wrapped` key path, turns every projection of the `storage` one into a
    // field address (so no key path object is made at run time: that costs a
    // runtime call, `swift_getKeyPath`, and a retain and release per access)
    // and specializes the rest.
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Managed<Value>>
    ) -> Value {
        @inlinable @inline(__always)
        get {
            let index = slotIndex(of: object, storageKeyPath)
            object.entity.managedSlotEntries.noteRead(of: object, at: index)
            // Observation (`withObservationTracking`): a load and a test when
            // the context is not observable. The slot's key path, not
            // `wrapped`, is registered, so that no key path is made here.
            if object.readsAreObserved { object.noteObservedRead(at: index) }
            return Value._readSlot(of: object, at: index)
        }
        @inlinable @inline(__always)
        set {
            Value._writeSlot(newValue, of: object, at: slotIndex(of: object, storageKeyPath))
        }
    }

    /// The slot of the storage `storage` projects to, known by the object's
    /// class and the storage's offset in the object; the key path is only
    /// ever projected here, never kept, which is what lets the optimizer fold it.
    @inlinable @inline(__always)
    static func slotIndex<Object: ManagedObject>(of object: Object, _ storage: ReferenceWritableKeyPath<Object, Managed<Value>>) -> Int {
        let base = UnsafeRawPointer(Unmanaged.passUnretained(object).toOpaque())
        let offset = withUnsafeMutablePointer(to: &object[keyPath: storage]) { base.distance(to: UnsafeRawPointer($0)) }
        if let index = object.entity.managedSlotEntries.index(for: type(of: object), offset: offset) { return index }
        object[keyPath: storage].isMarked = true
        defer { object[keyPath: storage].isMarked = false }
        return resolveSlotIndex(of: object, offset: offset)
    }

    /// Finds the name of the marked storage (by reflecting the object, once per
    /// class and property in the process) and enters its slot in the entity's table.
    @usableFromInline
    static func resolveSlotIndex(of object: ManagedObject, offset: Int) -> Int {
        // Entries past the lock-free capacity are kept under a lock.
        if let index = object.entity.managedSlots.index(for: type(of: object), offset: offset) { return index }
        let name = ManagedStorageNames.shared.name(of: type(of: object), offset: offset) {
            guard let label = labelOfMarkedStorage(in: object) else {
                preconditionFailure("\(type(of: object)): could not find the @Managed property's name")
            }
            return label.hasPrefix("_") ? String(label.dropFirst()) : label
        }
        guard let property = object.entity.propertiesByName[name] else {
            preconditionFailure("\(type(of: object)).\(name) is @Managed, but entity \(object.entity.name) has no property named '\(name)'")
        }
        object.entity.managedSlots.insert(property.index, for: type(of: object), offset: offset)
        return property.index
    }

    /// The label of the marked `@Managed` storage, searching the class and its superclasses.
    private static func labelOfMarkedStorage(in object: ManagedObject) -> String? {
        var mirror: Mirror? = Mirror(reflecting: object)
        while let current = mirror {
            for child in current.children {
                if let probe = child.value as? ManagedStorageProbe, probe.isMarkedForLookup { return child.label }
            }
            mirror = current.superclassMirror
        }
        return nil
    }
}

extension Managed: ManagedStorageProbe {
    fileprivate var isMarkedForLookup: Bool { isMarked }
}

private protocol ManagedStorageProbe {
    var isMarkedForLookup: Bool { get }
}

// MARK: - Value conversions

/// A type that a ``Managed`` property can have: an attribute value, a managed
/// object (to-one), a set or array of them (to-many), or an optional of these.
///
/// The package conforms the attribute types Core Data has (`String`, the
/// integers, `Double`, `Float`, `Bool`, `Date`, `Data`, `UUID`, `URL`,
/// `Decimal`), ``ManagedObject`` subclasses, `Set` and `Array` of them, and
/// `Optional` of any of these. To store a type of your own, conform it to
/// ``ManagedAttributeValue`` (how it converts to and from a ``PropertyValue``)
/// or, for a `Codable` value, to ``TransformableValue``:
///
/// ```swift
/// struct Celsius: ManagedAttributeValue {
///     var degrees: Double
///     init(degrees: Double) { self.degrees = degrees }
///     init?(propertyValue: PropertyValue) {
///         guard let degrees = Double(propertyValue: propertyValue) else { return nil }
///         self.degrees = degrees
///     }
///     var propertyValue: PropertyValue { .double(degrees) }
///     static var defaultManagedValue: Celsius { Celsius(degrees: 0) }
/// }
/// final class Reading: ManagedObject { @Managed var temperature: Celsius }
/// ```
///
/// Don't conform a type to this protocol directly: its requirements are the
/// wrapper's hooks into an object's storage, which ``ManagedAttributeValue``
/// implements for you and which are not part of the API.
public protocol ManagedPropertyValue {
    // Underscored rather than `package` or `@_spi`: a requirement of a public
    // protocol is as public as the protocol, so that conformances declared in
    // users' modules (through ManagedAttributeValue's defaults) can witness it,
    // and the inlinable `@Managed` subscript cannot call an SPI member. The
    // leading underscore keeps them out of DocC and code completion, as the
    // standard library does with its `_`-prefixed requirements.

    /// Reads the value from an object's slot. Not API: see the protocol's comment.
    static func _readSlot(of object: ManagedObject, at index: Int) -> Self
    /// Writes the value into an object's slot, keeping inverses in step. Not
    /// API: see the protocol's comment.
    static func _writeSlot(_ value: Self, of object: ManagedObject, at index: Int)
    /// What a property of this type declares in a model derived from its
    /// classes: an attribute type, a relationship, or nothing. Not API: see
    /// the protocol's comment. ``ManagedAttributeValue`` gives a default.
    static var _managedValueKind: _ManagedValueKind { get }
    /// The attribute value an initial value declares as the default. Not
    /// API: see the protocol's comment.
    static func _declaredPropertyValue(_ value: Self) -> PropertyValue?
}

/// A type stored in an attribute: converts to and from ``PropertyValue``.
public protocol ManagedAttributeValue: ManagedPropertyValue {
    /// The value held in a slot, or nil if the slot holds another kind.
    init?(propertyValue: PropertyValue)
    /// The slot value for this value.
    var propertyValue: PropertyValue { get }
    /// What a non-optional property reads when its slot holds nil: `0`, `""`, `false`…
    static var defaultManagedValue: Self { get }
}

// Inlinable, as the `@Managed` subscript is: a typed access becomes a direct
// call to the slot read or write, not a protocol witness call.
extension ManagedAttributeValue {
    // Into the getter: a call of its own cost each read a frame (~15 instructions).
    @inlinable @inline(__always)
    public static func _readSlot(of object: ManagedObject, at index: Int) -> Self {
        Self(propertyValue: object.slotValue(at: index)) ?? defaultManagedValue
    }

    @inlinable
    public static func _writeSlot(_ value: Self, of object: ManagedObject, at index: Int) {
        object.writeSlot(value.propertyValue, at: index)
    }
}

extension Optional: ManagedPropertyValue where Wrapped: ManagedPropertyValue {
    public static var _managedValueKind: _ManagedValueKind { .optional(Wrapped._managedValueKind) }

    public static func _declaredPropertyValue(_ value: Wrapped?) -> PropertyValue? {
        guard let value else { return .null }
        return Wrapped._declaredPropertyValue(value)
    }

    public static func _readSlot(of object: ManagedObject, at index: Int) -> Wrapped? {
        if object.slotValue(at: index).isNull { return nil }
        return Wrapped._readSlot(of: object, at: index)
    }

    public static func _writeSlot(_ value: Wrapped?, of object: ManagedObject, at index: Int) {
        if let value {
            Wrapped._writeSlot(value, of: object, at: index)
        } else if let relationship = object.entity.slotProperties[index] as? RelationshipDescription {
            object.setRelationshipThroughTypedProperty(relationship, to: [])
        } else {
            object.writeSlot(.null, at: index)
        }
    }
}

extension ManagedObject: ManagedPropertyValue {
    public static var _managedValueKind: _ManagedValueKind { .toOne(self) }

    // A to-one has no zero value to read for nil, as attributes have
    // (`defaultManagedValue`), so a nil read through a non-optional property
    // traps: declare to-ones optional (`Company?`).
    public static func _readSlot(of object: ManagedObject, at index: Int) -> Self {
        guard case .object(let id) = object.slotValue(at: index), let context = object.managedObjectContext,
              let related = context.object(with: id) as? Self else {
            preconditionFailure("\(type(of: object)).\(object.entity.slotProperties[index].name) is nil; declare it optional")
        }
        return related
    }

    public static func _writeSlot(_ value: ManagedObject, of object: ManagedObject, at index: Int) {
        guard let relationship = object.entity.slotProperties[index] as? RelationshipDescription else { return }
        object.setRelationshipThroughTypedProperty(relationship, to: [value])
    }
}

extension Set: ManagedPropertyValue where Element: ManagedObject {
    public static var _managedValueKind: _ManagedValueKind { .toMany(Element.self, isOrdered: false) }

    public static func _readSlot(of object: ManagedObject, at index: Int) -> Set<Element> {
        guard let relationship = object.entity.slotProperties[index] as? RelationshipDescription else { return [] }
        return Set(object.relatedObjectsForTypedAccess(at: index, for: relationship).compactMap { $0 as? Element })
    }

    public static func _writeSlot(_ value: Set<Element>, of object: ManagedObject, at index: Int) {
        guard let relationship = object.entity.slotProperties[index] as? RelationshipDescription else { return }
        object.setRelationshipThroughTypedProperty(relationship, to: Array(value))
    }
}

extension Array: ManagedPropertyValue where Element: ManagedObject {
    public static var _managedValueKind: _ManagedValueKind { .toMany(Element.self, isOrdered: true) }

    public static func _readSlot(of object: ManagedObject, at index: Int) -> [Element] {
        guard let relationship = object.entity.slotProperties[index] as? RelationshipDescription else { return [] }
        return object.relatedObjectsForTypedAccess(at: index, for: relationship).compactMap { $0 as? Element }
    }

    public static func _writeSlot(_ value: [Element], of object: ManagedObject, at index: Int) {
        guard let relationship = object.entity.slotProperties[index] as? RelationshipDescription else { return }
        object.setRelationshipThroughTypedProperty(relationship, to: value)
    }
}

extension String: ManagedAttributeValue {
    @inlinable
    public init?(propertyValue: PropertyValue) {
        guard case .string(let v) = propertyValue else { return nil }
        self = v
    }
    @inlinable public var propertyValue: PropertyValue { .string(self) }
    public static var defaultManagedValue: String { "" }
}

extension Bool: ManagedAttributeValue {
    @inlinable
    public init?(propertyValue: PropertyValue) {
        switch propertyValue {
        case .bool(let v): self = v
        case .integer(let v): self = v != 0
        default: return nil
        }
    }
    @inlinable public var propertyValue: PropertyValue { .bool(self) }
    public static var defaultManagedValue: Bool { false }
}

extension Double: ManagedAttributeValue {
    @inlinable
    public init?(propertyValue: PropertyValue) {
        switch propertyValue {
        case .double(let v): self = v
        case .integer(let v): self = Double(v)
        default: return nil
        }
    }
    @inlinable public var propertyValue: PropertyValue { .double(self) }
    public static var defaultManagedValue: Double { 0 }
}

extension Float: ManagedAttributeValue {
    @inlinable
    public init?(propertyValue: PropertyValue) {
        guard let double = Double(propertyValue: propertyValue) else { return nil }
        self = Float(double)
    }
    @inlinable public var propertyValue: PropertyValue { .double(Double(self)) }
    public static var defaultManagedValue: Float { 0 }
    public static var _managedValueKind: _ManagedValueKind { .attribute(.float) }
}

extension Date: ManagedAttributeValue {
    @inlinable
    public init?(propertyValue: PropertyValue) {
        guard case .date(let v) = propertyValue else { return nil }
        self = v
    }
    @inlinable public var propertyValue: PropertyValue { .date(self) }
    public static var defaultManagedValue: Date { Date(timeIntervalSinceReferenceDate: 0) }
}

extension Data: ManagedAttributeValue {
    @inlinable
    public init?(propertyValue: PropertyValue) {
        guard case .data(let v) = propertyValue else { return nil }
        self = v
    }
    @inlinable public var propertyValue: PropertyValue { .data(self) }
    public static var defaultManagedValue: Data { Data() }
}

extension UUID: ManagedAttributeValue {
    @inlinable
    public init?(propertyValue: PropertyValue) {
        guard case .uuid(let v) = propertyValue else { return nil }
        self = v
    }
    @inlinable public var propertyValue: PropertyValue { .uuid(self) }
    public static var defaultManagedValue: UUID { UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }
}

extension URL: ManagedAttributeValue {
    @inlinable
    public init?(propertyValue: PropertyValue) {
        guard case .uri(let v) = propertyValue else { return nil }
        self = v
    }
    @inlinable public var propertyValue: PropertyValue { .uri(self) }
    public static var defaultManagedValue: URL { URL(string: "about:blank")! }
}

extension Decimal: ManagedAttributeValue {
    @inlinable
    public init?(propertyValue: PropertyValue) {
        switch propertyValue {
        case .decimal(let v): self = v
        case .double(let v): self = Decimal(v)
        case .integer(let v): self = Decimal(v)
        default: return nil
        }
    }
    @inlinable public var propertyValue: PropertyValue { .decimal(self) }
    public static var defaultManagedValue: Decimal { 0 }
}

/// Integers of every width read and write the same `.integer` slot.
public protocol ManagedIntegerValue: ManagedAttributeValue, FixedWidthInteger {}

extension ManagedIntegerValue {
    @inlinable
    public init?(propertyValue: PropertyValue) {
        guard case .integer(let v) = propertyValue else { return nil }
        self.init(truncatingIfNeeded: v)
    }
    @inlinable public var propertyValue: PropertyValue { .integer(Int64(truncatingIfNeeded: self)) }
    public static var defaultManagedValue: Self { 0 }
}

extension Int: ManagedIntegerValue {}
extension Int16: ManagedIntegerValue {
    public static var _managedValueKind: _ManagedValueKind { .attribute(.integer16) }
}
extension Int32: ManagedIntegerValue {
    public static var _managedValueKind: _ManagedValueKind { .attribute(.integer32) }
}
extension Int64: ManagedIntegerValue {}

/// A `Codable` value stored in a transformable attribute as a binary property list.
///
/// ```swift
/// struct Tags: TransformableValue { var names: [String]; static let defaultManagedValue = Tags(names: []) }
/// final class Note: ManagedObject { @Managed var tags: Tags }
/// ```
public protocol TransformableValue: ManagedAttributeValue, Codable {}

extension TransformableValue {
    public init?(propertyValue: PropertyValue) {
        guard case .data(let data) = propertyValue,
              let value = try? TransformableCoding.decode(Self.self, from: data) else { return nil }
        self = value
    }
    public var propertyValue: PropertyValue {
        (try? TransformableCoding.encode(self)).map(PropertyValue.data) ?? .null
    }
}
