/// The statements a connection has prepared, keyed by SQL text, with least-recently-used
/// eviction (used by ``PostgreSQLConnection/execute(cached:_:)``).
///
/// The cache only does the bookkeeping; the connection prepares and deallocates on the
/// server, so the two stay in step even when the server refuses a statement.
///
/// Recency is a use counter per entry; finding the oldest scans all entries. With a
/// capacity in the hundreds that scan costs far less than the round trip to the server
/// that every eviction needs anyway.
struct PreparedStatementCache {
    struct Entry {
        var name: String
        var lastUse: UInt64
    }

    let capacity: Int
    private var entries: [String: Entry] = [:]
    private var useCounter: UInt64 = 0
    private var nameCounter = 0

    init(capacity: Int) {
        self.capacity = capacity
    }

    var count: Int { entries.count }
    var isFull: Bool { entries.count >= capacity }

    /// The statement name for `sql`, marking it used; nil when not prepared.
    mutating func name(for sql: String) -> String? {
        guard entries[sql] != nil else { return nil }
        useCounter += 1
        entries[sql]?.lastUse = useCounter
        return entries[sql]?.name
    }

    /// A name not used before on this connection: `ds_1`, `ds_2`, …
    mutating func nextName() -> String {
        nameCounter += 1
        return "ds_\(nameCounter)"
    }

    mutating func insert(sql: String, name: String) {
        useCounter += 1
        entries[sql] = Entry(name: name, lastUse: useCounter)
    }

    /// The entry used longest ago.
    ///
    /// - Complexity: O(*n*), *n* = entries.
    var leastRecentlyUsed: (sql: String, name: String)? {
        entries.min { $0.value.lastUse < $1.value.lastUse }.map { (sql: $0.key, name: $0.value.name) }
    }

    mutating func remove(sql: String) {
        entries[sql] = nil
    }

    /// Forgets every statement (the session that held them is gone). Names keep
    /// counting up, so a name is never reused on one connection.
    mutating func removeAll() {
        entries.removeAll()
    }
}
