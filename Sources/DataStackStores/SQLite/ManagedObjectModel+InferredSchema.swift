@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - A model inferred from a store's schema

extension ManagedObjectModel {
    /// The key of a to-one relationship's `userInfo`, in a model inferred from
    /// a store's schema, that says how its destination was found: `"entity
    /// column"` (certain), `"column name"` (guessed from the names) or
    /// `"none"` (a stand-in: do not follow it). See ``init(inferredFromSchemaOfStoreAt:)``.
    public static let inferredDestinationUserInfoKey = "inferredDestination"

    /// A model read from a Core Data store's schema alone, to open a store
    /// that comes with neither its Xcode model nor a cached model (stores of
    /// framework 519 and older have no `Z_MODELCACHE`).
    ///
    /// ```swift
    /// let model = try ManagedObjectModel(inferredFromSchemaOfStoreAt: url)
    /// var options = StoreOptions()
    /// options.isReadOnly = true                       // such a model is for reading
    /// let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
    /// try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
    /// ```
    ///
    /// Open the store read-only with it (``StoreOptions/isReadOnly``): the
    /// model has the store's tables and columns, not the real model's
    /// optionality, defaults, delete rules or validation, so a save would
    /// write what the real model might refuse.
    ///
    /// What the schema tells, and so what the model holds:
    /// - the entities and their inheritance, from `Z_PRIMARYKEY` (`Z_ENT`,
    ///   `Z_NAME`, `Z_SUPER`), without the persistent history's 16001–16003;
    /// - a property per column of each root entity's table `Z<ROOT>` (after
    ///   `Z_PK`, `Z_ENT`, `Z_OPT`), **named as the column without its `Z`,
    ///   lower-cased** (`ZDISPLAYNAME` → `displayname`, `ZACCOUNT1` →
    ///   `account1`), so that the store maps each property back to exactly
    ///   its column. Core Data upper-cases names into columns, so the real
    ///   names' case is lost; lower-cased names sort as the real ones do
    ///   without regard to case;
    /// - a to-one relationship per foreign-key column: one with the index
    ///   Core Data gives every key (`<TABLE>_<COLUMN>_INDEX`; see below for
    ///   old stores, which index attributes the same way), an entity column
    ///   `Z<n>_<COLUMN>` beside it, or a rank column `Z_FOK_<COLUMN>`;
    /// - an attribute per other column, of the type Core Data declares it
    ///   with: INTEGER → Integer 64, TIMESTAMP → Date, FLOAT → Double,
    ///   DECIMAL → Decimal, VARCHAR → String, BLOB → Binary Data;
    /// - a many-to-many pair per join table `Z_<n><NAME>` whose two columns
    ///   are `Z_<m><NAME>`: `<name>` on entity n and its inverse, named by
    ///   the other column, on the destination; `Z_FOK_` columns make a side ordered;
    /// - for each to-one whose destination is known, its inverse to-many on
    ///   the destination, named `<root entity>_<to-one>` lower-cased
    ///   (`KikChat.user` → `KikUser.kikchat_user`: the chats whose user it
    ///   is), ordered when `Z_FOK_<COLUMN>` is beside the key. The real
    ///   name of such a to-many has no trace in the file.
    ///
    /// What the schema cannot tell, and what stands in for it:
    /// - **which level of an inheritance tree declares a column**: every
    ///   column of a shared table goes on the root entity, so every entity of
    ///   the table has every property of the table (a row of one subentity
    ///   reads nil for the columns of its siblings). This is the one
    ///   placement that reads every value of every row;
    /// - **the destination of a key without entity column**: an entity without
    ///   subentities, guessed from the names (the rules are in
    ///   InferredSchema+Destinations.swift); a key that fits no name points at
    ///   a stand-in. Each to-one's `userInfo` says which, under
    ///   ``inferredDestinationUserInfoKey``;
    /// - **whether an indexed INTEGER column is a key or an indexed
    ///   attribute** in stores up to about framework 600: told from the order
    ///   in which Core Data creates the indexes and the columns
    ///   (InferredSchema+Table.swift);
    /// - the real names of to-manys kept by their inverse's key, transient
    ///   properties, abstract entities, optionality, defaults, delete rules,
    ///   indexes, constraints, and the finer attribute types (Integer 16 and
    ///   32, Boolean, Float, URI, UUID, Transformable read as their column's
    ///   widest type).
    ///
    /// A join table whose relationship names clash with a column's property
    /// is left out (Core Data never writes one).
    ///
    /// - Parameter url: the store file; opened read-only, and never changed.
    /// - Throws: ``PersistentStoreError`` naming the file: `.cannotOpen` when
    ///   no file exists there, `.notAStore` when it is not a SQLite database,
    ///   has no `Z_PRIMARYKEY` table, or has tables Core Data does not lay out.
    /// - Complexity: a few schema queries per table; the number of rows does not matter.
    public convenience init(inferredFromSchemaOfStoreAt url: URL) throws {
        let schema = try InferredSchema(storeAt: url)
        self.init(entities: InferredModelBuilder(schema: schema).entities())
    }
}

/// Turns an ``InferredSchema`` into entity descriptions.
private struct InferredModelBuilder {
    let schema: InferredSchema
    let descriptions: [Int64: EntityDescription]
    let rootOf: [Int64: Int64]

    init(schema: InferredSchema) {
        self.schema = schema
        descriptions = Dictionary(uniqueKeysWithValues: schema.entities.map { ($0.number, EntityDescription(name: $0.name)) })
        let parents = Dictionary(uniqueKeysWithValues: schema.entities.map { ($0.number, $0.parent) })
        var roots: [Int64: Int64] = [:]
        for entity in schema.entities {
            var current = entity.number
            var steps = 0
            while let parent = parents[current], parent != 0, steps < parents.count { current = parent; steps += 1 }
            roots[entity.number] = current
        }
        rootOf = roots
    }

    /// The entities in `Z_ENT` order, their properties and subentities set.
    func entities() -> [EntityDescription] {
        var properties: [Int64: [PropertyDescription]] = [:]
        // Names taken in each inheritance tree, by root: a property name must be unique along every chain.
        var taken: [Int64: Set<String>] = [:]
        for table in schema.tables {
            taken[table.root] = Set(table.toOnes.map(\.name) + table.attributes.map(\.name))
        }
        for table in schema.tables {
            guard let root = descriptions[table.root] else { continue }
            for toOne in table.toOnes {
                let destination = descriptions[toOne.destination]?.name ?? ""
                var inverse: String?
                // A stand-in gets no inverse, unless a rank column needs one to be read.
                if !destination.isEmpty, toOne.destinationSource != .none || toOne.hasOrderColumn {
                    let tree = rootOf[toOne.destination] ?? toOne.destination
                    let name = String.firstFree("\(root.name.lowercased())_\(toOne.name)", among: taken[tree] ?? [])
                    taken[tree, default: []].insert(name)
                    inverse = name
                    properties[toOne.destination, default: []].append(RelationshipDescription(
                        name: name, destination: root.name, inverse: toOne.name, isToMany: true, isOrdered: toOne.hasOrderColumn))
                }
                let relationship = RelationshipDescription(name: toOne.name, destination: destination, inverse: inverse)
                relationship.userInfo[ManagedObjectModel.inferredDestinationUserInfoKey] = toOne.destinationSource.rawValue
                properties[table.root, default: []].append(relationship)
            }
            properties[table.root, default: []] += table.attributes.map { AttributeDescription(name: $0.name, type: $0.type) }
        }
        for join in schema.manyToManys {
            guard descriptions[join.owner] != nil, let destination = descriptions[join.destination],
                  let ownerTree = rootOf[join.owner], let destinationTree = rootOf[join.destination],
                  !(taken[ownerTree] ?? []).contains(join.name), !(taken[destinationTree] ?? []).contains(join.inverseName),
                  let inverseDestination = descriptions[join.inverseDestination] else { continue }
            taken[ownerTree, default: []].insert(join.name)
            taken[destinationTree, default: []].insert(join.inverseName)
            properties[join.owner, default: []].append(RelationshipDescription(
                name: join.name, destination: destination.name, inverse: join.inverseName, isToMany: true, isOrdered: join.isOrdered))
            properties[join.destination, default: []].append(RelationshipDescription(
                name: join.inverseName, destination: inverseDestination.name, inverse: join.name, isToMany: true,
                isOrdered: join.inverseIsOrdered))
        }
        for (number, list) in properties { descriptions[number]?.properties = list }
        for entity in schema.entities where entity.parent != 0 {
            descriptions[entity.parent]?.subentities.append(contentsOf: descriptions[entity.number].map { [$0] } ?? [])
        }
        return schema.entities.compactMap { descriptions[$0.number] }
    }
}
