import Foundation

/// What happens to related objects when an object is deleted (Core Data: `NSDeleteRule`).
public enum DeleteRule: Int, Sendable, Hashable, CaseIterable {
    /// Leave related objects alone; the caller keeps the graph consistent.
    case noAction = 0
    /// Remove the deleted object from the related objects' inverse relationship.
    case nullify = 1
    /// Delete the related objects too.
    case cascade = 2
    /// Refuse to delete while related objects exist: the save fails.
    case deny = 3
}

/// A relationship between two entities (Core Data: `NSRelationshipDescription`).
///
/// The destination and the inverse are named, and resolved when the model is
/// finalized, so entities can be declared in any order:
///
/// ```swift
/// let updates = RelationshipDescription(name: "updates", destination: "StockUpdate",
///                                       inverse: "company", isToMany: true, deleteRule: .cascade)
/// ```
public final class RelationshipDescription: PropertyDescription, @unchecked Sendable {
    /// The name of the destination entity.
    public var destinationEntityName: String { didSet { checkMutable() } }
    /// The name of the inverse relationship on the destination entity, if any.
    public var inverseName: String? { didSet { checkMutable() } }
    /// Whether the relationship holds many objects.
    public var isToMany: Bool { didSet { checkMutable() } }
    /// Whether a to-many relationship keeps its objects in order.
    public var isOrdered: Bool { didSet { checkMutable() } }
    /// What deleting the source object does to the destination objects.
    public var deleteRule: DeleteRule { didSet { checkMutable() } }
    /// The fewest objects a to-many relationship may hold when saved (0: no minimum).
    public var minCount: Int = 0 { didSet { checkMutable() } }
    /// The most objects a to-many relationship may hold when saved (0: no maximum).
    public var maxCount: Int = 0 { didSet { checkMutable() } }

    /// The destination entity, resolved when the model is finalized.
    /// Unowned: see ``EntityDescription/superentity``.
    public internal(set) unowned var destinationEntity: EntityDescription?
    /// The inverse relationship, resolved when the model is finalized.
    public internal(set) unowned var inverseRelationship: RelationshipDescription?

    /// Creates a relationship.
    ///
    /// - Parameters:
    ///   - name: the key of the relationship.
    ///   - destination: the destination entity's name.
    ///   - inverse: the inverse relationship's name, if there is one.
    ///   - isToMany: whether it holds many objects. The default is false.
    ///   - isOrdered: whether a to-many keeps its order. The default is false.
    ///   - deleteRule: the default is `.nullify`, as in Xcode.
    ///   - isOptional: the default is true.
    public init(
        name: String,
        destination: String,
        inverse: String? = nil,
        isToMany: Bool = false,
        isOrdered: Bool = false,
        deleteRule: DeleteRule = .nullify,
        isOptional: Bool = true
    ) {
        self.destinationEntityName = destination
        self.inverseName = inverse
        self.isToMany = isToMany
        self.isOrdered = isOrdered
        self.deleteRule = deleteRule
        super.init(name: name, isOptional: isOptional)
    }

    /// The property's fields and the relationship's destination, inverse,
    /// cardinality, order and delete rule: what Core Data's relationship hash
    /// covers, plus the ordered flag, which decides the store's `Z_FOK_` columns.
    override package var versionHashComponents: [String] {
        super.versionHashComponents + [
            "relationship", destinationEntityName, inverseName ?? "",
            isToMany ? "to-many" : "to-one", isOrdered ? "ordered" : "unordered",
            String(minCount), String(maxCount), String(deleteRule.rawValue),
        ]
    }
}
