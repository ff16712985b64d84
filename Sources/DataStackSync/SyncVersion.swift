import Foundation

/// Which change set a value, member or deletion, and where that change stands
/// in the hub's order: what the merge compares.
///
/// Two versions of one field meet in hub order: the later one (*incoming*)
/// and the earlier one (*current*). The incoming one saw the current one
/// when its replica had pulled the current one before making it
/// (``saw(_:)``); otherwise the two are concurrent and the property's
/// ``SyncMergePolicy`` settles them.
///
/// ```swift
/// let pulled = SyncVersion(change, sequence: 41)
/// pulled.saw(current)   // true when change.baseSequence >= current.sequence
/// ```
///
/// ## Topics
/// - ``saw(_:)``
public struct SyncVersion: Sendable, Hashable {
    /// The change's hybrid timestamp; it names the change.
    public var timestamp: HybridTimestamp
    /// The change's hub sequence; nil for a replica's own change the hub
    /// does not hold yet (it will come after everything pulled).
    public var sequence: Int64?
    /// The last hub sequence the change's replica had pulled when it made the change.
    public var baseSequence: Int64

    public init(timestamp: HybridTimestamp, sequence: Int64?, baseSequence: Int64) {
        self.timestamp = timestamp
        self.sequence = sequence
        self.baseSequence = baseSequence
    }

    /// The version of `change`, at hub sequence `sequence` (nil: not on the hub yet).
    public init(_ change: SyncChange, sequence: Int64?) {
        self.init(timestamp: change.timestamp, sequence: sequence, baseSequence: change.baseSequence)
    }

    /// The replica that made the change.
    public var replica: UUID { timestamp.replica }

    /// Whether this version's change was made after its replica had seen
    /// `earlier`: the replica had pulled `earlier` (its sequence is at most
    /// this change's base sequence), or made it itself before (a replica
    /// sees its own changes, pushed or not; its clock orders them).
    ///
    /// The second rule is an addition to "base sequence ≥ sequence": a
    /// replica's changes made before it pulled its own earlier ones back
    /// would otherwise count as concurrent with them, and a `hubWins`
    /// property would keep the replica's older value.
    public func saw(_ earlier: SyncVersion) -> Bool {
        if let sequence = earlier.sequence, baseSequence >= sequence { return true }
        return earlier.replica == replica && earlier.timestamp < timestamp
    }

    /// The same change (seen twice: an own change pulled back, a chunk applied again).
    func isSameChange(as other: SyncVersion) -> Bool { timestamp == other.timestamp }
}
