import Foundation
import Testing
@testable import ObjectGraph

/// Damaged, edited and foreign `elements` files: each loads or throws a
/// ``ModelLoadingError`` naming the file; none traps or hangs. The edits start
/// from RestKit's real Xcode 3 model.
@Suite struct LegacyModelBadInputTests {
    static let twitterElements = "restkit-twitter-seed/RKTwitterCoreData.xcdatamodel/elements"

    /// Writes `data` as the `elements` file of a new version folder and loads it.
    private func load(_ data: Data, in workspace: FixtureWorkspace, as name: String = "elements") throws -> XcodeModelLoader.LoadedModel {
        let file = workspace.url.appendingPathComponent("Edited.xcdatamodel/\(name)")
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: file)
        return try XcodeModelLoader.load(file.deletingLastPathComponent())
    }

    /// Loads RestKit's model after `edit` changed its archive.
    private func load(editing edit: (inout EditableArchive) throws -> Void) throws -> XcodeModelLoader.LoadedModel {
        var archive = try EditableArchive(CoreDataFixtures.url(Self.twitterElements))
        try edit(&archive)
        return try load(archive.encoded(), in: try FixtureWorkspace())
    }

    // MARK: - Not a model

    @Test func truncatedOrGarbageElementsFilesThrowNamingTheFile() throws {
        let original = try Data(contentsOf: CoreDataFixtures.url(Self.twitterElements))
        let inputs: [Data] = [
            Data(), original.prefix(8), original.prefix(original.count / 2), original.dropLast(),
            Data("<?xml version=\"1.0\"?><model/>".utf8), Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7919) }),
        ]
        for data in inputs {
            let workspace = try FixtureWorkspace()
            let error = try #require(throws: ModelLoadingError.self) { try load(data, in: workspace) }
            #expect(error.code == .malformedArchive, "\(error)")
            #expect(error.path == workspace.url.appendingPathComponent("Edited.xcdatamodel/elements").path)
            #expect(error.description.hasPrefix(error.path + ": the file is not a readable Xcode 3 model"))
        }
    }

    @Test func aKeyedArchiveThatIsNotAnXcode3ModelIsRefusedSayingWhatItHolds() throws {
        let compiled = try ArchiveFixtures.data("SampleModel_V1.modelcache.bplist")
        let cases: [(Data, String)] = [
            (ArchivedValue.array([.string("a")]).archived(), "not an Xcode 3 data model (XDPMModel)"),
            (compiled, "compiled model (NSManagedObjectModel)"),
            (BinaryPropertyList.encode(.dictionary(["a": .integer(1)])), "not a keyed archive"),
        ]
        for (data, message) in cases {
            let workspace = try FixtureWorkspace()
            let error = try #require(throws: ModelLoadingError.self) { try load(data, in: workspace) }
            #expect(error.code == .legacyBinaryModel)
            #expect(error.path.hasSuffix("Edited.xcdatamodel/elements"))
            #expect(error.message.contains(message), "\(error)")
        }
        // A binary property list where the XML contents should be is read the same way.
        let error = try #require(throws: ModelLoadingError.self) { try load(compiled, in: try FixtureWorkspace(), as: "contents") }
        #expect(error.code == .legacyBinaryModel && error.path.hasSuffix("Edited.xcdatamodel/contents"))
    }

    // MARK: - Models that cannot be rebuilt

    @Test func anUnknownAttributeTypeThrowsNamingEntityAndProperty() throws {
        let error = try #require(throws: ModelLoadingError.self) {
            try load { archive in
                let text = try archive.element("text", of: "XDPMAttribute")
                try archive.setSetting("XD_PAttK_attributeType", of: "XD_PAtt_Stereotype", in: text, to: .integer(2000))
            }
        }
        #expect(error.code == .unknownAttributeType)
        #expect(error.message.contains("Tweet.text") && error.message.contains("Object ID (2000)"), "\(error)")
    }

    /// Xcode 3's "Allows External Storage" reaches the model: without it, a value
    /// Core Data moved to a file would read as its reference bytes.
    @Test func externalStorageIsReadAndMeaninglessOnTextIsAWarning() throws {
        let loaded = try load { archive in
            let text = try archive.element("text", of: "XDPMAttribute")
            try archive.setSetting("XD_PAttK_allowsExternalBinaryDataStorage", of: "XD_PAtt_Stereotype", in: text, to: .bool(true))
            try archive.setSetting("XD_PAttK_attributeType", of: "XD_PAtt_Stereotype", in: text, to: .integer(1000))
            let name = try archive.element("name", of: "XDPMAttribute")
            try archive.setSetting("XD_PAttK_allowsExternalBinaryDataStorage", of: "XD_PAtt_Stereotype", in: name, to: .bool(true))
        }
        let text = try #require(loaded.model.entitiesByName["Tweet"]?.attributesByName["text"])
        #expect(text.type == .binaryData && text.allowsExternalBinaryDataStorage && text.storesExternalBinaryData)
        #expect(loaded.warnings.contains { $0.contains(".name allows external binary storage") }, "\(loaded.warnings)")
    }

    @Test func aMissingOrDanglingDestinationThrowsNamingTheRelationship() throws {
        let missing = try #require(throws: ModelLoadingError.self) {
            try load { archive in
                let user = try archive.element("user", of: "XDPMRelationship")
                try archive.setSetting("XD_PRK_destination", of: "XD_PR_Stereotype", in: user, to: .uid(0))
            }
        }
        #expect(missing.code == .missingValue && missing.message.contains("Tweet.user"), "\(missing)")
        let dangling = try #require(throws: ModelLoadingError.self) {
            try load { archive in
                let user = try archive.element("user", of: "XDPMRelationship")
                let stranger = try archive.element("XDGenericRecordClass", of: "XDUMLClassImp")
                try archive.setSetting("XD_PRK_destination", of: "XD_PR_Stereotype", in: user, to: .uid(stranger))
            }
        }
        #expect(dangling.code == .danglingReference && dangling.message.contains("Tweet.user"), "\(dangling)")
    }

    @Test func anInverseThatIsNotARelationshipOfTheDestinationThrows() throws {
        let error = try #require(throws: ModelLoadingError.self) {
            try load { archive in
                let status = try archive.element("status", of: "XDPMRelationship")
                let text = try archive.element("text", of: "XDPMAttribute")
                try archive.setSetting("XD_PRK_inverseRelationship", of: "XD_PR_Stereotype", in: status, to: .uid(text))
            }
        }
        #expect(error.code == .danglingReference && error.message.contains("User.status"), "\(error)")
    }

    @Test func anInheritanceCycleThrowsInsteadOfLooping() throws {
        let error = try #require(throws: ModelLoadingError.self) {
            try load { archive in
                let tweet = try archive.element("Tweet", of: "XDPMEntity")
                let user = try archive.element("User", of: "XDPMEntity")
                try archive.setParent(of: tweet, to: user, asGeneralization: true)
                try archive.setParent(of: user, to: tweet, asGeneralization: false)
            }
        }
        #expect(error.code == .inconsistentModel && error.message.contains("inherits from itself"), "\(error)")
    }

    /// Neither fixture has a subentity; a parent given as a UML generalization
    /// (`_general`) or as the entity itself makes one.
    @Test(arguments: [true, false])
    func aGeneralizationMakesASubentity(asGeneralization: Bool) throws {
        let loaded = try load { archive in
            let tweet = try archive.element("Tweet", of: "XDPMEntity")
            try archive.setParent(of: tweet, to: try archive.element("User", of: "XDPMEntity"), asGeneralization: asGeneralization)
        }
        let tweet = try #require(loaded.model.entitiesByName["Tweet"])
        #expect(tweet.superentity?.name == "User")
        #expect(loaded.model.entitiesByName["User"]?.subentities.map(\.name) == ["Tweet"])
        #expect(tweet.propertiesByName["screenName"] != nil && tweet.properties.count == 7)
    }

    @Test func unknownSettingsKeysAndFetchedPropertiesAreWarningsWithTheirPath() throws {
        let loaded = try load { archive in
            try archive.replaceString("XD_PPSK_isSpotlightIndexed", with: "XD_PPSK_somethingNew")
            let tweet = try archive.element("Tweet", of: "XDPMEntity")
            archive.setField("XDBucketForSomethingstorage", of: tweet, to: .uid(0))
            let url = try archive.element("urlString", of: "XDPMAttribute")
            let fetched = archive.addClass("XDPMFetchedProperty", superclasses: ["XDUMLPropertyImp", "NSObject"])
            archive.setField("$class", of: url, to: .uid(fetched))
        }
        let warnings = loaded.warnings.filter { !$0.contains("user info") }
        #expect(warnings.filter { $0.contains("the setting XD_PPSK_somethingNew is not understood") }.count == 10, "\(warnings)")
        #expect(warnings.contains { $0.contains("entity Tweet: the key XDBucketForSomethingstorage is not understood") })
        #expect(warnings.contains { $0.contains("Tweet.urlString is a fetched property") })
        #expect(loaded.model.entitiesByName["Tweet"]?.propertiesByName["urlString"] == nil)
    }

    // MARK: - Fuzzing

    /// Byte flips and truncations of the real file, and edits of its objects
    /// (references, numbers, names, dropped keys): each loads or throws a
    /// ``ModelLoadingError`` naming the file.
    @Test func damagedElementsFilesNeverCrash() throws {
        let url = CoreDataFixtures.url(Self.twitterElements)
        let original = try Data(contentsOf: url)
        var random = SplitMix64(seed: 0xE1E_3E47)
        func below(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }
        // Damaged bytes go through the whole reader; edited objects skip the bytes
        // (their encoding is the writer's, tested on its own) to keep this test short.
        var inputs: [Data] = stride(from: 0, to: original.count, by: original.count / 40).map { original.prefix($0) }
        for _ in 0..<120 {
            var bytes = [UInt8](original)
            for _ in 0...below(3) { bytes[below(bytes.count)] = UInt8(truncatingIfNeeded: random.next()) }
            inputs.append(Data(bytes))
        }
        var edited: [PropertyListValue] = []
        let pristine = try EditableArchive(url)
        let integers: [Int64] = [-1, 0, 1, 2, 3, 100, 700, 1800, 2000, Int64(Int32.max) + 1, .max]
        let strings = ["", "Tweet", "User", "user", "status", "x y", "XD_PRK_isToMany", "NSManagedObject"]
        for _ in 0..<300 {
            var archive = pristine
            for _ in 0...below(3) {
                let index = 1 + below(archive.objects.count - 1)
                archive.mutate(at: index, integers: integers, strings: strings, random: &random)
            }
            edited.append(archive.propertyList)
        }
        // The decoder and the model's checks, as the loader runs them, without a file per input.
        var loaded = 0
        let decodes: [(inout LegacyModelDecoder) throws -> ModelDefinition] =
            inputs.map { data in { try $0.decode(data) } }
            + edited.map { plist in { decoder in
                do {
                    return try decoder.decode(KeyedArchive(propertyList: plist))
                } catch let error as KeyedArchiveError {
                    throw ModelLoadingError(.malformedArchive, path: decoder.path, message: "\(error)")
                }
            } }
        for decode in decodes {
            do {
                var decoder = LegacyModelDecoder(path: "/Edited.xcdatamodel/elements")
                let output = try decode(&decoder)
                try ManagedObjectModel(entities: output.entities).validate()
                loaded += 1
            } catch let error as ModelLoadingError {
                #expect(error.path == "/Edited.xcdatamodel/elements", "\(error)")
            } catch is ObjectGraphError {
                continue   // the model's own checks, which the loader reports as ModelLoadingError
            }
        }
        #expect(decodes.count > 450)
        #expect(loaded > 0 && loaded < decodes.count, "\(loaded) of \(decodes.count) loaded")
    }
}

// MARK: - Editing a real archive

/// The `$objects` of a keyed archive, edited in place by the tests.
struct EditableArchive {
    private var envelope: [String: PropertyListValue]
    var objects: [PropertyListValue]

    init(_ url: URL) throws {
        guard case .dictionary(let envelope) = try BinaryPropertyList.decode(Data(contentsOf: url)),
              case .array(let objects) = envelope["$objects"] else { throw FixtureError("\(url.path) is not a keyed archive") }
        self.envelope = envelope
        self.objects = objects
    }

    func encoded() -> Data {
        BinaryPropertyList.encode(propertyList)
    }

    /// The edited archive as the decoder reads it, without writing and parsing its bytes.
    var propertyList: PropertyListValue {
        var envelope = envelope
        envelope["$objects"] = .array(objects)
        return .dictionary(envelope)
    }

    /// The index of the object of `className` whose `_name` is `name`.
    func element(_ name: String, of className: String) throws -> Int {
        for index in objects.indices where self.className(of: index) == className && string(objects[index], "_name") == name {
            return index
        }
        throw FixtureError("no \(className) named \(name)")
    }

    /// Sets the value (`_default`) of a setting of one of an element's stereotypes.
    mutating func setSetting(_ setting: String, of stereotype: String, in element: Int, to value: PropertyListValue) throws {
        guard let stereotypeIndex = try entry(stereotype, in: "XDBucketForStereotypesstorage", of: element),
              let settingIndex = try entry(setting, in: "XDBucketForOwnedAttributesstorage", of: stereotypeIndex) else {
            throw FixtureError("no setting \(stereotype).\(setting) in object \(element)")
        }
        setField("_default", of: settingIndex, to: value)
    }

    /// Makes `parent` the entity's only generalization: a UML generalization
    /// object naming it in `_general`, or the parent entity itself.
    mutating func setParent(of entity: Int, to parent: Int, asGeneralization: Bool) throws {
        var member = parent
        if asGeneralization {
            let generalization = addClass("XDUMLGeneralizationImp", superclasses: ["XDUMLElementImp", "NSObject"])
            objects.append(.dictionary(["$class": .uid(generalization), "_general": .uid(parent), "_specific": .uid(entity)]))
            member = objects.count - 1
        }
        let arrayClass = addClass("NSMutableArray", superclasses: ["NSArray", "NSObject"])
        objects.append(.dictionary(["$class": .uid(arrayClass), "NS.objects": .array([.uid(member)])]))
        setField("XDBucketForGeneralizationsstorage", of: entity, to: .uid(objects.count - 1))
    }

    /// Adds a class description and returns its index.
    mutating func addClass(_ name: String, superclasses: [String]) -> Int {
        objects.append(.dictionary(["$classname": .string(name), "$classes": .array(([name] + superclasses).map(PropertyListValue.string))]))
        return objects.count - 1
    }

    mutating func replaceString(_ old: String, with new: String) throws {
        guard let index = objects.firstIndex(of: .string(old)) else { throw FixtureError("no string \(old)") }
        objects[index] = .string(new)
    }

    mutating func setField(_ key: String, of index: Int, to value: PropertyListValue) {
        guard case .dictionary(var fields) = objects[index] else { return }
        fields[key] = value
        objects[index] = .dictionary(fields)
    }

    /// One random edit of the object at `index`: a scalar replaced, or in an
    /// object a reference redirected, a key dropped, or a collection emptied.
    mutating func mutate(at index: Int, integers: [Int64], strings: [String], random: inout SplitMix64) {
        func below(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }
        switch objects[index] {
        case .integer: objects[index] = .integer(integers[below(integers.count)])
        case .string: objects[index] = .string(strings[below(strings.count)])
        case .bool(let flag): objects[index] = .bool(!flag)
        case .dictionary(var fields) where !fields.isEmpty:
            let keys = fields.keys.sorted()
            let key = keys[below(keys.count)]
            switch below(4) {
            case 0: fields[key] = nil
            case 1: fields[key] = .uid(below(objects.count + 2))
            case 2: fields[key] = .integer(integers[below(integers.count)])
            default: fields[key] = key.hasPrefix("NS.") ? .array([]) : .bool(true)
            }
            objects[index] = .dictionary(fields)
        default:
            objects[index] = .uid(below(objects.count))
        }
    }

    // MARK: Reading

    private func className(of index: Int) -> String? {
        guard case .dictionary(let fields) = objects[index], case .uid(let classIndex)? = fields["$class"],
              classIndex < objects.count, case .dictionary(let description) = objects[classIndex] else { return nil }
        return description["$classname"]?.stringValue
    }

    private func string(_ object: PropertyListValue, _ key: String) -> String? {
        guard case .dictionary(let fields) = object, case .uid(let index)? = fields[key], index < objects.count else { return nil }
        return objects[index].stringValue
    }

    /// The index of the value under `name` in the dictionary that `bucket` of `owner` refers to.
    private func entry(_ name: String, in bucket: String, of owner: Int) throws -> Int? {
        guard case .dictionary(let fields) = objects[owner], case .uid(let dictionary)? = fields[bucket],
              case .dictionary(let storage) = objects[dictionary],
              case .array(let keys)? = storage["NS.keys"], case .array(let values)? = storage["NS.objects"] else { return nil }
        for (key, value) in zip(keys, values) {
            if case .uid(let keyIndex) = key, objects[keyIndex] == .string(name), case .uid(let valueIndex) = value { return valueIndex }
        }
        return nil
    }
}
