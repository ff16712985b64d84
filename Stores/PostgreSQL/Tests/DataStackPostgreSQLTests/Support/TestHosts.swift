import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Hosts on one machine for the tests across a network: a network namespace
/// per host, each joined to a bridge in the server's namespace by a veth
/// pair, on 10.77.0.0/24 (the server 10.77.0.1, the others .2, .3, …).
///
/// ```swift
/// let hosts = try TestHosts(hosts: ["importer", "viewer"])
/// defer { hosts.remove() }
/// try hosts.setLink(of: "viewer", up: false)     // a partition
/// try hosts.delay("importer", milliseconds: 5)   // tc netem on its link
/// ```
///
/// Every name carries a prefix unique to the run (`ds<5 hex>`), so runs on one
/// machine never meet, and nothing leaves the namespaces the test made: the
/// addresses are private to them. ``remove()`` (also on deinit) deletes the
/// namespaces, which takes their links with them. Needs root (`ip netns`);
/// ``unavailableReason`` says why not, for the tests to skip visibly.
final class TestHosts: @unchecked Sendable {
    // @unchecked Sendable: `isRemoved` is touched under `lock`; the rest is immutable.

    /// One host: its namespace, the interface in it and its address.
    struct Host {
        var namespace: String
        var interface: String
        var address: String
    }

    /// `ip` from iproute2.
    static let ipTool = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/sbin/ip"
    /// `tc` from iproute2.
    static let tcTool = ["/usr/sbin/tc", "/sbin/tc", "/usr/bin/tc", "/bin/tc"]
        .first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/sbin/tc"

    /// Why these tests cannot run here, or nil when they can.
    static var unavailableReason: String? {
        if geteuid() != 0 { return "the tests across hosts need root (ip netns add, veth pairs); skipped when not root" }
        if !FileManager.default.isExecutableFile(atPath: ipTool) || !FileManager.default.isExecutableFile(atPath: tcTool) {
            return "the tests across hosts need ip and tc (apt-get install iproute2); skipped"
        }
        return nil
    }

    /// The server's namespace and its address on the bridge.
    let server: Host
    /// The other hosts, by name.
    let hosts: [String: Host]
    /// The range every host's address is in, for pg_hba.conf.
    let range = "10.77.0.0/24"
    private let prefix: String
    private let lock = NSLock()
    private var isRemoved = false

    /// Creates the server's namespace with its bridge, and one namespace and
    /// link per name; on a failure, removes what it made and throws.
    init(hosts names: [String]) throws {
        prefix = "ds" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(5).lowercased()
        server = Host(namespace: "\(prefix)-server", interface: "\(prefix)br", address: "10.77.0.1")
        var hosts: [String: Host] = [:]
        for (index, name) in names.enumerated() {
            hosts[name] = Host(namespace: "\(prefix)-\(name)", interface: "\(prefix)h\(index)", address: "10.77.0.\(index + 2)")
        }
        self.hosts = hosts
        do {
            try Self.ip(["netns", "add", server.namespace])
            try Self.ip(["-n", server.namespace, "link", "set", "lo", "up"])
            try Self.ip(["-n", server.namespace, "link", "add", server.interface, "type", "bridge"])
            try Self.ip(["-n", server.namespace, "addr", "add", "\(server.address)/24", "dev", server.interface])
            try Self.ip(["-n", server.namespace, "link", "set", server.interface, "up"])
            for (index, name) in names.enumerated() {
                guard let host = hosts[name] else { continue }
                let peer = "\(prefix)s\(index)"
                try Self.ip(["netns", "add", host.namespace])
                try Self.ip(["-n", host.namespace, "link", "set", "lo", "up"])
                // Made in the host's namespace; its peer end moves to the server's, onto the bridge.
                try Self.ip(["-n", host.namespace, "link", "add", host.interface, "type", "veth", "peer", "name", peer,
                             "netns", server.namespace])
                try Self.ip(["-n", server.namespace, "link", "set", peer, "master", server.interface])
                try Self.ip(["-n", server.namespace, "link", "set", peer, "up"])
                try Self.ip(["-n", host.namespace, "addr", "add", "\(host.address)/24", "dev", host.interface])
                try Self.ip(["-n", host.namespace, "link", "set", host.interface, "up"])
            }
        } catch {
            remove()
            throw error
        }
    }

    deinit {
        remove()
    }

    /// The host named `name`.
    func host(_ name: String) throws -> Host {
        guard let host = hosts[name] else { throw TestHostsError(description: "no host named \(name)") }
        return host
    }

    /// Takes a host's link down (a partition: its packets are dropped) or up again.
    func setLink(of name: String, up: Bool) throws {
        let host = try host(name)
        try Self.ip(["-n", host.namespace, "link", "set", host.interface, up ? "up" : "down"])
    }

    /// Delays every packet a host sends by `milliseconds` (tc netem on its end of the link).
    func delay(_ name: String, milliseconds: Int) throws {
        let host = try host(name)
        try Self.run(Self.tcTool, ["-n", host.namespace, "qdisc", "add", "dev", host.interface, "root", "netem", "delay", "\(milliseconds)ms"])
    }

    /// Deletes the namespaces (and with them the links). Safe to call twice;
    /// a namespace already gone is not an error.
    func remove() {
        let shouldRemove = lock.withLock {
            defer { isRemoved = true }
            return !isRemoved
        }
        guard shouldRemove else { return }
        for namespace in [server.namespace] + hosts.values.map(\.namespace) {
            // Cleanup must not throw: a namespace that was never made is not there to delete.
            _ = try? Self.ip(["netns", "del", namespace])
        }
    }

    // MARK: - Running ip and tc

    @discardableResult
    private static func ip(_ arguments: [String]) throws -> String {
        try run(ipTool, arguments)
    }

    @discardableResult
    private static func run(_ tool: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw TestHostsError(description: "`\(tool) \(arguments.joined(separator: " "))` failed: \(text)")
        }
        return text
    }
}

/// Why a test network could not be made or changed; carries the command's output.
struct TestHostsError: Error, CustomStringConvertible {
    var description: String
}
