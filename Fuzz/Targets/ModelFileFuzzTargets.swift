import Foundation
import ObjectGraph

extension FuzzTarget {
    /// An Xcode model's `contents` file, through the public loader, which
    /// parses the XML, maps it to entities and validates the model.
    static let xcodeModel = FuzzTarget(
        name: "xcode-model",
        summary: "XcodeModelLoader.load(_:) on a .xcdatamodel whose contents file is the input",
        seeds: { try $0.contents(ofFilesNamed: "contents") },
        run: { input in try ModelFileFuzzing.loadXcodeModel(input, fileName: "contents") }
    )

    /// An Xcode 3 model's binary `elements` file, through the same public loader.
    static let legacyModel = FuzzTarget(
        name: "legacy-model",
        summary: "XcodeModelLoader.load(_:) on a .xcdatamodel whose Xcode 3 elements file is the input",
        seeds: { try $0.contents(ofFilesNamed: "elements") },
        run: { input in try ModelFileFuzzing.loadXcodeModel(input, fileName: "elements") }
    )

    /// A compiled model (`.mom`): the keyed archive `momc` writes and stores cache.
    static let compiledModel = FuzzTarget(
        name: "compiled-model",
        summary: "the compiled-model decoder (CompiledModelLoader) on a keyed archive of NSManagedObjectModel",
        seeds: { seeds in try seeds.modelCaches().map(ModelFileFuzzing.inflate) },
        run: { input in _ = try CompiledModelLoader.decode(archive: input, from: ModelFileFuzzing.momURL) }
    )

    /// A store's `Z_MODELCACHE` blob: raw DEFLATE around a compiled model.
    static let modelCache = FuzzTarget(
        name: "model-cache",
        summary: "the raw-DEFLATE reader of Z_MODELCACHE, then the compiled-model decoder",
        seeds: { try $0.modelCaches() },
        run: { input in
            let archive = try RawDeflate.inflate(input)
            _ = try CompiledModelLoader.decode(archive: archive, from: ModelFileFuzzing.momURL)
        }
    )

    /// A binary property list: store metadata (`Z_METADATA`), compiled models,
    /// Xcode 3 models; then, when it is a keyed archive, every object in it.
    static let propertyList = FuzzTarget(
        name: "property-list",
        summary: "the binary property list reader, then the keyed-archive reader over every object it holds",
        seeds: { seeds in
            try seeds.blobs("SELECT Z_PLIST FROM Z_METADATA", ifTableExists: "Z_METADATA")
                + seeds.modelCaches().map(ModelFileFuzzing.inflate)
                + seeds.contents(ofFilesNamed: "elements")
        },
        run: { input in
            try ModelFileFuzzing.visitEveryObject(of: KeyedArchive(propertyList: BinaryPropertyList.decode(input)))
        }
    )
}

extension FuzzSeeds {
    /// Every `Z_MODELCACHE` blob the fixture stores hold.
    func modelCaches() throws -> [Data] {
        try blobs("SELECT Z_CONTENT FROM Z_MODELCACHE", ifTableExists: "Z_MODELCACHE")
    }
}

/// What the model-file targets share.
enum ModelFileFuzzing {
    /// Where a decoded archive says it came from, in messages.
    static let momURL = URL(fileURLWithPath: "/fuzz/Model.mom")

    /// Loads `input` as the `fileName` file (`contents` or `elements`) of a
    /// model. The loaders take files, so the input is written into a
    /// `.xcdatamodel` of its own (targets and tests run at the same time).
    static func loadXcodeModel(_ input: Data, fileName: String) throws {
        let folder = FuzzScratch.file("\(UUID().uuidString).xcdatamodel", isFolder: true)
        defer {
            // Nothing depends on the scratch copy; the process's folder goes at exit anyway.
            try? FileManager.default.removeItem(at: folder)
        }
        try input.write(to: folder.appendingPathComponent(fileName))
        _ = try XcodeModelLoader.load(folder)
    }

    /// Reads every object reachable from the archive's root, each once, every
    /// way an object is read: as a Foundation value, a string, a collection,
    /// and each of its keys as a value and as objects.
    static func visitEveryObject(of archive: KeyedArchive) throws {
        guard let root = try archive.topObject() else { return }
        var pending = [root]
        var visited = Set<Int>()
        while let object = pending.popLast() {
            if let uid = object.uid, !visited.insert(uid).inserted { continue }
            // Each read below is a probe: an object is rarely every kind at
            // once, and the error that says it is not is the expected answer.
            _ = try? object.asString()
            pending += (try? object.asElements()) ?? []
            pending += ((try? object.asEntries()) ?? []).flatMap { [$0.key, $0.value] }
            for key in object.keys {
                _ = try? object.value(key)
                if let child = try? object.object(key) { pending.append(child) }
                pending += (try? object.objects(key)) ?? []
            }
        }
    }

    /// The archive inside a model cache, for seeds.
    static func inflate(_ cache: Data) throws -> Data {
        do {
            return try RawDeflate.inflate(cache)
        } catch {
            throw FuzzSeeds.Failure(description: "a fixture's Z_MODELCACHE does not inflate: \(error)")
        }
    }
}
