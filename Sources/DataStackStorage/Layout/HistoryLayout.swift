import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// Core Data's persistent-history tables, and how each entity's changes are
/// written into them: the bit of each property in `ACHANGE.ZCOLUMNS` and the
/// `ZTOMBSTONE<n>` column of each preserved attribute.
///
/// The `ZCOLUMNS` rule is the one the reference derives from every update row
/// of six stores written by Apple (coredata-semantics-stage2 §1.3): an MSB-first
/// bit string of `ceil(S/8)` bytes whose slots run over the inheritance chain,
/// root to leaf — first the to-one relationships, level by level and sorted by
/// name within a level (a to-one whose destination has subentities takes two
/// slots, its key and its `Z<n>_` entity column), then the attributes the same
/// way, then the to-many relationships. Transient properties have no slot.
/// Tombstones are numbered by the rank of the preserved attribute in that order.
package struct HistoryLayout: Sendable {
    /// `Z_PRIMARYKEY` numbers and names of the history entities, as Apple writes them.
    package static let changeEntity: Int64 = 16001
    package static let transactionEntity: Int64 = 16002
    package static let stringEntity: Int64 = 16003

    /// One entity's history layout.
    package final class EntityLayout: Sendable {
        package let entity: EntityDescription
        /// `Z_ENT` of the entity, written as `ACHANGE.ZENTITY`.
        package let number: Int64
        /// For each slot of the entity, its `ZCOLUMNS` bits (one, or two for a
        /// to-one with an entity column); empty for a transient property.
        package let bitsOfSlot: [[Int]]
        /// The property of each bit, for reading `ZCOLUMNS` back.
        let propertyOfBit: [String]
        /// `ceil(S/8)`: every update row of the entity has this many bytes.
        let byteCount: Int
        /// The slots of the preserved attributes, in tombstone order.
        package let tombstoneSlots: [Int]

        init(entity: EntityDescription, number: Int64) {
            self.entity = entity
            self.number = number
            var chain: [EntityDescription] = []
            var level: EntityDescription? = entity
            while let current = level {
                chain.insert(current, at: 0)
                level = current.superentity
            }
            func declared(_ include: (PropertyDescription) -> Bool) -> [PropertyDescription] {
                chain.flatMap { level in
                    level.properties.filter { !$0.isTransient && include($0) }.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
                }
            }
            let toOnes = declared { ($0 as? RelationshipDescription).map { !$0.isToMany } ?? false }
            let attributes = declared { $0 is AttributeDescription }
            let toManys = declared { ($0 as? RelationshipDescription)?.isToMany ?? false }
            var bitsOfSlot = [[Int]](repeating: [], count: entity.slotProperties.count)
            var propertyOfBit: [String] = []
            for property in toOnes + attributes + toManys {
                var width = 1
                if let relationship = property as? RelationshipDescription, !relationship.isToMany,
                   !(relationship.destinationEntity?.subentities.isEmpty ?? true) {
                    width = 2
                }
                let slot = property.index
                for _ in 0..<width {
                    if slot >= 0 && slot < bitsOfSlot.count { bitsOfSlot[slot].append(propertyOfBit.count) }
                    propertyOfBit.append(property.name)
                }
            }
            self.bitsOfSlot = bitsOfSlot
            self.propertyOfBit = propertyOfBit
            byteCount = (propertyOfBit.count + 7) / 8
            // Attributes with external binary storage are never tombstoned, even
            // when their value is inline (coredata-semantics-stage2, "Tombstones").
            tombstoneSlots = attributes.compactMap { property in
                guard let attribute = property as? AttributeDescription, attribute.preservesValueInHistoryOnDeletion,
                      !attribute.storesExternalBinaryData else { return nil }
                return property.index
            }
        }

        /// The `ZCOLUMNS` bytes with the bits of these slots set.
        package func columnsMask(slots: [Int]) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: byteCount)
            for slot in slots where slot >= 0 && slot < bitsOfSlot.count {
                for bit in bitsOfSlot[slot] { bytes[bit / 8] |= 0x80 >> UInt8(bit % 8) }
            }
            return bytes
        }

        /// The slots of an updated object whose values differ from its row
        /// before the save (`old`, with the members of each to-many the save
        /// writes; nil when there was none): a to-many whose members, or
        /// for an ordered one their order, changed counts. Slots without a
        /// bit never count; `written` slots always do (a batch update's `SET`).
        package func changedSlots(of node: IncrementalStoreNode, before old: IncrementalStoreNode?, written: Set<Int> = [],
                          permanent: (ObjectID) -> ObjectID) -> [Int] {
            node.values.indices.filter { slot in
                guard !bitsOfSlot[slot].isEmpty else { return false }
                if written.contains(slot) { return true }
                guard let old else { return true }
                switch node.values[slot] {
                case .objects(let members):
                    guard case .objects(let before) = old.values[slot],
                          let relationship = entity.slotProperties[slot] as? RelationshipDescription else { return true }
                    let now = members.map(permanent)
                    return relationship.isOrdered ? before != now : Set(before) != Set(now)
                case .object(let id):
                    return old.values[slot] != .object(permanent(id))
                case let value:
                    return old.values[slot] != value
                }
            }
        }

        /// The names of the properties whose bits `mask` sets; bits past the
        /// entity's slots (a row written with another model) are left out.
        package func properties(in mask: Data) -> Set<String> {
            var names: Set<String> = []
            for (offset, byte) in mask.enumerated() where byte != 0 {
                for bit in 0..<8 where byte & (0x80 >> UInt8(bit)) != 0 {
                    let position = offset * 8 + bit
                    if position < propertyOfBit.count { names.insert(propertyOfBit[position]) }
                }
            }
            return names
        }
    }

    /// Where a file's history keeps the author, bundle, context and process
    /// names of its transactions.
    package enum TransactionStrings: Sendable, Equatable {
        /// Once each, in `ATRANSACTIONSTRING`, which the `ATRANSACTION.*TS`
        /// columns point into: Core Data's layout since about framework 1145,
        /// and the one written here.
        case interned
        /// In `ATRANSACTION`'s own `ZAUTHOR`, `ZBUNDLEID`, `ZCONTEXTNAME` and
        /// `ZPROCESSID`, with no `ATRANSACTIONSTRING` table and no `*TS`
        /// columns: Core Data's older layout (macOS 10.13's knowledgeC,
        /// framework 851). It is read, never written here.
        case inline

        /// The `ATRANSACTION` columns a file of this layout must have for its transactions to be read.
        package var transactionColumns: [String] {
            let names = ["ZTIMESTAMP", "ZAUTHOR", "ZBUNDLEID", "ZCONTEXTNAME", "ZPROCESSID"]
            return self == .interned ? names + ["ZAUTHORTS", "ZBUNDLEIDTS", "ZCONTEXTNAMETS", "ZPROCESSIDTS"] : names
        }

        /// The start of a select of each transaction's number, timestamp,
        /// author, bundle, context and process names, from `ATRANSACTION t`.
        /// The interned layout still falls back on the inline columns, which
        /// Core Data leaves NULL there.
        package var transactionSelect: String {
            switch self {
            case .interned: """
                SELECT t.Z_PK, t.ZTIMESTAMP, coalesce(a.ZNAME, t.ZAUTHOR), coalesce(b.ZNAME, t.ZBUNDLEID), \
                coalesce(c.ZNAME, t.ZCONTEXTNAME), coalesce(p.ZNAME, t.ZPROCESSID) FROM ATRANSACTION t \
                LEFT JOIN ATRANSACTIONSTRING a ON a.Z_PK = t.ZAUTHORTS LEFT JOIN ATRANSACTIONSTRING b ON b.Z_PK = t.ZBUNDLEIDTS \
                LEFT JOIN ATRANSACTIONSTRING c ON c.Z_PK = t.ZCONTEXTNAMETS LEFT JOIN ATRANSACTIONSTRING p ON p.Z_PK = t.ZPROCESSIDTS
                """
            case .inline:
                "SELECT t.Z_PK, t.ZTIMESTAMP, t.ZAUTHOR, t.ZBUNDLEID, t.ZCONTEXTNAME, t.ZPROCESSID FROM ATRANSACTION t"
            }
        }
    }

    package let entities: [ObjectIdentifier: EntityLayout]
    package let entitiesByNumber: [Int64: EntityLayout]
    /// How many `ZTOMBSTONE<n>` columns the model needs: the most preserved attributes of any entity.
    package let tombstoneColumnCount: Int
    /// Where the file keeps its transactions' names.
    package var transactionStrings = TransactionStrings.interned

    package init(schema: TableLayout) {
        var entities: [ObjectIdentifier: EntityLayout] = [:]
        var byNumber: [Int64: EntityLayout] = [:]
        for (key, mapping) in schema.mappings {
            let layout = EntityLayout(entity: mapping.entity, number: mapping.number)
            entities[key] = layout
            byNumber[mapping.number] = layout
        }
        self.entities = entities
        entitiesByNumber = byNumber
        tombstoneColumnCount = entities.values.map(\.tombstoneSlots.count).max() ?? 0
    }

    // MARK: - Tables

    /// The tables and indexes of the history, in Apple's words
    /// (`sqlite_master` of the fixture stores), with `tombstones` tombstone columns.
    package static func creationStatements(tombstones: Int) -> [String] {
        let tombstoneColumns = (0..<tombstones).map { ", ZTOMBSTONE\($0) BLOB" }.joined()
        return [
            "CREATE TABLE ACHANGE ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZCHANGETYPE INTEGER, ZENTITY INTEGER, "
                + "ZENTITYPK INTEGER, ZTRANSACTIONID INTEGER, ZCOLUMNS BLOB\(tombstoneColumns) )",
            "CREATE TABLE ATRANSACTION ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZAUTHORTS INTEGER, ZBUNDLEIDTS INTEGER, "
                + "ZCONTEXTNAMETS INTEGER, ZPROCESSIDTS INTEGER, ZTIMESTAMP FLOAT, ZAUTHOR VARCHAR, ZBUNDLEID VARCHAR, "
                + "ZCONTEXTNAME VARCHAR, ZPROCESSID VARCHAR, ZQUERYGEN BLOB )",
            "CREATE TABLE ATRANSACTIONSTRING ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR )",
            "CREATE INDEX ACHANGE_ZTRANSACTIONID_INDEX ON ACHANGE (ZTRANSACTIONID)",
            "CREATE INDEX ATRANSACTION_ZAUTHORTS_INDEX ON ATRANSACTION (ZAUTHORTS)",
            "CREATE INDEX ATRANSACTION_ZBUNDLEIDTS_INDEX ON ATRANSACTION (ZBUNDLEIDTS)",
            "CREATE INDEX ATRANSACTION_ZCONTEXTNAMETS_INDEX ON ATRANSACTION (ZCONTEXTNAMETS)",
            "CREATE INDEX ATRANSACTION_ZPROCESSIDTS_INDEX ON ATRANSACTION (ZPROCESSIDTS)",
            "CREATE INDEX Z_TRANSACTION_TransactionAuthorIndex ON ATRANSACTION (ZAUTHOR COLLATE BINARY ASC)",
            "CREATE INDEX Z_TRANSACTION_TransactionTimestampIndex ON ATRANSACTION (ZTIMESTAMP COLLATE BINARY ASC)",
            "CREATE UNIQUE INDEX Z_TRANSACTIONSTRING_UNIQUE_NAME ON ATRANSACTIONSTRING (ZNAME COLLATE BINARY ASC)",
            "INSERT OR IGNORE INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES "
                + "(\(changeEntity), 'CHANGE', 0, 0), (\(transactionEntity), 'TRANSACTION', 0, 0), (\(stringEntity), 'TRANSACTIONSTRING', 0, 0)",
        ]
    }
}
