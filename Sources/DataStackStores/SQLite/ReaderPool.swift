import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// The store's reader connections: fetches and faults of all the contexts of a
/// coordinator run on them at the same time, each on its own connection, as
/// GRDB's `DatabasePool` does.
///
/// Up to ``maximumCount`` connections (``StoreOptions/maximumReaderCount``),
/// opened when a read finds none idle and fewer than that are open, and kept
/// open once opened; the most recently returned idle one is used first, so
/// few connections stay warm (their cached statements prepared). A read at
/// the maximum waits until another read returns its connection. Each
/// ``withConnection(opening:_:)`` holds its connection for the body only, and
/// a connection comes back with no statement left stepping, so no read keeps
/// its snapshot into the next: in WAL mode every read then begins from the
/// last commit, and never waits for a save in progress, nor a save for it.
/// A read body must not start another read: at the maximum it would wait
/// for its own connection (with one connection it always would).
///
/// Every connection gets the same setup: the store opens each like the first
/// (settings and SQL functions), and the trace set with ``setTrace(_:)`` is
/// installed on each connection before its next read, so connections opened
/// later trace too.
///
/// ``close()`` refuses new reads, wakes the waiting ones (they throw that the
/// store was removed), and waits for the reads in progress to return their
/// connections, so that no connection is open on the file once it returns.
/// ``start(with:)`` opens the pool again (after a migration replaced the file):
/// connections of the earlier opening are closed as they come back.
// @unchecked Sendable: every stored property is touched only while `condition` is locked;
// a `Connection` is used by the thread that checked it out, alone, until it is returned.
final class ReaderPool: @unchecked Sendable {
    /// The most connections open at once; at least 1.
    let maximumCount: Int
    private let url: URL?
    private let condition = NSCondition()
    /// Connections no read holds, the most recently returned last.
    private var idle: [Pooled] = []
    /// Connections open or being opened, idle or not, of the current opening.
    private var openCount = 0
    /// Reads holding a connection, of any opening.
    private var inUseCount = 0
    #if DEBUG
    /// Reads waiting for a connection at the maximum: kept in debug builds only, for tests.
    private var waitingCount = 0
    /// Told when a read starts waiting for a connection and when ``close()``
    /// starts refusing reads, with the pool locked (it must not use the pool):
    /// debug builds only, so that a test waits for the event, not a count.
    private var onEvent: (@Sendable (Event) -> Void)?
    #endif
    private var isOpen = false
    /// Counts openings, so connections of an earlier one close when returned.
    private var opening = 0
    private var trace: (@Sendable (String) -> Void)?
    /// Counts trace changes, so each connection installs the latest once.
    private var traceVersion = 0

    /// A connection with what it was set up with.
    private final class Pooled {
        let connection: Connection
        let opening: Int
        var traceVersion = 0

        init(_ connection: Connection, opening: Int) {
            self.connection = connection
            self.opening = opening
        }
    }

    init(maximumCount: Int, url: URL?) {
        self.maximumCount = max(1, maximumCount)
        self.url = url
    }

    /// Opens the pool with its first connection, closing the idle ones of an
    /// earlier opening; those in use close when returned.
    func start(with first: Connection) {
        condition.withLock {
            opening += 1
            idle = [Pooled(first, opening: opening)]
            openCount = 1
            isOpen = true
        }
    }

    /// Refuses new reads, wakes those waiting for a connection, and returns
    /// once the reads in progress returned theirs; then no connection is open.
    func close() {
        condition.lock()
        defer { condition.unlock() }
        isOpen = false
        idle = []
        openCount = 0
        #if DEBUG
        onEvent?(.closing)
        #endif
        condition.broadcast()
        while inUseCount > 0 { condition.wait() }
    }

    /// Installs `observer` (nil removes it) as every connection's trace, each
    /// before its next read.
    func setTrace(_ observer: (@Sendable (String) -> Void)?) {
        condition.withLock {
            trace = observer
            traceVersion += 1
        }
    }

    /// Runs `body` with a connection of its own: an idle one, a new one from
    /// `open` while fewer than ``maximumCount`` are open, or else the first
    /// another read returns.
    ///
    /// - Throws: ``PersistentStoreError/Code/ioFailure`` once the pool is
    ///   closed (the store was removed from its coordinator), what `open`
    ///   throws, and what `body` throws.
    func withConnection<T>(opening open: () throws -> Connection, _ body: (Connection) throws -> T) throws -> T {
        let pooled = try checkOut(opening: open)
        let result: T
        do {
            result = try body(pooled.connection)
        } catch {
            checkIn(consume pooled)
            throw error
        }
        checkIn(consume pooled)
        return result
    }

    private func checkOut(opening open: () throws -> Connection) throws -> Pooled {
        condition.lock()
        var reserved: Int?   // the opening for which a new connection's slot is taken
        while reserved == nil {
            guard isOpen else {
                condition.unlock()
                throw removed()
            }
            if let pooled = idle.popLast() {
                inUseCount += 1
                let (observer, version) = (trace, traceVersion)
                condition.unlock()
                install(observer, version: version, on: pooled)
                return pooled
            }
            if openCount < maximumCount {
                openCount += 1
                reserved = opening
            } else {
                waitForReturnedConnection()
            }
        }
        guard let reserved else { preconditionFailure("the loop ends only with a reserved slot") }
        inUseCount += 1
        let (observer, version) = (trace, traceVersion)
        condition.unlock()
        // Opening takes a while (the file, its settings, the functions): outside the lock.
        let pooled: Pooled
        do {
            pooled = Pooled(try open(), opening: reserved)
        } catch {
            condition.withLock {
                inUseCount -= 1
                if reserved == opening { openCount -= 1 }
                condition.broadcast()
            }
            throw error
        }
        install(observer, version: version, on: pooled)
        return pooled
    }

    /// Waits, with `condition` locked, until a read returns its connection or the pool closes.
    private func waitForReturnedConnection() {
        #if DEBUG
        waitingCount += 1
        defer { waitingCount -= 1 }
        onEvent?(.readWaiting)
        #endif
        condition.wait()
    }

    /// Takes the connection back; the caller's reference is consumed, so a
    /// connection that is not kept closes before ``close()`` can return.
    private func checkIn(_ pooled: consuming Pooled) {
        // A read that stopped stepping a statement early leaves its snapshot open:
        // end it, so the next read on this connection starts from the last commit.
        pooled.connection.resetActiveStatements()
        condition.lock()
        defer { condition.unlock() }
        if isOpen && pooled.opening == opening {
            idle.append(pooled)
        } else {
            _ = consume pooled   // of an earlier opening, or returned after close(): it closes now
        }
        inUseCount -= 1
        condition.broadcast()
    }

    /// Installs the trace on a connection checked out by this thread, unless it has it.
    private func install(_ observer: (@Sendable (String) -> Void)?, version: Int, on pooled: Pooled) {
        guard pooled.traceVersion != version else { return }
        pooled.connection.trace(observer)
        pooled.traceVersion = version
    }

    private func removed() -> PersistentStoreError {
        PersistentStoreError(.ioFailure, url: url, message: "the store was removed from its coordinator")
    }
}

#if DEBUG
// What tests read of the pool, in debug builds only: release builds carry no test surface.
extension ReaderPool {
    /// The number of connections open now.
    var connectionCount: Int { condition.withLock { openCount } }
    /// The number of reads waiting for a connection now.
    var waitingReadCount: Int { condition.withLock { waitingCount } }

    /// What the pool tells ``observe(_:)``.
    enum Event: Sendable {
        /// A read found every connection in use at the maximum and waits for one.
        case readWaiting
        /// ``close()`` started: reads from now on are refused.
        case closing
    }

    /// Calls `observer` (nil removes it) on each ``Event``, on the thread
    /// where it happens, with the pool locked.
    func observe(_ observer: (@Sendable (Event) -> Void)?) {
        condition.withLock { onEvent = observer }
    }
}
#endif
