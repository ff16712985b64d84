import DataStack
import DataStackPostgreSQL
import Foundation
import Synchronization

/// `readers <url> --contexts N --seconds S --max-readers K`: N private-queue
/// contexts of one coordinator (its store opened with `maximumReaderCount` K)
/// each count the entries as often as they can for S seconds; writes
/// `{"reads":…,"seconds":S}`. How much the reader pool lets contexts read at
/// once, over whatever link the process sits behind (HostTests).
enum PeerReaders {
    struct Result: Codable {
        var reads: Int
        var seconds: Double
    }

    static func run(url: URL, contexts: Int, seconds: Double, maximumReaderCount: Int, options: StoreOptions) throws {
        var options = options
        options.maximumReaderCount = maximumReaderCount
        options.remoteChangeNotifications = false
        let coordinator = PersistentStoreCoordinator(managedObjectModel: PeerModel.make())
        try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url, options: options)
        let request = FetchRequest<ManagedObject>(entityName: "Entry")
        let reads = Mutex(0)
        let failure = Mutex<(any Error)?>(nil)
        let end = Date().addingTimeInterval(seconds)
        let group = DispatchGroup()
        for _ in 0..<max(1, contexts) {
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            group.enter()
            // A thread each: the contexts read at the same time, as a coordinator's contexts do.
            Thread {
                defer { group.leave() }
                do {
                    while Date() < end {
                        _ = try context.performAndWait { try context.count(for: request) }
                        reads.withLock { $0 += 1 }
                    }
                } catch {
                    failure.withLock { $0 = error }
                }
            }.start()
        }
        group.wait()
        if let error = failure.withLock({ $0 }) { throw error }
        PeerOutput.write(Result(reads: reads.withLock { $0 }, seconds: seconds))
    }
}
