import CLibPQ

// MARK: - Executing statements

extension PostgreSQLConnection {
    /// Runs one statement with `$1`…`$n` parameters (PQexecParams) and returns its result.
    ///
    /// Text parameters go in text format with their type left for the server to infer
    /// (write `$1::int8` where the context does not say); ``PostgreSQLValue/bytes(_:)``
    /// goes in binary format as `bytea`. Results come back in text format.
    ///
    /// The statement is parsed and planned on every call; use ``execute(cached:_:)``
    /// for statements run many times.
    ///
    /// - Throws: ``PostgreSQLError`` with the SQL (never the parameter values).
    ///
    /// Related PostgreSQL documentation: <https://www.postgresql.org/docs/current/libpq-exec.html#LIBPQ-PQEXECPARAMS>
    @discardableResult
    public func execute(_ sql: String, _ parameters: [PostgreSQLValue] = []) throws -> PostgreSQLResult {
        let connection = try openConnection(sql: sql)
        tracer.report(sql)
        let result = try ParameterBuffer(parameters, sql: sql).withParameters { count, types, values, lengths, formats in
            PQexecParams(connection, sql, count, types, values, lengths, formats, 0)
        }
        return try checked(result, sql: sql)
    }

    /// Runs a statement prepared once per session and reused (PQprepare, then PQexecPrepared).
    ///
    /// Statements are keyed by their SQL text and named `ds_<n>`. The cache is bounded
    /// (``init(conninfo:settings:preparedStatementCacheCapacity:)``, 256 by default): when it is
    /// full, the least recently used statement is deallocated on the server to make room,
    /// and the others stay prepared.
    ///
    /// Parameter types are inferred when the statement is first prepared, from its
    /// text, as in ``execute(_:_:)``; `bytea` parameters are declared as such.
    ///
    /// - Complexity: a hit costs one round trip; a miss costs two (three when full).
    ///   Choosing the statement to evict is O(*c*), *c* = the cache capacity.
    /// - Throws: ``PostgreSQLError`` with the SQL (never the parameter values).
    @discardableResult
    public func execute(cached sql: String, _ parameters: [PostgreSQLValue]) throws -> PostgreSQLResult {
        let connection = try openConnection(sql: sql)
        let buffer = try ParameterBuffer(parameters, sql: sql)
        // Once per call, prepared or not (the statement runs once), after the DEALLOCATE that makes room.
        let name: String
        if let cachedName = statementCache.name(for: sql) {
            tracer.report(sql)
            name = cachedName
        } else {
            if let evicted = statementCache.leastRecentlyUsed, statementCache.isFull {
                // DEALLOCATE first: if it fails, the cache still matches the server.
                let deallocate = "DEALLOCATE \(evicted.name)"
                tracer.report(deallocate)
                try checked(PQexec(connection, deallocate), sql: deallocate)
                statementCache.remove(sql: evicted.sql)
            }
            tracer.report(sql)
            let newName = statementCache.nextName()
            let prepared = buffer.withParameters { count, types, _, _, _ in
                PQprepare(connection, newName, sql, count, types)
            }
            try checked(prepared, sql: sql)
            statementCache.insert(sql: sql, name: newName)
            name = newName
        }
        let result = buffer.withParameters { count, _, values, lengths, formats in
            PQexecPrepared(connection, name, count, values, lengths, formats, 0)
        }
        return try checked(result, sql: sql)
    }

    /// Runs several statements separated by semicolons, without parameters (PQexec),
    /// for example a schema. They run in one implicit transaction unless the script
    /// contains its own `BEGIN`/`COMMIT`; the first failure stops the script.
    ///
    /// - Throws: ``PostgreSQLError`` with the script as its SQL.
    public func executeScript(_ sql: String) throws {
        let connection = try openConnection(sql: sql)
        tracer.report(sql)
        try checked(PQexec(connection, sql), sql: sql)
    }

    // MARK: - Internal helpers

    /// Wraps a PGresult, or throws the error it (or the connection) describes.
    ///
    /// Succeeds for PGRES_COMMAND_OK, PGRES_TUPLES_OK and PGRES_EMPTY_QUERY; a
    /// COPY state here means the statement was a COPY run through the wrong call.
    @discardableResult
    func checked(_ result: OpaquePointer?, sql: String?) throws -> PostgreSQLResult {
        guard let result else {
            // libpq returns NULL only when out of memory or when it cannot send the query.
            throw PostgreSQLError(connection: connection, sql: sql)
        }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return PostgreSQLResult(result: result, sql: sql)
        case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH:
            let status = PQresultStatus(result)
            PQclear(result)
            if let connection {
                // Leave the COPY state so the connection stays usable: refuse the
                // input, or read and discard the output. Either way the server's own
                // outcome says nothing the error below does not.
                if status == PGRES_COPY_OUT {
                    var row: UnsafeMutablePointer<CChar>?
                    while PQgetCopyData(connection, &row, 0) > 0 {
                        PQfreemem(row)
                    }
                } else {
                    _ = PQputCopyEnd(connection, "COPY is only supported through copy(into:columns:rows:)")
                }
                drainResults(connection)
            }
            throw PostgreSQLError(
                kind: .other, message: "COPY statements must go through copy(into:columns:rows:)", sql: sql)
        default:
            let error = PostgreSQLError(result: result, connection: connection, sql: sql)
            PQclear(result)
            throw error
        }
    }

    /// Reads and discards the results left after a command, until libpq has none.
    func drainResults(_ connection: OpaquePointer) {
        while let result = PQgetResult(connection) {
            PQclear(result)
        }
    }
}

// MARK: - Parameter buffer

/// Statement parameters laid out for libpq: one contiguous byte buffer, with the
/// pointer, length, format and type arrays PQexecParams and friends take.
struct ParameterBuffer {
    /// `bytea`'s type OID (pg_type.dat).
    static let byteaOID: Oid = 17

    private var storage: [UInt8] = []
    /// Offset of each value in `storage`; nil for NULL.
    private var offsets: [Int?] = []
    private var lengths: [Int32] = []
    private var formats: [Int32] = []
    private var types: [Oid] = []

    /// - Throws: ``PostgreSQLError`` when a text value contains a NUL character (text
    ///   parameters are C strings, so libpq would silently cut it there) or there are
    ///   more parameters than the protocol allows.
    init(_ parameters: [PostgreSQLValue], sql: String) throws {
        guard parameters.count <= Int(UInt16.max) else {
            throw PostgreSQLError(
                kind: .other,
                message: "\(parameters.count) parameters; PostgreSQL accepts at most \(UInt16.max) per statement",
                sql: sql)
        }
        for (index, parameter) in parameters.enumerated() {
            switch parameter {
            case .null:
                offsets.append(nil)
                lengths.append(0)
                formats.append(0)
                types.append(0)
            case .text(let text):
                if text.utf8.contains(0) {
                    throw PostgreSQLError(
                        kind: .other,
                        message: "parameter $\(index + 1) contains a NUL character, which PostgreSQL text cannot store",
                        sql: sql)
                }
                offsets.append(storage.count)
                storage.append(contentsOf: text.utf8)
                storage.append(0)
                lengths.append(0)  // ignored for text format
                formats.append(0)
                types.append(0)  // let the server infer the type
            case .bytes(let bytes):
                offsets.append(storage.count)
                storage.append(contentsOf: bytes)
                lengths.append(Int32(bytes.count))
                formats.append(1)
                types.append(Self.byteaOID)
            }
        }
        // A trailing byte so `storage` always has an address: a zero-length `bytes`
        // value at the end must still get a non-NULL pointer (NULL means SQL NULL).
        storage.append(0)
    }

    /// Calls `body` with (count, types, values, lengths, formats) valid during the call.
    func withParameters<R>(
        _ body: (
            Int32, UnsafePointer<Oid>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?,
            UnsafePointer<Int32>?
        ) throws -> R
    ) rethrows -> R {
        try storage.withUnsafeBufferPointer { bytes in
            let base = bytes.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }
            let values: [UnsafePointer<CChar>?] = offsets.map { offset in
                offset.flatMap { offset in base.map { $0 + offset } }
            }
            return try values.withUnsafeBufferPointer { values in
                try types.withUnsafeBufferPointer { types in
                    try lengths.withUnsafeBufferPointer { lengths in
                        try formats.withUnsafeBufferPointer { formats in
                            try body(
                                Int32(offsets.count), types.baseAddress, values.baseAddress, lengths.baseAddress,
                                formats.baseAddress)
                        }
                    }
                }
            }
        }
    }
}
