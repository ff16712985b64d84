import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// A connection used by one thread at a time.
///
/// `Connection` is not `Sendable`; the store shares its writer connection
/// between the queues of all contexts of a coordinator, serializing access
/// here. (Its reader connections are in a ``ReaderPool``.)
// @unchecked Sendable: `connection` is only touched while `lock` is held.
final class ConnectionLock: @unchecked Sendable {
    private let lock = NSLock()
    private var connection: Connection?

    init() {}

    /// Installs (or, with nil, closes) the connection.
    func set(_ newConnection: Connection?) {
        lock.withLock { connection = newConnection }
    }

    /// Waits for the work holding the lock (a save in progress), runs `last`
    /// on the connection if one is installed, then closes it.
    func close(after last: (Connection) -> Void) {
        lock.withLock {
            if let connection { last(connection) }
            connection = nil
        }
    }

    /// Runs `body` with the connection while holding the lock; nil if none is installed.
    func withConnection<T>(_ body: (Connection) throws -> T) rethrows -> T? {
        try lock.withLock {
            guard let connection else { return nil }
            return try body(connection)
        }
    }
}
