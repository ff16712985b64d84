import Foundation

/// What the readers of models kept as keyed archives share — compiled models
/// (``CompiledModelDecoder``) and Xcode 3 `elements` files
/// (``LegacyModelDecoder``): errors and warnings that name the file and the
/// path in the archive.
protocol ArchivedModelReader {
    /// The file the archive came from, for messages.
    var path: String { get }
    /// Everything read but not loaded, one line each: `file: archive path: what`.
    var warnings: [String] { get set }
}

extension ArchivedModelReader {
    func error(_ code: ModelLoadingError.Code, _ message: String) -> ModelLoadingError {
        ModelLoadingError(code, path: path, message: message)
    }

    mutating func warn(_ object: ArchivedObject, _ message: String) {
        warnings.append("\(path): \(object.path): \(message)")
    }

    /// Warns about each key of `object` that is neither read (`known`) nor
    /// deliberately ignored (`ignoring`).
    mutating func checkKeys(of object: ArchivedObject, known: Set<String>, in context: String,
                            ignoring: (String) -> Bool = { _ in false }) {
        for key in object.keys where !known.contains(key) && !ignoring(key) {
            warn(object, "\(context): the key \(key) is not understood and was ignored")
        }
    }

    /// Runs `body`, turning an archive that does not have the expected shape into
    /// a ``ModelLoadingError`` that names `context` and the archive path.
    func reading<T>(_ context: @autoclosure () -> String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as KeyedArchiveError {
            throw self.error(.malformedArchive, "\(context()): \(error)")
        }
    }
}
