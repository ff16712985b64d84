import Foundation
#if canImport(Glibc)
import Glibc
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage
#endif

/// Core Data's external binary storage in a SQLite store: how the column of an
/// attribute with ``AttributeDescription/allowsExternalBinaryDataStorage`` holds
/// its value, and the files beside the store that hold the large ones.
///
/// The column is a tagged blob (coredata-semantics-stage2 §7):
///
/// | Column | Value |
/// |---|---|
/// | `0x01` + bytes | the bytes, stored inline |
/// | `0x02` + ASCII UUID (+ optional NUL) | the contents of `<store folder>/.<store name>_SUPPORT/_EXTERNAL_DATA/<UUID>` |
/// | anything else | the bytes as they are (a row written before the attribute had the flag, or by a writer that did not tag) |
///
/// Values larger than ``threshold`` are written to a file, smaller ones inline.
/// Core Data decides "heuristically" and does not publish its threshold (about
/// 1 MB in 2011, lower by later unsourced reports); 100 KB is the figure commonly
/// given for it. Whatever was written, both forms are read.
///
/// Writes put the UUID in upper case followed by a NUL. Whether Core Data ends
/// the name with a NUL is not settled (stage 2, open question 14); readers of
/// either kind accept it, since the name is read up to the first NUL.
///
/// A file named by a column that is missing or unreadable is a thrown
/// ``PersistentStoreError`` naming the file, never empty data.
struct ExternalBinaryStorage: Sendable {
    /// Values longer than this many bytes go to a file: 100 KB.
    static let threshold = 100 * 1024
    static let inlineTag: UInt8 = 0x01
    static let fileTag: UInt8 = 0x02

    /// `<store folder>/.<store name without extension>_SUPPORT/_EXTERNAL_DATA`.
    let folder: URL
    private let hasLocation: Bool

    /// The storage of the store at `storeURL`; a store without a location has no
    /// folder, and a column naming a file throws.
    init(storeURL: URL?) {
        guard let storeURL else {
            folder = URL(fileURLWithPath: "/nonexistent/_EXTERNAL_DATA")
            hasLocation = false
            return
        }
        let name = storeURL.deletingPathExtension().lastPathComponent
        folder = storeURL.deletingLastPathComponent()
            .appendingPathComponent(".\(name)_SUPPORT", isDirectory: true)
            .appendingPathComponent("_EXTERNAL_DATA", isDirectory: true)
        hasLocation = true
    }

    // MARK: - Reading

    /// The value a column holds, reading its file when it names one.
    ///
    /// - Parameter describing: what the column is, for the error ("Photo.image of row 3").
    /// - Throws: ``PersistentStoreError/Code/ioFailure`` naming the file when it is missing or unreadable.
    func value(fromColumn column: Data, describing: @autoclosure () -> String) throws -> Data {
        guard let tag = column.first else { return column }
        if tag == Self.inlineTag { return Data(column.dropFirst()) }
        guard tag == Self.fileTag, let name = Self.fileName(inColumn: column) else { return column }
        guard hasLocation else {
            throw PersistentStoreError(.ioFailure, url: nil, message: "\(describing()) is stored in the external binary data file \(name), but the store has no location")
        }
        let file = folder.appendingPathComponent(name)
        do {
            return try Data(contentsOf: file)
        } catch {
            let missing = !FileManager.default.fileExists(atPath: file.path)
            throw PersistentStoreError(.ioFailure, url: file, message: """
                \(describing()) is stored in the external binary data file \(file.path), which \
                \(missing ? "is missing" : "cannot be read: \(error.localizedDescription)")
                """)
        }
    }

    /// The file a column names: the UUID after the `0x02` tag, up to a NUL; nil
    /// when the column is not a file reference.
    static func fileName(inColumn column: Data) -> String? {
        guard column.first == fileTag, column.count >= 37 else { return nil }
        let name = column.dropFirst().prefix { $0 != 0 }
        guard name.count == 36, column.count - 1 - name.count <= 1,
              let text = String(bytes: name, encoding: .ascii), UUID(uuidString: text) != nil else { return nil }
        return text
    }

    // MARK: - Writing

    /// A value stored inline: `0x01` and the bytes.
    static func inlineColumn(_ value: Data) -> Data {
        var column = Data(capacity: value.count + 1)
        column.append(inlineTag)
        column.append(value)
        return column
    }

    /// The column for a value of a save, writing a file when the value is larger
    /// than ``threshold`` and `previous` (the row's column before the save) does
    /// not already name a file with these bytes.
    func column(for value: Data, previous: Data?, files: ExternalDataFiles) throws -> Data {
        guard value.count > Self.threshold, hasLocation else { return Self.inlineColumn(value) }
        if let previous, let name = Self.fileName(inColumn: previous),
           let size = (try? FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent(name).path))?[.size] as? Int,
           size == value.count,
           // Only a failed read is dropped here: it means "write a new file", never "use empty data".
           (try? Data(contentsOf: folder.appendingPathComponent(name))) == value {
            return previous
        }
        let name = UUID().uuidString
        let file = folder.appendingPathComponent(name)
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try value.write(to: file, options: .atomic)
            try Self.synchronize(file: file, folder: folder)
        } catch {
            throw PersistentStoreError(.ioFailure, url: file, message: "the external binary data file \(file.path) cannot be written: \(error.localizedDescription)")
        }
        files.wrote(file)
        var column = Data([Self.fileTag])
        column.append(contentsOf: Array(name.utf8))
        column.append(0)
        return column
    }

    /// Waits until the file and its name are on disk. The row that names the
    /// file commits after this, so that not even a power loss can leave a row
    /// naming a file the disk never got (`Data.write(options: .atomic)` renames
    /// a complete file into place, but does not flush it).
    private static func synchronize(file: URL, folder: URL) throws {
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }   // the bytes are flushed already: a failing close cannot lose them
        try handle.synchronize()
        let directory = open(folder.path, O_RDONLY)
        guard directory >= 0 else { return }   // a folder that cannot be opened to flush: the file itself is flushed
        defer { close(directory) }
        if fsync(directory) != 0 {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: folder.path])
        }
    }

    /// The file a column names, as a URL in ``folder``.
    func file(inColumn column: Data) -> URL? {
        Self.fileName(inColumn: column).map { folder.appendingPathComponent($0) }
    }
}

/// The external data files one save writes and retires, so that they are
/// removed at the right moment.
///
/// Files are written before the transaction commits, and removed only after:
///
/// - A file the save wrote is removed when the attempt that wrote it is rolled
///   back (a conflict resolved in a new round, a stale snapshot retried, a failed save).
/// - A file named by a row the save replaced or deleted is removed once the
///   commit succeeded.
///
/// The crash window is chosen so that a crash never leaves a row naming a
/// missing file: a crash between the commit and the removal leaves an orphan
/// file (disk space, no lost data), and so does a crash between writing a new
/// file and the commit. Removing old files before the commit would instead lose
/// the value of a save that then failed.
///
/// A class: the save's attempts run in closures that share it. Used on the
/// store's writer connection only, one save at a time.
final class ExternalDataFiles {
    private var written: [URL] = []
    private var abandoned: [URL] = []
    private var retired: [URL] = []

    /// Records a file the current attempt wrote.
    func wrote(_ file: URL) { written.append(file) }

    /// Records a file named by a row the current attempt replaced or deleted.
    func retire(_ file: URL) { retired.append(file) }

    /// Starts an attempt: what a previous one wrote is no longer referenced by
    /// anything that will be committed, and what it retired is not retired.
    func beginAttempt() {
        abandoned += written
        written = []
        retired = []
    }

    /// After the transaction: removes the retired and abandoned files when it
    /// committed, the written and abandoned ones when it did not.
    ///
    /// Removal errors are dropped on purpose: the commit's outcome is decided,
    /// and a file left behind is an orphan taking disk space, not lost data.
    func finish(committed: Bool) {
        let remove = abandoned + (committed ? retired : written)
        for file in remove { try? FileManager.default.removeItem(at: file) }
        written = []
        abandoned = []
        retired = []
    }
}
