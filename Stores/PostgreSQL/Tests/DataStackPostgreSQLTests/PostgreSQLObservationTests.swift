import DataStack
import DataStackPostgreSQL
import Foundation
import Observation
import Synchronization
import Testing

/// Tells whether code runs on the main queue: by a mark set on it (on Linux the
/// main queue's blocks need not run on the thread `Thread.isMainThread` names).
enum MainQueueMark {
    private static let key: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()
    static var isOnMainQueue: Bool { DispatchQueue.getSpecific(key: key) ?? false }
}

/// The stack's merges, observed (issue #38), on the PostgreSQL store: an
/// importer's save of 10,000 rows calls, on the main queue and once,
/// exactly the observers of the observed objects' properties it changed.
@Suite(.serialized) struct PostgreSQLObservationTests {
    /// Counts the `onChange` calls of the trackings it starts, and the threads they came on.
    final class Counter: Sendable {
        private let calls = Mutex<[Bool]>([])
        var count: Int { calls.withLock { $0.count } }
        var allOnMainQueue: Bool { calls.withLock { $0.allSatisfy { $0 } } }
        func track<T>(_ read: () -> T) -> T {
            withObservationTracking(read) { [self] in calls.withLock { $0.append(MainQueueMark.isOnMainQueue) } }
        }
    }

    /// The stack's merges, as they are posted; a test waits for the next one.
    final class Merges: Sendable {
        let stream: AsyncStream<StackDidMerge>
        private let token: Mutex<(any NSObjectProtocol)?>

        init(_ stack: StackManager) {
            let (stream, continuation) = AsyncStream.makeStream(of: StackDidMerge.self)
            self.stream = stream
            let observer = NotificationCenter.default.addObserver(forName: StackManager.didMergeNotification, object: stack, queue: nil) { notification in
                if let merge = try? StackDidMerge(notification) { continuation.yield(merge) }
            }
            token = Mutex(observer)
        }

        deinit { token.withLock { if let observer = $0 { NotificationCenter.default.removeObserver(observer) } } }
    }

    // @unchecked Sendable: the objects are only used on the main context's queue.
    final class Holder: @unchecked Sendable { var objects: [ManagedObject] = [] }

    @Test("an import of 10,000 rows calls, once, exactly the observers of the observed objects' changed properties, on the main queue")
    func importWhileTenObjectsAreObserved() async throws {
        PostgreSQLStore.register()
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let stack = StackManager()
        try await stack.setup(model: StoreTestModel.make(), storeURL: url)
        let merges = Merges(stack)
        var arrivals = merges.stream.makeAsyncIterator()
        let importer = stack.importerContext()
        let ids = try await importer.perform {
            let entity = try #require(importer.persistentStoreCoordinator?.managedObjectModel.entitiesByName["Company"])
            let companies = try (0..<10).map { index in
                let company = ManagedObject(entity: entity, insertInto: importer)
                try company.setValue("C\(index)", forKey: "symbol")
                try company.setValue(index, forKey: "employees")
                return company
            }
            try importer.save()
            return companies.map(\.objectID)
        }
        _ = await arrivals.next()

        let main = stack.mainContext
        let employees = ids.map { _ in Counter() }
        let symbols = ids.map { _ in Counter() }
        let holder = Holder()
        try await main.perform {
            main.isObservable = true
            holder.objects = try ids.map { try main.existingObject(with: $0) }
            for (index, company) in holder.objects.enumerated() {
                _ = employees[index].track { try? company.value(forKey: "employees") }
                _ = symbols[index].track { try? company.value(forKey: "symbol") }
            }
        }

        try await importer.perform {
            for id in ids.prefix(5) {
                let company = try importer.existingObject(with: id)
                try company.setValue(((try company.value(forKey: "employees") as? Int) ?? 0) + 100, forKey: "employees")
            }
            let entity = try #require(importer.persistentStoreCoordinator?.managedObjectModel.entitiesByName["Company"])
            for index in 0..<9_995 {
                try ManagedObject(entity: entity, insertInto: importer).setValue("N\(index)", forKey: "symbol")
            }
            try importer.save()
        }
        let merge = try #require(await arrivals.next())
        #expect(merge.save.insertedObjectIDs.count == 9_995)
        #expect(merge.refreshedObjectIDs == Set(ids.prefix(5)))
        #expect(employees.prefix(5).map(\.count) == [1, 1, 1, 1, 1])
        #expect(employees.prefix(5).allSatisfy { $0.allOnMainQueue })
        #expect(employees.suffix(5).map(\.count) == [0, 0, 0, 0, 0])
        #expect(symbols.map(\.count) == Array(repeating: 0, count: 10))
        let first = try await main.perform { try holder.objects[0].value(forKey: "employees") as? Int }
        #expect(first == 100)
    }
}
