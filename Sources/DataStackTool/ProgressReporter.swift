import Foundation
import DataStack
import Synchronization

/// Shows a migration's progress on standard error: a bar redrawn in place on
/// a terminal, or, when standard error is a file or a pipe, one line per step
/// (each time the whole percentage changes), which logs read well.
///
/// The migration calls ``report(_:)`` on the queue that adds the store; the
/// state is behind a lock so the callback can be `@Sendable`.
final class ProgressReporter: Sendable {
    private let drawsBar: Bool
    /// The last whole percentage shown; -1 before the first report.
    private let shown = Mutex(-1)

    init(drawsBar: Bool) {
        self.drawsBar = drawsBar
    }

    /// Whether the migration reported any progress, that is, whether it ran.
    var hasReported: Bool { shown.withLock { $0 >= 0 } }

    /// Shows `fraction` (0…1) if its whole percentage is new.
    func report(_ fraction: Double) {
        let percent = Int((min(max(fraction, 0), 1) * 100).rounded(.down))
        let isNew = shown.withLock { shown in
            guard percent != shown else { return false }
            shown = percent
            return true
        }
        guard isNew else { return }
        if drawsBar {
            let width = 30
            let filled = percent * width / 100
            let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
            Output.error.writeWithoutNewline("\rmigrating [\(bar)] \(percent)%")
        } else {
            Output.error.write("migrating: \(percent)%")
        }
    }

    /// Ends the bar's line, if a bar was drawn.
    func finish() {
        if drawsBar && hasReported { Output.error.write("") }
    }
}
