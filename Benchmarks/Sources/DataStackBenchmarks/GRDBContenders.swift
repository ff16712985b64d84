import Foundation
import GRDB

/// A GRDB record that leaves encoding and decoding to `Codable`.
struct CodableTicker: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "ticker"
    var id: Int64?
    var symbol: String
    var name: String
    var price: Double
    var volume: Int64
    var time: Date

    /// Dates as seconds since 2001, as Core Data and the other contenders store them.
    static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy { .timeIntervalSinceReferenceDate }
    static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy { .timeIntervalSinceReferenceDate }

    init(_ values: TickerValues) {
        symbol = values.symbol
        name = values.name
        price = values.price
        volume = values.volume
        time = values.time
    }
}

/// A GRDB record with hand-written `init(row:)` and `encode(to:)`, reading columns by
/// position (the default selection, `*`, is the table's column order).
struct HandWrittenTicker: FetchableRecord, PersistableRecord {
    static let databaseTableName = "ticker"
    var id: Int64?
    var symbol: String
    var name: String
    var price: Double
    var volume: Int64
    var time: Date

    init(_ values: TickerValues) {
        symbol = values.symbol
        name = values.name
        price = values.price
        volume = values.volume
        time = values.time
    }

    init(row: Row) throws {
        id = row[0]
        symbol = row[1]
        name = row[2]
        price = row[3]
        volume = row[4]
        time = Date(timeIntervalSinceReferenceDate: row[5])
    }

    func encode(to container: inout PersistenceContainer) throws {
        container["id"] = id
        container["symbol"] = symbol
        container["name"] = name
        container["price"] = price
        container["volume"] = volume
        container["time"] = time.timeIntervalSinceReferenceDate
    }
}

/// GRDB on a `DatabaseQueue`, WAL mode and `synchronous=NORMAL` like the others.
enum GRDBBench {
    enum Record: String, CaseIterable, Sendable {
        case codable = "GRDB Codable"
        case handWritten = "GRDB hand-written"
    }

    static func open(_ path: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode=WAL")
            try db.execute(sql: "PRAGMA synchronous=NORMAL")
        }
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.write { db in try db.execute(sql: "CREATE TABLE IF NOT EXISTS " + RawSQLite.schema.dropFirst("CREATE TABLE ".count)) }
        return queue
    }

    /// Inserts the rows, one transaction per chunk, with the record's `insert(_:)`.
    static func insert(_ rows: [TickerValues], chunkSize: Int, as record: Record, into queue: DatabaseQueue) throws {
        for start in stride(from: 0, to: rows.count, by: chunkSize) {
            let chunk = rows[start..<min(start + chunkSize, rows.count)]
            try queue.write { db in
                switch record {
                case .codable: for row in chunk { try CodableTicker(row).insert(db) }
                case .handWritten: for row in chunk { try HandWrittenTicker(row).insert(db) }
                }
            }
        }
    }

    /// Every record, fully decoded, with every property read.
    static func fetchAll(as record: Record, from queue: DatabaseQueue) throws -> Checksum {
        try queue.read { db in
            var checksum = Checksum()
            switch record {
            case .codable:
                for ticker in try CodableTicker.fetchAll(db) {
                    checksum.add(symbol: ticker.symbol, name: ticker.name, price: ticker.price, volume: ticker.volume, time: ticker.time)
                }
            case .handWritten:
                for ticker in try HandWrittenTicker.fetchAll(db) {
                    checksum.add(symbol: ticker.symbol, name: ticker.name, price: ticker.price, volume: ticker.volume, time: ticker.time)
                }
            }
            return checksum
        }
    }

    /// The faulting pattern with GRDB: every ID, then every `stride`-th record by primary key.
    static func fetchIDsThenRecords(every stride: Int, as record: Record, from queue: DatabaseQueue) throws -> Checksum {
        try queue.read { db in
            let ids = try Int64.fetchAll(db, sql: "SELECT id FROM ticker")
            var checksum = Checksum()
            for index in Swift.stride(from: 0, to: ids.count, by: stride) {
                switch record {
                case .codable:
                    guard let ticker = try CodableTicker.fetchOne(db, key: ids[index]) else { throw BenchError("GRDB: row \(ids[index]) missing") }
                    checksum.add(symbol: ticker.symbol, name: ticker.name, price: ticker.price, volume: ticker.volume, time: ticker.time)
                case .handWritten:
                    guard let ticker = try HandWrittenTicker.fetchOne(db, key: ids[index]) else { throw BenchError("GRDB: row \(ids[index]) missing") }
                    checksum.add(symbol: ticker.symbol, name: ticker.name, price: ticker.price, volume: ticker.volume, time: ticker.time)
                }
            }
            return checksum
        }
    }

    /// The faulting pattern from fetched rows, the like of a DataStack fault fetch
    /// that decodes every row into its row cache: every hand-written record, then
    /// every `stride`-th one of them read (no second query).
    static func fetchRecordsThenRead(every stride: Int, from queue: DatabaseQueue) throws -> Checksum {
        try queue.read { db in
            let tickers = try HandWrittenTicker.fetchAll(db)
            var checksum = Checksum()
            for index in Swift.stride(from: 0, to: tickers.count, by: stride) {
                let ticker = tickers[index]
                checksum.add(symbol: ticker.symbol, name: ticker.name, price: ticker.price, volume: ticker.volume, time: ticker.time)
            }
            return checksum
        }
    }
}
