import Foundation
import DataStack

/// `datastack migrate FILE --model PATH`: migrates the store in place to the
/// model at PATH with a lightweight migration (the store's own migration:
/// the mapping is inferred first, then a copy is migrated in one transaction
/// and renamed over the file, so a failure leaves the store as it was).
///
/// Progress goes to standard error: a bar redrawn in place when it is a
/// terminal, otherwise a line per step (see ``ProgressReporter``).
struct MigrateCommand: ToolCommand {
    let file: URL
    let modelPath: String

    init(_ arguments: [String]) throws {
        let parsed = try Arguments(arguments, flags: [], options: ["--model"])
        file = storeURL(try parsed.file())
        guard let modelPath = parsed.values["--model"] else {
            throw ToolError.usage("migrate needs --model PATH, the model to migrate the store to")
        }
        self.modelPath = modelPath
    }

    func run() throws {
        guard FileManager.default.fileExists(atPath: file.path) else {
            throw ToolError(.noInput, "\(file.path): no store file exists at this location")
        }
        let model = try ManagedObjectModel(contentsOf: URL(fileURLWithPath: modelPath))
        let reporter = ProgressReporter(drawsBar: Output.standardErrorIsTerminal)
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        options.migrationProgress = { reporter.report($0) }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store: any PersistentStore
        do {
            defer { reporter.finish() }
            store = try coordinator.addPersistentStore(type: .sqlite, at: file, options: options)
        }
        try coordinator.remove(store)
        Output.standard.write(reporter.hasReported
            ? "migrated \(file.path) to \(modelPath)"
            : "\(file.path) already fits \(modelPath); nothing to migrate")
    }
}
