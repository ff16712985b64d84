import DataStack
import Foundation

/// `viewer`: shows the entries and the shared counter on the stack's main
/// context, and writes a line each time a merge changed what it shows.
///
/// The counter is fetched once and then held: its value changes only when a
/// merge refreshes it, so the line's `counter` is what the merges brought.
/// The entries are fetched again after each merge (a merge reports inserted
/// objects by ID only). `token` is the stack's last merged history transaction.
// @unchecked Sendable: `counter`, `isScheduled` and `last` are touched only on the main queue (the main context's).
final class PeerViewer: @unchecked Sendable {
    private let stack: StackManager
    private var counter: ManagedObject?        // protected by the main queue
    private var isScheduled = false            // protected by the main queue
    private var last: PeerOutput.Seen?         // protected by the main queue
    private var observer: (any NSObjectProtocol)?

    init(stack: StackManager) {
        self.stack = stack
    }

    /// Writes the first line, then one after each burst of merges.
    func start() {
        observer = NotificationCenter.default.addObserver(forName: StackManager.didMergeNotification, object: stack, queue: nil) { [self] _ in
            // Posted on the main queue; merges arriving together are reported once.
            scheduleReport()
        }
        stack.mainContext.perform { self.report() }
    }

    private func scheduleReport() {
        dispatchPrecondition(condition: .onQueue(.main))
        guard !isScheduled else { return }
        isScheduled = true
        stack.mainContext.perform { self.report() }
    }

    private func report() {
        isScheduled = false
        let main = stack.mainContext
        do {
            if counter == nil { counter = try main.fetch(PeerModel.counterRequest).first }
            let seen = PeerOutput.Seen(entries: try PeerModel.entryNames(in: main),
                                       counter: try counter.map(PeerModel.value(of:)),
                                       token: stack.lastMergedHistoryToken?.transactionNumber)
            if seen != last {
                var line = seen
                line.at = Date().timeIntervalSince1970
                PeerOutput.write(line)
            }
            last = seen
        } catch {
            PeerOutput.fail("viewer: \(error)")
        }
    }
}
