import DataStack
import Foundation

/// Polls `read` on the stack's main context until it gives `expected`, for up
/// to ten seconds, and returns the last value read.
///
/// For what another process or a standby makes true at a moment no event of
/// this process marks (a row replayed on a standby, a merge of another
/// machine's save): the caller asserts the value returned.
func eventually<T: Equatable & Sendable>(_ stack: StackManager, _ expected: T,
                                         _ read: @escaping @Sendable (ManagedObjectContext) throws -> T) async throws -> T {
    let main = stack.mainContext
    let deadline = ContinuousClock.now + .seconds(10)
    var value = try await main.perform { try read(main) }
    while value != expected, ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(20))
        value = try await main.perform { try read(main) }
    }
    return value
}
