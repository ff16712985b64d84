import DataStackPostgreSQL
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The PostgreSQL server the benchmarks run against: a private one started with
/// `initdb` and `pg_ctl` as the tests start theirs, or an existing one (`--url`).
///
/// ```swift
/// let server = try BenchServer.start()           // or BenchServer(existing: url)
/// defer { server.stop() }
/// let url = try server.makeDatabase()            // a fresh, empty database
/// ```
///
/// A compact copy of what `Tests/DataStackPostgreSQLTests/Support/PostgreSQLTestServer.swift`
/// does (a test file, which a benchmark target cannot import): a data folder and a
/// Unix socket folder under /tmp, no TCP port, `fsync=off`, trust authentication
/// for the user `datastack`; as root, the server programs run as `postgres`
/// through `runuser`. The folder is removed by ``stop()``.
final class BenchServer: Sendable {
    /// A URL of a database on the server; its path is replaced to reach other databases.
    let baseURL: URL
    /// The private server's folder (nil for an existing server).
    private let folder: URL?
    private let pgCtl: String?
    private let runuser: String?
    /// Databases this run created, dropped by ``stop()``.
    private let created = Mutex<[String]>([])

    /// Uses a server that is already running; databases are created on it (the
    /// URL's user needs `CREATEDB`) and dropped at the end.
    init(existing url: URL) {
        baseURL = url
        folder = nil
        pgCtl = nil
        runuser = nil
    }

    private init(folder: URL, pgCtl: String, runuser: String?) {
        self.folder = folder
        self.pgCtl = pgCtl
        self.runuser = runuser
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let socket = folder.appendingPathComponent("socket").path
        let host = socket.addingPercentEncoding(withAllowedCharacters: allowed) ?? socket
        // The folder path is ours (/tmp/ds-pg-bench-…), so the URL always parses.
        baseURL = URL(string: "postgresql://datastack@/postgres?host=\(host)")!
    }

    /// Creates a data folder with initdb and starts a private server on it.
    static func start() throws -> BenchServer {
        let fileManager = FileManager.default
        var folders = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        // Debian/Ubuntu keep the server programs out of PATH; take the newest version.
        folders += ((try? fileManager.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .compactMap(Int.init).sorted(by: >).map { "/usr/lib/postgresql/\($0)/bin" }
        guard let bin = folders.first(where: {
            fileManager.isExecutableFile(atPath: "\($0)/initdb") && fileManager.isExecutableFile(atPath: "\($0)/pg_ctl")
        }) else {
            throw BenchError("initdb and pg_ctl not found on PATH or in /usr/lib/postgresql/*/bin (apt-get install postgresql), or pass --url")
        }
        let server = try makeFolder(pgCtl: "\(bin)/pg_ctl")
        do {
            try server.run("\(bin)/initdb", ["-D", server.dataPath, "-A", "trust", "-U", "datastack", "--no-sync", "-E", "UTF8", "--locale=C"])
            try server.startServer()
        } catch {
            server.stop()
            throw error
        }
        return server
    }

    /// A hot streaming standby of this private server (`pg_basebackup -R -X stream -c fast`
    /// over its Unix socket), in a folder and on a socket of its own, as the tests'
    /// `startStandby()` makes one. ``stop()`` stops it and removes its folder.
    func startStandby() throws -> BenchServer {
        guard let folder, let pgCtl else { throw BenchError("a standby needs the private server (not --url)") }
        // pg_basebackup beside pg_ctl, beside what a linked pg_ctl points to, or in Debian's folders.
        let fileManager = FileManager.default
        let linked = (try? fileManager.destinationOfSymbolicLink(atPath: pgCtl))
            .map { URL(fileURLWithPath: $0, relativeTo: URL(fileURLWithPath: pgCtl).deletingLastPathComponent()).standardized.path }
        let versions = ((try? fileManager.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []).compactMap(Int.init).sorted(by: >)
        let candidates = ([pgCtl] + [linked].compactMap { $0 }).map { URL(fileURLWithPath: $0).deletingLastPathComponent().path }
            + versions.map { "/usr/lib/postgresql/\($0)/bin" }
        guard let pgBasebackup = candidates.map({ "\($0)/pg_basebackup" }).first(where: fileManager.isExecutableFile(atPath:)) else {
            throw BenchError("pg_basebackup not found beside \(pgCtl) or in /usr/lib/postgresql/*/bin")
        }
        let standby = try Self.makeFolder(pgCtl: pgCtl)
        do {
            // `-c fast`: the base backup starts with an immediate checkpoint; the default spread one
            // waited minutes after the import tasks' writes (4.5 min in one run).
            try standby.run(pgBasebackup, ["-D", standby.dataPath, "-R", "-X", "stream", "-c", "fast",
                                                     "-h", folder.appendingPathComponent("socket").path, "-U", "datastack"])
            try standby.startServer()
        } catch {
            standby.stop()
            throw error
        }
        return standby
    }

    /// A new folder under /tmp with `socket/`, handed to `postgres` when root.
    private static func makeFolder(pgCtl: String) throws -> BenchServer {
        let fileManager = FileManager.default
        var runuser: String?
        let folder = URL(fileURLWithPath: "/tmp/ds-pg-bench-\(UUID().uuidString.prefix(8).lowercased())")
        let socket = folder.appendingPathComponent("socket")
        try fileManager.createDirectory(at: socket, withIntermediateDirectories: true)
        for path in [folder.path, socket.path] { chmod(path, 0o755) }
        if geteuid() == 0 {
            // PostgreSQL refuses to run as root: run it as `postgres`, which owns the folder.
            runuser = ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"].first { fileManager.isExecutableFile(atPath: $0) }
            guard runuser != nil, let account = getpwnam("postgres") else {
                throw BenchError("PostgreSQL refuses to run as root, and there is no runuser or `postgres` user to run it as")
            }
            for path in [folder.path, socket.path] where chown(path, account.pointee.pw_uid, account.pointee.pw_gid) != 0 {
                throw BenchError("chown \(path) to postgres failed: \(String(cString: strerror(errno)))")
            }
        }
        return BenchServer(folder: folder, pgCtl: pgCtl, runuser: runuser)
    }

    private var dataPath: String { folder?.appendingPathComponent("data").path ?? "" }

    /// Starts the server on its data folder: its own Unix socket, no TCP, `fsync=off`.
    private func startServer() throws {
        guard let folder, let pgCtl else { return }
        let socket = folder.appendingPathComponent("socket").path
        let options = "-c unix_socket_directories='\(socket)' -c listen_addresses='' -c fsync=off -c max_connections=100"
        try run(pgCtl, ["start", "-D", dataPath, "-o", options, "-w", "-l", folder.appendingPathComponent("log").path])
    }

    /// Whether this run started the server (and can start a standby of it).
    var isPrivate: Bool { folder != nil }

    /// A URL of the database `name` on this server.
    func url(database name: String) -> URL {
        var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false)
        components?.path = "/" + name
        // Only the path changes, to a plain name: the URL stays valid.
        return components?.url ?? baseURL
    }

    /// Creates a new, empty database and returns its URL.
    func makeDatabase() throws -> URL {
        let name = "dsbench_\(UUID().uuidString.prefix(8).lowercased())"
        let admin = try PostgreSQLConnection(url: baseURL)
        defer { admin.close() }
        try admin.executeScript("CREATE DATABASE \(name)")
        created.withLock { $0.append(name) }
        return url(database: name)
    }

    /// Drops the databases this run created, then stops a private server and removes its folder.
    func stop() {
        let names = created.withLock { names in
            defer { names.removeAll() }
            return names
        }
        if !names.isEmpty, let admin = try? PostgreSQLConnection(url: baseURL) {
            // Cleanup must not hide the run's results: a database left behind is
            // reported, not thrown.
            for name in names {
                do {
                    try admin.executeScript("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
                } catch {
                    FileHandle.standardError.write(Data("warning: could not drop \(name): \(error)\n".utf8))
                }
            }
            admin.close()
        }
        guard let folder, let pgCtl else { return }
        // If pg_ctl fails the server is most likely gone already; the folder goes either way.
        _ = try? run(pgCtl, ["stop", "-D", folder.appendingPathComponent("data").path, "-m", "fast", "-w"])
        // A folder left in /tmp is harmless.
        try? FileManager.default.removeItem(at: folder)
    }

    /// Runs a server program (as `postgres` when root) with no inherited descriptors:
    /// the postmaster `pg_ctl start` leaves behind must hold no pipe of ours.
    private func run(_ executable: String, _ arguments: [String]) throws {
        guard let folder else { return }
        var argv = ["/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", folder.path]
        if let runuser { argv += [runuser, "-u", "postgres", "--"] }
        argv += [executable] + arguments
        let outputPath = folder.path + ".out"
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        for descriptor in ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap({ Int32($0) })
        where descriptor > 2 {
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }
        let cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, cArguments, environ)
        guard spawned == 0 else { throw BenchError("could not run \(argv[0]): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS are macros Swift does not import.
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            throw BenchError("`\(([executable] + arguments).joined(separator: " "))` failed (wait status \(status)):\n\(output.suffix(2000))")
        }
    }
}

/// Why a benchmark could not run or read back what it wrote.
struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
