@_spi(DataStackInternal) import DataStackSupport


/// The continuations of the `AsyncStream`s handed out for one source of
/// events (a context's `events`, a fetched results controller's `changes`):
/// each stays until its iterating task ends, and every event goes to all of them.
///
/// Thread-safe: a stream ends on the iterating task's thread, while events are
/// yielded on the source's queue.
final class StreamSubscribers<Element: Sendable>: Sendable {
    private struct State {
        var nextID = 0
        var continuations: [Int: AsyncStream<Element>.Continuation] = [:]
    }
    private let state = Locked(State())

    /// Keeps `continuation` until its stream ends.
    func add(_ continuation: AsyncStream<Element>.Continuation) {
        let id = state.withLock { state in
            state.nextID += 1
            state.continuations[state.nextID] = continuation
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { $0.continuations[id] = nil }
        }
    }

    var hasSubscribers: Bool { state.withLock { !$0.continuations.isEmpty } }

    /// Yields outside the lock: a continuation's consumer may end its stream meanwhile.
    func yield(_ element: Element) {
        for continuation in state.withLock({ Array($0.continuations.values) }) { continuation.yield(element) }
    }

    func finishAll() {
        for continuation in state.withLock({ Array($0.continuations.values) }) { continuation.finish() }
    }
}
