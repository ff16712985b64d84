/// What an entity declares beyond its class's `@Managed` properties, for a
/// model derived from its classes (``ManagedObjectModel/init(classes:)``):
/// SwiftData's `#Unique` and `#Index`, and Core Data's entity settings.
///
/// A class gives it by overriding ``ManagedObject/entityDeclaration``:
///
/// ```swift
/// final class Company: ManagedObject {
///     @Managed var symbol: String
///     @Managed var exchange: String
///     @Managed var name: String = ""
///     override class var entityDeclaration: EntityDeclaration {
///         EntityDeclaration(uniquenessConstraints: [[\Company.symbol, \Company.exchange]],
///                           indexes: [[\Company.name, \Company.symbol]])
///     }
/// }
/// ```
///
/// Key paths name `@Managed` properties of the class or of its superclasses;
/// any other key path makes the model's creation throw
/// ``ModelDeclarationError``. A subclass that does not override the
/// declaration declares nothing of its own (it does not inherit its
/// superclass's name or constraints: its entity inherits them).
public struct EntityDeclaration: Hashable, @unchecked Sendable {
    // @unchecked Sendable: key paths are immutable values.

    /// The entity's name; nil for the class's unqualified name.
    public var name: String?
    /// Whether the entity has no objects of its own, only of its subentities
    /// (``EntityDescription/isAbstract``).
    public var isAbstract: Bool
    /// Sets of properties whose values must be unique together
    /// (``EntityDescription/uniquenessConstraints``; SwiftData's `#Unique`).
    public var uniquenessConstraints: [[AnyKeyPath]]
    /// Fetch indexes (``EntityDescription/indexes``; SwiftData's `#Index`).
    public var indexes: [IndexDeclaration]
    /// The entity's name in an earlier model version, for lightweight
    /// migration (``EntityDescription/renamingIdentifier``; SwiftData's `originalName`).
    public var originalName: String?
    /// Changes the entity's version hash without changing its schema
    /// (``EntityDescription/versionHashModifier``; SwiftData's `hashModifier`).
    public var hashModifier: String?
    /// The entity's user info (``EntityDescription/userInfo``), for what
    /// reads the model beyond Core Data: a sync delete policy, say.
    public var userInfo: [String: String]
    /// User info for properties, by their key paths
    /// (``PropertyDescription/userInfo``): what Xcode's model editor gives a
    /// property, such as its sync merge policy.
    ///
    /// A key path names a `@Managed` property the class itself declares: an
    /// inherited one takes its user info from the class that declares it
    /// (changing it here would change it for every sibling class too).
    public var propertyUserInfo: [AnyKeyPath: [String: String]]

    /// Declares an entity.
    ///
    /// - Parameters:
    ///   - name: the entity's name; nil (the default) for the class's unqualified name.
    ///   - isAbstract: whether it has no objects of its own. The default is false.
    ///   - uniquenessConstraints: each an array of key paths of the class
    ///     whose values must be unique together.
    ///   - indexes: compound fetch indexes, each an array of key paths (named
    ///     `by` and the property names) or an ``IndexDeclaration`` with a name.
    ///   - originalName: the entity's name in the previous model version.
    ///   - hashModifier: a version hash modifier.
    ///   - userInfo: the entity's user info. The default is empty.
    ///   - propertyUserInfo: user info of properties the class declares, by
    ///     key path. The default is none.
    public init(name: String? = nil, isAbstract: Bool = false, uniquenessConstraints: [[AnyKeyPath]] = [],
                indexes: [IndexDeclaration] = [], originalName: String? = nil, hashModifier: String? = nil,
                userInfo: [String: String] = [:], propertyUserInfo: [AnyKeyPath: [String: String]] = [:]) {
        self.name = name
        self.isAbstract = isAbstract
        self.uniquenessConstraints = uniquenessConstraints
        self.indexes = indexes
        self.originalName = originalName
        self.hashModifier = hashModifier
        self.userInfo = userInfo
        self.propertyUserInfo = propertyUserInfo
    }
}

/// A fetch index of an ``EntityDeclaration``: the key paths of its properties,
/// in order, and its name (``FetchIndexDescription``).
///
/// An array literal of key paths is an index named `by` and the capitalized
/// property names (`[\Company.name, \Company.symbol]` is `byNameSymbol`):
///
/// ```swift
/// indexes: [[\Company.name, \Company.symbol], IndexDeclaration(name: "bySymbol", \Company.symbol)]
/// ```
public struct IndexDeclaration: Hashable, ExpressibleByArrayLiteral, @unchecked Sendable {
    // @unchecked Sendable: key paths are immutable values.

    /// The index's name; nil for `by` and the capitalized property names.
    public var name: String?
    /// The indexed properties, in order.
    public var keyPaths: [AnyKeyPath]

    /// An index of these properties, named with the default name.
    public init(arrayLiteral keyPaths: AnyKeyPath...) {
        self.name = nil
        self.keyPaths = keyPaths
    }

    /// An index with a name of its own (the SQLite index is `Z_<Entity>_<name>`).
    public init(name: String, _ keyPaths: AnyKeyPath...) {
        self.name = name
        self.keyPaths = keyPaths
    }
}
