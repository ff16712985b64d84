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
    /// - Parameter url: an `.xcdatamodeld` folder (its current version), an
    ///   `.xcdatamodel` folder, or its `contents` file.
    /// - Throws: ``ModelLoadingError`` naming the file, the line and the problem.
    public convenience init(contentsOf url: URL) throws {
        let contents = try XcodeModelLoader.readContents(at: url)
        self.init(entities: contents.output.entities)
        versionIdentifiers = contents.output.versionIdentifiers
        configurations = contents.output.configurations
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
}
