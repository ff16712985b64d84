@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
@_spi(DataStackInternal) import DataStackSupport
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Saving

extension SQLiteStore {
    /// Writes a save in one `BEGIN IMMEDIATE` transaction: primary keys for the
    /// inserted rows allocated as one block per root entity (`Z_MAX += n`),
    /// then deletes and updates checked against the versions the context read,
    /// then inserts, then join-table rows and `Z_FOK_` ranks
    /// (SQLiteStore+Relationships.swift). Deletes come first so that a row
    /// taking over a deleted row's unique values does not trip its unique index.
    ///
    /// A version mismatch or a unique index refusing a row rolls the attempt
    /// back to a savepoint; the request's ``SaveChangesRequest/conflictResolver``
    /// settles the conflicts against the rows as they are now and the
    /// resolved request is written — all in the same transaction, so no other
    /// writer can move the rows in between (the ``SaveConflictResolver``
    /// contract). Without a resolver, or when it throws, nothing is written and
    /// the conflict (``ObjectGraphError/Code-swift.struct/mergeConflict`` or
    /// ``ObjectGraphError/Code-swift.struct/uniquenessConflict``) or its error is thrown;
    /// so is any SQLite error.
    ///
    /// With persistent history, the attempt that stands also writes its
    /// transaction and changes (SQLiteStore+History.swift) before the savepoint
    /// is released, so a rolled-back or failed save leaves no history.
    ///
    /// Values of attributes with external binary storage that go to files are
    /// written before the transaction commits; files of replaced or deleted
    /// values are removed after it (see ``ExternalDataFiles`` for the crash window).
    func execute(_ request: SaveChangesRequest, in context: ManagedObjectContext?) throws -> SaveResult {
        let schema = try schema
        // Read on the saving context's queue, before the store's lock is taken.
        let history = request.isEmpty ? nil : state.withLock { $0.history }
        let author = context?.transactionAuthor
        let contextName = context?.name
        let files = schema.usesExternalStorage ? ExternalDataFiles() : nil
        do {
            let result = try save(request, in: context, history: history, author: author, contextName: contextName,
                                  schema: schema, files: files)
            files?.finish(committed: true)
            return result
        } catch {
            files?.finish(committed: false)
            throw error
        }
    }

    /// The transaction of ``execute(_:in:)``: attempts, each under a savepoint,
    /// until one stands or the conflicts are the save's error.
    private func save(_ request: SaveChangesRequest, in context: ManagedObjectContext?, history: HistoryLayout?,
                      author: String?, contextName: String?, schema: TableLayout, files: ExternalDataFiles?) throws -> SaveResult {
        try write { connection in
            files?.beginAttempt()   // a stale snapshot runs this closure again
            return try request.writeResolvingConflicts(attempt: { request in
                try connection.execute("SAVEPOINT datastack_save")
                do {
                    var result: SaveResult
                    if let history {
                        let before = try rowsBeforeSave(request, layout: history, schema: schema, connection: connection)
                        let written = try write(request, schema: schema, files: files, connection: connection)
                        result = written.result
                        result.historyTokens = [try recordHistory(of: request, permanentIDs: written.permanentIDs, insertedKeys: written.insertedKeys,
                                                                  before: before, author: author, contextName: contextName,
                                                                  layout: history, schema: schema, connection: connection)]
                    } else {
                        result = try write(request, schema: schema, files: files, connection: connection).result
                    }
                    try connection.execute("RELEASE datastack_save")
                    // Once, after the attempt that stands: a rolled-back attempt must not consume it.
                    try writeMetadataIfNeeded(connection)
                    return result
                } catch let error as ObjectGraphError {
                    // A conflict: the next attempt needs the transaction as it was
                    // before this one, so a rollback that fails is the save's error.
                    try connection.execute("ROLLBACK TO datastack_save")
                    try connection.execute("RELEASE datastack_save")
                    files?.beginAttempt()
                    throw error
                } catch {
                    // Dropped: the whole transaction is rolled back next (`write`),
                    // and this error, not the rollback's, says why the save failed.
                    try? connection.execute("ROLLBACK TO datastack_save")
                    try? connection.execute("RELEASE datastack_save")
                    throw error
                }
            }, currentRows: { objectIDs in
                try rows(of: objectIDs, schema: schema, connection: connection)
            })
        }
    }

    /// The rows of these objects as the open transaction sees them.
    func currentRows(of objectIDs: [ObjectID], schema: TableLayout, connection: Connection) throws -> [ObjectID: IncrementalStoreNode] {
        let nodes = try rows(of: objectIDs, schema: schema, connection: connection)
        // A row's ID is made from its own entity number: equal to the caller's ID of it.
        return Dictionary(nodes.map { ($0.objectID, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// One attempt at writing a save, inside the caller's transaction; with
    /// the primary key of each inserted object, in the request's order, and
    /// the temporary-to-permanent mapping it wrote relationships with (empty
    /// when no saved entity has relationships), for the history to use too.
    private func write(_ request: SaveChangesRequest, schema: TableLayout, files: ExternalDataFiles?, connection: Connection)
        throws -> (result: SaveResult, insertedKeys: [Int64], permanentIDs: [ObjectID: ObjectID]) {
        let identity = identity
        do {
            let (insertedIDs, insertedKeys) = try allocatePrimaryKeys(for: request.insertedObjects, schema: schema,
                                                                     identity: identity, connection: connection)
            let result = SaveResult(insertedObjects: request.insertedObjects, permanentIDs: insertedIDs)
            // Relationships name the objects they point at by ID; the mapping is
            // built (a hash of every inserted ID) only when an entity has them.
            let pointsAtObjects = request.insertedObjects.contains { $0.objectID.entity.hasRelationships }
                || request.updatedObjects.contains { $0.objectID.entity.hasRelationships }
            let permanentIDs = pointsAtObjects ? result.permanentIDs : [:]
            var search = SearchIndexMaintenance(schema: schema, connection: connection)
            try search.plan(deleted: request.deletedObjects, updated: request.updatedObjects, inserted: request.insertedObjects,
                            insertedKeys: insertedKeys)
            try search.beforeWritingRows()
            defer { search.restoreTriggers() }
            var conflicts: [MergeConflict] = []
            var deletes = EntityStatementCache(connection: connection, schema: schema, sql: \.deleteSQL)
            var updates = EntityStatementCache(connection: connection, schema: schema, sql: \.updateSQL)
            var inserts = EntityStatementCache(connection: connection, schema: schema, sql: \.insertSQL)
            for node in request.deletedObjects {
                let (mapping, statement) = try deletes.entry(for: node.objectID.entity)
                if let files, !mapping.externalSlots.isEmpty {
                    try retireExternalFiles(of: node.objectID, mapping: mapping, files: files, connection: connection)
                }
                try statement.bind(node.objectID.primaryKey ?? 0, at: 1)
                try statement.bind(node.version, at: 2)
                try statement.execute()
                if connection.changes == 0 {
                    conflicts.append(try conflict(for: node, mapping: mapping, connection: connection))
                }
            }
            var partialUpdates = PartialUpdateCache(connection: connection)
            for (position, node) in request.updatedObjects.enumerated() {
                var (mapping, statement) = try updates.entry(for: node.objectID.entity)
                var writable = mapping.statements.writable
                // The changed columns only, when the context's snapshot says which: a
                // file kept outside the row is replaced only by writing its column.
                if let changed = request.snapshotChanges(ofUpdatedAt: position), mapping.externalSlots.isEmpty {
                    (writable, statement) = try partialUpdates.entry(for: node.objectID.entity, mapping: mapping, changed: changed)
                }
                let external = try files.map { files in
                    try externalColumns(of: node, mapping: mapping, replacing: true, files: files, connection: connection)
                } ?? [:]
                var index: Int32 = 1
                try statement.bind(node.version + 1, at: index)
                index += 1
                try bindValues(of: node, writable: writable, into: statement, from: &index, schema: schema,
                               permanentIDs: permanentIDs, external: external)
                try statement.bind(node.objectID.primaryKey ?? 0, at: index)
                try statement.bind(node.version, at: index + 1)
                try Self.executeCheckingUniqueness(statement, node: node)
                if connection.changes == 0 {
                    conflicts.append(try conflict(for: node, mapping: mapping, connection: connection))
                }
            }
            for node in request.lockedObjects {
                let mapping = try schema.mapping(for: node.objectID.entity)
                let current = try currentVersion(of: node.objectID, mapping: mapping, connection: connection)
                if current != node.version {
                    conflicts.append(MergeConflict(objectID: node.objectID, objectSnapshotVersion: node.version, persistedSnapshotVersion: current))
                }
            }
            if !conflicts.isEmpty { throw ObjectGraphError.mergeConflict(conflicts) }

            // Every parameter of the INSERT is bound for every row: its bindings
            // are cleared once, after the last row or the one that failed.
            var rowsInserts = EntityStatementCache(connection: connection, schema: schema, sql: \.insertRowsSQL)
            defer {
                inserts.clearBindings()
                rowsInserts.clearBindings()
            }
            // The entity's statement, mapping and columns taken once per run of
            // its rows (an import's whole chunk), held in locals: a struct of
            // them copied per row cost ~180 instructions a row in retains.
            let nodes = request.insertedObjects
            var runEntity: ObjectIdentifier?
            var runStatement: Statement?
            var runEnd = 0
            var rowsPerStatement = 1
            var writable: [EntityStatements.WritableSlot] = []
            var externalMapping: TableLayout.EntityMapping?
            // Rows before this one go one a statement: a statement of several refused one of them.
            var oneAtATimeUntil = 0
            var position = 0
            while position < nodes.count {
                if runEntity != ObjectIdentifier(nodes[position].objectID.entity) {
                    let entity = nodes[position].objectID.entity
                    let entry = try inserts.entry(for: entity)
                    runEntity = ObjectIdentifier(entity)
                    runStatement = entry.statement
                    writable = entry.mapping.statements.writable
                    externalMapping = entry.mapping.externalSlots.isEmpty ? nil : entry.mapping
                    rowsPerStatement = externalMapping == nil ? entry.mapping.statements.rowsPerInsert : 1
                    runEnd = position + 1
                    while runEnd < nodes.count, ObjectIdentifier(nodes[runEnd].objectID.entity) == runEntity { runEnd += 1 }
                }
                // Several rows a statement (EntityStatements.insertRowsSQL): one
                // statement's start, end and B-tree descent for all of them.
                if rowsPerStatement > 1, position >= oneAtATimeUntil, position + rowsPerStatement <= runEnd {
                    let statement = try rowsInserts.entry(for: nodes[position].objectID.entity).statement
                    var index: Int32 = 1
                    for row in position..<(position + rowsPerStatement) {
                        try statement.bind(insertedKeys[row], at: index)
                        index += 1
                        try bindValues(of: nodes[row], writable: writable, into: statement, from: &index, schema: schema,
                                       permanentIDs: permanentIDs, external: [:])
                    }
                    do {
                        try statement.executeRebindingEveryParameter()
                        position += rowsPerStatement
                        continue
                    } catch let error as SQLiteError where error.resultCode == SQLiteError.SQLITE_CONSTRAINT {
                        // A constraint undoes the refused statement's own rows and
                        // nothing else; written one a statement, the row it refused
                        // is the one named. (Other errors may have ended the whole
                        // transaction: they go up as they are.)
                        oneAtATimeUntil = position + rowsPerStatement
                    }
                }
                guard let statement = runStatement else { preconditionFailure("a run's statement is taken before its first row") }
                let node = nodes[position]
                var external: [Int: PropertyValue] = [:]
                if let files, let mapping = externalMapping {
                    external = try externalColumns(of: node, mapping: mapping, replacing: false, files: files, connection: connection)
                }
                // Z_ENT and Z_OPT are in the statement's text (EntityStatements.insertSQL).
                try statement.bind(insertedKeys[position], at: 1)
                var index: Int32 = 2
                try bindValues(of: node, writable: writable, into: statement, from: &index, schema: schema,
                               permanentIDs: permanentIDs, external: external)
                try Self.executeCheckingUniqueness(statement, node: node, rebindsEveryParameter: true)
                position += 1
            }
            try writeRelationships(of: request, schema: schema, permanentIDs: permanentIDs, connection: connection)
            try search.afterWritingRows()
            return (result, insertedKeys, permanentIDs)
        }
    }

    /// One kind of an entity's prepared statement (INSERT, UPDATE or DELETE)
    /// and its mapping, for the rows of one save: a row of the same entity as
    /// the row before finds them at once, others by the entity's identity —
    /// never by hashing the statement's SQL in the connection's cache.
    private struct EntityStatementCache {
        typealias Entry = (mapping: TableLayout.EntityMapping, statement: Statement)
        let connection: Connection
        let schema: TableLayout
        let sql: KeyPath<EntityStatements, String>
        private var last: (entity: ObjectIdentifier, entry: Entry)?
        private var entries: [ObjectIdentifier: Entry] = [:]

        init(connection: Connection, schema: TableLayout, sql: KeyPath<EntityStatements, String>) {
            self.connection = connection
            self.schema = schema
            self.sql = sql
        }

        mutating func entry(for entity: EntityDescription) throws -> Entry {
            let key = ObjectIdentifier(entity)
            let entry: Entry
            if let last, last.entity == key {
                entry = last.entry
            } else if let known = entries[key] {
                entry = known
            } else {
                let mapping = try schema.mapping(for: entity)
                entry = (mapping, try connection.cachedStatement(mapping.statements[keyPath: sql]))
                entries[key] = entry
            }
            last = (key, entry)
            // Not reset here: every parameter is bound again for each row, and
            // `execute()` resets the statement whether its row ran or failed.
            return entry
        }

        /// Clears the bindings of every statement handed out: after rows run
        /// with ``Statement/executeRebindingEveryParameter()``, so that no
        /// binding outlives the text it points at.
        func clearBindings() {
            for entry in entries.values { entry.statement.clearBindings() }
        }
    }

    /// The UPDATE statements of changed-column sets (``EntityStatements/updateSQL(writing:)``)
    /// for the rows of one save, by entity and set: an import that changes the
    /// same columns of every row prepares one, and finds it again by comparing
    /// with the row before, not by hashing.
    private struct PartialUpdateCache {
        typealias Entry = (writable: [EntityStatements.WritableSlot], statement: Statement)
        private struct Key: Hashable {
            let entity: ObjectIdentifier
            let changed: SlotMask
        }
        let connection: Connection
        private var last: (key: Key, entry: Entry)?
        private var entries: [Key: Entry] = [:]

        init(connection: Connection) {
            self.connection = connection
        }

        mutating func entry(for entity: EntityDescription, mapping: TableLayout.EntityMapping, changed: SlotMask) throws -> Entry {
            let key = Key(entity: ObjectIdentifier(entity), changed: changed)
            if let last, last.key == key { return last.entry }
            let entry: Entry
            if let known = entries[key] {
                entry = known
            } else {
                let (sql, writable) = mapping.statements.updateSQL(writing: changed)
                // A few sets a save, the same ones save after save: the connection's cache keeps them.
                entry = (writable, try connection.cachedStatement(sql))
                entries[key] = entry
            }
            last = (key, entry)
            return entry
        }
    }

    /// Runs an INSERT or UPDATE; a unique index refusing it (a row another
    /// coordinator saved since the context checked) becomes a uniqueness conflict.
    ///
    /// With `rebindsEveryParameter`, the bindings are kept after the run
    /// (``Statement/executeRebindingEveryParameter()``): the caller binds
    /// every parameter again before the next and clears them after the last.
    private static func executeCheckingUniqueness(_ statement: Statement, node: IncrementalStoreNode,
                                                  rebindsEveryParameter: Bool = false) throws {
        do {
            if rebindsEveryParameter {
                try statement.executeRebindingEveryParameter()
            } else {
                try statement.execute()
            }
        } catch let error as SQLiteError where error.extendedResultCode == SQLiteError.SQLITE_CONSTRAINT_UNIQUE {
            throw StoreLayout.uniquenessViolation(by: [node.objectID])
        }
    }

    public func obtainPermanentIDs(for objectIDs: [ObjectID]) throws -> [ObjectID] {
        let schema = try schema
        let identity = identity
        let nodes = objectIDs.map { IncrementalStoreNode(objectID: $0, values: [], version: 0) }
        let ids = try write { connection in
            try allocatePrimaryKeys(for: nodes, schema: schema, identity: identity, connection: connection).ids
        }
        // An ID given twice gets one permanent ID, the last allocated for it.
        let mapping = Dictionary(zip(objectIDs, ids), uniquingKeysWith: { _, last in last })
        return objectIDs.map { mapping[$0] ?? $0 }
    }

    /// Adds `count` to an entity's `Z_MAX` in `Z_PRIMARYKEY` and returns the
    /// new maximum, the last of the `count` keys now handed out: for rows of
    /// the model's entities and of the history's alike.
    ///
    /// - Throws: ``PersistentStoreError/Code/ioFailure`` when the table has no
    ///   row for the entity, rather than make keys up.
    static func allocateKeys(_ count: Int64, entity: Int64, connection: Connection, url: URL?) throws -> Int64 {
        let bump = try connection.cachedStatement("UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + ? WHERE Z_ENT = ?")
        try bump.bind(count, at: 1)
        try bump.bind(entity, at: 2)
        try bump.execute()
        let read = try connection.cachedStatement("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = ?")
        defer { read.reset() }
        try read.bind(entity, at: 1)
        guard try read.step() else {
            throw PersistentStoreError(.ioFailure, url: url, message: "Z_PRIMARYKEY has no row for entity number \(entity)")
        }
        return read.int64(at: 0)
    }

    /// Hands out one block of primary keys per root entity (its counter in
    /// `Z_PRIMARYKEY`), inside the caller's transaction.
    ///
    /// - Returns: every node's ID and primary key after the save, in the order
    ///   of `nodes`: a temporary ID's permanent one, a permanent ID as it was.
    private func allocatePrimaryKeys(for nodes: [IncrementalStoreNode], schema: TableLayout, identity: StoreIdentity,
                                     connection: Connection) throws -> (ids: [ObjectID], keys: [Int64]) {
        if let keys = try allocateKeysOfOneEntity(for: nodes, schema: schema, identity: identity, connection: connection) {
            return keys
        }
        var keys = [Int64](repeating: 0, count: nodes.count)
        // The positions of each root entity's new rows; one root in most saves.
        var groups: [(root: Int64, positions: [Int])] = []
        var previous: (entity: ObjectIdentifier, group: Int)?
        for (position, node) in nodes.enumerated() {
            guard node.objectID.isTemporaryID else {
                keys[position] = node.objectID.primaryKey ?? 0
                continue
            }
            let entity = ObjectIdentifier(node.objectID.entity)
            if previous?.entity != entity {
                let root = try schema.mapping(for: node.objectID.entity).rootNumber
                let group = groups.firstIndex { $0.root == root } ?? {
                    groups.append((root, []))
                    return groups.count - 1
                }()
                previous = (entity, group)
            }
            groups[previous!.group].positions.append(position)
        }
        var ids = nodes.map(\.objectID)
        for (root, positions) in groups {
            let last = try Self.allocateKeys(Int64(positions.count), entity: root, connection: connection, url: url)
            var next = last - Int64(positions.count) + 1
            var lastScope: ObjectIDScope?
            for position in positions {
                // One scope lookup per run of one entity (positions are grouped by root, not entity).
                let entity = ids[position].entity
                let scope = lastScope.flatMap { $0.entity === entity ? $0 : nil } ?? entity.idScope(in: identity)
                lastScope = scope
                ids[position] = ObjectID(scope: scope, primaryKey: next)
                keys[position] = next
                next += 1
            }
        }
        return (ids, keys)
    }

    /// ``allocatePrimaryKeys(for:schema:identity:connection:)`` for a save
    /// whose new rows are all new objects of one entity (an import's chunk),
    /// in one pass that makes each ID once; nil for any other save.
    ///
    /// The general path groups the rows by root entity and makes every ID
    /// twice (copied from the node, then replaced): ~400 instructions a row
    /// where this takes ~60.
    private func allocateKeysOfOneEntity(for nodes: [IncrementalStoreNode], schema: TableLayout, identity: StoreIdentity,
                                         connection: Connection) throws -> (ids: [ObjectID], keys: [Int64])? {
        guard let entity = nodes.first?.objectID.entity else { return nil }
        let isOneEntity = nodes.withUnsafeBufferPointer { nodes in
            nodes.allSatisfy { $0.objectID.isTemporaryID && $0.objectID.entity === entity }
        }
        guard isOneEntity else { return nil }
        let count = nodes.count
        let root = try schema.mapping(for: entity).rootNumber
        let first = try Self.allocateKeys(Int64(count), entity: root, connection: connection, url: url) - Int64(count) + 1
        let scope = entity.idScope(in: identity)
        let ids = [ObjectID](unsafeUninitializedCapacity: count) { buffer, initialized in
            for offset in 0..<count {
                (buffer.baseAddress! + offset).initialize(to: ObjectID(scope: scope, primaryKey: first + Int64(offset)))
            }
            initialized = count
        }
        let keys = [Int64](unsafeUninitializedCapacity: count) { buffer, initialized in
            for offset in 0..<count { buffer[offset] = first + Int64(offset) }
            initialized = count
        }
        return (ids, keys)
    }

    /// Binds a row's values; `external` holds the tagged columns of its slots
    /// with external binary storage (SQLiteStore+ExternalData.swift).
    private func bindValues(of node: IncrementalStoreNode, writable: [EntityStatements.WritableSlot],
                            into statement: Statement, from index: inout Int32, schema: TableLayout,
                            permanentIDs: [ObjectID: ObjectID], external: [Int: PropertyValue]) throws {
        var entityColumnValues: [PropertyValue] = []
        // Borrowed, the node's values and the slot descriptions: copying a
        // description out retains and releases its column's strings, for
        // every column of every row.
        try node.values.withUnsafeBufferPointer { values in
            try writable.withUnsafeBufferPointer { writable in
                for entry in writable.indices {
                    let slot = writable[entry].slot
                    let hasEntityColumn = writable[entry].entityColumn != nil
                    if case .object(let id) = values[slot] {
                        let target = permanentIDs[id] ?? id
                        if hasEntityColumn {
                            entityColumnValues.append(.integer(schema.mappings[ObjectIdentifier(target.entity)]?.number ?? 0))
                        }
                        try statement.bind(.object(target), at: index)
                    } else {
                        if hasEntityColumn { entityColumnValues.append(.null) }
                        if writable[entry].storesExternally, let column = external[slot] {
                            try statement.bind(column, at: index)
                        } else {
                            try statement.bindForExecution(values[slot], at: index)
                        }
                    }
                    index += 1
                }
            }
        }
        for value in entityColumnValues {
            try statement.bind(value, at: index)
            index += 1
        }
    }

    private func currentVersion(of objectID: ObjectID, mapping: TableLayout.EntityMapping, connection: Connection) throws -> Int64? {
        let statement = try connection.cachedStatement("SELECT Z_OPT FROM \(mapping.table) WHERE Z_PK = ?")
        try statement.bind(objectID.primaryKey ?? 0, at: 1)
        defer { statement.reset() }
        return try statement.step() ? statement.int64(at: 0) : nil
    }

    private func conflict(for node: IncrementalStoreNode, mapping: TableLayout.EntityMapping, connection: Connection) throws -> MergeConflict {
        MergeConflict(objectID: node.objectID, objectSnapshotVersion: node.version,
                      persistedSnapshotVersion: try currentVersion(of: node.objectID, mapping: mapping, connection: connection))
    }
}

// A store opens only with a unique index for every uniqueness constraint
// (`TableLayout.indexDifferences`), and a save turns the index's refusal
// into a uniqueness conflict for its resolver (`executeCheckingUniqueness`).
extension SQLiteStore: DuplicateRefusingStore {}
