import DataStack
import Foundation

/// Task 5: peak RSS while DataStack imports N objects in chunks. Each size runs
/// in a child process (this binary re-run with a hidden flag), so the peak is
/// not raised by the other tasks or by the data set of the parent.
enum MemoryBenchmark {
    static let childFlag = "--memory-child"

    struct Result: Sendable {
        var objects: Int
        /// Peak RSS after the stack was set up, before importing (KiB).
        var baselineKiB: Int
        /// Peak RSS at the end of the import (KiB).
        var peakKiB: Int
        var seconds: Double
    }

    /// Runs one import of `objects` in a child process and reads its report.
    static func measure(objects: Int, chunkSize: Int) async throws -> Result {
        let fields = try await ChildProcess.report([childFlag, String(objects), String(chunkSize)], prefix: "memory-result",
                                                   fields: 5, task: "memory")
        guard let baseline = Int(fields[2]), let peak = Int(fields[3]), let seconds = Double(fields[4]) else {
            throw BenchError("memory: cannot read the child's report `\(fields.joined(separator: " "))`")
        }
        return Result(objects: objects, baselineKiB: baseline, peakKiB: peak, seconds: seconds)
    }

    /// The child's side: import and print `memory-result N BASELINE PEAK SECONDS`.
    static func child(_ arguments: [String]) async throws {
        guard arguments.count == 2, let objects = Int(arguments[0]), let chunkSize = Int(arguments[1]) else {
            throw BenchError("usage: \(childFlag) OBJECTS CHUNK")
        }
        let directory = ScratchDirectory("memory")
        let (stack, watcher) = try await DataStackBench.open(directory.file("Memory.sqlite"))
        let baseline = peakResidentKiB()
        let start = ContinuousClock.now
        // Inputs are made one by one as the import reads them; nothing of size N is held.
        let progress = try await stack.performImport(0..<objects, chunkSize: chunkSize) { index, context in
            BenchTicker(context: context).assign(TickerValues(index: index))
        }
        try await watcher.wait(for: progress.savedChunks)
        let elapsed = ContinuousClock.now - start
        guard progress.insertedObjects == objects else {
            throw BenchError("memory: imported \(progress.insertedObjects) objects, expected \(objects)")
        }
        print("memory-result \(objects) \(baseline) \(peakResidentKiB()) \(elapsed.seconds)")
    }

    /// The process's peak resident set (VmHWM), in KiB; `getrusage` where /proc is missing.
    static func peakResidentKiB() -> Int {
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
           let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
           let kib = Int(line.dropFirst("VmHWM:".count).trimmingCharacters(in: .whitespaces).split(separator: " ")[0]) {
            return kib
        }
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return usage.ru_maxrss
    }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
