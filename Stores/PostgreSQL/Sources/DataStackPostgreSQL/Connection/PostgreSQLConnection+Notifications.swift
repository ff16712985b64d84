import CLibPQ
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - LISTEN / NOTIFY

extension PostgreSQLConnection {
    /// Starts listening to `channel` (`LISTEN "channel"`), so ``notifications(waitingUpTo:)``
    /// returns what is sent to it. The name is quoted, so it is case-sensitive and may
    /// contain any character. ``reconnect()`` listens again.
    ///
    /// Related PostgreSQL documentation: <https://www.postgresql.org/docs/current/sql-listen.html>
    public func listen(_ channel: String) throws {
        try executeListen(channel)
        if !listenedChannels.contains(channel) {
            listenedChannels.append(channel)
        }
    }

    /// Sends a notification (`SELECT pg_notify($1, $2)`). Inside a transaction it is
    /// delivered when the transaction commits, and not at all if it rolls back.
    public func notify(_ channel: String, payload: String) throws {
        try execute("SELECT pg_notify($1, $2)", [.text(channel), .text(payload)])
    }

    /// The notifications received so far, waiting up to `timeout` for the first one.
    ///
    /// Returns what libpq already holds without waiting. Otherwise waits until the
    /// connection's socket is readable or the timeout passes (poll(2)), reads, and
    /// returns what arrived: an empty array when nothing came in time.
    ///
    /// Notifications are delivered only between transactions, so do not hold a
    /// transaction open on this connection while waiting.
    ///
    /// - Throws: ``PostgreSQLError`` of kind ``PostgreSQLError/Kind/connectionLost`` when
    ///   the connection broke; a broken connection is never reported as "no notifications".
    public func notifications(waitingUpTo timeout: Duration) throws -> [PostgreSQLNotification] {
        let connection = try openConnection()
        try consumeInput(connection)
        var received = drainNotifications(connection)
        if !received.isEmpty { return received }

        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while received.isEmpty {
            let remaining = clock.now.duration(to: deadline)
            if remaining <= .zero { break }
            let socket = PQsocket(connection)
            guard socket >= 0 else {
                throw PostgreSQLError(connection: connection, kind: .connectionLost)
            }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Self.milliseconds(remaining))
            if ready < 0 {
                if errno == EINTR { continue }
                throw PostgreSQLError(
                    kind: .other, message: "poll() on the connection's socket failed: \(String(cString: strerror(errno)))")
            }
            if ready == 0 { break }
            // Readable: data, or end of file when the server went away (then
            // PQconsumeInput fails and consumeInput throws).
            try consumeInput(connection)
            received = drainNotifications(connection)
        }
        return received
    }

    // MARK: - Internal helpers

    func executeListen(_ channel: String) throws {
        let connection = try openConnection()
        try execute("LISTEN \(try quotedIdentifier(channel, connection: connection))")
    }

    /// The identifier in double quotes, escaped by libpq for the connection's encoding.
    func quotedIdentifier(_ identifier: String, connection: OpaquePointer) throws -> String {
        let utf8 = Array(identifier.utf8)
        guard !utf8.contains(0) else {
            throw PostgreSQLError(kind: .other, message: "an identifier cannot contain a NUL character")
        }
        let escaped = utf8.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { PQescapeIdentifier(connection, $0.baseAddress, $0.count) }
        }
        guard let escaped else {
            throw PostgreSQLError(connection: connection)
        }
        defer { PQfreemem(escaped) }
        return String(cString: escaped)
    }

    func consumeInput(_ connection: OpaquePointer) throws {
        if PQconsumeInput(connection) == 0 {
            throw PostgreSQLError(connection: connection, kind: .connectionLost)
        }
    }

    private func drainNotifications(_ connection: OpaquePointer) -> [PostgreSQLNotification] {
        var received: [PostgreSQLNotification] = []
        while let notification = PQnotifies(connection) {
            let notify = notification.pointee
            received.append(
                PostgreSQLNotification(
                    channel: notify.relname.map { String(cString: $0) } ?? "",
                    payload: notify.extra.map { String(cString: $0) } ?? "",
                    processID: notify.be_pid))
            PQfreemem(notification)
        }
        return received
    }

    /// A duration as poll(2)'s timeout: whole milliseconds, rounded up so a short wait
    /// does not become a busy loop, and capped to Int32.
    static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        let millis = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: max(0, millis))
    }
}
