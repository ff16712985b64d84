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

    // MARK: Tombstones

    /// How many `ZTOMBSTONE<n>` columns the history needs: the most preserved
    /// attributes (`preservesValueInHistoryOnDeletion`) of any one entity.
    public var tombstoneColumnCount: Int { history.tombstoneColumnCount }

    /// The preserved attributes of the entity numbered `number`, in tombstone
    /// order (Core Data's: `ZTOMBSTONE0` holds the first); empty for none.
    public func tombstoneAttributes(ofEntityNumbered number: Int64) -> [AttributeDescription] {
        guard let entity = history.entitiesByNumber[number] else { return [] }
        return entity.tombstoneSlots.compactMap { entity.entity.slotProperties[$0] as? AttributeDescription }
    }

    /// A deleted object's tombstone, read from `row` whose columns from
    /// `firstColumn` on are `ZTOMBSTONE0`… (`columnCount` of them), in the
    /// storage form; nil for an entity without preserved attributes, as the
    /// SQLite store reports it.
    ///
    /// - Throws: when a column does not hold a value of its attribute's type.
    public func tombstone(ofEntityNumbered number: Int64, from row: some StoredRow, firstColumn: Int,
                          columnCount: Int) throws -> [String: PropertyValue]? {
        let attributes = tombstoneAttributes(ofEntityNumbered: number)
        guard !attributes.isEmpty else { return nil }
        var tombstone: [String: PropertyValue] = [:]
        for (index, attribute) in attributes.enumerated() where index < columnCount {
            tombstone[attribute.name] = try RowReader.value(of: attribute.type, at: firstColumn + index, in: row)
        }
        return tombstone
    }
}
