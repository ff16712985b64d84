import Foundation

// MARK: - Loading Xcode models

extension ManagedObjectModel {
    /// Loads a model that Xcode's model editor wrote (Core Data:
    /// `NSManagedObjectModel(contentsOf:)`, which takes the compiled `.mom`; on Linux
    /// there is no `momc`, so the source is read instead).
    ///
    /// ```swift
    /// let url = URL(fileURLWithPath: "Model.xcdatamodeld")
    /// let current = try ManagedObjectModel(contentsOf: url)
    /// if let first = try ManagedObjectModel.versions(ofModelAt: url)["Model"] {
    ///     let v1 = try ManagedObjectModel(contentsOf: first)   // to open a store written with version 1
    /// }
    /// ```
    ///
    /// Entities get ``ManagedObject`` as their class and the file's
    /// `representedClassName` as ``EntityDescription/managedObjectClassName``; bind
    /// your own subclasses by setting ``EntityDescription/managedObjectClass``
    /// before the model is used.
    ///
    /// ``versionIdentifiers`` holds the file's `userDefinedModelVersionIdentifier`,
    /// or nothing when it is empty. ``configurations`` maps each configuration to
    /// its member entities.
    ///
    /// What the model cannot hold (fetched properties, unknown XML) is skipped;
    /// call ``XcodeModelLoader/load(_:)`` to see those warnings.
    ///
    /// Compiled models load too: a `.mom` file or a `.momd` bundle (its current
    /// version), as an app ships them; ``CompiledModelLoader`` says more.
    ///
    /// Xcode 3 models, whose versions hold only a binary `elements` file, load
    /// too.
    ///
    /// - Parameter url: an `.xcdatamodeld` folder (its current version), an
    ///   `.xcdatamodel` folder, or its `contents` (or Xcode 3 `elements`) file;
    ///   or a `.mom` or `.momd`.
    /// - Throws: ``ModelLoadingError`` naming the file, the line and the problem.
    public convenience init(contentsOf url: URL) throws {
        if url.pathExtension == "mom" || url.pathExtension == "momd" {
            let read = try CompiledModelLoader.read(url)
            try self.init(finishing: read.definition, readFrom: read.source.path)
            return
        }
        let contents = try XcodeModelLoader.readContents(at: url)
        try self.init(finishing: contents.definition, readFrom: contents.file.path)
    }

    /// Every version of an `.xcdatamodeld` by name (`"Model 2"` for
    /// `Model 2.xcdatamodel`), so any version can be loaded with
    /// ``init(contentsOf:)``, for example to open an older store.
    ///
    /// A single `.xcdatamodel` or `contents` file gives one entry.
    ///
    /// - Throws: ``ModelLoadingError`` when `url` is missing or not a model.
    public static func versions(ofModelAt url: URL) throws -> [String: URL] {
        try XcodeModelLoader.versions(ofModelAt: url)
    }

    /// Every version of an `.xcdatamodeld`, loaded, oldest first: the list a
    /// ``StagedMigrationManager`` is built from.
    ///
    /// ```swift
    /// let url = Bundle.module.url(forResource: "Model", withExtension: "xcdatamodeld")!
    /// let v = try ManagedObjectModel.versions(in: url)   // [Model, Model 2, Model 3]
    /// let manager = StagedMigrationManager(stages: [
    ///     .lightweight([v[0], v[1]]),
    ///     .custom(from: v[1], to: v[2], didMigrate: { context in /* fill in the new values */ }),
    /// ])
    /// ```
    ///
    /// Xcode records no order between versions, only which one is current, so
    /// the order is the versions' names compared numerically, as Xcode names
    /// new versions: "Model" before "Model 2" before "Model 10"
    /// (`String.compare(_:options: .numeric)` on the folder name without
    /// `.xcdatamodel`). A model whose version names do not sort this way (for
    /// example "Model v1.9" after "Model v1.10") must be put in order by the
    /// caller, from ``versions(ofModelAt:)``.
    ///
    /// A single `.xcdatamodel` or `contents` file gives one model.
    ///
    /// - Throws: ``ModelLoadingError`` naming the version that does not load.
    /// - Complexity: every version is read and parsed.
    public static func versions(in url: URL) throws -> [ManagedObjectModel] {
        try XcodeModelLocation.orderedVersions(ofModelAt: url).map { try ManagedObjectModel(contentsOf: $0.url) }
    }
}
