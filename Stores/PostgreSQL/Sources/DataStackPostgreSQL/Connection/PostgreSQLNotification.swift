/// A notification received on a channel this connection listens to (`NOTIFY` / `pg_notify`).
///
/// ```swift
/// try connection.listen("item_changed")
/// for note in try connection.notifications(waitingUpTo: .seconds(1)) {
///     print(note.channel, note.payload, note.processID)
/// }
/// ```
///
/// Related PostgreSQL documentation: <https://www.postgresql.org/docs/current/sql-notify.html>
public struct PostgreSQLNotification: Sendable, Hashable {
    /// The channel name, as given to `NOTIFY` (case preserved).
    public var channel: String
    /// The payload; empty when the notifier sent none.
    public var payload: String
    /// The server process ID of the session that sent the notification. Compare with
    /// ``PostgreSQLConnection/serverProcessID`` to skip this connection's own notifications.
    public var processID: Int32

    public init(channel: String, payload: String, processID: Int32) {
        self.channel = channel
        self.payload = payload
        self.processID = processID
    }
}
