import Foundation
import DataStack

/// Where the model a store is opened with came from.
enum ModelSource {
    /// `--model PATH`.
    case file(URL)
    /// The model the store keeps in `Z_MODELCACHE`.
    case cached
    /// Inferred from the store's schema (``ManagedObjectModel/init(inferredFromSchemaOfStoreAt:)``).
    case inferred

    var description: String {
        switch self {
        case .file(let url): "from \(url.path)"
        case .cached: "cached in the store (Z_MODELCACHE)"
        case .inferred: "inferred from the store's schema"
        }
    }

    /// The model file, for `--model`.
    var path: String? {
        if case .file(let url) = self { return url.path }
        return nil
    }

    /// `file`, `cached` or `inferred`, for JSON.
    var kind: String {
        switch self {
        case .file: "file"
        case .cached: "cached"
        case .inferred: "inferred"
        }
    }
}

/// A store opened read-only for inspect, dump and history.
struct OpenedStore {
    let url: URL
    let model: ManagedObjectModel
    let source: ModelSource
    let coordinator: PersistentStoreCoordinator
    let store: any PersistentStore

    /// Opens the store at `url` read-only (``StoreOptions/isReadOnly``): nothing
    /// is written to the file, and nothing is copied.
    ///
    /// - Parameter tracksHistory: whether to open it with persistent history
    ///   tracking, so its history can be read; read-only, the history tables
    ///   are never added to a store that lacks them.
    init(_ url: URL, modelPath: String?, tracksHistory: Bool = false) throws {
        let (model, source) = try loadModel(for: url, modelPath: modelPath)
        var options = StoreOptions()
        options.isReadOnly = true
        options.persistentHistoryTracking = tracksHistory
        // Rows are read once, a page at a time: a cache of one page keeps memory flat.
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model, rowCacheCapacity: ObjectPager.pageSize)
        store = try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        self.url = url
        self.model = model
        self.source = source
        self.coordinator = coordinator
    }

    /// A context on its own queue, for reading.
    func makeContext() -> ManagedObjectContext {
        ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
    }
}

/// The model to open the store at `file` with: the one at `modelPath` if
/// given; otherwise the model the store caches; otherwise the model inferred
/// from its schema, which reads every column but guesses some names (see
/// ``ManagedObjectModel/init(inferredFromSchemaOfStoreAt:)``).
///
/// - Throws: ``ModelLoadingError`` for a model file that does not load,
///   ``PersistentStoreError`` for a store whose schema cannot be read.
func loadModel(for file: URL, modelPath: String?) throws -> (ManagedObjectModel, ModelSource) {
    if let modelPath {
        let url = URL(fileURLWithPath: modelPath)
        return (try ManagedObjectModel(contentsOf: url), .file(url))
    }
    do {
        return (try ManagedObjectModel(cachedInStoreAt: file), .cached)
    } catch let error as ModelLoadingError where error.code == .notAModel {
        // No cache (Core Data before 2012, or this package before it wrote one). A damaged
        // cache is not this case: it is reported, since guessing would hide it.
        return (try ManagedObjectModel(inferredFromSchemaOfStoreAt: file), .inferred)
    }
}

/// The store file named on the command line, as an absolute file URL.
func storeURL(_ path: String) -> URL {
    URL(fileURLWithPath: path).standardizedFileURL
}
