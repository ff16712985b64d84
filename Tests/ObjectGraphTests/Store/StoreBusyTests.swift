import Foundation
import ObjectGraph
import Synchronization
import Testing
import DataStackSQLite

/// A save that finds another connection holding the write lock waits as the
/// store's busy mode says — and no longer — then throws a busy error that
/// names the store, keeping the context's changes.
@Suite struct StoreBusyTests {
    /// A store opened with `busyMode`, a context on it with one unsaved
    /// company, and another connection on the same file holding the write lock.
    private struct Locked {
        let stack: TestStack
        let context: ManagedObjectContext
        let holder: Connection?

        init(busyMode: BusyMode, holdsLock: Bool = true) throws {
            stack = try TestStack()
            var options = StoreOptions()
            options.busyMode = busyMode
            context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try stack.secondCoordinator(options: options))
            holder = holdsLock ? try RawStore.open(stack.storeURL) : nil
            try holder?.execute("BEGIN IMMEDIATE")
            context.performAndWait { Company(context: context).symbol = "WAITING" }
        }

        /// Saves, returning the error and how long the save took.
        func save() -> (error: (any Error)?, seconds: Double) {
            let start = ContinuousClock.now
            let error = context.saveReturningError()
            let elapsed = ContinuousClock.now - start
            return (error, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18)
        }

        func expectBusyError(_ error: (any Error)?, sourceLocation: SourceLocation = #_sourceLocation) {
            let storeError = error as? PersistentStoreError
            #expect(storeError?.code == .busy, "\(error.map { "\($0)" } ?? "no error")", sourceLocation: sourceLocation)
            #expect(storeError?.url?.path == stack.storeURL.path, sourceLocation: sourceLocation)
            #expect(storeError?.message.contains("locked by another connection") == true, sourceLocation: sourceLocation)
            context.performAndWait {
                #expect(context.hasChanges, "the context keeps its changes", sourceLocation: sourceLocation)
                #expect(context.insertedObjects.count == 1, sourceLocation: sourceLocation)
            }
        }
    }

    @Test func withImmediateErrorASaveFailsAtOnceWithABusyError() throws {
        let locked = try Locked(busyMode: .immediateError)
        let (error, seconds) = locked.save()
        locked.expectBusyError(error)
        #expect(seconds < 0.5, "no waiting and no retry loop: \(seconds) s")
        // Once the lock is released, the same changes save.
        try locked.holder?.execute("ROLLBACK")
        #expect(locked.save().error == nil)
        #expect(try RawStore.texts(locked.stack.storeURL, "SELECT ZSYMBOL FROM ZCOMPANY") == ["WAITING"])
    }

    @Test func withATimeoutASaveWaitsThatLongThenFails() throws {
        let locked = try Locked(busyMode: .timeout(0.3))
        let (error, seconds) = locked.save()
        locked.expectBusyError(error)
        #expect(seconds >= 0.25 && seconds < 1.5, "waited about the timeout: \(seconds) s")
        try locked.holder?.execute("ROLLBACK")
    }

    @Test func withATimeoutASaveSucceedsWhenTheLockIsReleasedInTime() throws {
        let locked = try Locked(busyMode: .timeout(0.3), holdsLock: false)
        // Another thread takes the lock, and releases it 0.1 s into the save.
        let url = locked.stack.storeURL
        let taken = DispatchSemaphore(value: 0)
        let released = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            defer { released.signal() }
            do {
                let holder = try RawStore.open(url)
                try holder.execute("BEGIN IMMEDIATE")
                taken.signal()
                // Behaviour under test: the lock is held for a while, and the save must wait it out.
                Thread.sleep(forTimeInterval: 0.1)
                try holder.execute("ROLLBACK")
            } catch {
                taken.signal()   // the save then runs unhindered and the timing check below fails
            }
        }
        taken.wait()
        let (error, seconds) = locked.save()
        released.wait()
        #expect(error == nil, "\(error.map { "\($0)" } ?? "")")
        #expect(seconds >= 0.05, "the save waited for the lock: \(seconds) s")
        #expect(seconds < 0.3 + 0.5)
        #expect(try RawStore.texts(url, "SELECT ZSYMBOL FROM ZCOMPANY") == ["WAITING"])
    }

    @Test func aCallbackDecidesHowLongToWait() throws {
        let tries = Tries()
        let locked = try Locked(busyMode: .callback { attempt in
            tries.record(attempt)
            usleep(1_000)   // behaviour under test: the callback is what waits between tries
            return attempt < 4
        })
        let (error, _) = locked.save()
        locked.expectBusyError(error)
        #expect(tries.values == [0, 1, 2, 3, 4])
        try locked.holder?.execute("ROLLBACK")
    }

    /// The busy callback's arguments, in call order.
    private final class Tries: Sendable {
        private let seen = Mutex<[Int]>([])
        func record(_ attempt: Int) { seen.withLock { $0.append(attempt) } }
        var values: [Int] { seen.withLock { $0 } }
    }
}
