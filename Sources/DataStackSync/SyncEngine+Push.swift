import DataStack
import Foundation

// The push half of a cycle, after the scan (SyncEngine+Scan.swift) filled the
// outbox: the outbox goes to the hub in chunks, and what the hub holds leaves it.
extension SyncEngine {
    /// This engine's name for its hold on the stack's history.
    var historyReader: String { "DataStackSync \(replica.uuidString)" }

    /// Keeps the clock in the ledger, inside the transaction that recorded what it stamped.
    func saveClock() throws {
        let latest = clock.latest
        try ledger.value.setInteger(latest.milliseconds, for: "clock")
        try ledger.value.setInteger(Int64(latest.counter), for: "clockCounter")
    }

    /// Whether a relationship travels: a to-one always; a to-many only when
    /// nothing else says the same thing — no inverse, or a to-many inverse whose
    /// side sorts after it. A to-many whose inverse is a to-one is carried by
    /// that to-one (setting it moves the member), so one fact never travels as two.
    static func syncs(_ relationship: RelationshipDescription) -> Bool {
        guard relationship.isToMany else { return true }
        guard let inverseName = relationship.inverseName,
              let inverse = relationship.destinationEntity?.relationshipsByName[inverseName] else { return true }
        guard inverse.isToMany else { return false }
        let mine = (relationship.entity?.rootEntity.name ?? "", relationship.name)
        let theirs = (inverse.entity?.rootEntity.name ?? "", inverse.name)
        return mine <= theirs
    }

    /// Sends the outbox to the hub, a chunk at a time, and clears what the hub holds.
    func pushOutbox() throws(SyncError) {
        let ledger = self.ledger.value
        while true {
            let chunk = try ledger.read("reading the outbox") { try ledger.outbox(limit: options.chunkSize) }
            guard let last = chunk.last else { return }
            let sequences = try hubCall { try options.hub.push(chunk, encodedBy: codec) }
            guard sequences.count == chunk.count else {
                throw SyncError(.hubFailure, message: "the hub answered \(sequences.count) sequences for a push of \(chunk.count) changes")
            }
            try ledger.write("recording a push") {
                for (change, sequence) in zip(chunk, sequences) {
                    // The hub's sequence of an insert is its object's number (SyncCodec) from now on.
                    if change.kind == .insert { try ledger.recordNumber(sequence, of: change.objectID) }
                    let known = try ledger.object(change.objectID)
                    var state = known?.state
                    merger.acknowledgePushed(change, sequence: sequence, in: &state)
                    try ledger.setObject(change.objectID, entity: change.entity, primaryKey: known?.primaryKey, state: state)
                }
                try ledger.removeFromOutbox(through: last.localSequence)
            }
            emit(.pushed(count: chunk.count, through: sequences.max() ?? 0))
        }
    }
}
