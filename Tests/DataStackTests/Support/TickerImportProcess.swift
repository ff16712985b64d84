@_spi(DataStackInternal) import DataStackSQLite
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
        /// One sector of the market, as the line's grouped fetch computed it.
        struct Sector: Decodable {
            var sector: String?
            var companies: Int
            var updates: Int64
            var averagePrice: Double
        }
        var imported: Int
        var stockUpdates: Int
        var saved: Int
        var mergeMillis: Double
        var registeredInMain: Int
        var source: String?
        var author: String?
        var watchlist: [Entry]
        /// The watched companies the merge changed, as Observation reported them.
        var changed: [String]
        var sectors: [Sector]
        /// Stock updates deleted by `--keep-updates` so far, as merged.
        var trimmed: Int
        var final: Bool
        var error: String?
        var readError: String?
    }

    /// One `--import-only --json` line: a save that is on disk, or (`final`) the run's totals.
    struct SaveLine: Decodable {
        var saved: Int
        /// The save's own counts; nil on the final line.
        var inserted: Int?
        var updated: Int?
        var stockUpdates: Int
        var imported: Int
        /// When the save returned, in seconds since 1970.
        var savedAt: Double?
        /// Old updates the trim after this save deleted; nil without `--keep-updates`.
        var trimmed: Int?
        var final: Bool
        var error: String?
    }

    struct Result {
        var status: Int32
        var lines: [Line]
        var stdout: String
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
        return Result(status: process.terminationStatus, lines: lines(in: data, as: Line.self), stdout: String(decoding: data, as: UTF8.self),
                      stderr: errorText.withLock { $0 })
    }

    /// The complete lines of `data` that decode as `type`.
    static func lines<Line: Decodable>(in data: Data, as type: Line.Type) -> [Line] {
        String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap {
            try? JSONDecoder().decode(type, from: Data($0.utf8))
        }
    }
}

/// The ticker example's model, loaded from the `.xcdatamodeld` it ships, so
/// the tests open its store with exactly the versions the example has.
enum TickerStoreModel {
    /// `Examples/TickerImport/Kit/Resources/TickerModel.xcdatamodeld`.
    static let bundleURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Examples/TickerImport/Kit/Resources/TickerModel.xcdatamodeld")

    /// The current version.
    static func make() throws -> ManagedObjectModel {
        try ManagedObjectModel(contentsOf: bundleURL)
    }

    /// One version by name: "TickerModel" (the first) or "TickerModel 2".
    static func version(_ name: String) throws -> ManagedObjectModel {
        guard let url = try ManagedObjectModel.versions(ofModelAt: bundleURL)[name] else {
            throw StackError(.modelNotFound, message: "TickerModel.xcdatamodeld has no version \(name)")
        }
        return try ManagedObjectModel(contentsOf: url)
    }
}

/// What a ticker store holds, read with plain SQL.
struct TickerStoreContents {
    /// One company as its row has it.
    struct CompanyRow: Equatable, CustomStringConvertible {
        var symbol: String
        var price: Double
        var updateCount: Int64
        var description: String { "\(symbol) \(price) ×\(updateCount)" }
    }

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

    /// The `limit` companies with the most updates, ties by symbol: the ticker example's top movers.
    static func mostUpdatedCompanies(in url: URL, limit: Int) throws -> [CompanyRow] {
        let connection = try Connection(path: url.path)
        let statement = try connection.prepare("SELECT ZSYMBOL, ZPRICE, ZUPDATECOUNT FROM ZCOMPANY ORDER BY ZUPDATECOUNT DESC, ZSYMBOL LIMIT \(limit)")
        var rows: [CompanyRow] = []
        while try statement.step() {
            rows.append(CompanyRow(symbol: statement.string(at: 0) ?? "", price: statement.double(at: 1), updateCount: statement.int64(at: 2)))
        }
        return rows
    }
}

/// A blocking wait for a callback, for tests that drive the callback API.
final class Semaphore: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    func signal() { semaphore.signal() }
    func wait() { semaphore.wait() }
}
