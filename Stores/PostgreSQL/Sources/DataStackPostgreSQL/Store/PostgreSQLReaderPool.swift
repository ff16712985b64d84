import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// The store's reader connections: the fetches, faults and history reads of
/// all the contexts of a coordinator run on them at the same time, each on a
/// session of its own, and never wait for a save on the writer's session —
/// as the SQLite store's `ReaderPool` does with SQLite connections.
///
/// Up to ``maximumCount`` sessions (``ObjectGraph/StoreOptions/maximumReaderCount``),
/// opened when a read finds none idle and fewer than that are open, and kept
/// open; the most recently returned idle one goes first, so few stay warm
/// (their statements prepared). A read at the maximum waits until another
/// returns its session. Each read holds its session for its body only, with
/// no transaction left open, so every read sees the last commit: a save that
/// returned is seen by the next read of any context.
///
/// A session is checked before it is handed out (``PostgreSQLConnection/isAlive``,
/// no round trip): one the server closed (a restart) or the kernel gave up on
/// (keepalives over a dead link) is dropped and another opened, so a read after
/// an outage does not fail on a session that died while idle. A session that
/// breaks during a read is dropped when it comes back.
///
/// ``close()`` refuses new reads, wakes the waiting ones (they throw that the
/// store was removed), and waits for the reads in progress, so no session is
/// open once it returns.
// @unchecked Sendable: every stored property is touched only while `condition` is locked;
// a connection is used by the thread that checked it out, alone, until it is returned.
final class PostgreSQLReaderPool: @unchecked Sendable {
    /// The most sessions open at once; at least 1.
    let maximumCount: Int
    private let url: URL
    private let condition = NSCondition()
    /// Sessions no read holds, the most recently returned last.
    private var idle: [PostgreSQLConnection] = []
    /// Sessions open or being opened, idle or not.
    private var openCount = 0
    /// Reads holding a session.
    private var inUseCount = 0
    private var isOpen = true

    init(maximumCount: Int, url: URL) {
        self.maximumCount = max(1, maximumCount)
        self.url = url
    }

    /// Runs `body` with a session of its own: an idle one that is still
    /// alive, a new one from `open` while fewer than ``maximumCount`` are
    /// open, or else the first another read returns.
    ///
    /// - Throws: ``ObjectGraph/PersistentStoreError/Code/ioFailure`` once the
    ///   pool is closed, what `open` throws, and what `body` throws.
    func withConnection<T>(opening open: () throws -> PostgreSQLConnection, _ body: (PostgreSQLConnection) throws -> T) throws -> T {
        let connection = try checkOut(opening: open)
        defer { checkIn(connection) }
        return try body(connection)
    }

    /// Refuses new reads, wakes those waiting, and returns once the reads in
    /// progress returned their sessions; then every session is closed.
    func close() {
        condition.lock()
        defer { condition.unlock() }
        isOpen = false
        for connection in idle { connection.close() }
        idle = []
        openCount = 0
        condition.broadcast()
        while inUseCount > 0 { condition.wait() }
    }

    /// The number of sessions open now (idle or in use).
    var connectionCount: Int { condition.withLock { openCount } }

    private func checkOut(opening open: () throws -> PostgreSQLConnection) throws -> PostgreSQLConnection {
        condition.lock()
        while true {
            guard isOpen else {
                condition.unlock()
                throw PersistentStoreError(.ioFailure, url: url, message: "the store was removed from its coordinator")
            }
            if let connection = idle.popLast() {
                if connection.isAlive {
                    inUseCount += 1
                    condition.unlock()
                    return connection
                }
                // Died while idle (server restart, dead link): its slot goes to a new session.
                connection.close()
                openCount -= 1
                continue
            }
            if openCount < maximumCount { break }
            condition.wait()
        }
        openCount += 1
        inUseCount += 1
        condition.unlock()
        // Connecting takes a round trip or more (and up to the connect timeout): outside the lock.
        do {
            return try open()
        } catch {
            condition.withLock {
                openCount -= 1
                inUseCount -= 1
                condition.broadcast()
            }
            throw error
        }
    }

    /// Takes a session back; one that broke, or was left inside a transaction, is closed.
    private func checkIn(_ connection: PostgreSQLConnection) {
        condition.lock()
        defer { condition.unlock() }
        inUseCount -= 1
        condition.broadcast()
        guard isOpen, connection.isConnected, !connection.isInTransaction else {
            connection.close()
            if isOpen { openCount -= 1 }
            return
        }
        idle.append(connection)
    }
}
