import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A replica's link to the hub that the test cuts and restores: a TCP relay on
/// 127.0.0.1 in front of the test server's Unix socket (the server listens on
/// no TCP port). ``cut()`` closes the listener and every relayed connection,
/// so a replica's next hub call fails at once as offline (connection refused
/// or reset); ``restore()`` listens again on the same port.
///
/// The loopback stand-in for a network namespace's link (TestHosts): it needs
/// no root and no `ip`, and cuts both directions in one step.
final class SyncLinkRelay: Sendable {
    /// The port the relay listens on, the same after every ``restore()``.
    let port: UInt16
    private let unixSocket: String
    private let state = Mutex(State())

    private struct State {
        var listener: Int32 = -1
        /// The relayed connections' descriptors, both ends, shut down on a cut.
        var connections: Set<Int32> = []
        var isUp = false
    }

    /// Starts a relay to the Unix socket at `unixSocket` (`<socket folder>/.s.PGSQL.5432`), up.
    init(unixSocket: String) throws {
        self.unixSocket = unixSocket
        let (listener, port) = try Self.makeListener(port: 0)
        self.port = port
        state.withLock { $0.listener = listener; $0.isUp = true }
        startAccepting(listener)
    }

    deinit {
        cut()
    }

    var isUp: Bool { state.withLock { $0.isUp } }

    /// Closes the listener and every relayed connection.
    func cut() {
        // Inside the lock: a connection's descriptors are closed (and may be reused) only under it.
        state.withLock { state in
            if state.listener >= 0 {
                shutdown(state.listener, Int32(SHUT_RDWR))   // wakes the accepting thread, which closes it
            }
            for descriptor in state.connections { shutdown(descriptor, Int32(SHUT_RDWR)) }
            state.listener = -1
            state.isUp = false
        }
    }

    /// Listens again on ``port``.
    func restore() throws {
        guard !isUp else { return }
        let (listener, _) = try Self.makeListener(port: port)
        state.withLock { $0.listener = listener; $0.isUp = true }
        startAccepting(listener)
    }

    private func startAccepting(_ listener: Int32) {
        Thread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { break }
                guard state.withLock({ $0.listener == listener }) else {
                    close(client)
                    break
                }
                relay(client)
            }
            close(listener)
        }.start()
    }

    /// Connects `client` to the Unix socket and copies both ways until either side ends.
    private func relay(_ client: Int32) {
        let server = socket(AF_UNIX, Self.socketStream, 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            let bytes = Array(unixSocket.utf8.prefix(buffer.count - 1)) + [0]
            buffer.copyBytes(from: bytes)
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard server >= 0, connected == 0 else {
            close(client)
            if server >= 0 { close(server) }
            return
        }
        state.withLock { $0.connections.formUnion([client, server]) }
        let pair = ConnectionPair(client: client, server: server) { [self] in
            state.withLock { state in
                state.connections.subtract([client, server])
                close(client)
                close(server)
            }
        }
        Thread { pair.copy(from: client, to: server) }.start()
        Thread { pair.copy(from: server, to: client) }.start()
    }

    private static func makeListener(port: UInt16) throws -> (Int32, UInt16) {
        let listener = socket(AF_INET, socketStream, 0)
        guard listener >= 0 else { throw PostgreSQLTestServerError(description: "relay: socket() failed") }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            close(listener)
            throw PostgreSQLTestServerError(description: "relay: cannot listen on 127.0.0.1:\(port): \(reason)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        return (listener, UInt16(bigEndian: actual.sin_port))
    }

    #if canImport(Glibc)
    private static let socketStream = Int32(SOCK_STREAM.rawValue)
    #else
    private static let socketStream = SOCK_STREAM
    #endif
}

/// One relayed connection: two copying threads; the first to end shuts both
/// sockets down (so the other ends too), the last has the relay forget and close them.
private final class ConnectionPair: Sendable {
    private let client: Int32
    private let server: Int32
    private let running = Mutex(2)
    private let onClose: @Sendable () -> Void

    init(client: Int32, server: Int32, onClose: @escaping @Sendable () -> Void) {
        self.client = client
        self.server = server
        self.onClose = onClose
    }

    func copy(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        copying: while true {
            let count = recv(source, &buffer, buffer.count, 0)
            if count <= 0 { break }
            var sent = 0
            while sent < count {
                let written = buffer[sent..<count].withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written <= 0 { break copying }
                sent += written
            }
        }
        shutdown(client, Int32(SHUT_RDWR))
        shutdown(server, Int32(SHUT_RDWR))
        let last = running.withLock { count -> Bool in
            count -= 1
            return count == 0
        }
        if last { onClose() }
    }
}
