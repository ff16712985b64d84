import Foundation
import Synchronization
import Testing
import ObjectGraph
@_spi(DataStackInternal) import DataStackSupport
import DataStackSQLite
import DataStackStores

/// Several private-queue contexts on two coordinators of one file, saving,
/// fetching and merging at once (SPEC §3.9, §6). Run it under
/// `swift test --sanitize=thread --filter ConcurrencyStress` from time to time.
@Suite struct ConcurrencyStressTests {
    static let workers = 4

    static func model() -> ManagedObjectModel {
        // Worker i only ever changes attribute `a<i>`: under per-property merging no
        // increment may be lost, whatever the interleaving.
        let attributes = (0..<workers).map {
            AttributeDescription(name: "a\($0)", type: .integer64, isOptional: false, defaultValue: .integer(0))
        }
        return ManagedObjectModel(entities: [
            EntityDescription(name: "Counter", properties: [AttributeDescription(name: "label", type: .string)] + attributes),
        ])
    }

    @Test func contextsOnTwoCoordinatorsLoseNoUpdateThePolicyDoesNotExplain() async throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Stress.sqlite")
        let model = Self.model()
        let coordinators = try (0..<2).map { _ -> PersistentStoreCoordinator in
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(type: .sqlite, at: url)
            return coordinator
        }
        // Twenty counters to fight over.
        let seedContext = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinators[0])
        let ids: [ObjectID] = try seedContext.performAndWait {
            let objects = (0..<20).map { index -> ManagedObject in
                let object = ManagedObject(entity: model.entitiesByName["Counter"]!, insertInto: seedContext)
                try? object.setValue("c\(index)", forKey: "label")
                return object
            }
            try seedContext.save()
            return objects.map(\.objectID)
        }

        // A watcher on coordinator 0 merges every save and must end with the store's values.
        let watcher = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinators[0])
        let watched = ObjectBox(try watcher.performAndWait { try ids.map { try watcher.existingObject(with: $0) } })
        let observer = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveNotification, object: nil, queue: nil) { note in
            guard let source = note.object as? ManagedObjectContext, source !== watcher,
                  let save = try? ContextDidSave(note) else { return }
            watcher.perform { watcher.mergeChanges(fromContextDidSave: save) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        let increments = Tally(count: Self.workers)
        let deadline = ContinuousClock.now + .seconds(2)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<Self.workers {
                let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinators[worker % 2])
                context.mergePolicy = .mergeByPropertyObjectTrump
                let key = "a\(worker)"
                group.addTask {
                    var rounds = 0
                    while rounds < 25 || ContinuousClock.now < deadline {
                        rounds += 1
                        let chosen = (0..<3).map { _ in ids[Int.random(in: 0..<ids.count)] }
                        try await context.perform {
                            var changed = 0
                            for id in chosen {
                                let object = try context.existingObject(with: id)
                                let value = try object.value(forKey: key) as? Int ?? 0
                                try object.setValue(value + 1, forKey: key)
                                changed += 1
                            }
                            _ = try context.count(for: FetchRequest<ManagedObject>(entityName: "Counter"))
                            try context.save()
                            increments.add(changed, to: worker)
                            context.reset()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }

        // Every increment of every worker is in the store.
        let checker = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinators[1])
        let totals: [Int] = try checker.performAndWait {
            var request = FetchRequest<ManagedObject>(entityName: "Counter")
            request.returnsObjectsAsFaults = false
            let objects = try checker.fetch(request)
            return try (0..<Self.workers).map { worker in
                try objects.reduce(0) { $0 + (try $1.value(forKey: "a\(worker)") as? Int ?? 0) }
            }
        }
        #expect(totals == increments.values)
        #expect(totals.allSatisfy { $0 > 0 })

        // The watcher, after its last merge, holds exactly the store's values.
        // Every save queued its merge on the watcher's queue (the observer runs
        // on the saving thread, inside the save) before the workers finished,
        // so this perform, queued now, runs after the last merge.
        let watcherTotals: [Int] = try await watcher.perform {
            try (0..<Self.workers).map { worker in
                try watched.objects.reduce(0) { $0 + (try $1.value(forKey: "a\(worker)") as? Int ?? 0) }
            }
        }
        #expect(watcherTotals == totals)

        let connection = try Connection(path: url.path)
        #expect(try connection.integrityCheck() == ["ok"])
    }
}

/// Successful increments per worker.
final class Tally: Sendable {
    private let counts: Locked<[Int]>
    init(count: Int) { counts = Locked(Array(repeating: 0, count: count)) }
    func add(_ amount: Int, to worker: Int) { counts.withLock { $0[worker] += amount } }
    var values: [Int] { counts.withLock { $0 } }
}

/// Objects kept alive for a context; used only on that context's queue.
// @unchecked Sendable: the objects are touched only inside their context's perform blocks.
final class ObjectBox: @unchecked Sendable {
    let objects: [ManagedObject]
    init(_ objects: [ManagedObject]) { self.objects = objects }
}
