@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Moving, destroying and replacing stores

extension PersistentStoreCoordinator {
    /// Copies every object of a store into a new store, swaps the new store in
    /// for the old one, and returns it (Core Data: `migratePersistentStore(_:to:options:type:)`,
    /// a "save as").
    ///
    /// ```swift
    /// let inMemory = coordinator.persistentStores[0]
    /// let onDisk = try coordinator.migratePersistentStore(inMemory, to: fileURL, type: .sqlite)
    /// ```
    ///
    /// Works between any store types: SQLite to SQLite at another location,
    /// SQLite to in-memory and back, or a store of your own. Every object is
    /// read, given a temporary ID, and inserted into the new store in one save,
    /// so relationships (to-one keys and to-many contents) carry over. The new
    /// store keeps the old store's configuration and its user metadata keys,
    /// but has its own UUID, and every row starts again at version 1.
    ///
    /// The old store is then removed from the coordinator; its file is left as
    /// it was. Object IDs of the old store no longer resolve, so reset contexts
    /// that hold its objects (or refetch them) after the call.
    ///
    /// - Parameters:
    ///   - store: one of this coordinator's stores.
    ///   - url: the new store's location; nil for an in-memory store. Nothing may exist there yet.
    ///   - options: how to open the new store.
    ///   - type: the new store's type.
    /// - Throws: ``PersistentStoreError``: `.storeNotFound` if `store` is not
    ///   this coordinator's, `.alreadyAdded` or `.migrationFailed` when something
    ///   exists at `url`, or the error of reading or saving. On failure the
    ///   coordinator keeps the old store and nothing is left at `url`.
    /// - Complexity: O(*n*) time and memory, *n* = objects in the store: all of
    ///   them are in memory at once.
    @discardableResult
    public func migratePersistentStore(_ store: any PersistentStore, to url: URL?, options: StoreOptions = StoreOptions(),
                                       type: StoreType = .sqlite) throws -> any PersistentStore {
        guard persistentStores.contains(where: { $0 === store }) else {
            throw PersistentStoreError(.storeNotFound, url: store.url, message: "the store is not one of this coordinator's")
        }
        if let url {
            if persistentStore(for: url) != nil {
                throw PersistentStoreError(.alreadyAdded, url: url, message: "a store for this location is already added")
            }
            if FileManager.default.fileExists(atPath: url.path) {
                throw PersistentStoreError(.migrationFailed, url: url,
                                           message: "a file already exists at the new store's location; destroy it first")
            }
        }
        let nodes = try allRows(of: store)

        let newStore = try addPersistentStore(type: type, configuration: store.configurationName, at: url, options: options)
        do {
            var metadata = newStore.metadata
            for (key, value) in store.metadata where !key.hasPrefix("NS") && !key.hasPrefix("_NS") {
                metadata[key] = value
            }
            try newStore.setMetadata(metadata)
            _ = try newStore.execute(.save(SaveChangesRequest(insertedObjects: nodes)), in: nil)
        } catch {
            // Cleanup after a failed copy: the copy's error is what the caller needs, and a
            // removal that fails too leaves only the half-written new store, never the old one.
            try? remove(newStore)
            if let url, type == .sqlite { try? SQLiteStoreFile.removeFiles(at: url) }
            throw error
        }
        try remove(store)
        return newStore
    }

    /// Every row of a store, as inserted nodes with temporary IDs that refer to each other.
    private func allRows(of store: any PersistentStore) throws -> [IncrementalStoreNode] {
        var rows: [IncrementalStoreNode] = []
        for entity in managedObjectModel.entities(forConfigurationName: store.configurationName) {
            let fetch = StoreFetch(entity: entity, predicate: nil, sortDescriptors: [], fetchLimit: 0, fetchOffset: 0,
                                   includesSubentities: false, resultType: .managedObject, propertiesToFetch: nil,
                                   returnsDistinctResults: false)
            guard case .nodes(var nodes) = try store.execute(.fetch(fetch), in: nil) else { continue }
            // To-many relationships not kept as a foreign key on the other side (many-to-many,
            // or without an inverse) and ordered ones (for their order) are read one by one;
            // the others follow from the keys.
            let listed = entity.slotProperties.compactMap { $0 as? RelationshipDescription }.filter { relationship in
                relationship.isToMany && !relationship.isTransient
                    && (relationship.inverseRelationship?.isToMany != false || relationship.isOrdered)
            }
            if !listed.isEmpty {
                for index in nodes.indices {
                    for relationship in listed {
                        nodes[index].values[relationship.index] = try store.newValue(
                            forRelationship: relationship, forObjectWith: nodes[index].objectID, in: nil)
                    }
                }
            }
            rows.append(contentsOf: nodes)
        }
        var temporaryIDs: [ObjectID: ObjectID] = [:]
        temporaryIDs.reserveCapacity(rows.count)
        for row in rows { temporaryIDs[row.objectID] = ObjectID.temporary(for: row.objectID.entity) }
        return rows.map { row in
            IncrementalStoreNode(objectID: temporaryIDs[row.objectID] ?? row.objectID,
                                 values: ContiguousArray(row.values.map { $0.remappingIDs(temporaryIDs) }), version: 0)
        }
    }

    /// Deletes a SQLite store: ``PersistentStoreCoordinator/destroyPersistentStore(at:type:)``
    /// with ``StoreType/sqlite``.
    public func destroyPersistentStore(at url: URL) throws {
        try destroyPersistentStore(at: url, type: .sqlite)
    }

    /// Copies a store's files over another store's (Core Data:
    /// `replacePersistentStore(at:destinationOptions:withPersistentStoreFrom:sourceOptions:type:)`).
    ///
    /// For SQLite, the source's write-ahead log is checkpointed (or copied, if
    /// the source is read-only), the copy is made into one file beside the
    /// destination, and it is renamed over the destination after the
    /// destination's `-wal` and `-shm` are removed. The destination then is the
    /// same store as the source, with its UUID.
    ///
    /// - Throws: ``PersistentStoreError``: `.alreadyAdded` when this coordinator
    ///   has the destination open (remove it first), `.ioFailure` when another
    ///   connection has it open or copying fails, `.cannotOpen` or `.notAStore`
    ///   for the source.
    public func replacePersistentStore(at destination: URL, withPersistentStoreFrom source: URL, type: StoreType = .sqlite) throws {
        if destination.standardizedFileURL.path == source.standardizedFileURL.path { return }
        if persistentStore(for: destination) != nil {
            throw PersistentStoreError(.alreadyAdded, url: destination,
                                       message: "the store to replace is in use by this coordinator; remove it first")
        }
        let temporary = SQLiteStoreFile.temporarySibling(of: destination, purpose: "replacing")
        guard type == .sqlite else {
            guard FileManager.default.fileExists(atPath: source.path) else {
                throw PersistentStoreError(.cannotOpen, url: source, message: "no store file exists at this location")
            }
            // The temporary copy is gone once moved; when the copy failed, its error is thrown instead.
            defer { try? FileManager.default.removeItem(at: temporary) }
            do {
                try FileManager.default.copyItem(at: source, to: temporary)
                if FileManager.default.fileExists(atPath: destination.path) {
                    _ = try FileManager.default.replaceItemAt(destination, withItemAt: temporary)
                } else {
                    try FileManager.default.moveItem(at: temporary, to: destination)
                }
            } catch {
                throw PersistentStoreError(.ioFailure, url: destination, message: "could not copy \(source.path) over the store", underlying: error)
            }
            return
        }
        // A destination that cannot be opened (none yet, not a store) has no connection to
        // close; the copy and the swap below throw what is really wrong with it.
        if let existing = try? SQLiteStoreFile.openExisting(destination, readOnly: false),
           !SQLiteStoreFile.leaveWriteAheadLog(existing) {
            throw PersistentStoreError(.ioFailure, url: destination,
                                       message: "another connection has the store to replace open; close it first")
        }
        try SQLiteStoreFile.copyAsOneFile(from: source, to: temporary)
        // Only a leftover temporary copy: the swap's own error, if any, is thrown.
        defer { try? SQLiteStoreFile.removeFiles(at: temporary) }
        try SQLiteStoreFile.swap(destination, with: temporary)
    }
}
