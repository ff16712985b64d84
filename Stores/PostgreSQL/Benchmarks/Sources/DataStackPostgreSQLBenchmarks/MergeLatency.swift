import DataStack
import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Task `merge`: how soon a save on one connection reaches the main context of
/// a stack in another process.
///
/// The viewer is this executable run again (`--viewer URL SAVES`): a
/// `StackManager` on the database with the defaults, its main context holding
/// the one company it watches. On each ``StackManager/didMergeNotification``
/// (posted on the main queue once the merge is done) it reads the company's
/// `employees` and prints `seen VALUE NANOSECONDS` when it changed. This process
/// updates `employees` to 1, 2, … with one save each on a coordinator of its own,
/// reading the time just before each `save()`. Both read `CLOCK_REALTIME`.
enum MergeLatency {
    static let viewerFlag = "--viewer"

    struct Result {
        var saves: Int
        /// seen − saved of every save the viewer saw, sorted.
        var samples: [Duration]

        func percentile(_ fraction: Double) -> Duration {
            samples[min(samples.count - 1, max(0, Int((Double(samples.count) * fraction).rounded(.up)) - 1))]
        }
    }

    static func realtimeNanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    // MARK: - The saving process

    static func run(on url: URL, saves: Int, interval: Duration) async throws -> Result {
        let writer = try DataStackContender(url: url)
        defer {
            // The database is dropped at the end of the run either way.
            try? writer.close()
        }
        try writer.insert([CompanyValues(symbol: "WATCH", name: "Watched", employees: 0, founded: Date(), price: 1)], chunkSize: 1)

        let viewer = try ViewerProcess(arguments: [viewerFlag, url.absoluteString, String(saves)])
        defer { viewer.stop() }
        try await viewer.waitForLine(timeout: .seconds(60)) { $0 == "ready" }

        let watched = try writer.context.performAndWait {
            guard let company = try writer.context.fetch(FetchRequest<ManagedObject>(entityName: CompanyModel.entityName)).first else {
                throw BenchError("merge: the watched company is missing")
            }
            return company.objectID
        }
        var saved: [Int64] = []
        for value in 1...saves {
            try await Task.sleep(for: interval)
            saved.append(try writer.context.performAndWait {
                try writer.context.object(with: watched).setValue(value, forKey: "employees")
                let now = realtimeNanoseconds()
                try writer.context.save()
                return now
            })
        }
        try await viewer.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("seen \(saves) ") }
        var seen: [Int: Int64] = [:]
        for line in viewer.lines {
            let fields = line.split(separator: " ")
            if fields.count == 3, fields[0] == "seen", let value = Int(fields[1]), let time = Int64(fields[2]) {
                seen[value] = time
            }
        }
        let samples = (1...saves).compactMap { value in seen[value].map { Duration.nanoseconds($0 - saved[value - 1]) } }
        return Result(saves: saves, samples: samples.sorted())
    }

    // MARK: - The viewer process

    /// The object the viewer's main context holds (registers) and the last value it saw.
    // @unchecked Sendable: touched only on the main context's queue (the main queue).
    private final class Watched: @unchecked Sendable {
        var company: ManagedObject?
        var last = 0
    }

    /// `--viewer URL SAVES`: watches the company until it has seen `employees == SAVES` (or two minutes passed).
    static func viewer(_ arguments: [String]) async throws {
        guard arguments.count == 2, let url = URL(string: arguments[0]), let final = Int(arguments[1]) else {
            throw BenchError("usage: \(viewerFlag) URL SAVES")
        }
        PostgreSQLStore.register()
        let stack = StackManager()
        try await stack.setup(model: CompanyModel.make(), storeURL: url)
        let main = stack.mainContext
        let watched = Watched()
        try await main.perform {
            watched.company = try main.fetch(FetchRequest<ManagedObject>(entityName: CompanyModel.entityName)).first
            watched.last = DataStackContender.integer(try watched.company?.value(forKey: "employees")) ?? -1
        }
        let observer = NotificationCenter.default.addObserver(forName: StackManager.didMergeNotification, object: stack, queue: nil) { _ in
            // Posted on the main queue, where performAndWait runs the block in place.
            main.performAndWait {
                // A failed read is reported as such, never taken for an unchanged value.
                let value: Int
                do {
                    value = DataStackContender.integer(try watched.company?.value(forKey: "employees")) ?? -1
                } catch {
                    FileHandle.standardOutput.write(Data("error \(error)\n".utf8))
                    return
                }
                let now = realtimeNanoseconds()
                if value != watched.last {
                    watched.last = value
                    FileHandle.standardOutput.write(Data("seen \(value) \(now)\n".utf8))
                }
            }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            if await main.perform({ watched.last }) == final { break }
        }
    }
}

/// The viewer child process, its standard output collected line by line on a thread of its own.
final class ViewerProcess: Sendable {
    private let process: Process
    private let collected = Lines()

    private final class Lines: Sendable {
        let lines = Mutex<[String]>([])
    }

    init(arguments: [String]) throws {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let handle = output.fileHandleForReading
        let collected = self.collected
        Thread.detachNewThread {
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    collected.lines.withLock { $0.append(line) }
                }
            }
        }
    }

    var lines: [String] { collected.lines.withLock { $0 } }

    /// Waits until the child printed a line `matching`; throws with its output if it exits or the time runs out first.
    func waitForLine(timeout: Duration, matching: (String) -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !lines.contains(where: matching) {
            guard process.isRunning, ContinuousClock.now < deadline else {
                throw BenchError("merge: the viewer process did not report in time (running: \(process.isRunning)); it printed:\n"
                                 + lines.suffix(20).joined(separator: "\n"))
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Ends the child if it has not exited by itself.
    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}
