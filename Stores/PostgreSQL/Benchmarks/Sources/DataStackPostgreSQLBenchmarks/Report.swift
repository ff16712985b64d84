import DataStackPostgreSQL
import Foundation

/// One row of the results table.
struct Measurement {
    var task: String
    var contender: String
    var best: Duration
    var objects: Int
    /// The contender of the same task this one is compared with (nil: it is the baseline).
    var baseline: String?

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

    /// Task, contender, best time, rows per second, ratio to the task's raw libpq baseline.
    static func results(_ measurements: [Measurement], repetitions: Int) -> String {
        let rows = measurements.map { measurement -> [String] in
            let baseline = measurement.baseline.flatMap { name in
                measurements.first { $0.task == measurement.task && $0.contender == name }
            }
            let ratio = baseline.map { String(format: "%.2f×", measurement.best.seconds / max($0.best.seconds, 1e-9)) } ?? "1.00× (baseline)"
            return [measurement.task, measurement.contender, milliseconds(measurement.best), rate(measurement.objectsPerSecond), ratio]
        }
        return table(["task", "contender", "best of \(repetitions)", "rows/s", "× raw libpq"], rows)
    }

    /// The machine, the server and the run, for the record.
    static func machine(server: PostgreSQLConnection) -> String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "?" } ?? "unknown CPU"
        let memory = Double(ProcessInfo.processInfo.physicalMemory) / 1_073_741_824
        // The version is for the record only; a server that will not say is still benchmarked.
        let version = (try? server.execute("SHOW server_version").string(row: 0, column: 0)) ?? "unknown"
        let date = ISO8601DateFormatter().string(from: Date())
        return "machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, \(model), "
            + String(format: "%.1f GiB", memory) + "; PostgreSQL \(version); \(date)"
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
