@testable import DataStackSync
import Dispatch
import Foundation
import Synchronization
import Testing

@Suite("Hybrid logical clock")
struct HybridLogicalClockTests {
    /// A physical clock the test sets.
    final class ManualClock: Sendable {
        private let milliseconds: Mutex<Int64>
        init(_ start: Int64) { milliseconds = Mutex(start) }
        func set(_ value: Int64) { milliseconds.withLock { $0 = value } }
        var read: @Sendable () -> Int64 { { self.milliseconds.withLock { $0 } } }
    }

    static let me = Replica.a
    static let other = Replica.b

    func stamp(_ ms: Int64, _ counter: UInt32, _ replica: UUID = me) -> HybridTimestamp {
        HybridTimestamp(milliseconds: ms, counter: counter, replica: replica)
    }

    @Test("ticks follow the wall clock forward and never go back when it steps back")
    func monotonicWhenTheClockGoesBackwards() {
        let wall = ManualClock(1_000)
        let clock = HybridLogicalClock(replica: Self.me, now: wall.read)
        #expect(clock.tick() == stamp(1_000, 0))
        #expect(clock.tick() == stamp(1_000, 1))
        wall.set(400)  // NTP stepped the clock back
        #expect(clock.tick() == stamp(1_000, 2))
        #expect(clock.tick(physical: 10) == stamp(1_000, 3))  // a history transaction stamped long ago
        wall.set(2_000)
        #expect(clock.tick() == stamp(2_000, 0))
        #expect(clock.tick(physical: 2_500) == stamp(2_500, 0))
        #expect(clock.latest == stamp(2_500, 0))
        var previous = clock.latest
        for step in 0..<500 {
            wall.set(Int64(2_000 + (step * 7919) % 1_000))  // jumping about
            let next = clock.tick()
            #expect(next > previous)
            previous = next
        }
    }

    @Test("receive: max of own, received and physical milliseconds; the counter per the rule")
    func receiveRule() {
        let wall = ManualClock(1_000)
        let clock = HybridLogicalClock(replica: Self.me, now: wall.read)
        #expect(clock.tick() == stamp(1_000, 0))
        // Received ahead of both: its milliseconds, its counter + 1.
        #expect(clock.receive(stamp(1_500, 7, Self.other)) == nil)
        #expect(clock.latest == stamp(1_500, 8))
        // Received at the same milliseconds with a smaller counter: own counter + 1.
        clock.receive(stamp(1_500, 3, Self.other))
        #expect(clock.latest == stamp(1_500, 9))
        // Same milliseconds, larger counter: its counter + 1.
        clock.receive(stamp(1_500, 20, Self.other))
        #expect(clock.latest == stamp(1_500, 21))
        // Received behind: own milliseconds, own counter + 1.
        clock.receive(stamp(900, 50, Self.other))
        #expect(clock.latest == stamp(1_500, 22))
        // Physical time ahead of both: it, counter 0.
        wall.set(3_000)
        clock.receive(stamp(1_000, 5, Self.other))
        #expect(clock.latest == stamp(3_000, 0))
        // A tick after receiving orders after what was received.
        let received = stamp(3_000, 40, Self.other)
        clock.receive(received)
        #expect(clock.tick() > received)
    }

    @Test("a counter at its maximum carries into the milliseconds, on tick and on receive")
    func counterCarry() {
        let wall = ManualClock(100)
        let clock = HybridLogicalClock(replica: Self.me, latest: stamp(1_000, .max, Self.other), now: wall.read)
        #expect(clock.latest == stamp(1_000, .max))  // restarted with its own replica
        #expect(clock.tick() == stamp(1_001, 0))
        clock.receive(stamp(5_000, .max, Self.other))
        #expect(clock.latest == stamp(5_001, 0))
        // The very last instant saturates instead of trapping: only a damaged timestamp gets there.
        clock.receive(stamp(.max, .max, Self.other))
        #expect(clock.tick() == stamp(.max, .max))
    }

    @Test("a timestamp more than a day ahead is taken in (monotonic) and reported as skew")
    func farFutureIsReported() throws {
        let wall = ManualClock(1_000)
        let clock = HybridLogicalClock(replica: Self.me, now: wall.read)
        #expect(clock.receive(stamp(1_000 + 86_400_000, 0, Self.other)) == nil)  // exactly a day: fine
        let far = stamp(1_000 + 3 * 86_400_000, 2, Self.other)
        let skew = try #require(clock.receive(far))
        #expect(skew == HybridLogicalClock.Skew(timestamp: far, milliseconds: 3 * 86_400_000))
        #expect(clock.tick() == stamp(far.milliseconds, 4))
        let extreme = clock.receive(stamp(.max, 0, Self.other))
        #expect(extreme?.milliseconds == Int64.max - 1_000)
        #expect(clock.receive(stamp(.min, 0, Self.other)) == nil)
    }

    @Test("timestamps equal in milliseconds and counter order by replica, and last writer wins picks the same one in either order")
    func tiesBreakByReplica() throws {
        #expect(stamp(5, 1, Replica.a) < stamp(5, 1, Replica.b))
        #expect(stamp(5, 2, Replica.a) > stamp(5, 1, Replica.b))
        #expect(stamp(6, 0, Replica.a) > stamp(5, 9, Replica.c))
        let merger = try SyncTestModel.merger(policy: .lastWriterWins)
        let object = UUID()
        let insert = itemChange(.insert, object, by: Replica.c, at: 1, base: 0, values: ["name": .string("c")])
        let a = itemChange(.update, object, by: Replica.a, at: 50, base: 1, values: ["name": .string("a")])
        let b = itemChange(.update, object, by: Replica.b, at: 50, base: 1, values: ["name": .string("b")])
        for order in [[a, b], [b, a]] {
            var state: SyncObjectState?
            for (index, change) in ([insert] + order).enumerated() {
                _ = try merger.apply(SequencedChange(sequence: Int64(index + 1), change: change), to: &state)
            }
            #expect(state?.fields["name"]?.value == .string("b"))
        }
    }

    @Test("ticks from many threads at once are all different and each thread's increase")
    func concurrentTicks() {
        let clock = HybridLogicalClock(replica: Self.me, now: { 7 })
        let seen = Mutex<Set<HybridTimestamp>>([])
        let ordered = Mutex(true)
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            var mine: [HybridTimestamp] = []
            for _ in 0..<2_000 { mine.append(clock.tick()) }
            if zip(mine, mine.dropFirst()).contains(where: { $0 >= $1 }) { ordered.withLock { $0 = false } }
            seen.withLock { $0.formUnion(mine) }
        }
        #expect(seen.withLock { $0.count } == 8_000)
        #expect(ordered.withLock { $0 })
        #expect(clock.latest == stamp(7, 7_999))
    }
}
