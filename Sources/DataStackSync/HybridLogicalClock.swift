import Foundation
@_spi(DataStackInternal) import DataStackSupport

/// A replica's hybrid logical clock: stamps its changes with timestamps that
/// never go backwards and that order after every timestamp it has received
/// (Kulkarni et al., "Logical Physical Clocks", OPODIS 2014).
///
/// ```swift
/// let clock = HybridLogicalClock(replica: replicaID)
/// let stamp = clock.tick()                    // a local change
/// for change in pulled { clock.receive(change.change.timestamp) }
/// ```
///
/// A timestamp's milliseconds follow the wall clock when it runs ahead of
/// everything seen, and stay put otherwise, the counter telling events apart:
/// a clock stepped back by NTP, or a replica whose clock is slow, still stamps
/// increasing timestamps, and a change made after receiving another orders
/// after it, so "last writer wins" never lets an older edit beat one made
/// after seeing it.
///
/// ## Topics
/// - ``tick(physical:)``
/// - ``receive(_:)``
/// - ``latest``
/// - ``Skew``
public final class HybridLogicalClock: Sendable {
    /// The replica whose timestamps this clock makes.
    public let replica: UUID
    /// How far ahead of this machine's clock a received timestamp may be
    /// before ``receive(_:)`` reports it. The default is one day.
    public let maximumSkew: Int64
    private let now: @Sendable () -> Int64
    private let state: Locked<HybridTimestamp>  // the latest timestamp made or received

    /// The wall clock in milliseconds since 1970, the default physical clock.
    public static let wallMilliseconds: @Sendable () -> Int64 = {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// Creates a clock for `replica`.
    ///
    /// - Parameters:
    ///   - replica: the replica stamped into every timestamp.
    ///   - latest: the last timestamp the replica made or received before it
    ///     stopped (its sync bookkeeping keeps it), so a restart with a clock
    ///     set back still stamps later timestamps. The default is none.
    ///   - maximumSkew: see ``maximumSkew``; the default is one day.
    ///   - now: the physical clock in milliseconds since 1970; tests pass their own.
    public init(replica: UUID, latest: HybridTimestamp? = nil, maximumSkew: Int64 = 86_400_000,
                now: @escaping @Sendable () -> Int64 = HybridLogicalClock.wallMilliseconds) {
        self.replica = replica
        self.maximumSkew = maximumSkew
        self.now = now
        let start = latest.map { HybridTimestamp(milliseconds: $0.milliseconds, counter: $0.counter, replica: replica) }
        state = Locked(start ?? HybridTimestamp(milliseconds: 0, counter: 0, replica: replica))
    }

    /// The latest timestamp this clock made or received, with this replica's ID.
    public var latest: HybridTimestamp { state.withLock { $0 } }

    /// A timestamp for a local event — a change the replica makes or sends —
    /// greater than every timestamp this clock made or received before.
    ///
    /// Rule (send or local event): *l′* = max(*l*, *pt*); *c′* = *l′* = *l* ? *c* + 1 : 0.
    /// A counter at its maximum carries into the milliseconds.
    ///
    /// - Parameter physical: the physical time of the event, when it is known
    ///   (a history transaction's timestamp, for a change saved earlier); the
    ///   default reads the clock. A physical time in the past never makes the
    ///   timestamp go backwards.
    public func tick(physical: Int64? = nil) -> HybridTimestamp {
        let physical = physical ?? now()
        return state.withLock { latest in
            if physical > latest.milliseconds {
                latest = HybridTimestamp(milliseconds: physical, counter: 0, replica: replica)
            } else {
                latest = Self.successor(milliseconds: latest.milliseconds, counter: latest.counter, replica: replica)
            }
            return latest
        }
    }

    /// A received timestamp far ahead of this machine's clock (see ``receive(_:)``).
    public struct Skew: Sendable, Hashable {
        /// The timestamp received.
        public var timestamp: HybridTimestamp
        /// How many milliseconds it was ahead of this machine's clock.
        public var milliseconds: Int64
    }

    /// Takes in a timestamp received from another replica, so that every
    /// timestamp this clock makes afterwards orders after it.
    ///
    /// Rule (receive *l*ₘ, *c*ₘ): *l′* = max(*l*, *l*ₘ, *pt*); the counter is
    /// one more than the largest counter among those whose milliseconds are
    /// *l′*, or 0 when *pt* alone is the maximum.
    ///
    /// A timestamp more than ``maximumSkew`` ahead of this machine's clock (a
    /// replica with a wrong clock) is still taken in: a hybrid clock must stay
    /// monotonic, or a change made after seeing it could order before it, and
    /// every replica that pulls it takes it in the same way, so they keep
    /// agreeing on the order. Refusing it would not undo it: it is on the hub
    /// already. Instead it is returned, for the engine to report: from then
    /// on this replica's timestamps run ahead of its wall clock (at the
    /// received milliseconds, counting up) until the wall clock catches up.
    ///
    /// - Returns: the skew when `timestamp` is more than ``maximumSkew`` ahead, otherwise nil.
    @discardableResult
    public func receive(_ timestamp: HybridTimestamp) -> Skew? {
        let physical = now()
        state.withLock { latest in
            let milliseconds = max(latest.milliseconds, timestamp.milliseconds, physical)
            if milliseconds == physical && milliseconds != latest.milliseconds && milliseconds != timestamp.milliseconds {
                latest = HybridTimestamp(milliseconds: physical, counter: 0, replica: replica)
                return
            }
            var counter: UInt32 = 0
            if milliseconds == latest.milliseconds { counter = latest.counter }
            if milliseconds == timestamp.milliseconds { counter = max(counter, timestamp.counter) }
            latest = Self.successor(milliseconds: milliseconds, counter: counter, replica: replica)
        }
        guard timestamp.milliseconds > physical else { return nil }
        let ahead = timestamp.milliseconds.subtractingReportingOverflow(physical)
        let milliseconds = ahead.overflow ? Int64.max : ahead.partialValue
        return milliseconds > maximumSkew ? Skew(timestamp: timestamp, milliseconds: milliseconds) : nil
    }

    /// The next timestamp after (`milliseconds`, `counter`): the counter plus
    /// one, or, at its maximum, the next millisecond with counter 0. At the
    /// very last representable instant it stays there (never traps): only a
    /// damaged timestamp gets there.
    private static func successor(milliseconds: Int64, counter: UInt32, replica: UUID) -> HybridTimestamp {
        if counter < .max { return HybridTimestamp(milliseconds: milliseconds, counter: counter + 1, replica: replica) }
        if milliseconds < .max { return HybridTimestamp(milliseconds: milliseconds + 1, counter: 0, replica: replica) }
        return HybridTimestamp(milliseconds: milliseconds, counter: counter, replica: replica)
    }
}
