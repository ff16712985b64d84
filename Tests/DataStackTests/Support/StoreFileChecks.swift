@_spi(DataStackInternal) import DataStackSQLite
import Foundation
import DataStack

/// What a closed store's files hold, for the tests that close a stack.
enum StoreFileChecks {
    /// The rows of `table` in the store's main file alone, read from a copy
    /// of that one file: rows still in the `-wal` are not in it.
    static func rowsInMainFileAlone(of store: URL, table: String) throws -> Int {
        let copy = StackDirectory()
        let alone = copy.url.appendingPathComponent("alone.sqlite")
        try FileManager.default.copyItem(at: store, to: alone)
        let connection = try Connection(path: alone.path)
        let statement = try connection.prepare("SELECT count(*) FROM \(table)")
        _ = try statement.step()
        return Int(statement.int64(at: 0))
    }

    /// The size of the store's `-wal`; no `-wal` is an empty one.
    static func logSize(of store: URL) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: store.path + "-wal"))?[.size] as? Int) ?? 0
    }
}
