import Foundation
import Testing
@testable import ObjectGraph

/// Walking `NSKeyedArchiver` archives Apple wrote (Core Data model caches) with
/// ``KeyedArchive`` and ``ArchivedObject``, and the errors for archives that are wrong.
@Suite struct KeyedArchiveTests {
    // MARK: - Model caches

    @Test func sampleModelCacheReadsAsAManagedObjectModel() throws {
        let archive = try KeyedArchive(data: try ArchiveFixtures.data("SampleModel_V1.modelcache.bplist"))
        let model = try #require(try archive.topObject())
        #expect(model.className == "NSManagedObjectModel")
        #expect(model.path == "root")
        #expect(model.keys == ["NSEntities", "NSFetchRequestTemplates", "NSVersionIdentifiers"])
        #expect(try model.object("NSFetchRequestTemplates") == nil)   // UID 0, $null
        #expect(try model.objects("NSVersionIdentifiers")?.map { try $0.asString() } == ["1"])

        let entities = try #require(try model.entries("NSEntities"))
        #expect(try entities.map { try $0.key.asString() } == ["Car", "ExpensiveSportCar", "Person", "SportCar"])
        #expect(entities.allSatisfy { $0.value.className == "NSEntityDescription" })
        let entitiesObject = try #require(try model.object("NSEntities"))
        #expect(entitiesObject.classChain == ["NSKnownKeysDictionary1", "NSKnownKeysDictionary", "NSMutableDictionary",
                                              "NSDictionary", "NSObject"])

        let car = entities[0].value
        #expect(car.path == "root.NSEntities.Car")
        #expect(try car.string("NSEntityName") == "Car")
        #expect(try car.object("NSSuperentity") == nil)
        let properties = try #require(try car.entries("NSProperties"))
        let names = try properties.map { try $0.key.asString() }
        #expect(names.contains("color") && names.contains("owner"))
        let color = try #require(properties.first { $0.value.path == "root.NSEntities.Car.NSProperties.color" }?.value)
        #expect(color.className == "NSAttributeDescription")
        #expect(color.classChain == ["NSAttributeDescription", "NSPropertyDescription", "NSObject"])
        #expect(try color.string("NSValueTransformerName") == "ColorTransformer")
        #expect(try color.integer("NSAttributeType") == 1800)
        #expect(try color.bool("NSIsOptional") == true)
        #expect(try color.string("NSAttributeValueClassName") == nil)
        #expect(try color.object("NSEntity")?.string("NSEntityName") == "Car")
        #expect(color.has("NSPropertyName") && !color.has("NSNoSuchKey"))

        let subentities = try #require(try car.entries("NSSubentities"))
        #expect(try subentities.map { try $0.key.asString() } == ["SportCar"])
    }

    @Test func defaultValuesDecodeAsFoundationValues() throws {
        let archive = try KeyedArchive(data: try ArchiveFixtures.data("NoteStore-macOS-26-Tahoe.modelcache.bplist"))
        let model = try #require(try archive.topObject())
        var dates: [String: ArchivedValue] = [:]
        var booleans = 0
        for (_, entity) in try model.entries("NSEntities") ?? [] {
            for (key, property) in try entity.entries("NSProperties") ?? [] {
                switch try property.value("NSDefaultValue") {
                case .date(let date)?: dates[try key.asString()] = .date(date)
                case .bool?, .integer?: booleans += 1
                default: break
                }
            }
        }
        #expect(dates["lastViewedModificationDate"] == .date(Date(timeIntervalSinceReferenceDate: -541_228_980)))
        #expect(booleans > 0)
    }

    @Test func proxiesAndMutableStringsRead() throws {
        let archive = try KeyedArchive(data: try ArchiveFixtures.data("ios-netusage.modelcache.bplist"))
        let model = try #require(try archive.topObject())
        var entityNames: [String] = []
        var proxies: [ArchivedObject] = []
        var visited = Set<Int>()
        var stack = [model]
        // Every object reachable from the root, through every UID of every key.
        while let object = stack.popLast() {
            if let uid = object.uid, !visited.insert(uid).inserted { continue }
            if object.className == "NSEntityDescription" { entityNames.append(try #require(try object.string("NSEntityName"))) }
            if object.className == "_NSPropertyDescriptionProxy" { proxies.append(object) }
            for key in object.keys {
                switch object.fields[key] {
                case .uid?:
                    if let next = try object.object(key) { stack.append(next) }
                case .array(let items)?:
                    for (index, item) in items.enumerated() {
                        if let next = try archive.resolve(item, path: "\(object.path).\(key)[\(index)]") { stack.append(next) }
                    }
                default: break
                }
            }
        }
        #expect(entityNames.count == 18)
        #expect(entityNames.contains("ProvisioningData"))
        #expect(proxies.count == 6)
        for proxy in proxies {
            #expect(try proxy.object("NSUnderlyingProperty")?.isKind(of: "NSPropertyDescription") == true)
            #expect(try proxy.integer("NSReferenceID") != nil)
        }
        #expect(visited.count > 600)
    }

    // MARK: - Wrong types and references

    @Test func wrongTypesNameThePath() throws {
        let archive = try KeyedArchive(data: try ArchiveFixtures.data("SampleModel_V1.modelcache.bplist"))
        let model = try #require(try archive.topObject())
        expectError(.wrongType, path: "root.NSEntities", mentions: "expected a string, found an object of class NSKnownKeysDictionary1") {
            _ = try model.string("NSEntities")
        }
        let car = try #require(try model.entries("NSEntities")?.first?.value)
        expectError(.wrongType, path: "root.NSEntities.Car.NSEntityName", mentions: "expected an integer, found a string") {
            _ = try car.integer("NSEntityName")
        }
        expectError(.wrongType, path: "root.NSEntities.Car.NSEntityName", mentions: "expected an array") {
            _ = try car.objects("NSEntityName")
        }
        expectError(.wrongType, path: "root.NSEntities.Car.NSProperties", mentions: "expected an array, set or ordered set") {
            _ = try car.objects("NSProperties")
        }
    }

    @Test func badReferencesAndClassesThrow() throws {
        let objects: [PropertyListValue] = [
            .string("$null"),
            .dictionary(["$class": .uid(2), "past": .uid(99), "inlineArray": .array([]), "noClass": .uid(3),
                         "badClass": .uid(4), "classRef": .uid(2)]),
            .dictionary(["$classname": .string("Thing"), "$classes": .array([.string("Thing"), .string("NSObject")])]),
            .dictionary(["x": .integer(1)]),
            .dictionary(["$class": .uid(5)]),
            .dictionary(["$classes": .array([])]),
        ]
        let thing = try #require(try archive(objects).topObject())
        #expect(thing.className == "Thing")
        expectError(.invalidReference, path: "root.past", mentions: "UID 99 is past the end of $objects (6 entries)") {
            _ = try thing.object("past")
        }
        expectError(.invalidReference, path: "root.inlineArray", mentions: "found an array") { _ = try thing.object("inlineArray") }
        expectError(.missingClass, path: "root.noClass", mentions: "has no $class") { _ = try thing.object("noClass") }
        expectError(.missingClass, path: "root.badClass", mentions: "not a class description with a $classname") {
            _ = try thing.object("badClass")
        }
        expectError(.missingClass, path: "root.classRef", mentions: "is a class description") { _ = try thing.object("classRef") }
    }

    @Test func inlineAndReferencedScalarsReadAlike() throws {
        let objects: [PropertyListValue] = [
            .string("$null"),
            .dictionary(["$class": .uid(5), "inlineString": .string("a"), "string": .uid(2), "nsString": .uid(3),
                         "inlineInt": .integer(7), "int": .uid(4), "flag": .bool(true), "one": .integer(1), "real": .real(2.5)]),
            .string("b"),
            .dictionary(["$class": .uid(6), "NS.string": .string("c")]),
            .integer(8),
            .dictionary(["$classname": .string("Thing")]),
            .dictionary(["$classname": .string("NSMutableString"), "$classes": .array([.string("NSMutableString"), .string("NSString"), .string("NSObject")])]),
        ]
        let thing = try #require(try archive(objects).topObject())
        #expect(thing.classChain == ["Thing"])
        #expect(try thing.string("inlineString") == "a")
        #expect(try thing.string("string") == "b")
        #expect(try thing.string("nsString") == "c")
        #expect(try thing.integer("inlineInt") == 7)
        #expect(try thing.integer("int") == 8)
        #expect(try thing.bool("flag") == true)
        #expect(try thing.bool("one") == true)
        #expect(try thing.double("real") == 2.5)
        #expect(try thing.double("int") == 8)
        #expect(try thing.string("absent") == nil)
        #expect(try thing.value("int") == .integer(8))
    }

    // MARK: - Envelope

    @Test func envelopeIsValidated() throws {
        func envelope(_ change: (inout [String: PropertyListValue]) -> Void) -> Data {
            var dictionary: [String: PropertyListValue] = [
                "$archiver": .string("NSKeyedArchiver"), "$version": .integer(100_000),
                "$top": .dictionary(["root": .uid(1)]), "$objects": .array([.string("$null"), .string("x")]),
            ]
            change(&dictionary)
            return BinaryPropertyList.encode(.dictionary(dictionary))
        }
        #expect(try ArchivedValue.unarchive(envelope { _ in }) == .string("x"))
        let cases: [(Data, String)] = [
            (envelope { $0["$archiver"] = .string("NSArchiver") }, "$archiver"),
            (envelope { $0["$version"] = .integer(1) }, "$version"),
            (envelope { $0["$top"] = nil }, "$top is missing"),
            (envelope { $0["$objects"] = .string("x") }, "$objects is a string"),
            (envelope { $0["$objects"] = .array([.string("x")]) }, "$objects[0]"),
            (BinaryPropertyList.encode(.array([])), "not an archive's dictionary"),
        ]
        for (data, text) in cases {
            expectError(.notKeyedArchive, path: "", mentions: text) { _ = try KeyedArchive(data: data) }
        }
        expectError(.invalidPropertyList, path: "", mentions: "bplist00") { _ = try KeyedArchive(data: Data("nope".utf8)) }
        expectError(.notKeyedArchive, path: "", mentions: "no \"root\"") {
            _ = try ArchivedValue.unarchive(envelope { $0["$top"] = .dictionary(["opaque": .uid(1)]) })
        }
    }

    // MARK: - Helpers

    private func archive(_ objects: [PropertyListValue]) throws -> KeyedArchive {
        try KeyedArchive(data: BinaryPropertyList.encode(.dictionary([
            "$archiver": .string("NSKeyedArchiver"), "$version": .integer(100_000),
            "$top": .dictionary(["root": .uid(1)]), "$objects": .array(objects),
        ])))
    }

    private func expectError(_ code: KeyedArchiveError.Code, path: String, mentions text: String,
                             sourceLocation: SourceLocation = #_sourceLocation,
                             _ body: () throws -> Void) {
        do {
            try body()
            Issue.record("no error; expected \(code)", sourceLocation: sourceLocation)
        } catch let error as KeyedArchiveError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
            #expect(error.path == path, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains(text), "\(error.message)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("not a KeyedArchiveError: \(error)", sourceLocation: sourceLocation)
        }
    }
}
