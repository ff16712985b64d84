@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - The model a store caches

extension ManagedObjectModel {
    /// The model a Core Data store keeps in its own file, so that a store opens
    /// with no model file at all: the apps' and the system's stores on a device
    /// or in a backup carry their model only there.
    ///
    /// ```swift
    /// let model = try ManagedObjectModel(cachedInStoreAt: noteStoreURL)
    /// let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
    /// var options = StoreOptions()
    /// options.isReadOnly = true
    /// try coordinator.addPersistentStore(type: .sqlite, at: noteStoreURL, options: options)
    /// ```
    ///
    /// Core Data writes the compiled model into `Z_MODELCACHE` (frameworks from
    /// 2012 on; older stores have none), compressed with raw DEFLATE. The model
    /// matches the store's schema, but the app's classes and its code-only
    /// settings are not in it: entities get ``ManagedObject`` as their class.
    /// Open someone else's store read-only unless writing to it is the point.
    ///
    /// ``CompiledModelLoader/loadModel(cachedInStoreAt:)`` also returns the
    /// decoder's warnings.
    ///
    /// - Throws: ``PersistentStoreError`` when the file is missing or not a
    ///   Core Data store; ``ModelLoadingError`` naming the store when it caches
    ///   no model (`.notAModel`), when the cache is damaged
    ///   (`.malformedArchive`), or when the model cannot be rebuilt (naming the
    ///   entity and property).
    public convenience init(cachedInStoreAt url: URL) throws {
        try self.init(finishing: CompiledModelLoader.readModel(cachedInStoreAt: url))
    }
}

extension CompiledModelLoader {
    /// Loads the model a Core Data store caches in its file, with the warnings
    /// of ``ManagedObjectModel/init(cachedInStoreAt:)``.
    public static func loadModel(cachedInStoreAt url: URL) throws -> LoadedModel {
        try readModel(cachedInStoreAt: url).finished()
    }

    /// The model a store caches, as read, before it is finished.
    static func readModel(cachedInStoreAt url: URL) throws -> Read {
        let connection = try SQLiteStoreFile.openExisting(url, readOnly: true)
        let compressed: Data?
        do {
            guard try connection.tableExists("Z_MODELCACHE") else {
                throw ModelLoadingError(.notAModel, path: url.path, message:
                    "the store caches no model (it has no Z_MODELCACHE table; Core Data before 2012 did not write one): open it with its model file")
            }
            let statement = try connection.prepare("SELECT Z_CONTENT FROM Z_MODELCACHE LIMIT 1")
            compressed = try statement.step() ? statement.data(at: 0) : nil
        } catch let error as SQLiteError {
            throw SQLiteStore.storeError(error, url: url, doing: "reading the cached model")
        }
        guard let compressed, !compressed.isEmpty else {
            throw ModelLoadingError(.notAModel, path: url.path, message: "the store's model cache (Z_MODELCACHE) is empty: open it with its model file")
        }
        let archive: Data
        do {
            archive = try RawDeflate.inflate(compressed)
        } catch {
            throw ModelLoadingError(.malformedArchive, path: url.path, message: "the store's model cache (Z_MODELCACHE) is damaged: \(error)")
        }
        return try read(archive: archive, from: url)
    }
}

// MARK: - Writing the cache

extension SQLiteStoreFile {
    /// Puts `model` in the store's `Z_MODELCACHE`, as Core Data does when it
    /// creates or migrates a store, inside the caller's transaction: so that the
    /// store opens with ``ManagedObjectModel/init(cachedInStoreAt:)`` (and
    /// `datastack`) with no model file.
    static func writeModelCache(_ model: ManagedObjectModel, _ connection: Connection, url: URL?) throws {
        let compressed: Data
        do {
            compressed = try RawDeflate.deflate(CompiledModelEncoder.archive(model))
        } catch {
            throw PersistentStoreError(.ioFailure, url: url, message: "the model cache (Z_MODELCACHE) cannot be written: \(error)")
        }
        if try !connection.tableExists("Z_MODELCACHE") {
            try connection.execute("CREATE TABLE Z_MODELCACHE (Z_CONTENT BLOB)")
        }
        try connection.execute("DELETE FROM Z_MODELCACHE")
        let insert = try connection.prepare("INSERT INTO Z_MODELCACHE (Z_CONTENT) VALUES (?)")
        try insert.bind(compressed, at: 1)
        try insert.execute()
    }
}
