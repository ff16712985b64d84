import Foundation
import Synchronization
@_spi(StoreImplementation) import ObjectGraph

/// A streaming standby the store reads from (issue #37, item 3): the reads of
/// the store's reader pool go to it, saves and the reads inside them to the
/// primary.
///
/// Named in ``StoreOptions/standbyURL`` (with ``StoreOptions/standbyMaximumLag``,
/// 1 s by default), or in the store's URL, which wins: `standby=` a
/// percent-encoded `postgresql://` URL of the standby, and optionally
/// `standby_max_lag_ms=`:
///
/// ```swift
/// let standby = "postgresql://app@db-replica/inventory".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
/// let url = URL(string: "postgresql://app@db-primary/inventory?standby=\(standby)")!
/// ```
///
/// **Consistency.** A read on the standby first waits until the standby has
/// replayed every commit this process knows of on the store: the saves of any
/// coordinator of this process (the writer notes the primary's WAL position
/// after each), and the saves of other machines that the change listener
/// reported (it notes the primary's WAL position when their notification
/// arrives, before it reports them). So a merge into the main context — an
/// importer's save, or another machine's — never refreshes an object to data
/// older than the save it merges, and a fetch after a save sees it. A standby
/// that has not replayed that far within the maximum lag, or cannot be
/// reached, makes the read go to the primary instead; the store reports each
/// move (``ReplicaReadingStore``: the coordinator's and the stack's
/// `readSourceDidChangeNotification`). Reads of changes nobody announced (a row written
/// by SQL outside DataStack, without history) see the standby's state, as any
/// read of a replica does.
final class PostgreSQLStandby: Sendable {
    /// The standby's URL (for libpq).
    let url: URL
    /// How long a read waits for the standby to replay what it must see.
    let maximumLag: Duration
    /// The sessions reads run on.
    let readers: PostgreSQLReaderPool
    /// The last replay position read from the standby, so most reads need not ask.
    private let replayed = Mutex<UInt64>(0)
    /// Whether the last read ran on the standby (nil before the first).
    let isReadingFromStandby = Mutex<Bool?>(nil)
    /// Told when reads move (``ReplicaReadingStore/observeReadSource(_:)``); cleared when the store is removed.
    let onReadSourceChange = Mutex<(@Sendable (ReadSourceChange) -> Void)?>(nil)
    /// After the standby could not be reached, reads go straight to the
    /// primary until then, rather than each wait for a connect timeout.
    private let unreachableUntil = Mutex<ContinuousClock.Instant?>(nil)
    /// How long reads skip a standby that could not be reached.
    static let retryInterval = Duration.seconds(1)

    /// The WAL position reads must see, by the primary's URL: process-wide,
    /// because a stack's writer and main coordinators are two stores of one database.
    private static let required = Mutex<[String: UInt64]>([:])

    static let urlParameter = "standby"
    static let lagParameter = "standby_max_lag_ms"

    init(url: URL, maximumLag: Duration, maximumReaderCount: Int, reportedURL: URL) {
        self.url = url
        self.maximumLag = maximumLag
        readers = PostgreSQLReaderPool(maximumCount: maximumReaderCount, url: reportedURL)
    }

    /// The primary's URL without the standby's parameters (which libpq would
    /// refuse), and the standby the URL or the options name, if any: the URL's
    /// `standby=` and `standby_max_lag_ms=` win over ``StoreOptions/standbyURL``
    /// and ``StoreOptions/standbyMaximumLag``.
    ///
    /// - Throws: ``PersistentStoreError/Code/cannotOpen`` naming the parameter
    ///   when the standby is not a `postgresql://` URL or the lag not a
    ///   non-negative number of milliseconds: a typo must not silently read
    ///   from the primary, or wait a second per read.
    static func split(_ url: URL, options: StoreOptions, reportedURL: URL) throws -> (URL, PostgreSQLStandby?) {
        func refuse(_ message: String) -> PersistentStoreError {
            PersistentStoreError(.cannotOpen, url: reportedURL, message: message)
        }
        var primary = url
        var named = options.standbyURL
        var lag = options.standbyMaximumLag ?? defaultMaximumLag
        if var components = URLComponents(url: url, resolvingAgainstBaseURL: false), let items = components.queryItems,
           items.contains(where: { $0.name == urlParameter || $0.name == lagParameter }) {
            if let item = items.first(where: { $0.name == urlParameter }) {
                guard let text = item.value, let parsed = URL(string: text) else {
                    throw refuse("the URL's \(urlParameter)= parameter is not a URL: \(item.value ?? "nothing")")
                }
                named = parsed
            }
            if let item = items.first(where: { $0.name == lagParameter }) {
                guard let milliseconds = item.value.flatMap(Int.init), milliseconds >= 0 else {
                    throw refuse("the URL's \(lagParameter)= parameter is not a number of milliseconds ≥ 0: \(item.value ?? "nothing")")
                }
                lag = .milliseconds(milliseconds)
            }
            let rest = items.filter { $0.name != urlParameter && $0.name != lagParameter }
            components.queryItems = rest.isEmpty ? nil : rest
            guard let stripped = components.url else { throw refuse("the URL without its standby parameters is not a URL") }
            primary = stripped
        }
        guard let named else { return (primary, nil) }
        guard let scheme = named.scheme?.lowercased(), scheme == "postgresql" || scheme == "postgres" else {
            throw refuse("a standby's URL starts with postgresql://, not \(named.scheme ?? "nothing"): \(PostgreSQLStore.withoutPassword(named))")
        }
        guard lag >= .zero else { throw refuse("StoreOptions.standbyMaximumLag is negative: \(lag)") }
        return (primary, PostgreSQLStandby(url: named, maximumLag: lag, maximumReaderCount: options.maximumReaderCount,
                                           reportedURL: reportedURL))
    }

    /// How long a read waits for the standby when neither the URL nor the options say.
    static let defaultMaximumLag = Duration.seconds(1)

    /// Notes that reads of the database at `database` (the primary's URL) must see the WAL up to `position`.
    static func require(_ position: UInt64, for database: URL) {
        let key = database.absoluteString
        required.withLock { required in
            let current = required[key] ?? 0
            // An unknown position (below) gives way to the next one known.
            required[key] = current == .max ? position : max(current, position)
        }
    }

    /// Notes that a commit's position is unknown: reads of the database go to the
    /// primary (no standby replays `.max`) until the next position is noted.
    static func requireUnknownPosition(for database: URL) {
        required.withLock { $0[database.absoluteString] = .max }
    }

    static func requiredPosition(for database: URL) -> UInt64 {
        required.withLock { $0[database.absoluteString] ?? 0 }
    }

    /// Runs `body` on a standby session once the standby has replayed
    /// `position`; nil when it has not within ``maximumLag``, or when the
    /// standby could not be reached less than ``retryInterval`` ago.
    ///
    /// - Throws: ``PostgreSQLError`` when the standby cannot be reached (the
    ///   caller reads from the primary), and what `body` throws.
    func read<T>(atLeast position: UInt64, opening open: () throws -> PostgreSQLConnection,
                 verifying verify: (PostgreSQLConnection) throws -> Void,
                 _ body: (PostgreSQLConnection) throws -> T) throws -> T? {
        if let until = unreachableUntil.withLock({ $0 }), ContinuousClock.now < until { return nil }
        do {
            return try readOnStandby(atLeast: position, opening: open, verifying: verify, body)
        } catch let error as PostgreSQLError where error.kind == .connectionFailed || error.kind == .connectionLost {
            unreachableUntil.withLock { $0 = ContinuousClock.now + Self.retryInterval }
            throw error
        }
    }

    private func readOnStandby<T>(atLeast position: UInt64, opening open: () throws -> PostgreSQLConnection,
                                  verifying verify: (PostgreSQLConnection) throws -> Void,
                                  _ body: (PostgreSQLConnection) throws -> T) throws -> T? {
        try readers.withConnection(opening: open) { connection -> T? in
            if position > replayed.withLock({ $0 }) {
                let clock = ContinuousClock()
                let deadline = clock.now + maximumLag
                while true {
                    let current = try Self.position(try connection.execute("SELECT pg_last_wal_replay_lsn()").string(row: 0, column: 0))
                    replayed.withLock { $0 = max($0, current) }
                    if current >= position { break }
                    if clock.now >= deadline { return nil }
                    Thread.sleep(forTimeInterval: 0.001)
                }
            }
            // Checked once replayed this far: the standby's copy of a new store may lag its creation.
            if !connection.isVerified {
                try verify(connection)
                connection.isVerified = true
            }
            return try body(connection)
        }
    }

    /// The primary's WAL position now (`pg_current_wal_lsn()`): every commit that returned is before it.
    static func primaryPosition(_ connection: PostgreSQLConnection) throws -> UInt64 {
        try position(try connection.execute("SELECT pg_current_wal_lsn()").string(row: 0, column: 0))
    }

    /// An LSN as PostgreSQL writes it (`16/B374D848`) as a number; 0 for none.
    static func position(_ text: String?) throws -> UInt64 {
        guard let text else { return 0 }
        let parts = text.split(separator: "/")
        guard parts.count == 2, let high = UInt64(parts[0], radix: 16), let low = UInt64(parts[1], radix: 16) else {
            throw PostgreSQLError(kind: .other, message: "not a WAL position: \(text)")
        }
        return high << 32 | low
    }
}

extension PostgreSQLStore: ReplicaReadingStore {
    /// Whether the last read ran on the standby; nil without a standby or before the first read.
    public var readsFromReplica: Bool? {
        standby?.isReadingFromStandby.withLock { $0 }
    }

    public func observeReadSource(_ onChange: @escaping @Sendable (ReadSourceChange) -> Void) {
        standby?.onReadSourceChange.withLock { $0 = onChange }
    }

    /// Runs a read on the standby when it has replayed what the read must see,
    /// else nil (the caller reads from the primary), posting the move either way.
    func readFromStandby<T>(_ standby: PostgreSQLStandby, _ body: (PostgreSQLConnection) throws -> T) throws -> T? {
        let required = PostgreSQLStandby.requiredPosition(for: databaseURL)
        let reason: String
        do {
            if let value = try standby.read(atLeast: required, opening: { try PostgreSQLConnection(url: standby.url, settings: connectionSettings, tracer: tracer) },
                                            verifying: holdOpenStoreLock, body) {
                noteReadSource(standby, onStandby: true, reason: nil)
                return value
            }
            reason = "the standby had not replayed the last save within \(standby.maximumLag), or was unreachable a moment ago"
        } catch let error as PostgreSQLError where error.kind == .connectionFailed || error.kind == .connectionLost {
            reason = "the standby cannot be reached: \(error)"
        }
        noteReadSource(standby, onStandby: false, reason: reason)
        return nil
    }

    private func noteReadSource(_ standby: PostgreSQLStandby, onStandby: Bool, reason: String?) {
        let previous = standby.isReadingFromStandby.withLock { state in
            defer { state = onStandby }
            return state
        }
        // The first read on the standby is no move; the first on the primary is.
        guard previous != onStandby, previous != nil || !onStandby,
              let onChange = standby.onReadSourceChange.withLock({ $0 }) else { return }
        onChange(ReadSourceChange(storeIdentifier: identifier, readsFromReplica: onStandby, reason: onStandby ? nil : reason))
    }
}
