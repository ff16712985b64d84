import Foundation

/// Loads compiled Core Data models: the `.mom` files `momc` writes, `.momd`
/// bundles of model versions, and the keyed archive of a model however it was
/// obtained (a store's `Z_MODELCACHE` is one; see
/// `ManagedObjectModel(cachedInStoreAt:)` (DataStackStores)).
///
/// ```swift
/// let loaded = try CompiledModelLoader.load(URL(fileURLWithPath: "App.app/Model.momd"))
/// for warning in loaded.warnings { print(warning) }   // …/Model 2.mom: root.NSEntities…: Book.related is a fetched property; …
/// let coordinator = PersistentStoreCoordinator(managedObjectModel: loaded.model)
/// ```
///
/// ``ManagedObjectModel/init(contentsOf:)`` takes these files too, for callers
/// that do not need the warnings.
///
/// A compiled model is an `NSKeyedArchiver` archive of `NSManagedObjectModel`
/// and its entity and property descriptions. The decoder reads what the model
/// holds — entities with their class names, inheritance, attributes (types,
/// defaults, optionality, validation), relationships (destinations, inverses,
/// cardinality, order, delete rules), uniqueness constraints, fetch indexes,
/// renaming identifiers, version hash modifiers, user info, configurations and
/// version identifiers — and warns, with the path in the archive, about what
/// it leaves out (fetched properties, fetch request templates, derived
/// attributes' expressions, keys it does not know). Problems that would make
/// the model wrong throw ``ModelLoadingError`` naming the entity and property.
public enum CompiledModelLoader {
    /// A loaded model with what the decoder noticed on the way.
    public struct LoadedModel: Sendable {
        /// The model, ready for a coordinator.
        public let model: ManagedObjectModel
        /// Everything read but not loaded, one line each: `file: archive path: what`.
        public let warnings: [String]
        /// The `.mom` file that was read (for a `.momd`: its current version's), or
        /// the store whose cached model was read.
        public let source: URL
    }

    /// Loads a `.mom` file, or the current version of a `.momd` bundle.
    ///
    /// - Parameter url: a `.mom` file or a `.momd` folder. The bundle's current
    ///   version is the one its `VersionInfo.plist` names
    ///   (`NSManagedObjectModel_CurrentVersionName`); without one, the bundle's
    ///   only `.mom`.
    /// - Throws: ``ModelLoadingError`` naming the file: `.unreadable`,
    ///   `.notAModel`, `.malformedArchive`, or a problem of the model itself.
    public static func load(_ url: URL) throws -> LoadedModel {
        try read(url).finished()
    }

    /// Every version of a `.momd` bundle by name (`"Model 2"` for `Model 2.mom`);
    /// a `.mom` file gives one entry.
    public static func versions(ofModelAt url: URL) throws -> [String: URL] {
        if url.pathExtension != "momd" { return [url.deletingPathExtension().lastPathComponent: url] }
        let files = try momFiles(in: url)
        return Dictionary(files.map { ($0.deletingPathExtension().lastPathComponent, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// Decodes the keyed archive of a compiled model.
    ///
    /// - Parameter source: where the archive came from, for messages and ``LoadedModel/source``.
    package static func decode(archive data: Data, from source: URL) throws -> LoadedModel {
        try read(archive: data, from: source).finished()
    }

    // MARK: - Reading

    /// A compiled model as read, before ``ManagedObjectModel/init(finishing:readFrom:)`` makes it a model.
    package struct Read {
        let definition: ModelDefinition
        let warnings: [String]
        let source: URL

        package func finished() throws -> LoadedModel {
            LoadedModel(model: try ManagedObjectModel(finishing: definition, readFrom: source.path), warnings: warnings, source: source)
        }
    }

    /// Reads the `.mom` file that loading `url` reads (see ``load(_:)``).
    static func read(_ url: URL) throws -> Read {
        let file = try momFile(for: url)
        return try read(archive: ModelDefinition.readFile(file), from: file)
    }

    /// Reads the keyed archive of a compiled model.
    package static func read(archive data: Data, from source: URL) throws -> Read {
        let archive: KeyedArchive
        do {
            archive = try KeyedArchive(data: data)
        } catch {
            throw ModelLoadingError(.malformedArchive, path: source.path, message: "the model is not a readable keyed archive: \(error)")
        }
        var decoder = CompiledModelDecoder(path: source.path)
        let definition = try decoder.decode(archive)
        return Read(definition: definition, warnings: decoder.warnings, source: source)
    }

    // MARK: - Finding the file

    /// The `.mom` file that loading `url` reads.
    private static func momFile(for url: URL) throws -> URL {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder) else {
            throw ModelLoadingError(.unreadable, path: url.path, message: "there is no file or folder here")
        }
        guard isFolder.boolValue else { return url }
        guard url.pathExtension == "momd" else {
            throw ModelLoadingError(.notAModel, path: url.path, message: "the folder is not a compiled model bundle (.momd)")
        }
        let files = try momFiles(in: url)
        let info = url.appendingPathComponent("VersionInfo.plist")
        if let current = try currentVersionName(in: info) {
            guard let file = files.first(where: { $0.deletingPathExtension().lastPathComponent == current }) else {
                throw ModelLoadingError(.danglingReference, path: info.path, message:
                    "the current version is \(current), but the bundle has no \(current).mom")
            }
            return file
        }
        guard files.count == 1, let only = files.first else {
            throw ModelLoadingError(.missingValue, path: url.path, message:
                "the bundle holds \(files.count) .mom files and no VersionInfo.plist naming the current one")
        }
        return only
    }

    /// The `.mom` files of a bundle, by name.
    private static func momFiles(in bundle: URL) throws -> [URL] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: bundle.path)
        } catch {
            throw ModelLoadingError(.unreadable, path: bundle.path, message: "the folder cannot be read: \(error.localizedDescription)")
        }
        return names.filter { $0.hasSuffix(".mom") }.sorted().map { bundle.appendingPathComponent($0) }
    }

    /// `NSManagedObjectModel_CurrentVersionName` from a bundle's `VersionInfo.plist`,
    /// or nil when the bundle has no such file.
    private static func currentVersionName(in info: URL) throws -> String? {
        guard FileManager.default.fileExists(atPath: info.path) else { return nil }
        let plist: Any
        do {
            plist = try PropertyListSerialization.propertyList(from: Data(contentsOf: info), options: [], format: nil)
        } catch {
            throw ModelLoadingError(.unreadable, path: info.path, message: "the file is not a readable property list: \(error.localizedDescription)")
        }
        guard let name = (plist as? [String: Any])?["NSManagedObjectModel_CurrentVersionName"] as? String else {
            throw ModelLoadingError(.missingValue, path: info.path, message: "the file names no current version (NSManagedObjectModel_CurrentVersionName)")
        }
        return name
    }
}

extension ManagedObjectModel {
    /// The model of a compiled archive as read, for a layer above that finds
    /// archives elsewhere (the SQLite store's `Z_MODELCACHE`).
    package convenience init(finishing read: CompiledModelLoader.Read) throws {
        try self.init(finishing: read.definition, readFrom: read.source.path)
    }
}
