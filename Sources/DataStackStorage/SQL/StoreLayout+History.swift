import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - History: which properties an update changed
@_spi(StoreImplementation)
extension StoreLayout {
    /// The to-many relationships of an updated object whose members the save
    /// writes (the context loaded them): a store reads their members before
    /// the save into the row it passes to ``historyColumns(of:before:permanent:)``,
    /// so that a relationship whose members did not change is not recorded as changed.
    public func relationshipsComparedByHistory(in node: IncrementalStoreNode) -> [RelationshipDescription] {
        guard node.objectID.entity.hasRelationships else { return [] }
        return node.values.indices.compactMap { slot in
            guard case .objects = node.values[slot] else { return nil }
            return node.objectID.entity.slotProperties[slot] as? RelationshipDescription
        }
    }

    /// `ACHANGE.ZCOLUMNS` of an updated object, as the SQLite store writes it
    /// (Core Data's encoding: one bit per property, `ceil(S/8)` bytes): the
    /// bits of the properties whose values differ from `before`, the row
    /// before the save with the members of ``relationshipsComparedByHistory(in:)``
    /// (nil when it could not be read: every property counts).
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/noStore`` for an entity the layout does not hold.
    public func historyColumns(of node: IncrementalStoreNode, before: IncrementalStoreNode?,
                               permanent: (ObjectID) -> ObjectID) throws -> Data {
        guard let entity = history.entities[ObjectIdentifier(node.objectID.entity)] else {
            throw ObjectGraphError.noStore(entity: node.objectID.entity.name)
        }
        return Data(entity.columnsMask(slots: entity.changedSlots(of: node, before: before, permanent: permanent)))
    }

    /// The names of the properties whose bits `columns` (``historyColumns(of:before:permanent:)``)
    /// sets, for an object of the entity numbered `entityNumber`; empty for an
    /// entity the layout does not hold.
    public func updatedProperties(ofEntityNumbered entityNumber: Int64, historyColumns columns: Data) -> Set<String> {
        history.entitiesByNumber[entityNumber]?.properties(in: columns) ?? []
    }
}
