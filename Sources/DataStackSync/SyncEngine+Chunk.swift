import Foundation

/// What folding one pulled chunk produced: each object's state (read once,
/// written once) and what its row showed before the chunk, and the objects
/// merged into another because they carried the same unique key.
struct ChunkFold {
    var states: [UUID: (entity: String, primaryKey: Int64?, state: SyncObjectState?)] = [:]
    /// What each object's row showed when the chunk first touched it.
    var shown: [UUID: SyncObjectState.Fold] = [:]
    /// Global IDs merged away in this chunk, to their survivors: their rows, if any, are the survivors' now.
    var aliases: [UUID: UUID] = [:]
    /// Unique keys whose holder in the hub's order this chunk changed: the
    /// object whose insert took the key, or nil where a delete freed it.
    var keyHolders: [String: UUID?] = [:]
    /// This replica's own objects whose row holds a unique key another
    /// object took in this chunk, by a change of theirs (an insert, an
    /// update) whose return from the hub is still to be folded — with the
    /// key's attributes. That return decides which of the two keeps the key;
    /// until then the store cannot show both.
    var awaitedTwins: [UUID: Set<String>] = [:]
    /// Rows of objects merged into a survivor that has a row of its own: they
    /// are deleted, their to-many members moved to the survivor's row.
    var mergedRows: [(entity: String, primaryKey: Int64, into: UUID)] = []
    /// Changes that would have given an object a key another holds, one per
    /// attribute left out, to report once the chunk is applied.
    var keyConflicts: [SyncConflict] = []

    /// Drops the awaited twins whose changes of the key's attributes have all come back.
    mutating func settleAwaitedTwins() {
        awaitedTwins = awaitedTwins.filter { id, names in
            states[id]?.state?.pending.contains { !names.isDisjoint(with: $0.change.values.keys) } ?? false
        }
    }

    /// What the store must change, one effect per object: the chunk's net
    /// result, so an object inserted and deleted within it is never made, and
    /// a reference to one deleted within it finds nothing.
    func effects(_ merger: SyncMerger) -> [SyncEffect] {
        states.compactMap { id, entry in
            guard aliases[id] == nil else { return nil }
            return merger.effect(from: shown[id] ?? SyncObjectState.Fold(), to: entry.state?.effective ?? SyncObjectState.Fold(),
                                 objectID: id, entity: entry.entity)
        }
    }
}

extension SyncEngine {
    /// Pulls the hub's changes after `sequence`, a chunk of them, and folds
    /// them into `fold`; returns them, none when the hub has nothing newer.
    ///
    /// A chunk that gives a unique key to another object while this
    /// replica's own insert or update of that key is still in its store goes
    /// on until the hub sends that change back (it is on the hub already: the
    /// push comes before the pull), however many changes lie between. Only
    /// then is it known, in the hub's order alone, whether the own change
    /// keeps the key — the other deleted or moved off it before — or merges
    /// into the other (an insert) or loses the key (an update); and only the
    /// net result of the whole run is what the store is to show.
    func pullAndFold(after sequence: Int64, into fold: inout ChunkFold) throws(SyncError) -> [SequencedChange] {
        let ledger = self.ledger.value
        var chunk: [SequencedChange] = []
        var after = sequence
        repeat {
            let pulled = try hubCall { try options.hub.pull(after: after, limit: options.chunkSize, decodedBy: codec) }
            guard let last = pulled.last else { break }
            // The inserts' numbers (SyncCodec) at once, not with the apply: the next pull of
            // this fold may name these objects by them. A fact of the hub's log, so recording
            // it before the apply (and again, after a crash) is harmless.
            try ledger.write("recording object numbers") {
                for sequenced in pulled where sequenced.change.kind == .insert {
                    try ledger.recordNumber(sequenced.sequence, of: sequenced.change.objectID)
                }
            }
            for change in pulled {
                if let skew = clock.receive(change.change.timestamp) {
                    emit(.clockSkew(replica: change.change.replica, aheadByMilliseconds: skew.milliseconds))
                }
            }
            // Each object's state is read once and written once.
            try ledger.read("reading merge states") {
                let lookup = uniqueKeyLookup()
                for sequenced in pulled {
                    try self.fold(sequenced, into: &fold, lookup: lookup)
                }
            }
            chunk += pulled
            after = last.sequence
            fold.settleAwaitedTwins()
        } while !fold.awaitedTwins.isEmpty
        // Awaited twins left when the hub has nothing more: the store refuses the apply
        // (`.concurrentSave`), and the next attempt pushes and pulls again.
        return chunk
    }
}
