import Foundation
import DataStack

/// `datastack reindex FILE [--model PATH]`: builds the store's full-text
/// indexes anew from its rows, for the attributes the model marks for search
/// (``PropertyDescription/isIndexedBySpotlight``), in one transaction.
///
/// It creates them for a store that has none (one written by Apple's Core
/// Data, or before the model marked the attributes) and repairs them after a
/// program wrote the file without their triggers. The model is the one given,
/// or the one the store caches; a model inferred from the schema marks
/// nothing, so a store without a cache needs `--model`.
struct ReindexCommand: ToolCommand {
    let file: URL
    let modelPath: String?

    init(_ arguments: [String]) throws {
        let parsed = try Arguments(arguments, flags: [], options: ["--model"])
        file = storeURL(try parsed.file())
        modelPath = parsed.values["--model"]
    }

    func run() throws {
        guard FileManager.default.fileExists(atPath: file.path) else {
            throw ToolError(.noInput, "\(file.path): no store file exists at this location")
        }
        let (model, source) = try loadModel(for: file, modelPath: modelPath)
        // Each attribute once, under the entity that declares it.
        let indexed = model.entities.flatMap { entity in
            entity.searchIndexedAttributes.filter { $0.entity === entity }.map { "\(entity.name).\($0.name)" }
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: .sqlite, at: file)
        defer { try? coordinator.remove(store) }   // closing only; the rebuild has committed or thrown
        guard let sqlite = store as? SQLiteStore else {
            throw ToolError(.internalError, "\(file.path): not a SQLite store")
        }
        try sqlite.rebuildSearchIndex()
        Output.standard.write(indexed.isEmpty
            ? "the model (\(source.description)) marks no String attribute for search; \(file.path) has no search index now"
            : "rebuilt the search index of \(file.path): \(indexed.joined(separator: ", "))")
    }
}
