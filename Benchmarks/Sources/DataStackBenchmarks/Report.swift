import Foundation
import GRDBSQLite

/// One row of the results table.
struct Measurement: Sendable {
    var task: String
    var contender: String
    var best: Duration
    var objects: Int

    var objectsPerSecond: Double { Double(objects) / max(best.seconds, 1e-9) }
}

enum Report {
    static func milliseconds(_ duration: Duration) -> String {
        let ms = duration.seconds * 1000
        if ms < 1 { return String(format: "%.1f µs", ms * 1000) }
        return ms < 10 ? String(format: "%.2f ms", ms) : String(format: "%.1f ms", ms)
    }

    static func rate(_ perSecond: Double) -> String {
        perSecond >= 1e6 ? String(format: "%.2f M/s", perSecond / 1e6) : String(format: "%.0f k/s", perSecond / 1e3)
    }

    static func table(_ headers: [String], _ rows: [[String]]) -> String {
        var lines = ["| " + headers.joined(separator: " | ") + " |",
                     "|" + headers.map { _ in "---" }.joined(separator: "|") + "|"]
        lines += rows.map { "| " + $0.joined(separator: " | ") + " |" }
        return lines.joined(separator: "\n")
    }

    /// Task, contender, best time, objects per second, ratio to raw SQLite for the same task.
    static func results(_ measurements: [Measurement], repetitions: Int) -> String {
        let rows = measurements.map { measurement -> [String] in
            let raw = measurements.first { $0.task == measurement.task && $0.contender == Benchmarks.Contender.raw.rawValue }
            let ratio = raw.map { String(format: "%.2f×", measurement.best.seconds / max($0.best.seconds, 1e-9)) } ?? "–"
            return [measurement.task, measurement.contender, milliseconds(measurement.best),
                    rate(measurement.objectsPerSecond), ratio]
        }
        return table(["task", "contender", "best of \(repetitions)", "objects/s", "× raw SQLite"], rows)
    }

    /// The version of the system's SQLite, which raw SQLite, GRDB and DataStack use.
    static var sqliteVersion: String { String(cString: sqlite3_libversion()) }

    /// The machine and the run, for the record.
    static func machine() -> String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "?" } ?? "unknown CPU"
        let memory = Double(ProcessInfo.processInfo.physicalMemory) / 1_073_741_824
        let date = ISO8601DateFormatter().string(from: Date())
        return "machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, \(model), "
            + String(format: "%.1f GiB", memory) + "; SQLite \(sqliteVersion); \(date)"
    }
}
