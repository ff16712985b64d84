@_spi(DataStackInternal) import DataStackSupport
import Foundation

/// A set of entities: the schema of an object graph (Core Data: `NSManagedObjectModel`).
///
/// ```swift
/// let model = ManagedObjectModel(entities: [company, stockUpdate])
/// let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
/// ```
///
/// Build a model in code, with ``EntityDescription`` and the property
/// descriptions, or load one that Xcode wrote. Once a coordinator uses it the
/// model is frozen: changing it afterwards is a programmer error, as in Core Data.
/// Problems in the model (a relationship to an unknown entity, a duplicate
/// property) are thrown by ``validate()``, which a coordinator calls when a
/// store is added.
///
/// ## Topics
/// - ``entitiesByName``
/// - ``entityVersionHashesByName``
/// - ``validate()``
// @unchecked Sendable: mutable only before it is frozen; `layoutLock` guards the lazy layout.
public final class ManagedObjectModel: @unchecked Sendable {
    /// The entities, in the order given.
    public var entities: [EntityDescription] {
        didSet {
            checkMutable("the model")
            adopt(entities)
        }
    }
    /// Free-form version identifiers (Core Data's `versionIdentifiers`).
    public var versionIdentifiers: Set<String> = [] {
        didSet { checkMutable("the model") }
    }
    /// Named subsets of the entities, for stores that hold only part of the model.
    public var configurations: [String: [String]] = [:] {
        didSet { checkMutable("the model") }
    }

    /// Traps when the model is frozen, as Core Data raises for a change to a
    /// model in use: `part` (the model, an entity, a property) names what changed.
    func checkMutable(_ part: @autoclosure () -> String) {
        precondition(!isFrozen, "can't modify \(part()): the model is immutable once a coordinator uses it")
    }

    // `@exclusivity(unchecked)`: the layout's state, written under `layoutLock`
    // before the model is used and read for every object made (see
    // ``EntityDescription``'s layout).
    @exclusivity(unchecked) package private(set) var isFrozen = false
    @exclusivity(unchecked) var layoutIsStale = true
    private let layoutLock = Locked(())
    @exclusivity(unchecked) private var entitiesByNameStorage: [String: EntityDescription] = [:]
    @exclusivity(unchecked) private var entitiesByClass: [ObjectIdentifier: EntityDescription] = [:]

    /// Creates a model from its entities. Entities and relationships may refer to
    /// each other by name in any order.
    public init(entities: [EntityDescription]) {
        self.entities = entities
        adopt(entities)
    }

    deinit {
        // Each entity and its ID scopes hold each other (see `ObjectIDScope`):
        // break the cycle, so that an entity lives as long as the IDs that
        // name it, not forever.
        for entity in entities { entity.releaseIDScopes() }
    }

    /// The entities by name.
    public var entitiesByName: [String: EntityDescription] {
        prepareLayout()
        return entitiesByNameStorage
    }

    /// Each entity's version hash, the value a store keeps in `NSStoreModelVersionHashes`.
    public var entityVersionHashesByName: [String: Data] {
        Dictionary(uniqueKeysWithValues: entities.map { ($0.name, $0.versionHash) })
    }

    /// The entities a configuration names, or all of them for nil.
    public func entities(forConfigurationName name: String?) -> [EntityDescription] {
        guard let name, let names = configurations[name] else { return entities }
        let set = Set(names)
        return entities.filter { set.contains($0.name) }
    }

    /// The entity whose objects are instances of `type`, if exactly one is.
    package func entity(for type: ManagedObject.Type) -> EntityDescription? {
        prepareLayout()
        return entitiesByClass[ObjectIdentifier(type)]
    }

    // MARK: - Validation and freezing

    /// Checks the model: unique names, resolvable destinations and inverses,
    /// uniqueness constraints over existing attributes.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/invalidModel`` listing every problem found.
    public func validate() throws(ObjectGraphError) {
        prepareLayout()
        var problems: [String] = []
        var names = Set<String>()
        for entity in entities {
            if entity.name.isEmpty {
                problems.append("an entity has an empty name")
            } else if !Self.isIdentifier(entity.name) {
                problems.append("the entity name '\(entity.name)' is not an identifier")
            }
            for property in entity.properties where !Self.isIdentifier(property.name) {
                problems.append("\(entity.name).\(property.name): the name is not an identifier")
            }
            if !names.insert(entity.name).inserted { problems.append("two entities are named \(entity.name)") }
            var propertyNames = Set<String>()
            for property in entity.slotProperties {
                if !propertyNames.insert(property.name).inserted {
                    problems.append("\(entity.name) has two properties named \(property.name)")
                }
                if let attribute = property as? AttributeDescription, !attribute.type.accepts(attribute.defaultValue) {
                    problems.append("\(entity.name).\(property.name): the default value is \(attribute.defaultValue.kindDescription), not a \(attribute.type.rawValue)")
                }
                if let attribute = property as? AttributeDescription, attribute.regularExpression != nil, (try? attribute.regex()) == nil {
                    problems.append("\(entity.name).\(property.name): the regular expression does not compile")
                }
                guard let relationship = property as? RelationshipDescription else { continue }
                guard let destination = relationship.destinationEntity else {
                    problems.append("\(entity.name).\(relationship.name): no entity named \(relationship.destinationEntityName)")
                    continue
                }
                if let inverse = relationship.inverseName, destination.propertiesByNameStorage[inverse] as? RelationshipDescription == nil {
                    problems.append("\(entity.name).\(relationship.name): \(destination.name) has no relationship named \(inverse)")
                }
            }
            for constraint in entity.uniquenessConstraints {
                for key in constraint where entity.propertiesByNameStorage[key] == nil {
                    problems.append("\(entity.name): the uniqueness constraint names \(key), which the entity does not have")
                }
            }
        }
        if !problems.isEmpty { throw .invalidModel(problems) }
    }

    /// Whether a name can be an entity or property name: letters, digits and `_`,
    /// not starting with a digit, as Xcode requires. Names become SQL table and
    /// column names, so nothing else may reach the store.
    package static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.first, !first.isNumber else { return false }
        return name.allSatisfy { $0 == "_" || $0.isLetter || $0.isNumber }
    }

    /// Validates the model and makes it immutable. Called by a coordinator.
    package func freeze() throws(ObjectGraphError) {
        if isFrozen { return }
        try validate()
        layoutLock.withLock { _ in isFrozen = true }
        for entity in entities { entity.markLayoutFinal() }
    }

    // MARK: - Layout

    private func adopt(_ entities: [EntityDescription]) {
        for entity in entities { entity.model = self }
        layoutIsStale = true
    }

    /// Resolves names and assigns slot indexes, once per change of the model.
    package func prepareLayout() {
        if isFrozen || !layoutIsStale { return }
        layoutLock.withLock { _ in
            guard layoutIsStale else { return }
            var byName: [String: EntityDescription] = [:]
            for (index, entity) in entities.enumerated() {
                entity.modelIndex = index
                byName[entity.name] = entity
            }
            for entity in entities {
                Self.layOut(entity)
                for case let relationship as RelationshipDescription in entity.properties {
                    relationship.destinationEntity = byName[relationship.destinationEntityName]
                }
            }
            for entity in entities {
                for case let relationship as RelationshipDescription in entity.properties {
                    relationship.inverseRelationship = relationship.inverseName.flatMap {
                        relationship.destinationEntity?.propertiesByNameStorage[$0] as? RelationshipDescription
                    }
                }
            }
            var byClass: [ObjectIdentifier: EntityDescription] = [:]
            var ambiguous = Set<ObjectIdentifier>()
            for entity in entities where entity.managedObjectClass != ManagedObject.self {
                let key = ObjectIdentifier(entity.managedObjectClass)
                if byClass.updateValue(entity, forKey: key) != nil { ambiguous.insert(key) }
            }
            for key in ambiguous { byClass[key] = nil }
            entitiesByNameStorage = byName
            entitiesByClass = byClass
            layoutIsStale = false
        }
    }

    /// Gives the entity's properties their slots: the superentity's first.
    ///
    /// Every property of the chain gets its index here, the inherited ones
    /// too, so an entity's layout never depends on whether its ancestors were
    /// laid out before it: the entities of a model may come in any order
    /// (compiled models list them by name, so a subentity often comes first).
    /// An ancestor's property lands at the same index in every descendant,
    /// since each one's slots start with its ancestors' slots.
    static func layOut(_ entity: EntityDescription) {
        var chain: [EntityDescription] = []
        var current: EntityDescription? = entity
        while let step = current { chain.insert(step, at: 0); current = step.superentity }
        var slots: [PropertyDescription] = []
        for step in chain { slots.append(contentsOf: step.properties) }
        var byName: [String: PropertyDescription] = [:]
        for (index, property) in slots.enumerated() {
            property.index = index
            if byName[property.name] == nil { byName[property.name] = property }
        }
        entity.slotProperties = slots
        entity.initialSlots = ContiguousArray(slots.map(ManagedObject.initialValue(of:)))
        entity.validationChecks = slots.filter { !$0.isTransient }.map(ValidationCheck.init)
        entity.transientSlots = slots.indices.filter { slots[$0].isTransient }
        entity.relationshipSlotsExist = slots.contains { $0 is RelationshipDescription }
        entity.propertiesByNameStorage = byName
    }
}
