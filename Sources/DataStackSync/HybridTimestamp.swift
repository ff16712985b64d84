import Foundation

/// A point in a replica set's time: the largest physical time a replica had
/// seen, a counter for events within one millisecond, and the replica that
/// made it (Kulkarni et al., "Logical Physical Clocks", OPODIS 2014).
///
/// Timestamps order every change of every replica the same way everywhere:
/// by time, then counter, then replica, so "last writer wins" picks one
/// winner on every machine. A change made after a replica saw another has a
/// greater timestamp than it, whatever the machines' clocks say.
public struct HybridTimestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Milliseconds since 1970, the largest physical time seen.
    public var milliseconds: Int64
    /// Events within ``milliseconds``, in order.
    public var counter: UInt32
    /// The replica that made the change.
    public var replica: UUID

    public init(milliseconds: Int64, counter: UInt32, replica: UUID) {
        self.milliseconds = milliseconds
        self.counter = counter
        self.replica = replica
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        if lhs.milliseconds != rhs.milliseconds { return lhs.milliseconds < rhs.milliseconds }
        if lhs.counter != rhs.counter { return lhs.counter < rhs.counter }
        return lhs.replica.uuidString < rhs.replica.uuidString
    }

    public var description: String { "\(milliseconds).\(counter)@\(replica.uuidString.prefix(8))" }
}
