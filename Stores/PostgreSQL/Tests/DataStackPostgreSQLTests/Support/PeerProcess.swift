import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A `datastack-postgresql-peer` process beside the test: its stdout lines are
/// read as they come, and the test kills it or closes its stdin.
///
/// The waits block the calling thread, polling every 2 ms, as the main
/// package's `TickerImportChild` does: the children run as fast as they can
/// meanwhile, and a wait that sleeps on the cooperative pool resumes only
/// when a thread of the pool is free.
///
/// A child still running when the value goes away is killed, so a test that
/// fails half-way leaves no process behind.
final class PeerProcess {
    /// The executable the build put next to the test bundle.
    static var executable: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("datastack-postgresql-peer")
    }

    private let process = Process()
    private let output = OutputLog()
    private let finishedReading = DispatchSemaphore(value: 0)
    private let stdin = Pipe()
    private let stderrURL: URL

    /// Starts the peer with `arguments`; its stderr goes to a file in the temporary folder.
    /// With `namespace`, it runs inside that network namespace (`ip netns exec`, which
    /// execs the peer: the process is the peer's, as for a kill).
    /// `executable` is another peer of the build (`datastack-sync-peer`);
    /// `environment` is added to the test's.
    init(_ arguments: [String], namespace: String? = nil, executable: URL = PeerProcess.executable,
         environment: [String: String] = [:]) throws {
        if let namespace {
            process.executableURL = URL(fileURLWithPath: TestHosts.ipTool)
            process.arguments = ["netns", "exec", namespace, executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardInput = stdin
        stderrURL = FileManager.default.temporaryDirectory.appendingPathComponent("ds-peer-\(UUID().uuidString.prefix(8)).txt")
        try Data().write(to: stderrURL)
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        try process.run()
        let output = self.output, finished = finishedReading
        Thread {
            while case let chunk = stdout.fileHandleForReading.availableData, !chunk.isEmpty {
                output.append(chunk)
            }
            finished.signal()
        }.start()
    }

    deinit {
        if process.isRunning {
            deliver(SIGKILL, to: process.processIdentifier)
            process.waitUntilExit()
        }
        // A leftover file in the temporary folder is harmless.
        try? FileManager.default.removeItem(at: stderrURL)
    }

    /// The complete lines written so far that decode as `Line`; a line cut off
    /// by a kill fails to decode and is left out, as it was never reported.
    func lines<Line: Decodable>(_ type: Line.Type) -> [Line] {
        let decoder = JSONDecoder()
        return output.contents.split(separator: UInt8(ascii: "\n")).compactMap { try? decoder.decode(type, from: Data($0)) }
    }

    /// Waits until `condition` holds for the lines written so far, the
    /// process ended, or `deadline` passed; returns the lines.
    @discardableResult
    func wait<Line: Decodable>(for type: Line.Type, until deadline: ContinuousClock.Instant,
                               _ condition: ([Line]) -> Bool) -> [Line] {
        var lines = self.lines(type)
        while !condition(lines) && process.isRunning && ContinuousClock.now < deadline {
            usleep(2_000)
            lines = self.lines(type)
        }
        return lines
    }

    /// Kills the process with SIGKILL and waits until it is gone and its output is read.
    func kill() {
        if process.isRunning { deliver(SIGKILL, to: process.processIdentifier) }
        process.waitUntilExit()
        finishedReading.wait()
    }

    /// Closes the process's stdin (a viewer then exits).
    func closeStdin() {
        // Closing a pipe we opened cannot fail in a way the test could act on.
        try? stdin.fileHandleForWriting.close()
    }

    /// Waits until the process exited, or `deadline` passed; returns whether it
    /// exited. All of its output has been read when it returns true.
    func waitForExit(until deadline: ContinuousClock.Instant) -> Bool {
        while process.isRunning && ContinuousClock.now < deadline { usleep(2_000) }
        if process.isRunning { return false }
        process.waitUntilExit()
        finishedReading.wait()
        return true
    }

    var isRunning: Bool { process.isRunning }
    var wasKilled: Bool { process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL }
    /// The exit status, once it exited by itself.
    var exitStatus: Int32? {
        process.isRunning || process.terminationReason != .exit ? nil : process.terminationStatus
    }
    var stderrText: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }
}

/// `kill(2)`, out of reach of ``PeerProcess/kill()``'s name.
private func deliver(_ signal: Int32, to process: pid_t) {
    kill(process, signal)
}

/// What a child wrote so far, appended by the thread that reads its pipe.
private final class OutputLog: Sendable {
    private let data = Mutex(Data())
    func append(_ chunk: Data) { data.withLock { $0.append(chunk) } }
    var contents: Data { data.withLock { $0 } }
}

// MARK: - The peer's lines

/// An importer's line: a committed save (PeerOutput.Saved in the peer).
struct PeerSaved: Decodable, Hashable {
    var saved: String
    var token: Int64
    var counter: Int64
    var attempts: Int
    /// When `save()` was called (seconds since 1970).
    var at: Double?
}

/// An importer's line for a save the store refused, with `--keep-going` (PeerOutput.Failed in the peer).
struct PeerFailed: Decodable, Hashable {
    var failed: String
    var code: String
    var error: String
}

/// A viewer's line, or the `read` mode's (PeerOutput.Seen in the peer).
struct PeerSeen: Decodable {
    var entries: [String]
    var counter: Int64?
    var token: Int64?
    /// When the viewer wrote the line (seconds since 1970).
    var at: Double?
}
