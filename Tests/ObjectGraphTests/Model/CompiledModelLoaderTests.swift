@_spi(DataStackInternal) import DataStackSQLite
@testable import DataStackStores
import Foundation
@testable import ObjectGraph
import Testing

/// Compiled models (`.mom`, `.momd`) and damaged model caches. The archives are
/// Apple's: the model caches of fixture stores, which hold the same keyed archive
/// `momc` writes into a `.mom` file.
@Suite struct CompiledModelLoaderTests {
    static let sampleStore = "coredataplus-samplemodel/stores/SampleModel_V1.sqlite"
    static let noteStore = "apple-notes-notestore/stores/NoteStore-macOS-26-Tahoe.sqlite"

    /// The inflated model cache of a fixture store, and the raw blob it came from.
    static func modelCache(of store: String) throws -> (archive: Data, compressed: Data) {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore(store)
        let connection = try Connection(path: url.path)
        let statement = try connection.prepare("SELECT Z_CONTENT FROM Z_MODELCACHE")
        #expect(try statement.step())
        let compressed = try #require(statement.data(at: 0))
        return (try RawDeflate.inflate(compressed), compressed)
    }

    // MARK: - .mom and .momd

    @Test func aMomFileLoadsAsTheModelItHolds() throws {
        let workspace = try FixtureWorkspace()
        let mom = workspace.url.appendingPathComponent("SampleModel.mom")
        try Self.modelCache(of: Self.sampleStore).archive.write(to: mom)
        let model = try ManagedObjectModel(contentsOf: mom)
        let xml = try ManagedObjectModel(contentsOf: CoreDataFixtures.url(
            "coredataplus-samplemodel/SampleModel.xcdatamodeld/SampleModel.xcdatamodel"))
        #expect(ModelDifferences.between(xml, model).isEmpty)
    }

    @Test func aMomdBundleLoadsTheVersionItsVersionInfoNames() throws {
        let workspace = try FixtureWorkspace()
        let bundle = workspace.url.appendingPathComponent("Notes.momd")
        try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
        try Self.modelCache(of: Self.sampleStore).archive.write(to: bundle.appendingPathComponent("Sample.mom"))
        try Self.modelCache(of: Self.noteStore).archive.write(to: bundle.appendingPathComponent("Notes 2.mom"))
        let info = try PropertyListSerialization.data(
            fromPropertyList: ["NSManagedObjectModel_CurrentVersionName": "Notes 2"], format: .binary, options: 0)
        try info.write(to: bundle.appendingPathComponent("VersionInfo.plist"))

        let loaded = try CompiledModelLoader.load(bundle)
        #expect(loaded.source.lastPathComponent == "Notes 2.mom")
        #expect(loaded.model.entitiesByName["ICNote"] != nil)
        #expect(try CompiledModelLoader.versions(ofModelAt: bundle).keys.sorted() == ["Notes 2", "Sample"])
        let model = try ManagedObjectModel(contentsOf: bundle)   // kept: entities point at their superentity without owning it
        #expect(model.entitiesByName["ICFolder"]?.superentity?.name == "ICNoteContainer")
    }

    @Test func aMomdBundleWhoseVersionInfoNamesAMissingVersionThrowsNamingIt() throws {
        let workspace = try FixtureWorkspace()
        let bundle = workspace.url.appendingPathComponent("M.momd")
        try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
        try Self.modelCache(of: Self.sampleStore).archive.write(to: bundle.appendingPathComponent("M.mom"))
        let info = try PropertyListSerialization.data(
            fromPropertyList: ["NSManagedObjectModel_CurrentVersionName": "M 3"], format: .xml, options: 0)
        try info.write(to: bundle.appendingPathComponent("VersionInfo.plist"))
        let error = try #require(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: bundle) }
        #expect(error.code == .danglingReference)
        #expect(error.path.hasSuffix("VersionInfo.plist"))
        #expect(error.message.contains("M 3"))
    }

    @Test func missingAndNonModelFilesThrowNamingTheFile() throws {
        let workspace = try FixtureWorkspace()
        let missing = workspace.url.appendingPathComponent("Nothing.mom")
        #expect(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: missing) }

        let text = workspace.url.appendingPathComponent("Text.mom")
        try Data("not a model".utf8).write(to: text)
        let error = try #require(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: text) }
        #expect(error.code == .malformedArchive)
        #expect(error.path == text.path)

        // A keyed archive of something else: a dictionary of strings.
        let other = workspace.url.appendingPathComponent("Other.mom")
        try ArchivedValue.dictionary([.string("a"): .string("b")]).archived().write(to: other)
        let notModel = try #require(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: other) }
        #expect(notModel.code == .notAModel)
        #expect(notModel.message.contains("NSDictionary"))
    }

    // MARK: - Writing

    /// Every Xcode model of the corpus, written as a compiled model and read back:
    /// the same model, property by property.
    @Test(arguments: CoreDataFixtures.xmlModels)
    func aModelWrittenAsACompiledModelReadsBackTheSame(path: String) throws {
        let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url(path))
        let archive = CompiledModelEncoder.archive(model)
        let loaded = try CompiledModelLoader.decode(archive: archive, from: URL(fileURLWithPath: "/written.mom"))
        let differences = ModelDifferences.between(model, loaded.model)
        #expect(differences.isEmpty, "\(differences.prefix(8).joined(separator: "; "))")
        #expect(loaded.warnings.isEmpty, "\(loaded.warnings.prefix(4))")
        #expect(try RawDeflate.inflate(RawDeflate.deflate(archive)) == archive)
    }

    /// What the Xcode models of the corpus do not have: every validation rule,
    /// defaults of every type, external storage.
    @Test func validationDefaultsAndExternalStorageSurviveWriting() throws {
        let price = AttributeDescription(name: "price", type: .decimal, defaultValue: .decimal(Decimal(string: "9.95")!))
        price.minimumValue = .decimal(0)
        price.maximumValue = .decimal(1_000)
        let code = AttributeDescription(name: "code", type: .string, isOptional: false, defaultValue: .string("X"))
        code.minimumLength = 1
        code.maximumLength = 8
        code.regularExpression = "[A-Z]+"
        let listed = AttributeDescription(name: "listed", type: .date, defaultValue: .date(Date(timeIntervalSinceReferenceDate: 0)))
        listed.minimumValue = .date(Date(timeIntervalSinceReferenceDate: -86_400))
        let logo = AttributeDescription(name: "logo", type: .binaryData)
        logo.allowsExternalBinaryDataStorage = true
        let id = AttributeDescription(name: "id", type: .uuid, defaultValue: .uuid(UUID(uuidString: "6E8F2A52-64B1-4C8B-9A2E-6D1F0C3B5A77")!))
        id.preservesValueInHistoryOnDeletion = true
        let site = AttributeDescription(name: "site", type: .uri, defaultValue: .uri(URL(string: "https://example.com")!))
        let company = EntityDescription(name: "Company", properties: [price, code, listed, logo, id, site,
            AttributeDescription(name: "count", type: .integer16, defaultValue: .integer(-3)),
            AttributeDescription(name: "active", type: .boolean, defaultValue: .bool(true))])
        let model = ManagedObjectModel(entities: [company])
        let loaded = try CompiledModelLoader.decode(archive: CompiledModelEncoder.archive(model), from: URL(fileURLWithPath: "/written.mom"))
        #expect(ModelDifferences.between(model, loaded.model).isEmpty, "\(ModelDifferences.between(model, loaded.model))")
    }

    // MARK: - Damaged model caches

    @Test func aDamagedModelCacheThrowsNamingTheStore() throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore(Self.sampleStore)
        let (_, compressed) = try Self.modelCache(of: Self.sampleStore)
        let cases: [(String, Data)] = [
            ("garbage", Data((0..<200).map { UInt8(truncatingIfNeeded: $0 &* 37) })),
            ("truncated", compressed.prefix(compressed.count / 2)),
            ("empty", Data()),
        ]
        for (name, blob) in cases {
            let connection = try Connection(path: url.path)
            let update = try connection.prepare("UPDATE Z_MODELCACHE SET Z_CONTENT = ?")
            try update.bind(blob, at: 1)
            try update.execute()
            let error = try #require(throws: ModelLoadingError.self, "\(name)") { try ManagedObjectModel(cachedInStoreAt: url) }
            #expect(error.path == url.path, "\(name)")
            #expect(error.code == (name == "empty" ? .notAModel : .malformedArchive), "\(name): \(error)")
        }
    }

    @Test func aFileThatIsNotAStoreThrowsAPersistentStoreError() throws {
        let workspace = try FixtureWorkspace()
        let text = workspace.url.appendingPathComponent("notes.txt")
        try Data("hello".utf8).write(to: text)
        let error = try #require(throws: PersistentStoreError.self) { try ManagedObjectModel(cachedInStoreAt: text) }
        #expect(error.code == .notAStore)
        let missing = workspace.url.appendingPathComponent("missing.sqlite")
        #expect(throws: PersistentStoreError.self) { try ManagedObjectModel(cachedInStoreAt: missing) }
    }

    // MARK: - Models that cannot be rebuilt

    /// Decodes a real archive, lets `edit` change its objects, and loads the result.
    private func load(editing store: String, _ edit: (inout [PropertyListValue]) throws -> Void) throws -> CompiledModelLoader.LoadedModel {
        guard case .dictionary(var envelope) = try BinaryPropertyList.decode(Self.modelCache(of: store).archive),
              case .array(var objects) = envelope["$objects"] else {
            throw FixtureError("the model cache is not a keyed archive")
        }
        try edit(&objects)
        envelope["$objects"] = .array(objects)
        return try CompiledModelLoader.decode(archive: BinaryPropertyList.encode(.dictionary(envelope)), from: URL(fileURLWithPath: "/edited.mom"))
    }

    /// The index in `$objects` of the object of `className` whose `key` is the string `value`.
    private func index(of className: String, where key: String, is value: String, in objects: [PropertyListValue]) throws -> Int {
        for (index, object) in objects.enumerated() {
            guard case .dictionary(let fields) = object, case .uid(let classIndex)? = fields["$class"],
                  case .dictionary(let classFields) = objects[classIndex],
                  classFields["$classname"] == .string(className), case .uid(let nameIndex)? = fields[key],
                  objects[nameIndex] == .string(value) else { continue }
            return index
        }
        throw FixtureError("no \(className) with \(key) \(value)")
    }

    private func setField(_ key: String, of index: Int, to value: PropertyListValue, in objects: inout [PropertyListValue]) {
        guard case .dictionary(var fields) = objects[index] else { return }
        fields[key] = value
        objects[index] = .dictionary(fields)
    }

    @Test func anUnknownAttributeTypeThrowsNamingEntityAndProperty() throws {
        let error = try #require(throws: ModelLoadingError.self) {
            try load(editing: Self.sampleStore) { objects in
                for i in objects.indices {
                    guard case .dictionary(let fields) = objects[i], case .uid(let name)? = fields["NSPropertyName"],
                          objects[name] == .string("numberPlate"), fields["NSAttributeType"] != nil else { continue }
                    setField("NSAttributeType", of: i, to: .integer(4242), in: &objects)
                }
            }
        }
        #expect(error.code == .unknownAttributeType)
        #expect(error.message.contains("Car.numberPlate"), "\(error)")
        #expect(error.message.contains("4242"))
    }

    @Test func anInheritanceCycleThrowsInsteadOfLooping() throws {
        let error = try #require(throws: ModelLoadingError.self) {
            try load(editing: Self.sampleStore) { objects in
                let car = try index(of: "NSEntityDescription", where: "NSEntityName", is: "Car", in: objects)
                let sportCar = try index(of: "NSEntityDescription", where: "NSEntityName", is: "SportCar", in: objects)
                setField("NSSuperentity", of: car, to: .uid(sportCar), in: &objects)
            }
        }
        #expect(error.code == .inconsistentModel)
        #expect(error.message.contains("inherits from itself"), "\(error)")
    }

    @Test func aReferencePastTheArchiveThrowsNamingThePath() throws {
        let error = try #require(throws: ModelLoadingError.self) {
            try load(editing: Self.sampleStore) { objects in
                let person = try index(of: "NSEntityDescription", where: "NSEntityName", is: "Person", in: objects)
                setField("NSProperties", of: person, to: .uid(objects.count + 10), in: &objects)
            }
        }
        #expect(error.code == .malformedArchive)
        #expect(error.message.contains("Person"), "\(error)")
    }

    @Test func unknownKeysAndFetchedPropertiesAreWarningsWithTheirPath() throws {
        let loaded = try load(editing: Self.sampleStore) { objects in
            let person = try index(of: "NSEntityDescription", where: "NSEntityName", is: "Person", in: objects)
            setField("NSSomethingNew", of: person, to: .integer(7), in: &objects)
        }
        #expect(loaded.warnings.contains { $0.contains("NSSomethingNew") && $0.contains("entity Person") && $0.contains("root.") },
                "\(loaded.warnings)")
        #expect(loaded.model.entitiesByName["Person"] != nil)

        let programmatic = try CompiledModelLoader.decode(
            archive: Self.modelCache(of: "coredataplus-samplemodel2-programmatic/stores/SampleModel2_V1.sqlite").archive,
            from: URL(fileURLWithPath: "/SampleModel2.mom"))
        #expect(programmatic.warnings.contains { $0.contains("fetched property") && $0.contains("feedbacks") }, "\(programmatic.warnings)")
        #expect(programmatic.warnings.contains { $0.contains("pagesCount") && $0.contains("derived") })
        #expect(programmatic.model.configurations.keys.sorted() == ["SampleConfigurationV1"])
    }

    // MARK: - Fuzzing

    /// Truncations, flipped bytes and random garbage of real archives and caches:
    /// each loads or throws a ``ModelLoadingError``; none crashes or hangs.
    @Test func damagedArchivesAndCachesNeverCrash() throws {
        let (archive, compressed) = try Self.modelCache(of: Self.sampleStore)
        var generator = SplitMix64(seed: 0x5EED)
        var inputs: [(Data, isCompressed: Bool)] = []
        for length in stride(from: 0, to: archive.count, by: max(1, archive.count / 400)) {
            inputs.append((archive.prefix(length), false))
        }
        for length in stride(from: 0, to: compressed.count, by: max(1, compressed.count / 300)) {
            inputs.append((compressed.prefix(length), true))
        }
        for _ in 0..<1_500 {
            var bytes = [UInt8](archive)
            for _ in 0..<(1 + Int(generator.next() % 4)) {
                bytes[Int(generator.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: generator.next())
            }
            inputs.append((Data(bytes), false))
        }
        for _ in 0..<500 {
            var bytes = [UInt8](compressed)
            bytes[Int(generator.next() % UInt64(bytes.count))] ^= UInt8(truncatingIfNeeded: generator.next() | 1)
            inputs.append((Data(bytes), true))
        }
        var loaded = 0
        for (data, isCompressed) in inputs {
            do {
                let archiveData = isCompressed ? try RawDeflate.inflate(data) : data
                _ = try CompiledModelLoader.decode(archive: archiveData, from: URL(fileURLWithPath: "/fuzz.mom"))
                loaded += 1
            } catch is ModelLoadingError, is RawDeflate.Failure {
                continue
            }
        }
        #expect(inputs.count > 2_500)
        #expect(loaded < inputs.count)
    }
}
