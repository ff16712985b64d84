import CLibPQ
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Connecting with a deadline, and noticing a lost server

extension PostgreSQLConnection {
    /// Starts a connection (PQconnectStartParams) and drives it to the end
    /// (PQconnectPoll) within the deadline the settings or the conninfo give.
    ///
    /// Non-blocking, so the deadline is this layer's, to the millisecond:
    /// libpq's `connect_timeout` counts whole seconds (at least 2) per host,
    /// too coarse for a caller that retries a partitioned link every fraction
    /// of a second.
    static func open(conninfo: String, settings: PostgreSQLConnectionSettings, tracer: StatementTracer) throws -> (OpaquePointer, Duration?) {
        let given = parsedParameters(conninfo)
        var keywords = ["dbname", "client_encoding"]
        // Putting client_encoding here (rather than a SET) keeps it across a reset.
        var values = [conninfo, "UTF8"]
        for (keyword, value) in settings.keepAliveParameters where given[keyword] == nil {
            keywords.append(keyword)
            values.append(value)
        }
        let timeout = given["connect_timeout"].flatMap(Int.init).flatMap { $0 > 0 ? Duration.seconds($0) : nil }
            ?? settings.connectTimeout
        // expand_dbname: the first value is parsed as a full connection string or URI;
        // the keywords after it add what it does not say.
        let connection = withCStringArray(keywords) { keywords in
            withCStringArray(values) { values in PQconnectStartParams(keywords, values, 1) }
        }
        guard let connection else {
            throw PostgreSQLError(kind: .connectionFailed, message: "libpq could not allocate a connection")
        }
        do {
            guard PQstatus(connection) != CONNECTION_BAD else {
                throw PostgreSQLError(connection: connection, kind: .connectionFailed)
            }
            try waitUntilConnected(connection, within: timeout) { PQconnectPoll($0) }
            try applyServerKeepAlives(connection, tracer: tracer)
        } catch {
            PQfinish(connection)
            throw error
        }
        return (connection, timeout)
    }

    /// Polls a connection being opened or reset until it is up, failed, or the time is over.
    static func waitUntilConnected(_ connection: OpaquePointer, within timeout: Duration?,
                                   step: (OpaquePointer) -> PostgresPollingStatusType) throws {
        let clock = ContinuousClock()
        let deadline = timeout.map { clock.now.advanced(by: $0) }
        // As libpq's documentation says: start as if the last poll asked to write.
        var status = PGRES_POLLING_WRITING
        while true {
            if status == PGRES_POLLING_OK { return }
            if status == PGRES_POLLING_FAILED { throw PostgreSQLError(connection: connection, kind: .connectionFailed) }
            var wait: Int32 = -1
            if let deadline, let timeout {
                let remaining = clock.now.duration(to: deadline)
                guard remaining > .zero else {
                    throw PostgreSQLError(kind: .connectionFailed, message: """
                        connection to server \(serverDescription(connection)) failed: no answer within \(timeout) (connect timeout)
                        """)
                }
                wait = milliseconds(remaining)
            }
            // The socket can change between polls (another host, another address): read it each turn.
            let socket = PQsocket(connection)
            guard socket >= 0 else { throw PostgreSQLError(connection: connection, kind: .connectionFailed) }
            var descriptor = pollfd(fd: socket, events: Int16(status == PGRES_POLLING_READING ? POLLIN : POLLOUT), revents: 0)
            let ready = poll(&descriptor, 1, wait)
            if ready < 0 && errno != EINTR {
                throw PostgreSQLError(kind: .connectionFailed, message: "poll() while connecting failed: \(String(cString: strerror(errno)))")
            }
            if ready > 0 { status = step(connection) }
        }
    }

    /// Sets the server's end of a TCP session to the keepalives the client's
    /// end has (`SET tcp_keepalives_idle …`): a server whose client vanished
    /// then ends the session, rolling back its transaction and releasing its
    /// locks, instead of holding them for the system's two hours.
    static func applyServerKeepAlives(_ connection: OpaquePointer, tracer: StatementTracer) throws {
        guard isTCP(connection) else { return }
        let effective = currentParameters(connection)
        guard effective["keepalives"] != "0" else { return }
        let settings = [("keepalives_idle", "tcp_keepalives_idle"), ("keepalives_interval", "tcp_keepalives_interval"),
                        ("keepalives_count", "tcp_keepalives_count"), ("tcp_user_timeout", "tcp_user_timeout")]
        let statements = settings.compactMap { client, server -> String? in
            guard let value = effective[client].flatMap(Int.init), value > 0 else { return nil }
            return "SET \(server) = \(value)"
        }
        guard !statements.isEmpty else { return }
        let sql = statements.joined(separator: "; ")
        tracer.report(sql)
        guard let result = PQexec(connection, sql) else { throw PostgreSQLError(connection: connection, kind: .connectionFailed, sql: sql) }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COMMAND_OK else {
            throw PostgreSQLError(result: result, connection: connection, sql: sql)
        }
    }

    /// Whether the session runs over TCP (not a Unix socket).
    static func isTCP(_ connection: OpaquePointer) -> Bool {
        guard let host = PQhost(connection).map({ String(cString: $0) }) else { return false }
        return !host.isEmpty && !host.hasPrefix("/") && !host.hasPrefix("@")
    }

    /// `10.0.0.2:5432`, or the socket folder and port: which server, for messages.
    static func serverDescription(_ connection: OpaquePointer) -> String {
        let host = PQhost(connection).map { String(cString: $0) } ?? ""
        let port = PQport(connection).map { String(cString: $0) } ?? ""
        if host.hasPrefix("/") || host.hasPrefix("@") { return "on socket \(host)/.s.PGSQL.\(port.isEmpty ? "5432" : port)" }
        return "at \(host.isEmpty ? "localhost" : host):\(port.isEmpty ? "5432" : port)"
    }

    /// The parameters a connection string or URI sets (PQconninfoParse); empty when it does not parse.
    static func parsedParameters(_ conninfo: String) -> [String: String] {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &error) else {
            if let error { PQfreemem(error) }
            return [:]
        }
        defer { PQconninfoFree(options) }
        return parameters(options)
    }

    /// The parameters a connection uses, defaults included (PQconninfo).
    static func currentParameters(_ connection: OpaquePointer) -> [String: String] {
        guard let options = PQconninfo(connection) else { return [:] }
        defer { PQconninfoFree(options) }
        return parameters(options)
    }

    private static func parameters(_ options: UnsafeMutablePointer<PQconninfoOption>) -> [String: String] {
        var result: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { result[String(cString: keyword)] = String(cString: value) }
            option += 1
        }
        return result
    }

    // MARK: - Public

    /// Which server this session talks to, for messages: `at 10.0.0.2:5432`,
    /// or `on socket /run/postgresql/.s.PGSQL.5432`; empty once closed.
    public var server: String {
        connection.map(Self.serverDescription) ?? ""
    }

    /// The libpq parameters the session runs with, defaults included
    /// (PQconninfo): `connect_timeout`, `keepalives_idle`, … Passwords are left out.
    public var parameters: [String: String] {
        guard let connection else { return [:] }
        return Self.currentParameters(connection).filter { $0.key != "password" }
    }

    /// Whether the session still works, as far as can be told without a round
    /// trip: reads what is waiting on the socket first, so a server that shut
    /// down (its last message), a closed socket and a link the kernel gave up
    /// on (keepalives) count as lost. False once closed.
    public var isAlive: Bool {
        guard let connection else { return false }
        // A server that goes away sends its last message (FATAL …) and closes: one read
        // takes the message, the next finds the end. Read while the socket says there
        // is something to read; a few rounds at most, an idle session has nothing.
        for _ in 0..<4 {
            guard PQstatus(connection) == CONNECTION_OK else { return false }
            let socket = PQsocket(connection)
            guard socket >= 0 else { return false }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 0)
            if ready == 0 { return true }
            if ready < 0 { return errno == EINTR }
            if PQconsumeInput(connection) == 0 { return false }
        }
        return PQstatus(connection) == CONNECTION_OK
    }

    /// Asks the server for an answer (an empty query) and waits up to
    /// `timeout` for it: a session over a link that went silent (a partition,
    /// a server host gone) shows no error until the kernel gives up, which
    /// takes the keepalive time; this tells within `timeout`.
    ///
    /// Notifications that arrive meanwhile are kept for ``notifications(waitingUpTo:)``.
    /// Do not call it inside a transaction.
    ///
    /// - Throws: ``PostgreSQLError/Kind/connectionLost`` when the answer does
    ///   not come in time (the connection is then closed: it is left mid-query)
    ///   or the connection broke.
    public func ping(timeout: Duration) throws {
        let connection = try openConnection()
        guard PQsendQuery(connection, "") == 1 else {
            throw PostgreSQLError(connection: connection, kind: .connectionLost)
        }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            try consumeInput(connection)
            while PQisBusy(connection) == 0 {
                guard let result = PQgetResult(connection) else { return }
                defer { PQclear(result) }
                if PQresultStatus(result) == PGRES_FATAL_ERROR {
                    throw PostgreSQLError(result: result, connection: connection, sql: nil)
                }
            }
            let remaining = clock.now.duration(to: deadline)
            guard remaining > .zero else {
                let server = Self.serverDescription(connection)
                close()
                throw PostgreSQLError(kind: .connectionLost, message: """
                    the server \(server) did not answer within \(timeout); the connection was closed
                    """)
            }
            var descriptor = pollfd(fd: PQsocket(connection), events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, Self.milliseconds(remaining)) < 0 && errno != EINTR {
                throw PostgreSQLError(kind: .other, message: "poll() on the connection's socket failed: \(String(cString: strerror(errno)))")
            }
        }
    }
}

extension PostgreSQLConnection {
    /// Whether a transaction is open or failed on the session (not idle between transactions).
    var isInTransaction: Bool {
        guard let connection else { return false }
        return PQtransactionStatus(connection) != PQTRANS_IDLE
    }
}
