import Foundation

/// Finds the `contents` file to read from whatever location a caller gives: an
/// `.xcdatamodeld` folder (a versioned model), one of its `.xcdatamodel` versions,
/// or the `contents` file itself.
///
/// The decision rests on what is inside the folder, not only on its extension, so a
/// model copied into a resources folder under another name still loads. Xcode's
/// layout:
///
/// ```
/// Model.xcdatamodeld/
///     .xccurrentversion          plist: _XCCurrentVersionName = "Model 2.xcdatamodel"
///     Model.xcdatamodel/contents XML, one file per version
///     Model 2.xcdatamodel/contents
/// ```
///
/// Xcode 3 models keep only a binary `elements` file in each version; that file
/// stands for the version when there is no `contents` (see ``LegacyModelDecoder``).
enum XcodeModelLocation {
    /// The file of an Xcode 3 model version, read when the version has no `contents`.
    static let legacyFile = "elements"
    /// The file `.xccurrentversion` inside a versioned model.
    static let currentVersionFile = ".xccurrentversion"
    /// The key of `.xccurrentversion` that names the current version's folder.
    static let currentVersionKey = "_XCCurrentVersionName"

    /// The `contents` file that `url` stands for (for an Xcode 3 version: its
    /// `elements` file), and notes on choices made on the way (a version picked
    /// without `.xccurrentversion`).
    static func contentsFile(for url: URL) throws -> (file: URL, warnings: [String]) {
        let path = url.path
        switch kind(of: url) {
        case .missing:
            throw ModelLoadingError(.unreadable, path: path, message: "there is no file or folder here")
        case .file:
            if ["mom", "omo"].contains(url.pathExtension) { throw compiledError(path) }
            return (url, [])
        case .version:
            return (url.appendingPathComponent("contents"), [])
        case .legacyVersion:
            return (url.appendingPathComponent(legacyFile), [])
        case .package:
            let (version, warnings) = try currentVersion(ofPackage: url)
            let (file, more) = try contentsFile(for: version)
            return (file, warnings + more)
        case .otherFolder:
            if url.pathExtension == "momd" { throw compiledError(path) }
            throw ModelLoadingError(.notAModel, path: path, message:
                "the folder is not an Xcode model: it has no contents file, no .xcdatamodel versions and no .xccurrentversion")
        }
    }

    /// Every version of the model at `url`, by name (the folder name without
    /// `.xcdatamodel`). A single version or `contents` file gives one entry.
    static func versions(ofModelAt url: URL) throws -> [String: URL] {
        Dictionary(try orderedVersions(ofModelAt: url), uniquingKeysWith: { first, _ in first })
    }

    /// Every version of the model at `url` with its name, in numeric name order
    /// ("Model", "Model 2", "Model 10"). A single version or `contents` file gives one entry.
    static func orderedVersions(ofModelAt url: URL) throws -> [(name: String, url: URL)] {
        switch kind(of: url) {
        case .missing:
            throw ModelLoadingError(.unreadable, path: url.path, message: "there is no file or folder here")
        case .package:
            return try versionFolders(in: url).map { (versionName(of: $0), $0) }
        case .version, .legacyVersion:
            return [(versionName(of: url), url)]
        case .file:
            let folder = url.deletingLastPathComponent()
            let name = folder.pathExtension == "xcdatamodel" ? versionName(of: folder) : url.deletingPathExtension().lastPathComponent
            return [(name, url)]
        case .otherFolder:
            throw ModelLoadingError(.notAModel, path: url.path, message: "the folder is not an Xcode model")
        }
    }

    /// The version folder a versioned model names as current.
    ///
    /// Without `.xccurrentversion` the only version is used, or with several the
    /// last in numeric name order ("Model 10" after "Model 9"), with a warning.
    static func currentVersion(ofPackage url: URL) throws -> (version: URL, warnings: [String]) {
        let versions = try versionFolders(in: url)
        let marker = url.appendingPathComponent(currentVersionFile)
        if FileManager.default.fileExists(atPath: marker.path) {
            let name = try currentVersionName(in: marker)
            guard let version = versions.first(where: { $0.lastPathComponent == name || versionName(of: $0) == name }) else {
                throw ModelLoadingError(.danglingReference, path: marker.path, message:
                    "\(currentVersionKey) names \(name), which is not a version in this model (versions: \(versions.map(\.lastPathComponent).joined(separator: ", ")))")
            }
            return (version, [])
        }
        guard let last = versions.last else {
            throw ModelLoadingError(.notAModel, path: url.path, message: "the model folder contains no .xcdatamodel version")
        }
        if versions.count == 1 { return (last, []) }
        return (last, ["\(url.path): no \(currentVersionFile); using the last version by name, \(last.lastPathComponent)"])
    }

    // MARK: - Inspecting folders

    enum Kind {
        case missing, file, version, legacyVersion, package, otherFolder
    }

    static func kind(of url: URL) -> Kind {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        guard manager.fileExists(atPath: url.path, isDirectory: &isDirectory) else { return .missing }
        guard isDirectory.boolValue else { return .file }
        if manager.fileExists(atPath: url.appendingPathComponent("contents").path) { return .version }
        if manager.fileExists(atPath: url.appendingPathComponent(legacyFile).path) { return .legacyVersion }
        if url.pathExtension == "xcdatamodeld"
            || manager.fileExists(atPath: url.appendingPathComponent(currentVersionFile).path)
            || ((try? versionFolders(in: url))?.isEmpty == false) {
            return .package
        }
        return .otherFolder
    }

    /// The `.xcdatamodel` folders of a versioned model, in numeric name order.
    static func versionFolders(in url: URL) throws -> [URL] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: url.path)
        } catch {
            throw ModelLoadingError(.unreadable, path: url.path, message: "the folder cannot be listed: \(error.localizedDescription)")
        }
        // Compare names without the extension: "Model" < "Model 2" < "Model 10".
        return names.filter { $0.hasSuffix(".xcdatamodel") }
            .map { url.appendingPathComponent($0, isDirectory: true) }
            .sorted { versionName(of: $0).compare(versionName(of: $1), options: [.numeric]) == .orderedAscending }
    }

    static func versionName(of folder: URL) -> String {
        folder.pathExtension == "xcdatamodel" ? folder.deletingPathExtension().lastPathComponent : folder.lastPathComponent
    }

    private static func currentVersionName(in marker: URL) throws -> String {
        let plist: Any
        do {
            plist = try PropertyListSerialization.propertyList(from: Data(contentsOf: marker), options: [], format: nil)
        } catch {
            throw ModelLoadingError(.malformedXML, path: marker.path, message: "the file is not a readable property list: \(error.localizedDescription)")
        }
        guard let name = (plist as? [String: Any])?[currentVersionKey] as? String, !name.isEmpty else {
            throw ModelLoadingError(.missingValue, path: marker.path, message: "the property list has no \(currentVersionKey) string")
        }
        return name
    }

    private static func compiledError(_ path: String) -> ModelLoadingError {
        ModelLoadingError(.notAModel, path: path, message:
            "this is a compiled model (.mom/.momd); load the .xcdatamodeld or .xcdatamodel source instead")
    }
}
