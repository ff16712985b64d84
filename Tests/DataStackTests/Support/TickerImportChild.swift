import Foundation
import Synchronization

/// A ticker-import process that runs beside the test: its stdout lines are
/// read as they come, and the test signals it — stops it as Ctrl-C would,
/// pauses it, or kills it outright. (``TickerImportProcess/run(_:environment:fileSizeLimit:)``
/// is for runs the test only looks at once they ended.)
///
/// The waits block the calling thread, even in async tests, and each chunk
/// the child writes (and the end of its output) wakes them: the child imports
/// as fast as it can meanwhile, so the test must act the moment the child has
/// written what it waits for — a wait that suspends on the cooperative pool
/// resumes only when a thread of the pool is free, which on a loaded machine
/// with other tests running can be seconds later.
///
/// A child still running when the value goes away is killed, so a test that
/// fails half-way leaves no process behind.
final class TickerImportChild {
    private let process: Process
    private let output = OutputLog()
    private let finishedReading = DispatchSemaphore(value: 0)
    private let stderrURL: URL

    /// Starts ticker-import with `arguments`; its stderr goes to the file `stderr`.
    init(arguments: [String], stderr: URL) throws {
        process = Process()
        process.executableURL = TickerImportProcess.executable
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try Data().write(to: stderr)
        process.standardError = try FileHandle(forWritingTo: stderr)
        stderrURL = stderr
        try process.run()
        let output = self.output, finished = finishedReading
        Thread {
            while case let chunk = pipe.fileHandleForReading.availableData, !chunk.isEmpty {
                output.append(chunk)
            }
            output.end()
            finished.signal()
        }.start()
    }

    deinit {
        if process.isRunning {
            deliver(SIGKILL, to: process.processIdentifier)
            process.waitUntilExit()
        }
    }

    var processIdentifier: Int32 { process.processIdentifier }

    /// The complete lines written so far that decode as `Line`; a line cut
    /// off by a kill fails to decode and is left out, as it was never reported.
    func lines<Line: Decodable>(_ type: Line.Type) -> [Line] {
        TickerImportProcess.lines(in: output.contents, as: type)
    }

    /// Everything written to stdout so far, as text (the screen's frames without `--json`).
    var outputText: String { String(decoding: output.contents, as: UTF8.self) }

    /// The `--json` merge lines written so far.
    var reported: [TickerImportProcess.Line] { lines(TickerImportProcess.Line.self) }

    /// Waits until `count` lines that decode as `Line` were written, the
    /// process ended, or `timeout` passed; returns the lines.
    @discardableResult
    func waitForLines<Line: Decodable>(_ type: Line.Type, count: Int, timeout: Duration) -> [Line] {
        _ = waitForOutput(timeout: timeout) { TickerImportProcess.lines(in: $0, as: type).count >= count }
        return lines(type)
    }

    /// Waits until the stdout written so far satisfies `isDone`, woken by each
    /// chunk the child writes; returns false when the output ended (the
    /// process exited) or `timeout` passed first.
    func waitForOutput(timeout: Duration, until isDone: (Data) -> Bool) -> Bool {
        output.wait(until: ContinuousClock.now + timeout) { data, _ in isDone(data) }
    }

    /// Waits until the `--json` merge lines written so far satisfy `isDone`
    /// (see ``waitForOutput(timeout:until:)``).
    func waitForReported(timeout: Duration, until isDone: ([TickerImportProcess.Line]) -> Bool) -> Bool {
        waitForOutput(timeout: timeout) { isDone(TickerImportProcess.lines(in: $0, as: TickerImportProcess.Line.self)) }
    }

    /// Sends `signal` (SIGINT stops ticker-import after its current save;
    /// SIGSTOP and SIGCONT pause and resume it) while it runs.
    func send(_ signal: Int32) {
        if process.isRunning { deliver(signal, to: process.processIdentifier) }
    }

    /// Sends SIGSTOP and returns once every thread of the process has
    /// stopped (true), or once it exited (false). `kill` returns before a
    /// thread inside a system call — a commit's write — has stopped: that call
    /// completes first, so a store read at once may not yet hold the last
    /// transaction. The parent learns of the stop when the whole group has
    /// stopped; `WNOWAIT` leaves the state for `Process`, which reaps the exit.
    func pause() -> Bool {
        guard process.isRunning else { return false }
        let pid = process.processIdentifier
        deliver(SIGSTOP, to: pid)
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WSTOPPED | WEXITED | WNOWAIT) != 0 {
            guard errno == EINTR else { return false }
        }
        return info.si_code == CLD_STOPPED
    }

    /// Waits until the process exited, or `timeout` passed; returns whether it
    /// exited. All of its output has been read when it returns true.
    func waitForExit(timeout: Duration) -> Bool {
        // The output ends when the process exits (it closes its stdout then).
        _ = output.wait(until: ContinuousClock.now + timeout) { _, ended in ended }
        guard output.hasEnded else { return false }
        process.waitUntilExit()
        finishedReading.wait()
        return true
    }

    /// Kills the process with SIGKILL and waits until it is gone and its
    /// output is read.
    func kill() {
        send(SIGKILL)
        process.waitUntilExit()
        finishedReading.wait()
    }

    var wasKilled: Bool { process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL }
    /// The exit status, once it exited by itself.
    var exitStatus: Int32? {
        process.isRunning || process.terminationReason != .exit ? nil : process.terminationStatus
    }
    var stderrText: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }
}

/// `kill(2)`, out of reach of ``TickerImportChild/kill()``'s name.
private func deliver(_ signal: Int32, to process: pid_t) {
    kill(process, signal)
}

/// What a child wrote so far, appended by the thread that reads its pipe.
// @unchecked Sendable: `data`, `ended` and `changes` are only touched while `condition` is locked.
private final class OutputLog: @unchecked Sendable {
    private let condition = NSCondition()
    private var data = Data()
    private var ended = false
    /// Counts the changes, so that a wait knows whether one came.
    private var changes = 0

    func append(_ chunk: Data) { changing { $0.data.append(chunk) } }
    /// The child closed its stdout: no more output comes.
    func end() { changing { $0.ended = true } }

    var contents: Data { condition.withLock { data } }
    var hasEnded: Bool { condition.withLock { ended } }

    /// Blocks until `isDone` holds for the output so far, woken by each change;
    /// false when the output ended or `deadline` passed first. `isDone` runs
    /// outside the lock, so it may read the child's output again.
    func wait(until deadline: ContinuousClock.Instant, _ isDone: (Data, _ ended: Bool) -> Bool) -> Bool {
        while true {
            let (data, ended, seen) = condition.withLock { (self.data, self.ended, changes) }
            if isDone(data, ended) { return true }
            if ended { return false }
            let changed = condition.withLock {
                while changes == seen {
                    let left = deadline - ContinuousClock.now
                    guard left > .zero else { return false }
                    _ = condition.wait(until: Date(timeIntervalSinceNow: left.seconds))
                }
                return true
            }
            if !changed { return isDone(contents, hasEnded) }
        }
    }

    private func changing(_ change: (OutputLog) -> Void) {
        condition.withLock {
            change(self)
            changes += 1
            condition.broadcast()
        }
    }
}
