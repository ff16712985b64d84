import Foundation

/// What a model loader reads from a file: the entities, linked into their
/// inheritance trees, each with the properties it declares; the configurations;
/// the version identifiers. The Xcode source (`XcodeModelBuilder`), Xcode 3
/// `elements` files (`LegacyModelDecoder`) and compiled models, `.mom` files
/// and stores' `Z_MODELCACHE` alike (`CompiledModelDecoder`), read into it, and
/// ``ManagedObjectModel/init(finishing:readFrom:)`` makes every one of them a model.
struct ModelDefinition {
    var entities: [EntityDescription] = []
    var configurations: [String: [String]] = [:]
    var versionIdentifiers: Set<String> = []

    /// A model file's bytes, read only up to one byte past
    /// ``XcodeModelLoader/maximumFileSize``, so a huge file is refused before
    /// it is in memory.
    static func readFile(_ file: URL) throws -> Data {
        let data: Data
        do {
            let handle = try FileHandle(forReadingFrom: file)
            defer { try? handle.close() }   // a read-only handle: closing cannot lose data
            data = try handle.read(upToCount: XcodeModelLoader.maximumFileSize + 1) ?? Data()   // nil at end of file
        } catch {
            throw ModelLoadingError(.unreadable, path: file.path, message: "the file cannot be read: \(error.localizedDescription)")
        }
        guard data.count <= XcodeModelLoader.maximumFileSize else {
            throw ModelLoadingError(.unreadable, path: file.path,
                                    message: "the file is larger than \(XcodeModelLoader.maximumFileSize) bytes (XcodeModelLoader.maximumFileSize), far beyond any real model")
        }
        return data
    }
}

extension ManagedObjectModel {
    /// The model a loader read, finished the one way every loader finishes its
    /// model, and as a model built in code is when a coordinator first uses it:
    /// laid out (``prepareLayout()``, whatever the order of the entities) and
    /// validated (``validate()``).
    ///
    /// - Parameter path: the file read, which the error names.
    /// - Throws: ``ModelLoadingError`` `.inconsistentModel`, listing every
    ///   problem ``validate()`` found.
    convenience init(finishing definition: ModelDefinition, readFrom path: String) throws(ModelLoadingError) {
        self.init(entities: definition.entities)
        versionIdentifiers = definition.versionIdentifiers
        configurations = definition.configurations
        do {
            try validate()
        } catch {
            guard error.code == .invalidModel else {
                throw ModelLoadingError(.inconsistentModel, path: path, message: "\(error)")
            }
            throw ModelLoadingError(.inconsistentModel, path: path, message: error.modelProblems.joined(separator: "; "))
        }
    }
}
