import DataStackPostgreSQL
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a test server could not be started or driven; carries the command's output.
struct PostgreSQLTestServerError: Error, CustomStringConvertible, Sendable {
    var description: String
}

/// A throwaway PostgreSQL server for tests: its own data folder and Unix socket folder
/// under /tmp, no TCP port, trust authentication for the user `datastack`.
///
/// ```swift
/// let server = try PostgreSQLTestServer.start()
/// defer { server.stop() }
/// let connection = try PostgreSQLConnection(url: server.makeDatabase())
/// ```
///
/// Most tests share ``shared`` (initdb costs a second or two) and each gets a fresh
/// database from ``makeDatabase()``; tests that kill the server start their own.
///
/// PostgreSQL refuses to run as root. When the tests run as root (containers, CI),
/// `initdb` and `pg_ctl` run as the `postgres` system user through `runuser`, and the
/// folder is handed to that user.
final class PostgreSQLTestServer: Sendable {
    /// The temporary folder holding `data/`, `socket/` and `log`.
    let folder: URL
    let dataDirectory: String
    let socketDirectory: String
    let logFile: String

    private let binaries: Binaries
    private let state = Mutex(State())
    /// Where the server runs on a test network (TestHosts): its namespace, the
    /// address it listens on and the range pg_hba.conf trusts; nil for the
    /// Unix socket only.
    let network: Network?

    struct Network: Sendable {
        var namespace: String
        var address: String
        var trustedRange: String
    }

    private struct State {
        var isRunning = false
        var isRemoved = false
        var databaseCounter = 0
    }

    private struct Binaries {
        var initdb: String
        var pgCtl: String
        var pgBasebackup: String
        /// `runuser`, when the tests run as root; commands then run as `postgres`.
        var runuser: String?
    }

    // MARK: - Shared server

    /// One server for the whole test run, started on first use and stopped when the
    /// test process exits.
    static let shared: Result<PostgreSQLTestServer, PostgreSQLTestServerError> = {
        let result: Result<PostgreSQLTestServer, PostgreSQLTestServerError>
        do {
            result = .success(try start())
        } catch let error as PostgreSQLTestServerError {
            result = .failure(error)
        } catch {
            result = .failure(PostgreSQLTestServerError(description: "\(error)"))
        }
        if case .success = result {
            atexit {
                if case .success(let server) = PostgreSQLTestServer.shared { server.stop() }
            }
        }
        return result
    }()

    // MARK: - Starting

    /// Creates a data folder with initdb and starts a server on it.
    static func start(network: Network? = nil) throws -> PostgreSQLTestServer {
        let binaries = try locateBinaries()
        let folder = try makeFolder(binaries)
        let server = PostgreSQLTestServer(folder: folder, binaries: binaries, network: network)
        do {
            try server.run(
                binaries.initdb,
                ["-D", server.dataDirectory, "-A", "trust", "-U", "datastack", "--no-sync", "-E", "UTF8", "--locale=C"])
            if let network {
                // The test network's hosts log in over TCP, trusted as on the socket.
                let hba = URL(fileURLWithPath: server.dataDirectory).appendingPathComponent("pg_hba.conf")
                let handle = try FileHandle(forWritingTo: hba)
                defer { try? handle.close() }
                handle.seekToEndOfFile()
                handle.write(Data("host all all \(network.trustedRange) trust\nhost replication all \(network.trustedRange) trust\n".utf8))
            }
            try server.startServer()
        } catch {
            server.stop()
            throw error
        }
        return server
    }

    /// A streaming standby of this server (`pg_basebackup -R -X stream`), on a
    /// folder and Unix socket of its own: hot, read-only, replaying this one's WAL.
    ///
    /// With `network`, the standby runs on that host of the test network and
    /// replicates over TCP from this server's address.
    func startStandby(network standbyNetwork: Network? = nil) throws -> PostgreSQLTestServer {
        let folder = try Self.makeFolder(binaries)
        let standby = PostgreSQLTestServer(folder: folder, binaries: binaries, network: standbyNetwork)
        let primaryHost = standbyNetwork != nil ? network?.address ?? socketDirectory : socketDirectory
        do {
            try standby.run(binaries.pgBasebackup, ["-D", standby.dataDirectory, "-R", "-X", "stream", "-h", primaryHost, "-U", "datastack"])
            try standby.startServer()
        } catch {
            standby.stop()
            throw error
        }
        return standby
    }

    /// A new folder under /tmp with `socket/`, handed to `postgres` when root.
    private static func makeFolder(_ binaries: Binaries) throws -> URL {
        let folder = URL(fileURLWithPath: "/tmp/ds-pg-\(UUID().uuidString.prefix(8).lowercased())")
        let socket = folder.appendingPathComponent("socket")
        try FileManager.default.createDirectory(at: socket, withIntermediateDirectories: true)
        // 0755: the postgres user (when root hands the folder over) owns it; the tests
        // (root) reach the socket anyway.
        for path in [folder.path, socket.path] {
            chmod(path, 0o755)
        }
        if binaries.runuser != nil {
            guard let account = getpwnam("postgres") else {
                throw PostgreSQLTestServerError(
                    description: "PostgreSQL refuses to run as root and there is no `postgres` user to run it as; run the tests as another user or install postgresql (apt-get install postgresql)")
            }
            for path in [folder.path, socket.path] where chown(path, account.pointee.pw_uid, account.pointee.pw_gid) != 0 {
                throw PostgreSQLTestServerError(description: "chown \(path) to postgres failed: \(String(cString: strerror(errno)))")
            }
        }
        return folder
    }

    private init(folder: URL, binaries: Binaries, network: Network?) {
        self.folder = folder
        self.binaries = binaries
        self.network = network
        dataDirectory = folder.appendingPathComponent("data").path
        socketDirectory = folder.appendingPathComponent("socket").path
        logFile = folder.appendingPathComponent("log").path
    }

    deinit {
        stop()
    }

    // MARK: - Databases

    /// The URL of a database on this server: `postgresql://datastack@/<name>?host=<socket folder>`.
    func url(database: String) -> URL {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let host = socketDirectory.addingPercentEncoding(withAllowedCharacters: allowed) ?? socketDirectory
        // The folder path is ours (/tmp/ds-pg-…), so the URL always parses.
        return URL(string: "postgresql://datastack@/\(database)?host=\(host)")!
    }

    /// Creates a new, empty database and returns its URL.
    func makeDatabase() throws -> URL {
        // One at a time: CREATE DATABASE copies template1, and concurrent copies can
        // fail with "source database is being accessed by other users".
        try state.withLock { state in
            state.databaseCounter += 1
            let name = "test_\(state.databaseCounter)"
            let admin = try PostgreSQLConnection(url: url(database: "postgres"))
            defer { admin.close() }
            try admin.executeScript("CREATE DATABASE \(name)")
            return url(database: name)
        }
    }

    // MARK: - Stopping and restarting

    /// Stops the server (fast shutdown) and removes its folder. Safe to call twice.
    func stop() {
        let wasRunning = state.withLock { state in
            defer { state.isRunning = false }
            return state.isRunning
        }
        if wasRunning {
            // Cleanup must not throw: if pg_ctl fails the server is most likely gone
            // already, and the folder is removed below either way.
            _ = try? run(binaries.pgCtl, ["stop", "-D", dataDirectory, "-m", "fast", "-w"])
        }
        let shouldRemove = state.withLock { state in
            defer { state.isRemoved = true }
            return !state.isRemoved
        }
        if shouldRemove {
            // A folder left in /tmp is harmless; failing a test over it is not worth it.
            try? FileManager.default.removeItem(at: folder)
        }
    }

    /// Kills the server without a clean shutdown (`pg_ctl stop -m immediate`), as a
    /// crash would; the data folder stays for ``restart()``.
    func kill() throws {
        try run(binaries.pgCtl, ["stop", "-D", dataDirectory, "-m", "immediate", "-w"])
        state.withLock { $0.isRunning = false }
    }

    /// Stops the server cleanly (`pg_ctl stop -m fast`: sessions are ended,
    /// open transactions rolled back); the data folder stays for ``restart()``.
    func stopKeepingData() throws {
        try run(binaries.pgCtl, ["stop", "-D", dataDirectory, "-m", "fast", "-w"])
        state.withLock { $0.isRunning = false }
    }

    /// Restarts the server with a fast shutdown (`pg_ctl restart -m fast`):
    /// sessions are ended and their transactions rolled back, then it starts again.
    func restartFast() throws {
        try run(binaries.pgCtl, ["restart", "-D", dataDirectory, "-m", "fast", "-w", "-o", serverOptions, "-l", logFile])
    }

    /// The URL of a database over the test network: `postgresql://datastack@<address>:<port>/<name>`.
    func networkURL(database: String, port: Int = 5432, parameters: String = "") -> URL? {
        guard let network else { return nil }
        return URL(string: "postgresql://datastack@\(network.address):\(port)/\(database)" + (parameters.isEmpty ? "" : "?" + parameters))
    }

    /// Starts the server again on the same data folder and socket.
    func restart() throws {
        try startServer()
    }

    // MARK: - Private helpers

    private var serverOptions: String {
        "-c unix_socket_directories='\(socketDirectory)' -c listen_addresses='\(network?.address ?? "")' -c fsync=off -c max_connections=100"
    }

    private func startServer() throws {
        do {
            try run(binaries.pgCtl, ["start", "-D", dataDirectory, "-o", serverOptions, "-w", "-l", logFile])
        } catch {
            let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
            throw PostgreSQLTestServerError(description: "\(error)\nserver log:\n\(log.suffix(2000))")
        }
        state.withLock { $0.isRunning = true }
    }

    /// Runs a PostgreSQL program (as `postgres` when root) and returns its output.
    ///
    /// posix_spawn rather than Foundation's `Process`: `pg_ctl start` leaves a daemon
    /// behind, and the child must not inherit any of the test process's descriptors
    /// (a pipe held open by the postmaster keeps readers and `swift test` waiting
    /// forever). Output goes to a file next to the folder, read once the command exits.
    @discardableResult
    private func run(_ executable: String, _ arguments: [String]) throws -> String {
        // `sh -c 'cd … && exec …'`: start in a folder the postgres user can enter
        // (the test process's may not be); posix_spawn's chdir action is not imported.
        var argv = ["/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", folder.path]
        if let network {
            // Inside the server's namespace (as root), then as postgres.
            argv += [TestHosts.ipTool, "netns", "exec", network.namespace]
        }
        if let runuser = binaries.runuser {
            argv += [runuser, "-u", "postgres", "--"]
        }
        argv += [executable] + arguments
        let program = argv[0]
        let outputPath = folder.path + ".out"
        defer { unlink(outputPath) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Close every other inherited descriptor (closefrom_np is not imported either).
        // Closing one that is already closed at spawn time is ignored.
        let openDescriptors = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [])
            .compactMap { Int32($0) }.filter { $0 > 2 }
        for descriptor in openDescriptors {
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }

        let cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var pid = pid_t()
        let spawnStatus = posix_spawn(&pid, program, &actions, nil, cArguments, environ)
        guard spawnStatus == 0 else {
            throw PostgreSQLTestServerError(description: "could not run \(program): \(String(cString: strerror(spawnStatus)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // WIFEXITED / WEXITSTATUS are macros Swift does not import.
        let exited = status & 0x7f == 0
        let exitCode = (status >> 8) & 0xff
        guard exited && exitCode == 0 else {
            throw PostgreSQLTestServerError(
                description: "`\(argv.joined(separator: " "))` failed (wait status \(status)):\n\(output)")
        }
        return output
    }

    private static func locateBinaries() throws -> Binaries {
        let fileManager = FileManager.default
        var folders = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        // Debian/Ubuntu keep the server programs out of PATH; take the newest version.
        let versions = ((try? fileManager.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .compactMap(Int.init).sorted(by: >)
        folders += versions.map { "/usr/lib/postgresql/\($0)/bin" }
        guard let folder = folders.first(where: {
            fileManager.isExecutableFile(atPath: "\($0)/initdb") && fileManager.isExecutableFile(atPath: "\($0)/pg_ctl")
        }) else {
            throw PostgreSQLTestServerError(
                description: "initdb and pg_ctl not found on PATH or in /usr/lib/postgresql/*/bin: the PostgreSQL tests need a server (apt-get install postgresql, or brew install postgresql)")
        }
        var runuser: String?
        if geteuid() == 0 {
            runuser = ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"].first { fileManager.isExecutableFile(atPath: $0) }
            if runuser == nil {
                throw PostgreSQLTestServerError(
                    description: "PostgreSQL refuses to run as root, and runuser (util-linux) is not installed to run it as `postgres`")
            }
        }
        // pg_basebackup (for standbys) beside pg_ctl, or beside what a linked pg_ctl points to.
        let linked = (try? fileManager.destinationOfSymbolicLink(atPath: "\(folder)/pg_ctl")).map {
            URL(fileURLWithPath: $0, relativeTo: URL(fileURLWithPath: folder, isDirectory: true)).deletingLastPathComponent().path
        }
        let pgBasebackup = ([folder] + [linked].compactMap { $0 } + folders).map { "\($0)/pg_basebackup" }
            .first { fileManager.isExecutableFile(atPath: $0) } ?? "\(folder)/pg_basebackup"
        return Binaries(initdb: "\(folder)/initdb", pgCtl: "\(folder)/pg_ctl", pgBasebackup: pgBasebackup, runuser: runuser)
    }
}
