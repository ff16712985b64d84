import Foundation
import Testing

/// The corpus of real Core Data files in `../shared/fixtures/coredata` (relative to
/// the package root), found from this file's path so tests run from any directory.
///
/// Fixture files are read-only and some stores keep their data only in the `-wal`:
/// tests copy a store with ``copyStore(_:)`` before opening it, never open it in place.
enum CoreDataFixtures {
    /// `manifest.json`: which model version wrote which store, and every model file.
    struct Manifest: Decodable, Sendable {
        struct Pair: Decodable, Sendable, CustomTestStringConvertible {
            let store: String
            let model: String
            var testDescription: String { store }
        }
        let pairs: [Pair]
        let xmlModels: [String]
        let legacyBinaryModels: [String]
        let storesWithoutXMLModel: [String]
    }

    /// The fixture folder.
    static let root: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()   // Support
        .deletingLastPathComponent()   // ObjectGraphTests
        .deletingLastPathComponent()   // Tests
        .deletingLastPathComponent()   // the package root
        .appendingPathComponent("../shared/fixtures/coredata")
        .standardizedFileURL

    /// The manifest, or nil when the corpus is missing (then `manifestLoads` fails).
    static let manifest: Manifest? = {
        guard let data = try? Data(contentsOf: root.appendingPathComponent("manifest.json")) else { return nil }
        return try? JSONDecoder().decode(Manifest.self, from: data)
    }()

    static var pairs: [Manifest.Pair] { manifest?.pairs ?? [] }
    static var xmlModels: [String] { manifest?.xmlModels ?? [] }
    static var legacyBinaryModels: [String] { manifest?.legacyBinaryModels ?? [] }

    /// A path of the corpus as a URL.
    static func url(_ relativePath: String) -> URL {
        root.appendingPathComponent(relativePath)
    }

    /// Every `.xcdatamodeld` folder that holds one of the manifest's models.
    static var versionedModels: [String] {
        let all = (xmlModels + legacyBinaryModels).compactMap { path -> String? in
            let parent = (path as NSString).deletingLastPathComponent
            return parent.hasSuffix(".xcdatamodeld") ? parent : nil
        }
        return Array(Set(all)).sorted()
    }
}

/// Lets `Manifest.Pair` read as its store path in test names, without importing
/// Testing into this support file.
protocol CustomTestStringConvertible {
    var testDescription: String { get }
}

/// A temporary folder holding copies of fixture files; removed on deinit.
final class FixtureWorkspace {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("CoreDataFixture-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    /// Copies a store with its `-wal` and `-shm` (when the corpus has them) and
    /// returns the copy's URL. The copies are made writable.
    func copyStore(_ relativePath: String) throws -> URL {
        let source = CoreDataFixtures.url(relativePath)
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

    /// Copies a store as a process that stopped before a checkpoint leaves it:
    /// its rows in a non-empty `-wal` beside a main file that lacks them.
    ///
    /// The corpus may ship a store's log or may have folded it into the main
    /// file; either way the copy has one. The log is made by vacuuming a staging
    /// copy in WAL mode with checkpoints off, which writes every page to the log,
    /// and copying both files while that connection is still open.
    func copyStoreWithItsRowsInTheLog(_ relativePath: String) throws -> URL {
        let target = url.appendingPathComponent(CoreDataFixtures.url(relativePath).lastPathComponent)
        let staging = try FixtureWorkspace()
        let source = try staging.copyStore(relativePath)
        let log = URL(fileURLWithPath: source.path + "-wal")
        if let size = try? FileManager.default.attributesOfItem(atPath: log.path)[.size] as? Int, size > 0 {
            return try copyStore(relativePath)
        }
        let connection = try RawStore.open(source)
        try connection.execute("PRAGMA wal_autocheckpoint = 0; VACUUM")
        for suffix in ["", "-wal"] {
            try FileManager.default.copyItem(at: URL(fileURLWithPath: source.path + suffix), to: URL(fileURLWithPath: target.path + suffix))
        }
        withExtendedLifetime(connection) {}
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
