@_spi(DataStackInternal) import DataStackSupport

/// A set of object IDs that a context collects as a list — an append per
/// object, no hashing — and that becomes a `Set` only when it is read as one.
///
/// The payloads of objects-did-change and did-save notifications are sets
/// (``ObjectsDidChange/insertedObjectIDs``, ``ContextDidSave/insertedObjectIDs``).
/// An import of 10,000 objects built two such sets per save, one hashed
/// insert per object each, and most were never read: nobody listened to the
/// importer's objects-did-change, and a stack merges a save from its list
/// (``ids``). The set is built once, on the first read, and kept.
///
/// The IDs given must be distinct (each is one object's).
package struct DeferredObjectIDSet: Sendable, Equatable {
    private enum State {
        case list([ObjectID])
        case set(Set<ObjectID>)
    }

    // A class, so that the set built by the first read is kept by every copy
    // of the payload; under a lock, because payloads cross queues.
    private final class Storage: Sendable {
        let state: Locked<State>
        init(_ state: State) { self.state = Locked(state) }
    }

    private var storage: Storage?

    /// An empty set.
    package init() {}

    /// The IDs of `list`, which holds each once.
    package init(distinct list: [ObjectID]) {
        if !list.isEmpty { storage = Storage(.list(list)) }
    }

    package init(_ set: Set<ObjectID>) {
        if !set.isEmpty { storage = Storage(.set(set)) }
    }

    package var isEmpty: Bool { count == 0 }

    package var count: Int {
        guard let storage else { return 0 }
        return storage.state.withLock { state in
            switch state {
            case .list(let list): list.count
            case .set(let set): set.count
            }
        }
    }

    /// The IDs as a set, built on the first read.
    package var set: Set<ObjectID> {
        guard let storage else { return [] }
        return storage.state.withLock { state in
            switch state {
            case .set(let set):
                return set
            case .list(let list):
                let set = Set(list)
                state = .set(set)
                return set
            }
        }
    }

    /// The IDs in no particular order, without building the set.
    package var ids: [ObjectID] {
        guard let storage else { return [] }
        return storage.state.withLock { state in
            switch state {
            case .list(let list): list
            case .set(let set): Array(set)
            }
        }
    }

    package static func == (lhs: DeferredObjectIDSet, rhs: DeferredObjectIDSet) -> Bool {
        lhs.storage === rhs.storage || lhs.set == rhs.set
    }
}
