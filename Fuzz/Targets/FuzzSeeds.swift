import Foundation
import ObjectGraph
@_spi(DataStackInternal) import DataStackSQLite

/// Reads the starting inputs of the fuzz targets out of the real Core Data
/// files in `../shared/fixtures/coredata`: Xcode model `contents` files,
/// Xcode 3 `elements` files, and the model caches and metadata that Apple's
/// Core Data wrote into its stores.
public struct FuzzSeeds: Sendable {
    /// A fixture that could not be read.
    public struct Failure: Error, CustomStringConvertible {
        /// What failed, and the file.
        public let description: String
    }

    /// The fixtures folder.
    public let fixtures: URL

    /// Every file under the fixtures folder whose name is `name`, by path.
    func files(named name: String) throws -> [URL] {
        try allFiles().filter { $0.lastPathComponent == name }
    }

    /// The contents of every file named `name`.
    func contents(ofFilesNamed name: String) throws -> [Data] {
        try files(named: name).map(read)
    }

    /// One BLOB column of every SQLite store among the fixtures (`select` must
    /// return one column), from a copy of the store with its `-wal` and `-shm`,
    /// as the fixtures' README asks. A store without the table gives nothing.
    func blobs(_ select: String, ifTableExists table: String) throws -> [Data] {
        let scratch = FileManager.default.temporaryDirectory
            .appendingPathComponent("datastack-fuzz-seeds-\(UUID().uuidString)")
        defer {
            // Removing the scratch copy can only fail if it is already gone.
            try? FileManager.default.removeItem(at: scratch)
        }
        var blobs: [Data] = []
        for store in try allFiles() where try isSQLiteFile(store) {
            try? FileManager.default.removeItem(at: scratch)  // a fresh copy per store; absent the first time
            do {
                try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
                let copy = scratch.appendingPathComponent(store.lastPathComponent)
                for suffix in ["", "-wal", "-shm"] {
                    let side = URL(fileURLWithPath: store.path + suffix)
                    if FileManager.default.fileExists(atPath: side.path) {
                        try FileManager.default.copyItem(at: side, to: URL(fileURLWithPath: copy.path + suffix))
                    }
                }
                let connection = try Connection(path: copy.path)
                guard try connection.tableExists(table) else { continue }
                let statement = try connection.prepare(select)
                while try statement.step() {
                    if let blob = statement.data(at: 0), !blob.isEmpty { blobs.append(blob) }
                }
            } catch {
                throw Failure(description: "\(store.path): \(error)")
            }
        }
        return blobs
    }

    private func allFiles() throws -> [URL] {
        guard let walker = FileManager.default.enumerator(at: fixtures, includingPropertiesForKeys: [.isRegularFileKey]) else {
            throw Failure(description: "\(fixtures.path): the fixtures folder cannot be read")
        }
        var files: [URL] = []
        for case let url as URL in walker where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
            files.append(url)
        }
        guard !files.isEmpty else { throw Failure(description: "\(fixtures.path): no fixtures here") }
        return files.sorted { $0.path < $1.path }
    }

    private func read(_ url: URL) throws -> Data {
        do {
            return try Data(contentsOf: url)
        } catch {
            throw Failure(description: "\(url.path): \(error.localizedDescription)")
        }
    }

    private func isSQLiteFile(_ url: URL) throws -> Bool {
        guard !url.path.hasSuffix("-wal"), !url.path.hasSuffix("-shm") else { return false }
        let header = Data("SQLite format 3\0".utf8)
        guard let handle = FileHandle(forReadingAtPath: url.path) else { return false }
        defer { try? handle.close() }  // a read-only handle: closing cannot lose data
        return try handle.read(upToCount: header.count) == header
    }
}
