@_spi(DataStackInternal) import DataStackSupport
import Foundation
import ObjectGraph

// MARK: - Progress of the migration that setup runs

extension StackManager {
    /// The progress, from 0 to 1, of the migration that `setup` runs when the
    /// store was written with an older model version, as an asynchronous
    /// sequence for a progress bar.
    ///
    /// ```swift
    /// Task { @MainActor in
    ///     for await fraction in stack.migrationProgress { progressBar.value = fraction }
    /// }
    /// try await stack.setup(model: model)
    /// ```
    ///
    /// Each access gives a new sequence. It ends when the setup in progress —
    /// or, before one starts, the next one — ends, whether it migrated or not;
    /// after the stack is set up, it ends at once. A setup that needs no
    /// migration yields nothing. `options.migrationProgress` is called with
    /// the same values.
    public var migrationProgress: AsyncStream<Double> {
        let (stream, continuation) = AsyncStream.makeStream(of: Double.self, bufferingPolicy: .unbounded)
        let subscribed = state.withLock { state -> Bool in
            guard state.setup == nil || state.isSettingUp else { return false }
            state.progressSubscribers.nextID += 1
            state.progressSubscribers.continuations[state.progressSubscribers.nextID] = continuation
            return true
        }
        if !subscribed { continuation.finish() }
        return stream
    }

    /// A migration progress callback that calls `callback` and yields to every
    /// ``migrationProgress`` sequence.
    func reportingMigrationProgress(to callback: (@Sendable (Double) -> Void)?) -> @Sendable (Double) -> Void {
        { [weak self] fraction in
            callback?(fraction)
            let continuations = self?.state.withLock { Array($0.progressSubscribers.continuations.values) } ?? []
            for continuation in continuations { continuation.yield(fraction) }
        }
    }

    /// Ends every ``migrationProgress`` sequence: the setup is over.
    func finishMigrationProgress() {
        let continuations = state.withLock { state in
            defer { state.progressSubscribers = ProgressSubscribers() }
            return Array(state.progressSubscribers.continuations.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}

/// Subscribers of ``StackManager/migrationProgress`` sequences.
struct ProgressSubscribers {
    var nextID = 0
    var continuations: [Int: AsyncStream<Double>.Continuation] = [:]
}
