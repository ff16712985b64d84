import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `relay --listen ADDRESS:PORT --to ADDRESS:PORT --delay-ms MS`: a TCP relay
/// that holds every byte a client sends for MS milliseconds before passing it
/// on (what `tc qdisc add dev … root netem delay MSms` does on the client's
/// link), and passes the answers back at once. For the tests across hosts on
/// a kernel built without the netem qdisc (HostTests).
///
/// Writes `{"listening":PORT}` once it accepts connections; runs until killed.
enum PeerRelay {
    static func run(listeningOn local: (host: String, port: UInt16), to upstream: (host: String, port: UInt16), delay: Duration) -> Never {
        let listener = socket(AF_INET, socketStream, 0)
        guard listener >= 0 else { PeerOutput.fail("relay: socket() failed") }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = socketAddress(local.host, local.port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else {
            PeerOutput.fail("relay: cannot listen on \(local.host):\(local.port): \(String(cString: strerror(errno)))")
        }
        PeerOutput.write(["listening": Int(local.port)])
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            let server = socket(AF_INET, socketStream, 0)
            var target = socketAddress(upstream.host, upstream.port)
            let connected = withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                close(client)
                close(server)
                continue
            }
            for descriptor in [client, server] {
                setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            }
            DelayedPipe(from: client, to: server, delay: delay).start()
            DelayedPipe(from: server, to: client, delay: .zero).start()
        }
    }

    #if canImport(Glibc)
    private static let socketStream = Int32(SOCK_STREAM.rawValue)
    #else
    private static let socketStream = SOCK_STREAM
    #endif

    private static func socketAddress(_ host: String, _ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        address.sin_port = port.bigEndian
        return address
    }
}

/// One direction of a relayed connection: a thread reads and stamps each
/// chunk, another writes it once its delay has passed, in order.
// @unchecked Sendable: `chunks` and `isFinished` are touched only while `condition` is locked.
private final class DelayedPipe: @unchecked Sendable {
    private let source: Int32
    private let destination: Int32
    private let delay: Duration
    private let condition = NSCondition()
    private var chunks: [(due: ContinuousClock.Instant, bytes: [UInt8])] = []
    private var isFinished = false

    init(from source: Int32, to destination: Int32, delay: Duration) {
        self.source = source
        self.destination = destination
        self.delay = delay
    }

    func start() {
        Thread { self.read() }.start()
        Thread { self.write() }.start()
    }

    private func read() {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = recv(source, &buffer, buffer.count, 0)
            if count <= 0 { break }
            let chunk = (due: ContinuousClock.now + delay, bytes: Array(buffer[0..<count]))
            condition.withLock {
                chunks.append(chunk)
                condition.signal()
            }
        }
        condition.withLock {
            isFinished = true
            condition.signal()
        }
    }

    private func write() {
        while true {
            condition.lock()
            while chunks.isEmpty && !isFinished { condition.wait() }
            guard !chunks.isEmpty else {
                condition.unlock()
                // The reading side ended: pass the end on, so the other side sees it.
                shutdown(destination, Int32(SHUT_WR))
                return
            }
            let chunk = chunks.removeFirst()
            condition.unlock()
            let wait = ContinuousClock.now.duration(to: chunk.due)
            if wait > .zero { Thread.sleep(forTimeInterval: Double(wait.components.attoseconds) / 1e18 + Double(wait.components.seconds)) }
            var sent = 0
            while sent < chunk.bytes.count {
                let count = chunk.bytes[sent...].withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if count <= 0 { return }
                sent += count
            }
        }
    }
}
