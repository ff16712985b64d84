import Foundation

/// A value that threads share behind a lock: the job of the standard library's
/// `Mutex`, with a lock that ThreadSanitizer understands.
///
/// On Linux, `Mutex` waits on a futex through atomics that are compiled
/// without the sanitizer's instrumentation, so the sanitizer sees no order
/// between two threads' turns with the value and reports each access as a
/// race (the row cache's did, with two contexts on one coordinator). That
/// noise would hide real races — in our tests, and in the apps of users who
/// run their own under the sanitizer, as the README suggests. `NSLock` is a
/// `pthread_mutex_t`, whose locking the sanitizer intercepts.
///
/// The one lock of the package's shared state: its shape is `Mutex`'s
/// (`withLock` lends the value `inout` for the closure's duration), so the
/// two read alike.
@_spi(DataStackInternal) public final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched while `lock` is held, and
    // it goes in and out as `sending`, as with `Mutex`.
    @usableFromInline let lock = NSLock()
    @usableFromInline var value: Value

    @inlinable
    public init(_ value: sending Value) {
        self.value = value
    }

    /// Runs `body` with the value, holding the lock.
    @inlinable @inline(__always)
    public func withLock<Result, Failure: Error>(
        _ body: (inout sending Value) throws(Failure) -> sending Result
    ) throws(Failure) -> sending Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
