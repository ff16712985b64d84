import Foundation
import ObjectGraph
import Testing
@_spi(DataStackInternal) import DataStackSupport

/// `Locked`, the lock of the package's shared state: turns exclude each
/// other, and a turn that throws gives the lock back with its changes kept.
@Suite struct LockedTests {
    struct Refused: Error, Equatable { var at: Int }

    @Test func turnsOnManyThreadsExcludeEachOther() {
        let counter = Locked((count: 0, inside: 0, mostInside: 0))
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<2_000 {
                counter.withLock { state in
                    state.inside += 1
                    state.mostInside = max(state.mostInside, state.inside)
                    state.count += 1
                    state.inside -= 1
                }
            }
        }
        let state = counter.withLock { $0 }
        #expect(state.count == 16_000)
        #expect(state.mostInside == 1, "two turns overlapped")
    }

    @Test func aTurnThatThrowsKeepsItsChangesAndReleasesTheLock() {
        let list = Locked<[Int]>([])
        #expect(throws: Refused(at: 1)) {
            try list.withLock { (list) throws(Refused) in
                list.append(1)
                throw Refused(at: list.count)
            }
        }
        // Taken again on another thread: a lock left held would never return.
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            list.withLock { $0.append(2) }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(list.withLock { $0 } == [1, 2])
    }
}
