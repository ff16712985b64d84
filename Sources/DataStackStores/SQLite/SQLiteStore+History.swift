@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
@_spi(DataStackInternal) import DataStackSupport
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Persistent history: tables, recording, reading, deleting

extension SQLiteStore: PersistentHistoryStore {
    public var tracksPersistentHistory: Bool { state.withLock { $0.history != nil } }

    /// Makes the history tables ready when the store opens: with tracking they
    /// are created if missing (and tombstone columns the model needs are added),
    /// in one write transaction that checks again under the lock, as the store's
    /// own creation does; without tracking, a store whose history holds
    /// transactions refuses saves, as Core Data's is forced read-only.
    ///
    /// A file with Core Data's older history layout (strings inline, see
    /// ``HistoryLayout/TransactionStrings/inline``) opens with tracking
    /// so that its history can be read, but refuses saves: they would have to
    /// record transactions in a layout written nowhere here, and a save without
    /// its transaction would leave a gap in the history.
    func prepareHistory(_ connection: Connection) throws {
        let tracking = configuration.options.persistentHistoryTracking
        guard tracking else {
            if try connection.tableExists("ATRANSACTION"), try Self.scalar(connection, "SELECT EXISTS (SELECT 1 FROM ATRANSACTION)") != 0 {
                state.withLock { $0.readOnlyReason = StoreLayout.untrackedHistoryReason }
            }
            return
        }
        let strings = try historyTables(connection)
        var layout = HistoryLayout(schema: try schema)
        if strings == .inline {
            layout.transactionStrings = .inline
            state.withLock {
                $0.history = layout
                $0.readOnlyReason = isReadOnly ? nil : """
                    the store's persistent history has Core Data's older layout (no ATRANSACTIONSTRING table: each \
                    transaction's names inline, as macOS 10.13 wrote them), which is read here but not written: \
                    saves would go unrecorded in its history, so it is read-only
                    """
            }
            return
        }
        let needed = layout.tombstoneColumnCount
        let present = strings != nil ? try Self.tombstoneColumns(connection) : 0
        if isReadOnly {
            guard strings != nil else { return }
        } else if strings == nil || present < needed {
            do {
                try connection.inWriteTransaction {
                    if try historyTables(connection) == nil {
                        for sql in HistoryLayout.creationStatements(tombstones: needed) { try connection.execute(sql) }
                    }
                    let columns = try Self.tombstoneColumns(connection)
                    for index in columns..<max(needed, columns) {
                        try connection.execute("ALTER TABLE ACHANGE ADD COLUMN ZTOMBSTONE\(index) BLOB")
                    }
                }
            } catch let error as SQLiteError {
                throw Self.storeError(error, url: url, doing: "adding the persistent history tables")
            }
        }
        state.withLock { $0.history = layout }
    }

    /// Which layout the file's history tables have, nil when it has none.
    ///
    /// - Throws: ``PersistentStoreError/Code/notAStore`` for tables that are
    ///   neither layout (some missing, or `ATRANSACTION` without the columns
    ///   its names are read from): their history could be read only in part.
    private func historyTables(_ connection: Connection) throws -> HistoryLayout.TransactionStrings? {
        let all = ["ACHANGE", "ATRANSACTION", "ATRANSACTIONSTRING"]
        let present = try all.filter { try connection.tableExists($0) }
        if present.isEmpty { return nil }
        let strings: HistoryLayout.TransactionStrings = present.contains("ATRANSACTIONSTRING") ? .interned : .inline
        let tables = strings == .interned ? all : ["ACHANGE", "ATRANSACTION"]
        var missing = tables.filter { !present.contains($0) }
        if present.contains("ATRANSACTION") {
            let columns = Set(try connection.columns(in: "ATRANSACTION").map(\.name))
            missing += strings.transactionColumns.filter { !columns.contains($0) }.map { "ATRANSACTION.\($0)" }
        }
        guard missing.isEmpty else {
            throw PersistentStoreError(.notAStore, url: url, message: """
                the store's persistent history tables are incomplete: it has \(present.joined(separator: ", ")) but not \
                \(missing.joined(separator: ", ")), so its history cannot be read as Core Data wrote it
                """)
        }
        return strings
    }

    private static func tombstoneColumns(_ connection: Connection) throws -> Int {
        try connection.columns(in: "ACHANGE").filter { $0.name.hasPrefix("ZTOMBSTONE") }.count
    }

    private static func scalar(_ connection: Connection, _ sql: String, _ argument: Int64? = nil) throws -> Int64 {
        let statement = try connection.cachedStatement(sql)
        defer { statement.reset() }
        if let argument { try statement.bind(argument, at: 1) }
        return try statement.step() ? statement.int64(at: 0) : 0
    }

    /// The store's history layout, or the error a history request gets without one.
    private func historyLayout() throws -> HistoryLayout {
        guard let layout = state.withLock({ $0.history }) else {
            throw PersistentStoreError(.historyNotTracked, url: url, message: isReadOnly && configuration.options.persistentHistoryTracking
                ? "the store has no persistent history tables, and it is opened read-only so they cannot be added"
                : "the store does not record persistent history: add it with StoreOptions.persistentHistoryTracking")
        }
        return layout
    }

    // MARK: Recording

    /// What history needs from the rows before a save changes them: each
    /// updated row (to tell which columns change) and each deleted row of an
    /// entity with preserved attributes (its tombstone). Read inside the save's
    /// transaction, so the rows cannot move in between.
    func rowsBeforeSave(_ request: SaveChangesRequest, layout: HistoryLayout, schema: TableLayout,
                        connection: Connection) throws -> [ObjectID: IncrementalStoreNode] {
        let tombstoned = request.deletedObjects.lazy.map(\.objectID).filter {
            !(layout.entities[ObjectIdentifier($0.entity)]?.tombstoneSlots.isEmpty ?? true)
        }
        // Not the rows of updated objects whose changed slots the context
        // gave at the version the save checks: in an attempt that stands that
        // version is the row's, so the row is the context's snapshot
        // (``recordHistory`` takes their changed slots as they are).
        var read: [ObjectID] = []
        read.reserveCapacity(request.updatedObjects.count)
        for (position, node) in request.updatedObjects.enumerated() where request.snapshotChanges(ofUpdatedAt: position) == nil {
            read.append(node.objectID)
        }
        read.append(contentsOf: tombstoned)
        if read.isEmpty { return [:] }
        var rows = try currentRows(of: read, schema: schema, connection: connection)
        // A loaded to-many of an updated object: its members as the file has
        // them now. The writer holds the write lock, so a read begun now (on
        // any reader connection) sees the state this save starts from.
        for node in request.updatedObjects {
            for (slot, value) in node.values.enumerated() {
                guard case .objects = value, let relationship = node.objectID.entity.slotProperties[slot] as? RelationshipDescription,
                      !(layout.entities[ObjectIdentifier(node.objectID.entity)]?.bitsOfSlot[slot].isEmpty ?? true) else { continue }
                rows[node.objectID]?.values[slot] = try toManyDestinations(relationship, of: node.objectID, in: nil)
            }
        }
        return rows
    }

    /// Writes one `ATRANSACTION` row and one `ACHANGE` row per saved object,
    /// inside the save's transaction, after its rows are written; returns the
    /// transaction's token. `writtenSlots` are recorded as changed in every
    /// updated row whatever their values (a batch update's `SET` columns).
    /// `permanentIDs` maps the temporary IDs that updated rows' relationships
    /// name (empty when no saved entity has relationships).
    func recordHistory(of request: SaveChangesRequest, permanentIDs: [ObjectID: ObjectID], insertedKeys: [Int64], before: [ObjectID: IncrementalStoreNode],
                       writtenSlots: Set<Int> = [], author: String?, contextName: String?, layout: HistoryLayout, schema: TableLayout,
                       connection: Connection) throws -> PersistentHistoryToken {
        let transaction = try HistoryLayout.insertTransaction(author: author, contextName: contextName, connection: connection, url: url)

        let count = request.insertedObjects.count + request.updatedObjects.count + request.deletedObjects.count
        var next = try Self.allocateKeys(Int64(count), entity: HistoryLayout.changeEntity, connection: connection, url: url) - Int64(count) + 1
        let tombstones = layout.tombstoneColumnCount
        let tombstoneColumns = (0..<tombstones).map { ", ZTOMBSTONE\($0)" }.joined()
        let insertChange = try connection.cachedStatement("""
            INSERT INTO ACHANGE (Z_PK, Z_ENT, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID, ZCOLUMNS\(tombstoneColumns)) \
            VALUES (?, ?, ?, ?, ?, ?, ?\(String(repeating: ", ?", count: tombstones)))
            """)
        func insert(_ id: ObjectID, _ type: PersistentHistoryChange.ChangeType, columns: [UInt8]?, tombstone: [PropertyValue]) throws {
            // A save's history must be whole: a change it cannot record stops the save.
            guard let entity = layout.entities[ObjectIdentifier(id.entity)], let primaryKey = id.primaryKey else {
                throw PersistentStoreError(.ioFailure, url: url, message: "the history cannot record \(id): no history layout for entity \(id.entity.name), or no permanent ID")
            }
            insertChange.reset()
            try insertChange.bind(next, at: 1)
            try insertChange.bind(HistoryLayout.changeEntity, at: 2)
            try insertChange.bind(type.rawValue, at: 3)
            try insertChange.bind(entity.number, at: 4)
            try insertChange.bind(primaryKey, at: 5)
            try insertChange.bind(transaction, at: 6)
            if let columns { try insertChange.bind(columns, at: 7) } else { try insertChange.bindNull(at: 7) }
            for index in 0..<tombstones {
                try insertChange.bind(index < tombstone.count ? tombstone[index] : .null, at: Int32(8 + index))
            }
            try insertChange.execute()
            next += 1
        }
        next = try recordInsertions(of: request.insertedObjects, keys: insertedKeys, firstKey: next, transaction: transaction,
                                    schema: schema, connection: connection)
        // Updates changed the same way, a statement per run of keys as for inserts; a lone row, one of its own.
        for group in try historyUpdateGroups(of: request, before: before, writtenSlots: writtenSlots, permanentIDs: permanentIDs, layout: layout) {
            var start = group.rows.startIndex
            while start < group.rows.endIndex {
                var end = start + 1
                while end < group.rows.endIndex, group.rows[end].key == group.rows[end - 1].key + 1 { end += 1 }
                if end - start == 1 {
                    try insert(group.rows[start].id, .update, columns: group.columns, tombstone: [])
                } else {
                    next = try recordChangeRuns([(try schema.mapping(for: group.entity), [group.rows[start].key...group.rows[end - 1].key])],
                                                as: .update, columns: group.columns, firstKey: next, transaction: transaction, connection: connection)
                }
                start = end
            }
        }
        for node in request.deletedObjects {
            let slots = layout.entities[ObjectIdentifier(node.objectID.entity)]?.tombstoneSlots ?? []
            let old = before[node.objectID]
            try insert(node.objectID, .delete, columns: nil, tombstone: slots.map { old?.values[$0] ?? .null })
        }
        return PersistentHistoryToken(storeIdentifier: identifier, transactionNumber: transaction)
    }

    /// Writes the `ACHANGE` rows of inserted objects, one statement per run of
    /// consecutive primary keys of an entity (a save allocates each entity's
    /// keys in one block, so an import of one entity is one statement) that
    /// copies the keys from the rows the save just wrote; returns the next
    /// free `ACHANGE` key.
    ///
    /// A statement per change costs SQLite a fresh seek in `ACHANGE` and its
    /// `ZTRANSACTIONID` index each time, as much as writing the object's own
    /// row; one statement keeps its cursors at the end of both and appends.
    private func recordInsertions(of nodes: [IncrementalStoreNode], keys: [Int64], firstKey: Int64, transaction: Int64,
                                  schema: TableLayout, connection: Connection) throws -> Int64 {
        // Grouped by entity with a search only where the entity changes: a
        // save's inserts come mostly in runs of one entity, and a dictionary
        // keyed by entity cost two hashes per row.
        var groups: [(entity: ObjectIdentifier, mapping: TableLayout.EntityMapping, keys: [Int64])] = []
        var current = -1
        try nodes.withUnsafeBufferPointer { nodes in
            for offset in 0..<min(nodes.count, keys.count) {
                let key = keys[offset]
                let entity = ObjectIdentifier(nodes[offset].objectID.entity)
                if current < 0 || groups[current].entity != entity {
                    if let found = groups.firstIndex(where: { $0.entity == entity }) {
                        current = found
                    } else {
                        groups.append((entity, try schema.mapping(for: nodes[offset].objectID.entity), []))
                        current = groups.count - 1
                    }
                }
                groups[current].keys.append(key)
            }
        }
        let runs = groups.map { (mapping: $0.mapping, runs: Self.runs(of: $0.keys.sorted())) }
        return try recordChangeRuns(runs, as: .insert, firstKey: firstKey, transaction: transaction, connection: connection)
    }

    /// Writes the `ACHANGE` rows of rows given as runs of consecutive primary
    /// keys per entity, all changed the same way (`type`, and for an update
    /// the `ZCOLUMNS` value), one statement per run (see
    /// ``recordInsertions(of:keys:firstKey:transaction:schema:connection:)``);
    /// returns the next free `ACHANGE` key. A batch insert, whose inserted
    /// rows are one run and whose upserted ones a few, calls it directly.
    func recordChangeRuns(_ runsByEntity: [(mapping: TableLayout.EntityMapping, runs: [ClosedRange<Int64>])],
                          as type: PersistentHistoryChange.ChangeType, columns: [UInt8]? = nil, firstKey: Int64,
                          transaction: Int64, connection: Connection) throws -> Int64 {
        guard !runsByEntity.isEmpty else { return firstKey }
        let appends = try HistoryLayout.changesAppend(at: firstKey, connection)
        let key = appends ? "" : "Z_PK, "
        let keyValue = appends ? "" : "?3 + Z_PK - ?1, "
        var next = firstKey
        for (mapping, runs) in runsByEntity.sorted(by: { $0.mapping.number < $1.mapping.number }) {
            // The table of an entity without super- or subentities holds its rows alone: each row's
            // Z_ENT is the entity's number, bound rather than read, and SQLite steps through the
            // run's keys without decoding a row (~200 instructions a change).
            let holdsOneEntity = mapping.entity.superentity == nil && mapping.entity.subentities.isEmpty
            let (entityColumn, entityTest) = holdsOneEntity ? ("?7", "") : ("Z_ENT", " AND Z_ENT = ?7")
            let insertRun = try connection.cachedStatement("""
                INSERT INTO ACHANGE (\(key)Z_ENT, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID, ZCOLUMNS) \
                SELECT \(keyValue)?4, ?5, \(entityColumn), Z_PK, ?6, ?8 FROM \(mapping.table) WHERE Z_PK BETWEEN ?1 AND ?2\(entityTest)
                """)
            for run in runs {
                insertRun.reset()
                try insertRun.bind(run.lowerBound, at: 1)
                try insertRun.bind(run.upperBound, at: 2)
                if !appends { try insertRun.bind(next, at: 3) }
                try insertRun.bind(HistoryLayout.changeEntity, at: 4)
                try insertRun.bind(type.rawValue, at: 5)
                try insertRun.bind(transaction, at: 6)
                try insertRun.bind(mapping.number, at: 7)
                if let columns { try insertRun.bind(columns, at: 8) } else { try insertRun.bindNull(at: 8) }
                try insertRun.execute()
                let count = run.upperBound - run.lowerBound + 1
                // A save's history must be whole: every key of the run is a row this save wrote.
                guard connection.changes == count, !appends || connection.lastInsertedRowID == next + count - 1 else {
                    throw PersistentStoreError(.ioFailure, url: url, message: """
                        the history of \(type) \(mapping.entity.name) objects \(run) was not written whole: \(connection.changes) of \
                        \(count) changes, the last with key \(connection.lastInsertedRowID) instead of \(next + count - 1)
                        """)
                }
                next += count
            }
        }
        return next
    }

    /// Sorted keys as ranges of consecutive keys.
    static func runs(of sorted: [Int64]) -> [ClosedRange<Int64>] {
        var runs: [ClosedRange<Int64>] = []
        for key in sorted {
            if let last = runs.last, key == last.upperBound + 1 {
                runs[runs.count - 1] = last.lowerBound...key
            } else if runs.last?.contains(key) != true {
                runs.append(key...key)
            }
        }
        return runs
    }

    // MARK: Reading and deleting

    public func currentPersistentHistoryToken() throws -> PersistentHistoryToken {
        _ = try historyLayout()
        let number = try read { connection in
            try HistoryLayout.lastKey(of: HistoryLayout.transactionEntity, connection)
        }
        return PersistentHistoryToken(storeIdentifier: identifier, transactionNumber: number)
    }

    public func fetchHistory(_ request: PersistentHistoryRequest) throws -> [PersistentHistoryTransaction] {
        let layout = try historyLayout()
        let identifier = identifier
        return try read { connection in
            try connection.inReadTransaction {
                var condition = "t.Z_PK > ?"
                var bound = PropertyValue.integer(0)
                switch request.bound {
                case .token(let token?):
                    try checkFetch(after: token, connection: connection)
                    bound = .integer(token.transactionNumber)
                case .token(nil): break
                case .date(let date):
                    condition = "t.ZTIMESTAMP > ?"
                    bound = .double(date.timeIntervalSinceReferenceDate)
                }
                let select = try connection.prepare("\(layout.transactionStrings.transactionSelect) WHERE \(condition) ORDER BY t.Z_PK")
                try select.bind(bound, at: 1)
                var transactions: [PersistentHistoryTransaction] = []
                while try select.step() {
                    let transaction = PersistentHistoryTransaction(
                        token: PersistentHistoryToken(storeIdentifier: identifier, transactionNumber: select.int64(at: 0)),
                        timestamp: Date(timeIntervalSinceReferenceDate: select.double(at: 1)),
                        author: select.string(at: 2), contextName: select.string(at: 4),
                        processID: select.string(at: 5) ?? "", bundleID: select.string(at: 3) ?? "", changes: nil)
                    guard request.filter?.matches(transaction) ?? true else { continue }
                    transactions.append(transaction)
                    if request.fetchLimit > 0 && transactions.count == request.fetchLimit { break }
                }
                if request.includesChanges {
                    // Only the changes of the transactions the filter kept: a run of
                    // another author's transactions in between is not read.
                    let changes = try readChanges(in: Self.runs(of: transactions.map(\.transactionNumber)), layout: layout,
                                                  connection: connection)
                    for index in transactions.indices {
                        transactions[index].changes = changes[transactions[index].transactionNumber] ?? []
                    }
                }
                return transactions
            }
        }
    }

    /// A token must name this store and a transaction it wrote, and the
    /// transactions after it must still be there.
    private func checkFetch(after token: PersistentHistoryToken, connection: Connection) throws {
        let last = try checkOwnership(of: token, connection: connection)
        let first = try Self.scalar(connection, "SELECT coalesce(min(Z_PK), ?) FROM ATRANSACTION", last + 1)
        if token.transactionNumber + 1 < first {
            throw PersistentStoreError(.historyExpired, url: url, message: """
                the history after transaction \(token.transactionNumber) is gone (deleted up to transaction \(first - 1)): \
                changes were missed; refetch everything you show and continue from the store's current token
                """)
        }
    }

    /// Returns the number of the store's last transaction.
    @discardableResult
    private func checkOwnership(of token: PersistentHistoryToken, connection: Connection) throws -> Int64 {
        guard token.storeIdentifier == identifier else {
            throw PersistentStoreError(.historyTokenMismatch, url: url, message:
                "the history token belongs to the store \(token.storeIdentifier), not to this store (\(identifier))")
        }
        let last = try HistoryLayout.lastKey(of: HistoryLayout.transactionEntity, connection)
        guard token.transactionNumber >= 0, token.transactionNumber <= last else {
            throw PersistentStoreError(.historyTokenMismatch, url: url, message:
                "the history token names transaction \(token.transactionNumber), but the store's history ends at transaction \(last)")
        }
        return last
    }

    /// The changes of the transactions in `runs`, by transaction number, in
    /// the order they were recorded. Changes of entities the store's model
    /// does not hold (another configuration's) are left out: they have no ID here.
    private func readChanges(in runs: [ClosedRange<Int64>], layout: HistoryLayout,
                             connection: Connection) throws -> [Int64: [PersistentHistoryChange]] {
        var changes: [Int64: [PersistentHistoryChange]] = [:]
        guard !runs.isEmpty else { return changes }
        let tombstoneCount = try Self.tombstoneColumns(connection)
        let tombstoneColumns = (0..<tombstoneCount).map { ", ZTOMBSTONE\($0)" }.joined()
        let select = try connection.cachedStatement("""
            SELECT Z_PK, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID, ZCOLUMNS\(tombstoneColumns) FROM ACHANGE \
            WHERE ZTRANSACTIONID BETWEEN ? AND ? ORDER BY Z_PK
            """)
        defer { select.reset() }
        var scopes = ObjectIDScopeCache(store: identity)
        for run in runs {
            select.reset()
            try select.bind(run.lowerBound, at: 1)
            try select.bind(run.upperBound, at: 2)
            while try select.step() {
                // A change of an entity the model lacks is left out, as documented above.
                guard let entity = layout.entitiesByNumber[select.int64(at: 2)] else { continue }
                guard let type = PersistentHistoryChange.ChangeType(rawValue: select.int64(at: 1)) else {
                    throw PersistentStoreError(.notAStore, url: url, message: "ACHANGE row \(select.int64(at: 0)) has the unknown change type \(select.int64(at: 1))")
                }
                var change = PersistentHistoryChange(
                    changeID: select.int64(at: 0),
                    changedObjectID: scopes.objectID(of: entity.entity, primaryKey: select.int64(at: 3)),
                    changeType: type, transactionNumber: select.int64(at: 4))
                if type == .update { change.updatedProperties = entity.properties(in: select.data(at: 5) ?? Data()) }
                if type == .delete && !entity.tombstoneSlots.isEmpty {
                    var tombstone: [String: PropertyValue] = [:]
                    for (index, slot) in entity.tombstoneSlots.enumerated() where index < tombstoneCount {
                        guard let attribute = entity.entity.slotProperties[slot] as? AttributeDescription else { continue }
                        tombstone[attribute.name] = select.attributeValue(at: Int32(6 + index), type: attribute.type)
                    }
                    change.tombstone = tombstone
                }
                changes[change.transactionNumber, default: []].append(change)
            }
        }
        return changes
    }

    public func deleteHistory(_ request: PersistentHistoryRequest) throws -> Int {
        _ = try historyLayout()
        return try write { connection in
            let condition: String
            let bound: PropertyValue
            switch request.bound {
            case .token(let token?):
                try checkOwnership(of: token, connection: connection)
                condition = "Z_PK < ?"
                bound = .integer(token.transactionNumber)
            case .token(nil):
                return 0
            case .date(let date):
                condition = "ZTIMESTAMP < ?"
                bound = .double(date.timeIntervalSinceReferenceDate)
            }
            let changes = try connection.prepare("DELETE FROM ACHANGE WHERE ZTRANSACTIONID IN (SELECT Z_PK FROM ATRANSACTION WHERE \(condition))")
            try changes.bind(bound, at: 1)
            try changes.execute()
            let transactions = try connection.prepare("DELETE FROM ATRANSACTION WHERE \(condition)")
            try transactions.bind(bound, at: 1)
            try transactions.execute()
            return connection.changes
        }
    }
}
