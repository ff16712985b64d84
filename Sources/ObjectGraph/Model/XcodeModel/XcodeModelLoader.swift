import Foundation

/// Loads the model source that Xcode's model editor writes (`.xcdatamodeld`,
/// `.xcdatamodel`, or the `contents` XML inside), and says what it left out.
///
/// ```swift
/// let loaded = try XcodeModelLoader.load(URL(fileURLWithPath: "Resources/Model.xcdatamodeld"))
/// for warning in loaded.warnings { print(warning) }   // …/contents:14: Item.total is derived (…); it loads as a plain attribute …
/// let coordinator = PersistentStoreCoordinator(managedObjectModel: loaded.model)
/// ```
///
/// ``ManagedObjectModel/init(contentsOf:)`` is the short form for callers that do
/// not need the warnings. Core Data compiles the source with `momc` at build time;
/// on Linux there is no `momc`, so the source is read at run time instead. The
/// result is the same model: entities with their attributes, relationships,
/// inheritance, uniqueness constraints, fetch indexes and user info, the
/// configurations, and the version identifier.
///
/// ## What is reported rather than loaded
/// - Fetched properties and fetch request templates: listed in
///   ``LoadedModel/fetchRequestTemplates``, not part of the model.
/// - Editor layout (`<elements>`), code-generation settings (`codeGenerationType`,
///   `usesScalarValueType`, `customClassName`): ignored without a warning, as
///   `momc` ignores them too.
/// - Anything the loader does not know: a warning naming the element or XML
///   attribute and its line, never a silent guess.
///
/// ## Xcode 3 models
/// A version saved by Xcode 3 has no `contents`, only a binary `elements`
/// file (a keyed archive of the model editor's objects). It loads the same
/// way, through `LegacyModelDecoder`; its warnings name the path of the
/// object in the archive instead of a line, and fetch requests are warned
/// about rather than listed in ``LoadedModel/fetchRequestTemplates``.
///
/// Problems that would make the model wrong throw ``ModelLoadingError``: see
/// its ``ModelLoadingError/Code`` values.
///
/// ## Topics
/// - ``load(_:)``
/// - ``versions(ofModelAt:)``
/// - ``currentVersion(ofModelAt:)``
public enum XcodeModelLoader {
    /// The largest model file DataStack reads (a `contents` or `elements`
    /// file here, a `.mom` in ``CompiledModelLoader``): 64 MiB.
    ///
    /// A larger file is refused with ``ModelLoadingError/Code-swift.struct/unreadable``
    /// before it is read into memory. The largest model of the fixture corpus
    /// is 12 KB, and Xcode writes about 150 bytes per attribute, so the limit
    /// holds models hundreds of times larger than any real one; FoundationXML
    /// cannot take 2 GiB or more at all (it traps converting the length to `Int32`).
    public static let maximumFileSize = 64 << 20
    /// A loaded model with what the loader noticed on the way.
    public struct LoadedModel: Sendable {
        /// The model, ready for a coordinator.
        public let model: ManagedObjectModel
        /// Everything read but not loaded, one line each, starting `path:line:`.
        public let warnings: [String]
        /// The model's fetch request templates and the requests of its fetched
        /// properties, which the model does not hold.
        public let fetchRequestTemplates: [FetchRequestTemplate]
        /// The `contents` file that was read (for a versioned model: the current
        /// version's); for an Xcode 3 model, its `elements` file.
        public let contentsURL: URL
    }

    /// A `<fetchRequest>` from the model file, kept as written.
    public struct FetchRequestTemplate: Sendable, Hashable {
        /// The template's name.
        public let name: String
        /// The entity it fetches.
        public let entityName: String
        /// The predicate in `NSPredicate` format, if it has one.
        public let predicateFormat: String?
        /// `Entity.property` when this is the request of a fetched property; nil for
        /// a model-level template.
        public let fetchedPropertyOwner: String?
        /// Every XML attribute of the element (fetch limit, result type, …).
        public let attributes: [String: String]
        /// The line of the element in the `contents` file.
        public let line: Int
    }

    /// Loads a model and collects warnings about what it could not represent.
    ///
    /// - Parameter url: an `.xcdatamodeld` folder (its current version, named by
    ///   `.xccurrentversion`; without it the only or the last version by name), an
    ///   `.xcdatamodel` folder, or its `contents` file.
    /// - Throws: ``ModelLoadingError`` with the file, line and what is wrong.
    /// - Complexity: O(size of the file).
    public static func load(_ url: URL) throws -> LoadedModel {
        let contents = try readContents(at: url)
        let model = try ManagedObjectModel(finishing: contents.definition, readFrom: contents.file.path)
        return LoadedModel(model: model, warnings: contents.warnings,
                           fetchRequestTemplates: contents.fetchRequestTemplates, contentsURL: contents.file)
    }

    /// Every version of a versioned model by name ("Model 2" for `Model 2.xcdatamodel`),
    /// each loadable with ``load(_:)`` or ``ManagedObjectModel/init(contentsOf:)``.
    /// A single `.xcdatamodel` or `contents` file gives one entry.
    ///
    /// Versions that are Xcode 3 models (an `elements` file only) are listed too.
    public static func versions(ofModelAt url: URL) throws -> [String: URL] {
        try XcodeModelLocation.versions(ofModelAt: url)
    }

    /// The version folder that loading `url` reads: for an `.xcdatamodeld` the one
    /// `.xccurrentversion` names (or the only, or the last by name); otherwise `url`.
    public static func currentVersion(ofModelAt url: URL) throws -> URL {
        switch XcodeModelLocation.kind(of: url) {
        case .package: return try XcodeModelLocation.currentVersion(ofPackage: url).version
        case .missing: throw ModelLoadingError(.unreadable, path: url.path, message: "there is no file or folder here")
        default: return url
        }
    }

    // MARK: - Reading

    struct Contents {
        let file: URL
        let definition: ModelDefinition
        let warnings: [String]
        let fetchRequestTemplates: [FetchRequestTemplate]
    }

    /// Finds, reads, parses and maps the `contents` file for `url`, or the
    /// `elements` file of an Xcode 3 model (``LegacyModelDecoder``).
    static func readContents(at url: URL) throws -> Contents {
        let (file, locationWarnings) = try XcodeModelLocation.contentsFile(for: url)
        let path = file.path
        let data = try ModelDefinition.readFile(file)
        if file.lastPathComponent == XcodeModelLocation.legacyFile || data.starts(with: Array("bplist".utf8)) {
            var decoder = LegacyModelDecoder(path: path)
            let definition = try decoder.decode(data)
            return Contents(file: file, definition: definition, warnings: locationWarnings + decoder.warnings, fetchRequestTemplates: [])
        }
        if data.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            throw ModelLoadingError(.malformedXML, path: path, line: 1, message: "the file is empty")
        }
        let root = try XcodeModelXMLNode.parse(data, path: path)
        var builder = XcodeModelBuilder(path: path)
        let definition = try builder.build(root)
        return Contents(file: file, definition: definition, warnings: locationWarnings + builder.warnings,
                        fetchRequestTemplates: builder.fetchRequestTemplates)
    }

}
