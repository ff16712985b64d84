@_spi(DataStackInternal) import DataStackSupport

/// A class's declarations that make no model, or that disagree with the model
/// the class is bound to: which class, which property, and what is wrong.
///
/// Thrown by ``ManagedObjectModel/init(classes:)`` and, for a class bound to a
/// given model, by ``ManagedObjectModel/checkManagedObjectClasses()`` — which a
/// coordinator calls when a store is added, so that a mismatch is an error at
/// setup rather than a trap on the property's first access.
///
/// ```swift
/// do {
///     _ = try ManagedObjectModel(classes: [Company.self])
/// } catch let error as ModelDeclarationError {
///     print(error)   // Company.updates: the inverse key path \StockUpdate.name is not a relationship
/// }
/// ```
public struct ModelDeclarationError: CodedError, Sendable, Equatable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = ModelDeclarationError
        /// The code's name, as written in Swift (`"unsupportedType"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// A `@Managed` property's Swift type has no attribute type and is no relationship.
        public static let unsupportedType = Code("unsupportedType")
        /// A relationship's inverse is not declared and cannot be inferred, or
        /// the key path given does not name a relationship back to the class.
        public static let unresolvedInverse = Code("unresolvedInverse")
        /// Two classes make entities of the same name.
        public static let duplicateEntityName = Code("duplicateEntityName")
        /// A uniqueness constraint, an index or an inverse names a key path that
        /// is no `@Managed` property of the class it should belong to.
        public static let unknownKeyPath = Code("unknownKeyPath")
        /// A to-one relationship is declared non-optional (`Company` rather than `Company?`).
        public static let toOneNotOptional = Code("toOneNotOptional")
        /// An option that does not apply to the property (`.unique` on a relationship).
        public static let invalidOption = Code("invalidOption")
        /// The derived model does not validate (``ManagedObjectModel/validate()``);
        /// the message lists the problems.
        public static let invalidModel = Code("invalidModel")
        /// A class bound to a model declares a property the entity lacks, or
        /// of another kind, type, optionality or destination.
        public static let mismatch = Code("mismatch")
        /// A property's user info gives one key two values: one in
        /// `@Managed(userInfo:)`, another in the entity declaration's `propertyUserInfo`.
        public static let conflictingUserInfo = Code("conflictingUserInfo")
    }

    /// The kind of failure.
    public var code: Code
    /// The class whose declaration is at fault (its unqualified name).
    public var className: String
    /// The property at fault, if one is.
    public var propertyName: String?
    /// The entity the class makes or is bound to, if known.
    public var entityName: String?
    /// What is wrong, in words.
    public var message: String

    /// Creates an error.
    public init(_ code: Code, className: String, propertyName: String? = nil, entityName: String? = nil, message: String) {
        self.code = code
        self.className = className
        self.propertyName = propertyName
        self.entityName = entityName
        self.message = message
    }

    /// `Class.property (entity Entity): message`.
    public var description: String {
        var place = className
        if let propertyName { place += ".\(propertyName)" }
        if let entityName, entityName != className { place += " (entity \(entityName))" }
        return "\(place): \(message)"
    }
}
