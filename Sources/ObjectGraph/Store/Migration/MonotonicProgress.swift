/// A migration's progress for ``StoreOptions/migrationProgress``, never
/// going back: stages and steps report fractions that may overlap, and the
/// caller's bar must only move forward. Used on the migrating thread only.
@_spi(StoreImplementation)
public final class MonotonicProgress {
    private let callback: (@Sendable (Double) -> Void)?
    private var last = -1.0

    public init(_ callback: (@Sendable (Double) -> Void)?) {
        self.callback = callback
    }

    /// Calls the callback with `fraction` (clamped to 1) when it is beyond the last one reported.
    public func report(_ fraction: Double) {
        let value = min(1, max(last, fraction))
        guard value > last else { return }
        last = value
        callback?(value)
    }
}
