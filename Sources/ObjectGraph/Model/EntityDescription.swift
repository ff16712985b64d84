import Foundation
import Synchronization

/// An entity: a kind of object, its properties and its place in an inheritance tree
/// (Core Data: `NSEntityDescription`).
///
/// ```swift
/// let company = EntityDescription(name: "Company", managedObjectClass: Company.self, properties: [
///     AttributeDescription(name: "symbol", type: .string, isOptional: false),
///     RelationshipDescription(name: "updates", destination: "StockUpdate", inverse: "company",
///                             isToMany: true, deleteRule: .cascade),
/// ])
/// company.uniquenessConstraints = [["symbol"]]
/// ```
///
/// ## Topics
/// - ``propertiesByName``
/// - ``attributesByName``
/// - ``relationshipsByName``
/// - ``subentities``
// @unchecked Sendable: mutable only before its model is frozen, read-only after.
public final class EntityDescription: @unchecked Sendable, CustomStringConvertible {
    // `name` and `managedObjectClass` are read for every object a fetch makes
    // (the registry compares IDs by entity name; a fault is an instance of the
    // class), `isAbstract` for every object a save inserts.
    // `@exclusivity(unchecked)`: they change only before the model is
    // frozen (`checkMutable`), and the runtime's dynamic check cost ~76
    // instructions a read, where the optimizer hoists the read out of a loop.

    /// The entity's name, unique in its model.
    @exclusivity(unchecked) public var name: String {
        didSet {
            checkMutable()
            nameSeed = Self.seed(of: name)
        }
    }
    /// A hash of ``name`` (FNV-1a), which places the entity's objects in a
    /// context's registry: by name, because IDs of one row from two copies of
    /// a model are equal. Fixed once a coordinator uses the model.
    @exclusivity(unchecked) package private(set) var nameSeed: UInt64 = 0
    /// The class instantiated for objects of this entity. The default is ``ManagedObject``.
    @exclusivity(unchecked) public var managedObjectClass: ManagedObject.Type { didSet { checkMutable() } }
    /// The class name given by a loaded model file, when no Swift class was bound to it.
    public var managedObjectClassName: String? { didSet { checkMutable() } }
    /// An abstract entity has no instances of its own, only of its subentities.
    @exclusivity(unchecked) public var isAbstract: Bool = false { didSet { checkMutable() } }
    /// The properties this entity declares (not the inherited ones).
    public var properties: [PropertyDescription] {
        didSet {
            checkMutable()
            for property in properties { property.entity = self }
        }
    }
    /// The entities that inherit from this one. Setting it sets their ``superentity``.
    public var subentities: [EntityDescription] = [] {
        didSet {
            checkMutable()
            for entity in subentities { entity.superentity = self }
        }
    }
    /// The entity this one inherits from.
    ///
    /// Back references between descriptions (this one, ``PropertyDescription/entity``,
    /// ``RelationshipDescription/destinationEntity`` and its inverse) are unowned,
    /// as Core Data's are: the model owns its entities and they own their
    /// properties, so keep the model alive while you use its descriptions.
    /// They are not weak because a weak reference gives its target a side
    /// table, and every copy of an ``ObjectID`` retains its entity: with a side
    /// table each of those retains takes the runtime's slow path, shared by
    /// every queue that uses the entity.
    public internal(set) unowned var superentity: EntityDescription?
    /// Sets of property names whose values must be unique among the entity's objects.
    public var uniquenessConstraints: [[String]] = [] { didSet { checkMutable() } }
    /// Fetch indexes kept on the entity's table.
    public var indexes: [FetchIndexDescription] = [] { didSet { checkMutable() } }
    /// The name this entity had in an earlier model version (lightweight migration).
    public var renamingIdentifier: String? { didSet { checkMutable() } }
    /// Changes the version hash without changing the schema.
    public var versionHashModifier: String? { didSet { checkMutable() } }
    /// Free-form information from the model.
    public var userInfo: [String: String] = [:] { didSet { checkMutable() } }

    /// The model this entity belongs to.
    public internal(set) weak var model: ManagedObjectModel?

    // MARK: - Layout (computed by the model; read-only once frozen)
    //
    // `@exclusivity(unchecked)`: written only while the model lays itself out
    // (under its lock, before any object of the entity exists), then read for
    // every object made, validated and saved; the runtime's dynamic check of
    // each read (~76 instructions) was ~3 % of an import.

    /// Every property of the entity, inherited ones first, in slot order: the
    /// order of the values in an ``IncrementalStoreNode`` of this entity.
    @exclusivity(unchecked) public internal(set) var slotProperties: [PropertyDescription] = []
    @exclusivity(unchecked) package internal(set) var propertiesByNameStorage: [String: PropertyDescription] = [:]
    /// What a new object of this entity holds in each slot (defaults, empty to-manys).
    @exclusivity(unchecked) package internal(set) var initialSlots: ContiguousArray<PropertyValue> = []
    /// The persistent properties, as validation walks them: attributes flagged
    /// when only their type and presence need checking.
    @exclusivity(unchecked) package internal(set) var validationChecks: [ValidationCheck] = []
    /// The slots of transient properties, which saves leave out.
    @exclusivity(unchecked) package internal(set) var transientSlots: [Int] = []
    /// Whether any slot holds a relationship. An inlinable getter because stores
    /// in another module read it once per saved row: as a `package` stored
    /// property the read was a dynamically checked field access
    /// (`swift_beginAccess`, ~76 instructions), as a `package` getter a call
    /// that retains the entity around it.
    @_spi(StoreImplementation) @inlinable public var hasRelationships: Bool { relationshipSlotsExist }
    @usableFromInline @exclusivity(unchecked) var relationshipSlotsExist = false
    /// Slots of the `@Managed` properties of this entity's classes, by class and storage offset.
    let managedSlots = ManagedSlotTable()
    /// The lock-free entries of `managedSlots`, copied here as a trivial value
    /// so that the `@Managed` accessors read them without retaining the table.
    @usableFromInline let managedSlotEntries: ManagedSlotEntries
    /// Whether ``markLayoutFinal()`` was called.
    private let layoutIsFinal = Atomic<Bool>(false)
    /// The scope of this entity's temporary IDs (see ``ObjectIDScope``): made
    /// with the entity, so that an insert reads it without a lock; nil only
    /// once the model has gone (``releaseIDScopes()``).
    @exclusivity(unchecked) private var temporaryScope: ObjectIDScope?
    /// The scopes of this entity's permanent IDs, one per store it was used with.
    private let permanentScopes = Mutex<[ObjectIDScope]>([])
    /// Position of the entity in its model's `entities`.
    @exclusivity(unchecked) package internal(set) var modelIndex: Int = -1

    /// Creates an entity.
    public init(name: String, managedObjectClass: ManagedObject.Type = ManagedObject.self, properties: [PropertyDescription] = []) {
        self.name = name
        self.managedObjectClass = managedObjectClass
        self.managedSlotEntries = managedSlots.entries
        self.nameSeed = Self.seed(of: name)
        self.properties = properties
        for property in properties { property.entity = self }
        self.temporaryScope = ObjectIDScope(entity: self, store: nil)
    }

    /// The scope of this entity's permanent IDs in `store`: one per store,
    /// made on first use. A store that makes an ID per row it reads takes it
    /// once and makes each ID with ``ObjectID/init(scope:primaryKey:)``.
    @_spi(StoreImplementation)
    public func idScope(in store: StoreIdentity) -> ObjectIDScope {
        permanentScopes.withLock { scopes in
            if let scope = scopes.first(where: { $0.storeReference?.takeUnretainedValue() === store }) { return scope }
            let scope = ObjectIDScope(entity: self, store: store)
            scopes.append(scope)
            return scope
        }
    }

    /// The scope of this entity's temporary IDs.
    package var temporaryIDScope: ObjectIDScope {
        // Once the model has gone (which its users must not let happen while
        // they use its entities) a fresh scope: its IDs still compare equal.
        temporaryScope ?? ObjectIDScope(entity: self, store: nil)
    }

    /// Lets go of the scopes, which hold the entity: called when the model
    /// goes, so that the entity and its scopes are freed with the last ID
    /// that names them.
    func releaseIDScopes() {
        temporaryScope = nil
        permanentScopes.withLock { $0.removeAll() }
    }

    /// Every property, inherited ones included, by name.
    public var propertiesByName: [String: PropertyDescription] {
        prepareLayout()
        return propertiesByNameStorage
    }

    /// Every attribute, inherited ones included, by name.
    public var attributesByName: [String: AttributeDescription] {
        propertiesByName.compactMapValues { $0 as? AttributeDescription }
    }

    /// Every relationship, inherited ones included, by name.
    public var relationshipsByName: [String: RelationshipDescription] {
        propertiesByName.compactMapValues { $0 as? RelationshipDescription }
    }

    /// The top of this entity's inheritance tree; its objects share the root's table.
    public var rootEntity: EntityDescription {
        var entity = self
        while let parent = entity.superentity { entity = parent }
        return entity
    }

    /// The first of the entity's own properties that an ancestor declares
    /// already, which Core Data does not allow (a model loader reports it);
    /// nil when there is none.
    package var propertyOverridingAnAncestor: PropertyDescription? {
        var inherited = Set<String>()
        var ancestor = superentity
        while let current = ancestor {
            inherited.formUnion(current.properties.map(\.name))
            ancestor = current.superentity
        }
        return properties.first { inherited.contains($0.name) }
    }

    /// Whether this entity is `other` or inherits from it.
    public func isKind(of other: EntityDescription) -> Bool {
        var entity: EntityDescription? = self
        while let current = entity {
            if current === other { return true }
            entity = current.superentity
        }
        return false
    }

    /// This entity and all entities below it, depth first.
    package var selfAndDescendants: [EntityDescription] {
        [self] + subentities.flatMap(\.selfAndDescendants)
    }

    /// The version hash of the entity: what a store records of it in
    /// `NSStoreModelVersionHashes`, and what decides whether a store written
    /// with another version of the model must be migrated (Core Data:
    /// `NSEntityDescription.versionHash`).
    ///
    /// It covers what Core Data says its hash covers, the values that affect
    /// how objects are stored:
    /// - the entity's name, whether it is abstract, its superentity's version
    ///   hash (so a change to a parent changes every subentity), its
    ///   uniqueness constraints and ``versionHashModifier``;
    /// - the ``PropertyDescription/versionHash`` of each property it declares,
    ///   transient ones included: name, optionality, transience and
    ///   ``PropertyDescription/versionHashModifier``; for an attribute its
    ///   type; for a relationship its destination, inverse, to-many and
    ///   ordered flags, minimum and maximum counts and delete rule.
    ///
    /// It does not cover the class name, default values, validation rules,
    /// ``userInfo``, ``renamingIdentifier``, value transformer names, or
    /// indexes (``indexes`` and ``AttributeDescription/isIndexed``), as in
    /// Core Data. A store is checked for the indexes of the model separately,
    /// by the indexes its file has: a missing one makes the store need a
    /// migration, which creates it.
    ///
    /// The bytes hashed are this implementation's own (Apple does not document
    /// its encoding), so the hash differs from Core Data's for the same entity:
    /// a store written by Apple's Core Data is checked by its schema instead.
    /// Two models built alike, in code or from an Xcode model, give equal hashes.
    public var versionHash: Data {
        prepareLayout()
        var encoder = VersionHash.Encoder()
        encoder.append("entity")
        encoder.append(name)
        encoder.append(isAbstract)
        encoder.append(superentity?.versionHash ?? Data())
        encoder.append(versionHashModifier ?? "")
        let constraints = uniquenessConstraints.map { $0.joined(separator: ",") }.sorted()
        encoder.append(constraints.count)
        for constraint in constraints { encoder.append(constraint) }
        let sorted = properties.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        encoder.append(sorted.count)
        for property in sorted { encoder.append(property.versionHash) }
        return encoder.hash
    }

    /// The property for a key, or a thrown error that names the entity and the key.
    package func property(forKey key: String) throws(ObjectGraphError) -> PropertyDescription {
        guard let property = propertiesByName[key] else {
            throw ObjectGraphError.unknownKey(key, entity: name)
        }
        return property
    }

    package func prepareLayout() {
        if layoutIsFinal.load(ordering: .acquiring) { return }
        if let model {
            model.prepareLayout()
        } else if slotProperties.isEmpty && !properties.isEmpty {
            ManagedObjectModel.layOut(self)
        }
    }

    private static func seed(of name: String) -> UInt64 {
        name.utf8.reduce(0xCBF2_9CE4_8422_2325) { ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01B3 }
    }

    /// Records that the model is frozen: the layout cannot change any more, and
    /// creating an object skips `prepareLayout()`'s look at the model (a weak
    /// reference, whose load is atomic work on a shared object).
    package func markLayoutFinal() {
        layoutIsFinal.store(true, ordering: .releasing)
    }

    func checkMutable() {
        if let model {
            model.checkMutable("entity \(name)")
            model.layoutIsStale = true
        }
    }

    public var description: String { "Entity \(name)" }
}

/// One persistent property as `validateValues()` checks it, without dynamic casts.
package enum ValidationCheck {
    /// An attribute with no rules beyond its type and whether it is optional:
    /// plain values, so that checking it retains nothing.
    case plainAttribute(index: Int, type: AttributeType, isOptional: Bool)
    /// Anything else: an attribute with rules, or a relationship.
    case property(PropertyDescription)

    init(_ property: PropertyDescription) {
        if let attribute = property as? AttributeDescription, attribute.minimumValue == nil, attribute.maximumValue == nil,
           attribute.minimumLength == nil, attribute.maximumLength == nil, attribute.regularExpression == nil {
            self = .plainAttribute(index: attribute.index, type: attribute.type, isOptional: attribute.isOptional)
        } else {
            self = .property(property)
        }
    }
}

/// A fetch index on an entity's table (Core Data: `NSFetchIndexDescription`).
public struct FetchIndexDescription: Sendable, Hashable {
    /// The index's name; the SQLite index is called `Z_<Entity>_<name>`.
    public var name: String
    /// The indexed properties, in order.
    public var propertyNames: [String]

    public init(name: String, propertyNames: [String]) {
        self.name = name
        self.propertyNames = propertyNames
    }
}
