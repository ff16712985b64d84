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
    /// The Fluent contender of the same task this one is also compared with (a Fluent build only).
    var fluentBaseline: String? = nil

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

    /// Task, contender, best time, rows per second, ratio to the task's raw libpq
    /// baseline (and, in a Fluent build, to the task's Fluent contender).
    static func results(_ measurements: [Measurement], repetitions: Int) -> String {
        func ratio(_ measurement: Measurement, to name: String?) -> String? {
            name.flatMap { name in measurements.first { $0.task == measurement.task && $0.contender == name } }
                .map { String(format: "%.2f×", measurement.best.seconds / max($0.best.seconds, 1e-9)) }
        }
        let withFluent = measurements.contains { $0.fluentBaseline != nil }
        let rows = measurements.map { measurement -> [String] in
            var row = [measurement.task, measurement.contender, milliseconds(measurement.best), rate(measurement.objectsPerSecond),
                       ratio(measurement, to: measurement.baseline) ?? "1.00× (baseline)"]
            if withFluent { row.append(ratio(measurement, to: measurement.fluentBaseline) ?? "") }
            return row
        }
        return table(["task", "contender", "best of \(repetitions)", "rows/s", "× raw libpq"] + (withFluent ? ["× Fluent"] : []), rows)
    }

    /// The readers task: reads/s of each contender, its time per read against its
    /// raw libpq counterpart, and the pool's reads against one connection's.
    static func readers(_ results: [ReadersBenchmark.Result], repetitions: Int) -> String {
        #if FLUENT_CONTENDER
        let fluentRaw = [FluentReaders.onePool: ReadersBenchmark.rawShared, FluentReaders.fivePool: ReadersBenchmark.rawEach]
        let fluentOne = [FluentReaders.fivePool: FluentReaders.onePool]
        #else
        let fluentRaw: [String: String] = [:], fluentOne: [String: String] = [:]
        #endif
        let counterpart = [ReadersBenchmark.oneReader: ReadersBenchmark.rawShared, ReadersBenchmark.fiveReaders: ReadersBenchmark.rawEach,
                           ReadersBenchmark.standbyReaders: ReadersBenchmark.rawStandby].merging(fluentRaw) { $1 }
        // The standby's pool against one connection to the primary: what a stack gains by naming a standby.
        let one = [ReadersBenchmark.fiveReaders: ReadersBenchmark.oneReader, ReadersBenchmark.standbyReaders: ReadersBenchmark.oneReader,
                   ReadersBenchmark.rawEach: ReadersBenchmark.rawShared, ReadersBenchmark.rawStandby: ReadersBenchmark.rawShared]
            .merging(fluentOne) { $1 }
        func rate(of name: String?) -> Double? { name.flatMap { name in results.first { $0.contender == name }?.readsPerSecond } }
        let rows = results.map { result -> [String] in
            let raw = rate(of: counterpart[result.contender]).map { String(format: "%.2f×", $0 / result.readsPerSecond) } ?? ""
            let pool = rate(of: one[result.contender]).map { String(format: "%.2f×", result.readsPerSecond / $0) } ?? ""
            return [result.contender, "\(result.reads)", String(format: "%.0f", result.readsPerSecond), raw, pool]
        }
        return table(["readers: 3 threads, \(String(format: "%g", results.first?.seconds ?? 0)) s, best of \(repetitions)",
                      "reads", "reads/s", "time per read × raw", "reads/s × 1 connection"], rows)
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
