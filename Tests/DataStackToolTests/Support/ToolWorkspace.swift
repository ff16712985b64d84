@_spi(DataStackInternal) import DataStackSQLite
import Foundation
import DataStack

/// A temporary folder for copies of fixture stores and files a test writes;
/// removed on deinit.
///
/// Fixture stores are read-only and some keep their rows only in the `-wal`:
/// tests run the tool on copies made with ``copyStore(_:)``, never in place.
final class ToolWorkspace {
    let url: URL

    /// The fixture corpus, `../shared/fixtures/coredata` beside the package.
    static let fixtures: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()   // Support
        .deletingLastPathComponent()   // DataStackToolTests
        .deletingLastPathComponent()   // Tests
        .deletingLastPathComponent()   // the package root
        .appendingPathComponent("../shared/fixtures/coredata")
        .standardizedFileURL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("DataStackTool-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    /// Copies a fixture store with its `-wal` and `-shm` and returns the copy.
    func copyStore(_ relativePath: String) throws -> URL {
        let source = Self.fixtures.appendingPathComponent(relativePath)
        let target = url.appendingPathComponent(source.lastPathComponent)
        for suffix in ["", "-wal", "-shm"] {
            let from = URL(fileURLWithPath: source.path + suffix)
            guard FileManager.default.fileExists(atPath: from.path) else { continue }
            let to = URL(fileURLWithPath: target.path + suffix)
            try FileManager.default.copyItem(at: from, to: to)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: to.path)
        }
        return target
    }

    /// Writes a file into the workspace (creating folders) and returns its URL.
    @discardableResult
    func write(_ text: String, to relativePath: String) throws -> URL {
        let file = url.appendingPathComponent(relativePath)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: file)
        return file
    }
}

/// Reads a store file directly with SQLite, read-only: the reference the tool's output is checked against.
struct RawSQL {
    let connection: Connection

    init(_ url: URL) throws {
        var configuration = Connection.Configuration()
        configuration.isReadOnly = true
        configuration.createsIfMissing = false
        connection = try Connection(path: url.path, configuration: configuration)
    }

    /// The first column of every row, as text (nil for NULL).
    func column(_ sql: String) throws -> [String?] {
        let statement = try connection.prepare(sql)
        var values: [String?] = []
        while try statement.step() { values.append(statement.isNull(at: 0) ? nil : statement.string(at: 0)) }
        return values
    }

    /// The first column of the first row as bytes.
    func blob(_ sql: String) throws -> Data? {
        let statement = try connection.prepare(sql)
        return try statement.step() ? statement.data(at: 0) : nil
    }

    /// The first column of the first row as an integer.
    func integer(_ sql: String) throws -> Int {
        let statement = try connection.prepare(sql)
        guard try statement.step() else { return 0 }
        return Int(statement.int64(at: 0))
    }

    /// The `Z_ENT` of each entity of `Z_PRIMARYKEY`, by name.
    func entityNumbers() throws -> [String: Int] {
        let statement = try connection.prepare("SELECT Z_ENT, Z_NAME FROM Z_PRIMARYKEY")
        var numbers: [String: Int] = [:]
        while try statement.step() { numbers[statement.string(at: 1) ?? ""] = Int(statement.int64(at: 0)) }
        return numbers
    }

    /// How many rows of exactly this entity the root's table holds.
    func count(entity: String, root: String) throws -> Int {
        let number = try entityNumbers()[entity] ?? -1
        return try integer("SELECT count(*) FROM Z\(root.uppercased()) WHERE Z_ENT = \(number)")
    }
}
