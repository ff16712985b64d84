import Foundation
import Synchronization
import DataStack

/// The ticker-import executable the build produced, run as a user would.
enum TickerImportProcess {
    /// One `--json` line.
    struct Line: Decodable {
        struct Entry: Decodable {
            var symbol: String
            var price: Double
            var updates: Int64
        }
        var imported: Int
        var stockUpdates: Int
        var saved: Int
        var mergeMillis: Double
        var registeredInMain: Int
        var watchlist: [Entry]
        var final: Bool
        var error: String?
        var readError: String?
    }

    struct Result {
        var status: Int32
        var lines: [Line]
        var stderr: String
    }

    /// Next to the test bundle, where SwiftPM builds every product.
    static var executable: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("ticker-import")
    }

    /// Runs ticker-import to its end.
    ///
    /// - Parameter fileSizeLimit: the most bytes the process may write to any
    ///   one file (`ulimit -f`, in 512-byte blocks; `SIGXFSZ` ignored, so a write
    ///   past it fails with `EFBIG` as a full disk would). Root is held to it
    ///   too, unlike to permission bits.
    static func run(_ arguments: [String], environment: [String: String] = [:], fileSizeLimit: Int? = nil) throws -> Result {
        let process = Process()
        if let fileSizeLimit {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "trap '' XFSZ; ulimit -f \(fileSizeLimit / 512); exec \"$0\" \"$@\"", executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // stderr is read on another thread, so neither pipe can fill up and stall the child.
        let errorText = Mutex("")
        let errorsRead = Semaphore()
        Thread {
            let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            errorText.withLock { $0 = text }
            errorsRead.signal()
        }.start()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        errorsRead.wait()
        return Result(status: process.terminationStatus, lines: lines(in: data), stderr: errorText.withLock { $0 })
    }

    /// The complete lines of `data` that are JSON lines.
    static func lines(in data: Data) -> [Line] {
        String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap {
            try? JSONDecoder().decode(Line.self, from: Data($0.utf8))
        }
    }
}

/// The ticker example's schema, declared here so the test can open its store.
/// Everything a version hash covers must match the example's model, its
/// uniqueness constraint included.
enum TickerStoreModel {
    static func make() -> ManagedObjectModel {
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: "Company", properties: [
                AttributeDescription(name: "symbol", type: .string, isOptional: false),
                AttributeDescription(name: "name", type: .string, isOptional: false, defaultValue: .string("")),
                AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
                AttributeDescription(name: "previousClose", type: .double, isOptional: false, defaultValue: .double(0)),
                AttributeDescription(name: "lastUpdate", type: .date),
                AttributeDescription(name: "updateCount", type: .integer64, isOptional: false, defaultValue: .integer(0)),
                RelationshipDescription(name: "updates", destination: "StockUpdate", inverse: "company", isToMany: true, deleteRule: .cascade),
            ]),
            EntityDescription(name: "StockUpdate", properties: [
                AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
                AttributeDescription(name: "volume", type: .integer64, isOptional: false, defaultValue: .integer(0)),
                AttributeDescription(name: "time", type: .date, isOptional: false),
                RelationshipDescription(name: "company", destination: "Company", inverse: "updates"),
            ]),
        ])
        model.entitiesByName["Company"]?.uniquenessConstraints = [["symbol"]]
        return model
    }
}

/// What a ticker store holds, read with plain SQL.
struct TickerStoreContents {
    var integrity: [String]
    var stockUpdates: Int
    /// Companies whose `updateCount` differs from their number of stock updates:
    /// a save is one transaction, so after any crash there must be none.
    var companiesWithMismatchedCounters: Int

    init(_ url: URL) throws {
        let connection = try Connection(path: url.path)
        func integer(_ sql: String) throws -> Int {
            let statement = try connection.prepare(sql)
            _ = try statement.step()
            return Int(statement.int64(at: 0))
        }
        integrity = try connection.integrityCheck()
        stockUpdates = try integer("SELECT count(*) FROM ZSTOCKUPDATE")
        companiesWithMismatchedCounters = try integer("""
            SELECT count(*) FROM ZCOMPANY c
            WHERE c.ZUPDATECOUNT != (SELECT count(*) FROM ZSTOCKUPDATE u WHERE u.ZCOMPANY = c.Z_PK)
            """)
    }
}

/// A blocking wait for a callback, for tests that drive the callback API.
final class Semaphore: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    func signal() { semaphore.signal() }
    func wait() { semaphore.wait() }
}
