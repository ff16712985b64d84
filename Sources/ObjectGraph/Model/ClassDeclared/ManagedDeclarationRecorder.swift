import Foundation
import Synchronization

/// What one `@Managed` initializer declared, recorded while a model is
/// derived from its class (see ``ManagedDeclarationRecorder``).
struct ManagedDeclaration {
    var valueKind: _ManagedValueKind
    /// The Swift type, for messages.
    var valueTypeName: String
    var isRelationshipDeclaration = false
    var options: AttributeOptions = []
    var originalName: String?
    var hashModifier: String?
    var minimumValue: PropertyValue?
    var maximumValue: PropertyValue?
    var minimumLength: Int?
    var maximumLength: Int?
    var regularExpression: String?
    var userInfo: [String: String] = [:]
    /// The initial value's attribute value; nil when none was given.
    var initialValue: PropertyValue?
    var inverse: AnyKeyPath?
    var deleteRule: DeleteRule = .nullify
    var minimumCount = 0
    var maximumCount = 0
}

/// Records the declarations of the `@Managed` properties of an object made
/// while a model is derived from its class.
///
/// Deriving makes a prototype of the class on the deriving thread while the
/// recorder is on: each `@Managed` initializer (inlined into the class's
/// property initializers) sees ``isRecording``, records what it declares and
/// keeps the declaration's number in the wrapper's byte; a `Mirror` of the
/// prototype then pairs each stored property's label with its number.
///
/// When no model is being derived, which is always but for a moment at
/// setup, an initializer costs the relaxed load of ``active``. While one is,
/// objects made on other threads take the slow path and record nothing.
@usableFromInline
enum ManagedDeclarationRecorder {
    /// The number of derivations running (0 or 1: they take turns).
    @usableFromInline static let active = Atomic<Int>(0)
    /// The deriving thread, as `ObjectIdentifier(Thread.current)`'s bits.
    private static let owner = Atomic<UInt>(0)
    /// Derivations take turns.
    private static let serial = NSLock()
    /// The declarations of the prototype being made; touched only by the
    /// thread in ``owner``, which holds ``serial``.
    nonisolated(unsafe) private static var records: [ManagedDeclaration] = []
    /// Whether the prototype declared more properties than a wrapper's byte can number.
    nonisolated(unsafe) private static var overflowed = false
    /// The most declarations one prototype can record (its class and superclasses).
    static let maximumCount = 254

    /// Whether a derivation is running: the inlined initializers' only cost.
    @inlinable
    static var isRecording: Bool { active.load(ordering: .relaxed) != 0 }

    /// Runs `body` (which makes a prototype) with the recorder on for this
    /// thread, and returns the declarations recorded, in the order the
    /// initializers ran; nil when there were more than ``maximumCount``.
    static func recording<T>(_ body: () throws -> T) rethrows -> (T, [ManagedDeclaration]?) {
        serial.lock()
        defer { serial.unlock() }
        records = []
        overflowed = false
        owner.store(currentThread, ordering: .relaxed)
        active.add(1, ordering: .sequentiallyConsistent)
        defer {
            active.subtract(1, ordering: .sequentiallyConsistent)
            owner.store(0, ordering: .relaxed)
        }
        let result = try body()
        let recorded = records
        records = []
        return (result, overflowed ? nil : recorded)
    }

    private static var currentThread: UInt {
        UInt(bitPattern: ObjectIdentifier(Thread.current).hashValue)
    }

    /// The number to keep in the wrapper (1…``maximumCount``), or 0 when
    /// this thread is not deriving.
    private static func append(_ make: () -> ManagedDeclaration) -> UInt8 {
        guard owner.load(ordering: .relaxed) == currentThread else { return 0 }
        guard records.count < maximumCount else {
            overflowed = true
            return 0
        }
        records.append(make())
        return UInt8(records.count)
    }

    @usableFromInline @inline(never)
    static func recordAttribute<Value: ManagedPropertyValue>(
        _ type: Value.Type, options: AttributeOptions, originalName: String?, hashModifier: String?,
        minimumValue: () -> (any ManagedAttributeValue)?, maximumValue: () -> (any ManagedAttributeValue)?,
        minimumLength: Int?, maximumLength: Int?, regularExpression: String?, userInfo: () -> [String: String],
        initialValue: () -> PropertyValue?
    ) -> UInt8 {
        append {
            var declaration = ManagedDeclaration(valueKind: Value._managedValueKind, valueTypeName: String(describing: Value.self))
            declaration.options = options
            declaration.originalName = originalName
            declaration.hashModifier = hashModifier
            declaration.minimumValue = minimumValue()?.propertyValue
            declaration.maximumValue = maximumValue()?.propertyValue
            declaration.minimumLength = minimumLength
            declaration.maximumLength = maximumLength
            declaration.regularExpression = regularExpression
            declaration.userInfo = userInfo()
            declaration.initialValue = initialValue()
            return declaration
        }
    }

    @usableFromInline @inline(never)
    static func recordRelationship<Value: ManagedPropertyValue>(
        _ type: Value.Type, inverse: () -> AnyKeyPath?, deleteRule: DeleteRule, minimumCount: Int,
        maximumCount: Int, originalName: String?, hashModifier: String?, userInfo: () -> [String: String]
    ) -> UInt8 {
        append {
            var declaration = ManagedDeclaration(valueKind: Value._managedValueKind, valueTypeName: String(describing: Value.self))
            declaration.isRelationshipDeclaration = true
            declaration.inverse = inverse()
            declaration.deleteRule = deleteRule
            declaration.minimumCount = minimumCount
            declaration.maximumCount = maximumCount
            declaration.originalName = originalName
            declaration.hashModifier = hashModifier
            declaration.userInfo = userInfo()
            return declaration
        }
    }
}
