@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// A batch request's persistent history: one transaction, as a save records
/// one, or nothing when the store does not track history.
///
/// Rows a request selects by its condition are recorded by copying their keys
/// with one `INSERT INTO ACHANGE … SELECT … FROM <table>` per entity, before
/// the request writes them (its condition may read what it writes): a million
/// rows cost SQLite a table scan and an append, not a million statements.
/// Rows a delete plan read one by one are recorded from those rows.
struct BatchHistory {
    let layout: HistoryLayout?
    let author: String?
    let contextName: String?

    /// Records an update of `slots` (their `ZCOLUMNS` bits) for every selected row.
    func recordUpdates(of selection: BatchSelection, slots: [Int], store: SQLiteStore, schema: TableLayout,
                       connection: Connection) throws -> PersistentHistoryToken? {
        try record(selection, as: .update, store: store, schema: schema, connection: connection) { entity, _ in
            (entity.columnsMask(slots: slots.filter { $0 < entity.bitsOfSlot.count }), [])
        }
    }

    /// Records the deletion of every selected row, with its preserved values as tombstones.
    func recordDeletes(of selection: BatchSelection, store: SQLiteStore, schema: TableLayout,
                       connection: Connection) throws -> PersistentHistoryToken? {
        try record(selection, as: .delete, store: store, schema: schema, connection: connection) { entity, mapping in
            (nil, entity.tombstoneSlots.map { slot in mapping.columns[slot].map { "t0.\($0.name)" } ?? "NULL" })
        }
    }

    /// Records `request` against the rows as they were before it; returns the transaction's token.
    func write(_ request: SaveChangesRequest, before: [IncrementalStoreNode], writtenSlots: Set<Int> = [], store: SQLiteStore,
               schema: TableLayout, connection: Connection) throws -> PersistentHistoryToken? {
        guard let layout else { return nil }
        let rows = Dictionary(before.map { ($0.objectID, $0) }, uniquingKeysWith: { first, _ in first })
        return try store.recordHistory(of: request, permanentIDs: [:], insertedKeys: [], before: rows,
                                       writtenSlots: writtenSlots,
                                       author: author, contextName: contextName, layout: layout, schema: schema, connection: connection)
    }

    /// One transaction, and per entity of the selection one statement copying
    /// a change row from each selected row: `columns` gives the entity's
    /// `ZCOLUMNS` value and the SQL of its tombstone values.
    private func record(_ selection: BatchSelection, as type: PersistentHistoryChange.ChangeType, store: SQLiteStore,
                        schema: TableLayout, connection: Connection,
                        columns: (HistoryLayout.EntityLayout, TableLayout.EntityMapping) -> (mask: [UInt8]?, tombstones: [String]))
        throws -> PersistentHistoryToken? {
        guard let layout else { return nil }
        let url = store.url
        let transaction = try HistoryLayout.insertTransaction(author: author, contextName: contextName, connection: connection, url: url)
        let first = try HistoryLayout.lastKey(of: HistoryLayout.changeEntity, connection) + 1
        let appends = try HistoryLayout.changesAppend(at: first, connection)
        var next = first
        let parameter = selection.bindings.count
        for number in selection.entityNumbers {
            guard let entity = schema.entitiesByNumber[number], let entityLayout = layout.entities[ObjectIdentifier(entity)] else {
                throw PersistentStoreError(.ioFailure, url: url, message: "the history cannot record entity number \(number): it has no history layout")
            }
            let (mask, tombstones) = columns(entityLayout, try schema.mapping(for: entity))
            let tombstoneColumns = tombstones.indices.map { ", ZTOMBSTONE\($0)" }.joined()
            let key = appends ? ("", "") : ("Z_PK, ", "?\(parameter + 5) + row_number() OVER (ORDER BY t0.Z_PK) - 1, ")
            let insert = try selection.prepare("""
                INSERT INTO ACHANGE (\(key.0)Z_ENT, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID, ZCOLUMNS\(tombstoneColumns)) \
                SELECT \(key.1)?\(parameter + 1), ?\(parameter + 2), t0.Z_ENT, t0.Z_PK, ?\(parameter + 3), ?\(parameter + 4)\
                \(tombstones.map { ", " + $0 }.joined()) FROM \(selection.table) t0\(selection.whereClause(entity: number))
                """, on: connection)
            try insert.bind(HistoryLayout.changeEntity, at: Int32(parameter + 1))
            try insert.bind(type.rawValue, at: Int32(parameter + 2))
            try insert.bind(transaction, at: Int32(parameter + 3))
            if let mask { try insert.bind(mask, at: Int32(parameter + 4)) } else { try insert.bindNull(at: Int32(parameter + 4)) }
            if !appends { try insert.bind(next, at: Int32(parameter + 5)) }
            try insert.execute()
            next += Int64(connection.changes)
        }
        let count = next - first
        if count > 0 {
            let allocated = try SQLiteStore.allocateKeys(count, entity: HistoryLayout.changeEntity, connection: connection, url: url)
            // A batch's history must be whole: its rows hold exactly the keys allocated for them.
            guard allocated == next - 1, !appends || connection.lastInsertedRowID == next - 1 else {
                throw PersistentStoreError(.ioFailure, url: url, message: """
                    the history of the batch was not written whole: \(count) changes ending at key \(connection.lastInsertedRowID), \
                    keys allocated up to \(allocated)
                    """)
            }
        }
        return PersistentHistoryToken(storeIdentifier: store.identifier, transactionNumber: transaction)
    }
}
