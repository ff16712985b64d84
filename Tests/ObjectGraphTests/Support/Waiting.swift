import Foundation
import Synchronization
import Testing

// How the tests wait (STYLE rule 21; this file is linked into each test target): for the event, with a deadline
// that records an issue naming what did not happen, never a sleep and a hope.
// The deadlines are generous because the whole suite shares two cores; a wait
// that is met ends at once, so the deadline only costs when something is wrong.

/// Something that happens once, signalled from any thread (a callback, a
/// notification observer, a thread of the test) and waited for by the test.
final class Signal: Sendable {
    private struct State {
        var fired = false
        var waiters: [UUID: CheckedContinuation<Bool, Never>] = [:]
    }

    private let state = Mutex(State())
    /// Signalled once by `fire()`, for the waits of threads that are not tasks.
    private let fired = DispatchSemaphore(value: 0)

    init() {}

    var hasFired: Bool { state.withLock { $0.fired } }

    /// Says it happened; later calls do nothing.
    func fire() {
        let waiters: [CheckedContinuation<Bool, Never>]? = state.withLock { state in
            guard !state.fired else { return nil }
            state.fired = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        guard let waiters else { return }
        fired.signal()
        for waiter in waiters { waiter.resume(returning: true) }
    }

    /// A signal fired by the first `name` notification that `object` posts,
    /// on whichever thread posts it; observing starts now, so a notification
    /// posted before the test waits still counts.
    static func notification(_ name: Notification.Name, from object: AnyObject?) -> Signal {
        let signal = Signal()
        let observer = NotificationCenter.default.addObserver(forName: name, object: object, queue: nil) {
            [weak signal] _ in signal?.fire()
        }
        signal.observer.withLock { $0 = ObserverToken(observer) }
        return signal
    }

    /// The notification observer that fires this signal, removed with it.
    private let observer = Mutex<ObserverToken?>(nil)

    deinit {
        if let token = observer.withLock({ $0 }) { NotificationCenter.default.removeObserver(token.observer) }
    }

    /// Waits until it happened, without holding a thread; records an issue
    /// naming `what` when it did not happen within `deadline`.
    @discardableResult
    func wait(for what: String, deadline: Duration = .seconds(60),
              sourceLocation: SourceLocation = #_sourceLocation) async -> Bool {
        let id = UUID()
        let happened = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let already = state.withLock { state in
                if state.fired { return true }
                state.waiters[id] = continuation
                return false
            }
            if already { return continuation.resume(returning: true) }
            DispatchQueue.global().asyncAfter(deadline: .now() + deadline.seconds) { [self] in
                state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: false)
            }
        }
        if !happened { Issue.record("\(what) did not happen within \(deadline)", sourceLocation: sourceLocation) }
        return happened
    }

    /// Blocks the calling thread until it happened — for synchronous tests
    /// whose other side runs on threads of its own, never on the main queue;
    /// records an issue naming `what` when it did not happen within `deadline`.
    @discardableResult
    func waitBlocking(for what: String, deadline: Duration = .seconds(60),
                      sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        let happened = fired.wait(timeout: .now() + deadline.seconds) == .success
        if happened { fired.signal() }   // for the next waiter
        else { Issue.record("\(what) did not happen within \(deadline)", sourceLocation: sourceLocation) }
        return happened
    }
}

/// Things that happen again and again (a notification, a callback), kept in
/// order; a test waits until they satisfy a condition, checked when each one
/// arrives (no poll).
final class Recording<Element: Sendable>: Sendable {
    private struct Waiter {
        let isMet: @Sendable ([Element]) -> Bool
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var elements: [Element] = []
        var waiters: [UUID: Waiter] = [:]
    }

    private let state = Mutex(State())

    init() {}

    /// What happened so far, oldest first.
    var elements: [Element] { state.withLock { $0.elements } }

    /// Says it happened once more, and wakes the waits this satisfies.
    func append(_ element: Element) {
        let woken: [CheckedContinuation<Bool, Never>] = state.withLock { state in
            state.elements.append(element)
            let met = state.waiters.filter { $0.value.isMet(state.elements) }
            for id in met.keys { state.waiters[id] = nil }
            return met.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume(returning: true) }
    }

    /// Waits until what happened satisfies `isMet` (checked now, then on each
    /// arrival), without holding a thread; records an issue naming `what`,
    /// and what did happen as `describe` puts it, when it does not within
    /// `deadline`, and says whether it does.
    @discardableResult
    func wait(for what: String, deadline: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation,
              describe: ([Element]) -> String = { "\($0.count) so far" },
              until isMet: @escaping @Sendable ([Element]) -> Bool) async -> Bool {
        let id = UUID()
        let happened = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let already = state.withLock { state in
                if isMet(state.elements) { return true }
                state.waiters[id] = Waiter(isMet: isMet, continuation: continuation)
                return false
            }
            if already { return continuation.resume(returning: true) }
            DispatchQueue.global().asyncAfter(deadline: .now() + deadline.seconds) { [self] in
                state.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume(returning: false)
            }
        }
        if !happened {
            Issue.record("\(what) did not happen within \(deadline); \(describe(elements))", sourceLocation: sourceLocation)
        }
        return happened
    }
}

/// Waits until `condition` holds; records an issue naming `what` when it
/// does not within `deadline`, and says whether it holds.
///
/// The one poll of the test targets, for a state no event announces: a file
/// another process makes (ticker-import's `--view-only` creating its store). It checks the cheap condition every 2 ms, and once more
/// at the deadline, so a state reached while this task could not run counts.
@discardableResult
func waitUntil(_ what: String, deadline: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation,
               _ condition: () async throws -> Bool) async rethrows -> Bool {
    let end = ContinuousClock.now + deadline
    while ContinuousClock.now < end {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(2))   // the poll's yield (see above)
    }
    if try await condition() { return true }
    Issue.record("\(what) did not happen within \(deadline)", sourceLocation: sourceLocation)
    return false
}

// @unchecked Sendable: an opaque NotificationCenter token, only handed back to it.
private final class ObserverToken: @unchecked Sendable {
    let observer: any NSObjectProtocol
    init(_ observer: any NSObjectProtocol) { self.observer = observer }
}

extension Duration {
    /// In seconds, for Dispatch's deadlines.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) * 1e-18 }
}
