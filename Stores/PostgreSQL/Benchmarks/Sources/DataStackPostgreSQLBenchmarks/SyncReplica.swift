import DataStack
import DataStackPostgreSQLSync
import DataStackSync
import Foundation
import ObjectGraph
import Synchronization

/// The model of the sync tasks, built in code: one `Asset` entity with six
/// attributes of the common kinds (two strings, an integer, a double, a date,
/// a Boolean), so an insert carries six values.
enum SyncModel {
    static let entityName = "Asset"

    static func make() -> ManagedObjectModel {
        ManagedObjectModel(entities: [
            EntityDescription(name: entityName, properties: [
                AttributeDescription(name: "symbol", type: .string, isOptional: false),
                AttributeDescription(name: "name", type: .string),
                AttributeDescription(name: "quantity", type: .integer64, isOptional: false, defaultValue: .integer(0)),
                AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
                AttributeDescription(name: "updated", type: .date),
                AttributeDescription(name: "active", type: .boolean, isOptional: false, defaultValue: .bool(false)),
            ]),
        ])
    }

    /// The values of asset `symbol` number `index`, deterministic.
    static func assign(_ object: ManagedObject, symbol: String, index: Int) throws {
        try object.setValue(symbol, forKey: "symbol")
        try object.setValue("Asset \(symbol) of the fund", forKey: "name")
        try object.setValue(Int64(index % 10_000), forKey: "quantity")
        try object.setValue(Double(index) / 8 + 0.125, forKey: "price")
        try object.setValue(Date(timeIntervalSinceReferenceDate: 700_000_000 + Double(index)), forKey: "updated")
        try object.setValue(index % 2 == 0, forKey: "active")
    }
}

/// One replica of the sync tasks: a `StackManager` on an SQLite file of its
/// own in a temporary folder, and its engine on a PostgreSQL hub (its own
/// `PostgreSQLSyncHub`, its own sessions, as a separate machine would have)
/// behind a ``CountingSyncHub``.
final class SyncReplica: Sendable {
    let folder: URL
    let stack: StackManager
    let hub: CountingSyncHub
    let engine: SyncEngine

    init(hubURL: URL, label: String, notifies: Bool = true, keepsChanges: Bool = false,
         pullInterval: Duration = .seconds(1)) async throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("ds-pg-sync-\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        stack = StackManager()
        try await stack.setup(model: SyncModel.make(), storeURL: folder.appendingPathComponent("\(label).sqlite"))
        hub = CountingSyncHub(try PostgreSQLSyncHub(url: hubURL), notifies: notifies, keepsChanges: keepsChanges)
        var options = SyncOptions(hub: hub)
        options.pullInterval = pullInterval
        engine = try SyncEngine(stack: stack, options: options)
    }

    /// Stops the engine and removes the replica's folder.
    func close() {
        engine.stop()
        try? FileManager.default.removeItem(at: folder)
    }

    /// Runs `body` in a new importer context and saves, as an app's import would.
    func save(_ body: (ManagedObjectContext, EntityDescription) throws -> Void) throws {
        let context = stack.importerContext()
        guard let entity = stack.writerCoordinator.managedObjectModel.entitiesByName[SyncModel.entityName] else {
            throw BenchError("sync: the model has no \(SyncModel.entityName)")
        }
        try context.performAndWait {
            try body(context, entity)
            try context.save()
        }
    }

    /// Inserts assets `symbols`, `chunk` per save.
    func insert(_ symbols: [(String, Int)], chunk: Int = 1_000) throws {
        for start in stride(from: 0, to: symbols.count, by: chunk) {
            try save { context, entity in
                for (symbol, index) in symbols[start..<min(start + chunk, symbols.count)] {
                    try SyncModel.assign(ManagedObject(entity: entity, insertInto: context), symbol: symbol, index: index)
                }
            }
        }
    }

    /// Sets `key` of the assets named in `edits` (symbol → value), `chunk` per save.
    func update<Value: Sendable>(_ key: String, _ edits: [(String, Value)], chunk: Int = 1_000) throws {
        let ids = try objectIDs()
        for start in stride(from: 0, to: edits.count, by: chunk) {
            try save { context, _ in
                for (symbol, value) in edits[start..<min(start + chunk, edits.count)] {
                    guard let id = ids[symbol] else { throw BenchError("sync: asset \(symbol) is not on this replica") }
                    try context.object(with: id).setValue(value, forKey: key)
                }
            }
        }
    }

    /// Every asset's object ID by symbol.
    func objectIDs() throws -> [String: ObjectID] {
        let context = stack.importerContext()
        return try context.performAndWait {
            var ids: [String: ObjectID] = [:]
            for object in try context.fetch(FetchRequest<ManagedObject>(entityName: SyncModel.entityName)) {
                guard let symbol = try object.value(forKey: "symbol") as? String else { throw BenchError("sync: an asset without a symbol") }
                ids[symbol] = object.objectID
            }
            return ids
        }
    }

    /// Every asset as one line of its values, sorted: two replicas that converged dump the same lines.
    func dump() throws -> [String] {
        let context = stack.importerContext()
        return try context.performAndWait {
            var lines: [String] = []
            for object in try context.fetch(FetchRequest<ManagedObject>(entityName: SyncModel.entityName)) {
                var values: [String] = []
                for name in object.entity.propertiesByName.keys.sorted() {
                    let value = try object.value(forKey: name)
                    values.append("\(name)=\(value.map { "\($0)" } ?? "nil")")
                }
                lines.append(values.joined(separator: " "))
            }
            return lines.sorted()
        }
    }
}

/// Runs blocking work on a thread of its own and awaits it, so the main queue
/// (where a stack's main context and its merge notifications live) keeps running.
func onThread<T: Sendable>(_ name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
    let result: Result<T, any Error> = await withCheckedContinuation { continuation in
        let thread = Thread {
            continuation.resume(returning: Result { try body() })
        }
        thread.name = name
        thread.start()
    }
    return try result.get()
}
