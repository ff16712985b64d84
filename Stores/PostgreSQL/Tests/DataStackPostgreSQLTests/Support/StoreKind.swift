import Testing
import DataStackPostgreSQL
import Foundation
import ObjectGraph

/// A store the contract suite runs against: the SQLite store in a temporary
/// file, or the PostgreSQL store in a fresh database of the test server.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite
    case postgreSQL

    var testDescription: String { rawValue }

    /// A new, empty location for a store of this kind.
    func makeLocation() throws -> URL {
        switch self {
        case .sqlite:
            let folder = Self.sqliteFolder.appendingPathComponent(UUID().uuidString)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            return folder.appendingPathComponent("store.sqlite")
        case .postgreSQL:
            return try PostgreSQLTestServer.shared.get().makeDatabase()
        }
    }

    /// The folder holding this test process's SQLite stores, removed when the
    /// process exits (a test's stores may outlive the test's own scope: its
    /// coordinator is released later).
    private static let sqliteFolder: URL = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("DataStackPGTests-\(UUID().uuidString)")
        atexit {
            // Nothing is left to report to at exit; a folder that cannot be
            // removed stays in the temporary directory.
            try? FileManager.default.removeItem(at: StoreKind.sqliteFolder)
        }
        return folder
    }()

    var storeType: StoreType {
        switch self {
        case .sqlite: .sqlite
        case .postgreSQL: PostgreSQLStore.storeType
        }
    }

    /// A coordinator with a store of this kind at `location`.
    func coordinator(_ model: ManagedObjectModel, at location: URL, options: StoreOptions = StoreOptions()) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: storeType, at: location, options: options)
        return coordinator
    }
}

