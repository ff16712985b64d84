import Foundation
@testable import ObjectGraph

/// A model inferred from a Core Data store's schema alone
/// (``ManagedObjectModel/init(inferredFromSchemaOfStoreAt:)``, which documents
/// what the schema tells and what it cannot), so that the history of stores
/// Apple's apps wrote (Notes, Screen Time, knowledgeC), which ship no model
/// file, can be read through the API; plus what a history test needs beside
/// it: each entity's `ZCOLUMNS` bit order and tombstone attributes.
///
/// The bit order is worked out here from the model's to-ones and attributes,
/// which come from the columns, not by the engine's history layout, so a
/// test decodes `ZCOLUMNS` on its own. Every column of a shared table is on
/// its root entity, so for an entity that shares its table the order is not
/// Apple's (Core Data's slots run level by level). To-many relationships,
/// which have no column, come after every to-one and attribute; their bits
/// are left out here.
struct SchemaDerivedModel {
    let model: ManagedObjectModel
    /// For each entity, by name, the property each `ZCOLUMNS` bit stands for
    /// under the slot rule of the reference (coredata-semantics-stage2 §1.3)
    /// applied to this model: its to-ones by name, two bits for one with an
    /// entity column, then its attributes by name.
    let propertyOfBit: [String: [String]]
    /// For each entity with preserved attributes, by name, those attributes in
    /// `ZTOMBSTONE0`, `ZTOMBSTONE1`, … order: their order among the bits.
    let tombstoneAttributes: [String: [String]]
    /// The entities alone in their table: for them the schema fixes the bits
    /// of every to-one and attribute, as Core Data lays them out.
    let entitiesAloneInTheirTable: Set<String>

    /// Infers the model of the store at `url`.
    ///
    /// - Parameter preserving: the attributes, by root entity name, whose
    ///   values Core Data keeps in the tombstone of a deleted object (Xcode's
    ///   "Preserve After Deletion", which the schema cannot tell).
    init(store url: URL, preserving: [String: Set<String>] = [:]) throws {
        model = try ManagedObjectModel(inferredFromSchemaOfStoreAt: url)
        let byName = model.entitiesByName
        var propertyOfBit: [String: [String]] = [:]
        var tombstoneAttributes: [String: [String]] = [:]
        for root in model.entities where root.superentity == nil {
            let attributes = root.properties.compactMap { $0 as? AttributeDescription }
            let preserved = preserving[root.name] ?? []
            let unknown = preserved.subtracting(attributes.map(\.name))
            guard unknown.isEmpty else {
                throw FixtureError("\(root.name) has no attribute \(unknown.sorted().joined(separator: ", ")) to preserve")
            }
            for attribute in attributes { attribute.preservesValueInHistoryOnDeletion = preserved.contains(attribute.name) }
            let toOnes = root.properties.compactMap { $0 as? RelationshipDescription }.filter { !$0.isToMany }
            let bitOrder = toOnes.sorted { Self.byteWise($0.name, $1.name) }.flatMap { toOne in
                (byName[toOne.destinationEntityName]?.subentities.isEmpty ?? true) ? [toOne.name] : [toOne.name, toOne.name]
            } + attributes.map(\.name).sorted(by: Self.byteWise)
            for member in root.selfAndDescendants {
                propertyOfBit[member.name] = bitOrder
                tombstoneAttributes[member.name] = bitOrder.filter(preserved.contains)
            }
        }
        self.propertyOfBit = propertyOfBit
        self.tombstoneAttributes = tombstoneAttributes.filter { !$0.value.isEmpty }
        entitiesAloneInTheirTable = Set(model.entities.filter { $0.superentity == nil && $0.subentities.isEmpty }.map(\.name))
    }

    /// The names of the properties whose bits `columns` sets, by this model's
    /// bit order; bits past it (to-many relationships) are left out.
    func updatedProperties(of entity: String, in columns: Data) -> Set<String> {
        let order = propertyOfBit[entity] ?? []
        var names: Set<String> = []
        for (offset, byte) in columns.enumerated() {
            for bit in 0..<8 where byte & (0x80 >> bit) != 0 && offset * 8 + bit < order.count {
                names.insert(order[offset * 8 + bit])
            }
        }
        return names
    }

    /// Byte-wise order of names, as Core Data sorts the properties of a level.
    private static func byteWise(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }
}
