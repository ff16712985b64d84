import Foundation
import Testing
import ObjectGraph

/// Loading Xcode's model source (`.xcdatamodeld`, `.xcdatamodel`, `contents`) from
/// the real models of the fixture corpus, and refusing broken ones with the file,
/// the line and the reason.
@Suite struct XcodeModelLoaderTests {
    // MARK: - Every model of the corpus

    @Test func manifestLoads() {
        #expect(CoreDataFixtures.manifest != nil, "no manifest.json under \(CoreDataFixtures.root.path)")
        #expect(CoreDataFixtures.xmlModels.count >= 50)
    }

    @Test(arguments: CoreDataFixtures.xmlModels)
    func everyXMLModelLoadsWithAllItsEntitiesAndProperties(path: String) throws {
        let url = CoreDataFixtures.url(path)
        let loaded = try XcodeModelLoader.load(url)
        let text = try String(contentsOf: url.appendingPathComponent("contents"), encoding: .utf8)
        // Counted from the text, independently of the parser.
        let entityCount = text.components(separatedBy: "<entity ").count - 1
        let propertyCount = text.components(separatedBy: "<attribute ").count - 1
            + text.components(separatedBy: "<relationship ").count - 1
        #expect(loaded.model.entities.count == entityCount)
        #expect(loaded.model.entities.reduce(0) { $0 + $1.properties.count } == propertyCount)
        #expect(loaded.contentsURL.lastPathComponent == "contents")
        try loaded.model.validate()
        for entity in loaded.model.entities {
            #expect(entity.managedObjectClass == ManagedObject.self)
            for case let relationship as RelationshipDescription in entity.properties {
                #expect(relationship.destinationEntity != nil, "\(entity.name).\(relationship.name)")
                if relationship.inverseName != nil {
                    #expect(relationship.inverseRelationship != nil, "\(entity.name).\(relationship.name)")
                }
            }
        }
        // The short form gives the same model.
        let model = try ManagedObjectModel(contentsOf: url)
        #expect(model.entities.map(\.name) == loaded.model.entities.map(\.name))
        #expect(model.versionIdentifiers == loaded.model.versionIdentifiers)
        #expect(model.configurations == loaded.model.configurations)
    }

    // MARK: - What the models hold

    @Test func bookmarksModelHasOrderedReflexiveRelationshipsFetchIndexesAndRenamingIDs() throws {
        let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url("ddg-bookmarks/BookmarksModel.xcdatamodeld/BookmarksModel 5.xcdatamodel"))
        let bookmark = try #require(model.entitiesByName["BookmarkEntity"])
        #expect(model.entities.count == 1)
        #expect(bookmark.managedObjectClassName == "BookmarkEntity")
        let attributes = bookmark.attributesByName
        #expect(attributes["isFolder"]?.type == .boolean)
        #expect(attributes["isFolder"]?.isOptional == false)
        #expect(attributes["isPendingDeletion"]?.defaultValue == .bool(false))
        #expect(attributes["isPendingDeletion"]?.versionHashModifier == "3")
        #expect(attributes["modifiedAt"]?.type == .date)
        #expect(attributes["uuid"]?.type == .string)
        #expect(attributes["title"]?.defaultValue == .null)

        let children = try #require(bookmark.relationshipsByName["children"])
        #expect(children.isToMany && children.isOrdered)
        #expect(children.deleteRule == .cascade)
        #expect(children.inverseRelationship === bookmark.relationshipsByName["parent"])
        let parent = try #require(bookmark.relationshipsByName["parent"])
        #expect(!parent.isToMany && !parent.isOrdered && parent.deleteRule == .nullify)
        let favorites = try #require(bookmark.relationshipsByName["favorites"])
        #expect(favorites.isToMany && favorites.isOrdered && favorites.inverseName == "favoriteFolders")
        #expect(bookmark.relationshipsByName["favoriteFolders"]?.renamingIdentifier == "favoriteFolder")

        #expect(bookmark.indexes == [
            FetchIndexDescription(name: "byUUID", propertyNames: ["uuid", "isPendingDeletion"]),
            FetchIndexDescription(name: "byURL", propertyNames: ["url", "isPendingDeletion"]),
            FetchIndexDescription(name: "byIsPendingDeletion", propertyNames: ["isPendingDeletion"]),
        ])
        #expect(model.versionIdentifiers.isEmpty)   // userDefinedModelVersionIdentifier=""
    }

    @Test func sampleModelHasThreeLevelInheritanceUniquenessTransformableAndUUID() throws {
        let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url("coredataplus-samplemodel/SampleModel.xcdatamodeld/SampleModel.xcdatamodel"))
        let car = try #require(model.entitiesByName["Car"])
        let sport = try #require(model.entitiesByName["SportCar"])
        let expensive = try #require(model.entitiesByName["ExpensiveSportCar"])
        let person = try #require(model.entitiesByName["Person"])
        #expect(car.subentities.map(\.name) == ["SportCar"])
        #expect(sport.superentity === car && expensive.superentity === sport)
        #expect(expensive.rootEntity === car)
        #expect(expensive.propertiesByName["numberPlate"] is AttributeDescription)   // inherited
        #expect(expensive.attributesByName["isLimitedEdition"]?.defaultValue == .bool(false))
        #expect(car.uniquenessConstraints == [["numberPlate"]])
        #expect(person.uniquenessConstraints == [["firstName", "lastName"]])
        #expect(car.attributesByName["color"]?.type == .transformable)
        #expect(car.attributesByName["color"]?.valueTransformerName == "ColorTransformer")
        #expect(car.attributesByName["currentDrivingSpeed"]?.isTransient == true)
        #expect(car.attributesByName["currentDrivingSpeed"]?.defaultValue == .integer(0))
        #expect(person.attributesByName["id"]?.type == .uuid)
        #expect(person.attributesByName["id"]?.isOptional == false)
        #expect(person.relationshipsByName["cars"]?.inverseRelationship === car.relationshipsByName["owner"])
        #expect(model.versionIdentifiers == ["1"])

        let renamed = try ManagedObjectModel(contentsOf: CoreDataFixtures.url("coredataplus-samplemodel/SampleModel.xcdatamodeld/SampleModel2.xcdatamodel"))
        #expect(renamed.entitiesByName["LuxuryCar"]?.renamingIdentifier == "ExpensiveSportCar")
        #expect(renamed.entitiesByName["Car"]?.indexes == [FetchIndexDescription(name: "byMakerAndNumberPlate", propertyNames: ["maker", "numberPlate"])])
        #expect(renamed.versionIdentifiers == ["2"])
    }

    @Test func configurationsAndModuleRelativeClassNamesLoad() throws {
        let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url("corestore-models/Model.xcdatamodeld"))
        #expect(model.configurations == ["Config1": ["TestEntity1AAA"], "Config2": ["TestEntity2"]])
        #expect(model.entities(forConfigurationName: "Config2").map(\.name) == ["TestEntity2"])
        #expect(model.entitiesByName["TestEntity1AAA"]?.managedObjectClassName == ".TestEntity1")
        let ordered = try #require(model.entitiesByName["TestEntity2"]?.relationshipsByName["testToManyOrdered"])
        #expect(ordered.isOrdered && ordered.inverseName == "testToOne")
        #expect(model.entitiesByName["TestEntity1AAA"]?.attributesByName["testDecimal"]?.type == .decimal)
    }

    @Test func fetchedPropertiesAreReportedAndTheirRequestsKept() throws {
        let loaded = try XcodeModelLoader.load(CoreDataFixtures.url("corestore-models/Classic.ColorsDemo.xcdatamodeld"))
        let template = try #require(loaded.fetchRequestTemplates.first)
        #expect(template.name == "fetchedPropertyFetchRequest" && template.entityName == "Palette")
        #expect(template.fetchedPropertyOwner?.hasSuffix(".testFetchProperty") == true)
        #expect(loaded.warnings.contains { $0.contains("fetched property testFetchProperty") && $0.contains("contents:") })
        for entity in loaded.model.entities { #expect(entity.propertiesByName["testFetchProperty"] == nil) }
    }

    @Test func abstractEntitiesUserInfoAndRelationshipsWithoutInverseLoad() throws {
        let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url("magicalrecord-testmodel/TestModel.xcdatamodeld"))
        #expect(model.entities.count == 12)
        let abstract = try #require(model.entitiesByName["AbstractRelatedEntity"])
        #expect(abstract.isAbstract && abstract.subentities.map(\.name) == ["ConcreteRelatedEntity"])
        let mapped = try #require(model.entitiesByName["MappedEntity"])
        #expect(mapped.userInfo == ["relatedByAttribute": "mapped"])
        #expect(mapped.attributesByName["testMappedEntityID"]?.userInfo == ["mappedKeyName": "id"])
        #expect(mapped.attributesByName["mappedEntityID"]?.type == .integer16)
        #expect(model.entitiesByName["EntityWithDifferentClassName"]?.managedObjectClassName == "DifferentClassNameMapping")
        let toMany = try #require(model.entitiesByName["SingleEntityRelatedToManyMappedEntitiesUsingMappedPrimaryKey"]?.relationshipsByName["mappedEntities"])
        #expect(toMany.inverseName == nil && toMany.deleteRule == .cascade && toMany.isToMany)
        #expect(toMany.userInfo == ["relatedByAttribute": "testMappedEntityID"])
        let secondary = try #require(model.entitiesByName["SingleEntityRelatedToMappedEntityWithSecondaryMappings"])
        #expect(secondary.attributesByName["notImportedAttribute"]?.defaultValue == .bool(true))
        #expect(secondary.attributesByName["notImportedAttribute"]?.isOptional == false)
    }

    @Test func versionIdentifiersDecimalsURIsAndDefaultsLoad() throws {
        let jsq = try ManagedObjectModel(contentsOf: CoreDataFixtures.url("jsqcoredatakit-models/ExampleModel.xcdatamodeld"))
        #expect(jsq.versionIdentifiers == ["3"])
        let restkit = try ManagedObjectModel.versions(ofModelAt: CoreDataFixtures.url("restkit-models/VersionedModel.xcdatamodeld"))
        #expect(Set(try restkit.values.map { try ManagedObjectModel(contentsOf: $0).versionIdentifiers }) == [["1.0"], ["2.0"], ["3.0"], ["4.0"]])

        let every = try ManagedObjectModel(contentsOf: CoreDataFixtures.url("ddg-models/BrowsingHistory.xcdatamodeld"))
        let attributes = every.entities.flatMap { $0.properties.compactMap { $0 as? AttributeDescription } }
        #expect(attributes.contains { $0.type == .uri })
        #expect(attributes.contains { $0.type == .uuid })
        #expect(attributes.contains { $0.renamingIdentifier == "numberOfVisits" })

        // Defaults of every kind in the corpus parse into the attribute's value type.
        for path in CoreDataFixtures.xmlModels {
            let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url(path))
            for entity in model.entities {
                for case let attribute as AttributeDescription in entity.properties where !attribute.defaultValue.isNull {
                    #expect(attribute.type.accepts(attribute.defaultValue), "\(path): \(entity.name).\(attribute.name)")
                }
            }
        }
    }

    // MARK: - Versions

    @Test(arguments: CoreDataFixtures.versionedModels)
    func everyVersionOfAVersionedModelIsReachable(path: String) throws {
        let package = CoreDataFixtures.url(path)
        let versions = try ManagedObjectModel.versions(ofModelAt: package)
        let folders = try FileManager.default.contentsOfDirectory(atPath: package.path).filter { $0.hasSuffix(".xcdatamodel") }
        #expect(Set(versions.keys) == Set(folders.map { String($0.dropLast(".xcdatamodel".count)) }))
        for url in versions.values {
            _ = try ManagedObjectModel(contentsOf: url)   // Xcode 3 versions (elements only) included
        }
        let current = try XcodeModelLoader.currentVersion(ofModelAt: package)
        let marker = package.appendingPathComponent(".xccurrentversion")
        if let plist = try? PropertyListSerialization.propertyList(from: Data(contentsOf: marker), format: nil) as? [String: Any],
           let name = plist["_XCCurrentVersionName"] as? String {
            #expect(current.lastPathComponent == name)
        } else if folders.count == 1 {
            #expect(current.lastPathComponent == folders[0])
        }
    }

    @Test func versionedModelLoadsTheVersionNamedByXCCurrentVersion() throws {
        let package = CoreDataFixtures.url("ddg-bookmarks/BookmarksModel.xcdatamodeld")
        let versions = try ManagedObjectModel.versions(ofModelAt: package)
        #expect(versions.count == 6)
        let loaded = try XcodeModelLoader.load(package)
        #expect(loaded.contentsURL.deletingLastPathComponent().lastPathComponent == "BookmarksModel 6.xcdatamodel")
        let v1 = try ManagedObjectModel(contentsOf: try #require(versions["BookmarksModel"]))
        #expect(v1.entitiesByName["BookmarkEntity"]?.attributesByName["isFavorite"] != nil)
        #expect(loaded.model.entitiesByName["BookmarkEntity"]?.attributesByName["isFavorite"] == nil)
    }

    @Test func withoutXCCurrentVersionTheLastVersionByNameIsUsedAndReported() throws {
        let workspace = try FixtureWorkspace()
        let source = try String(contentsOf: CoreDataFixtures.url("coredataplus-samplemodel3/SampleModel3.xcdatamodeld/SampleModel3.xcdatamodel/contents"), encoding: .utf8)
        for name in ["M 2", "M 10", "M"] { try workspace.write(source, to: "M.xcdatamodeld/\(name).xcdatamodel/contents") }
        let loaded = try XcodeModelLoader.load(workspace.url.appendingPathComponent("M.xcdatamodeld"))
        #expect(loaded.contentsURL.path.contains("M 10.xcdatamodel"))
        #expect(loaded.warnings.contains { $0.contains("no .xccurrentversion") })
    }

    // MARK: - Bad input

    @Test func aMissingModelThrowsWithItsPath() throws {
        let missing = URL(fileURLWithPath: "/nonexistent/Nothing.xcdatamodeld")
        let error = try #require(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: missing) }
        #expect(error.code == .unreadable)
        #expect(error.description.hasPrefix("/nonexistent/Nothing.xcdatamodeld: "))
    }

    @Test func truncatedXMLThrowsWithLineAndColumn() throws {
        let workspace = try FixtureWorkspace()
        let text = try String(contentsOf: CoreDataFixtures.url("magicalrecord-testmodel/TestModel.xcdatamodeld/TestModel.xcdatamodel/contents"), encoding: .utf8)
        let file = try workspace.write(String(text.prefix(text.count / 2)), to: "Broken.xcdatamodel/contents")
        let error = try #require(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: file.deletingLastPathComponent()) }
        #expect(error.code == .malformedXML)
        #expect(error.path == file.path)
        #expect((error.line ?? 0) > 1)
        #expect(error.description.contains("contents:\(error.line ?? 0)"))
    }

    @Test(arguments: ["Money", "Undefined", "ObjectID", "Composite"])
    func anUnknownAttributeTypeThrowsWithItsLine(typeName: String) throws {
        let workspace = try FixtureWorkspace()
        let file = try workspace.write(Self.model("""
                <entity name="Item">
                    <attribute name="title" attributeType="String"/>
                    <attribute name="price" attributeType="\(typeName)"/>
                </entity>
            """), to: "Bad.xcdatamodel/contents")
        let error = try #require(throws: ModelLoadingError.self) { try XcodeModelLoader.load(file) }
        #expect(error.code == .unknownAttributeType)
        #expect(error.line == 5)
        #expect(error.description.contains("Item.price") && error.description.contains(typeName))
    }

    @Test(arguments: [
        (#"<attribute name="n" attributeType="Integer 16" defaultValueString="70000"/>"#, ModelLoadingError.Code.invalidValue),
        (#"<attribute name="d" attributeType="Date" defaultValueString="yesterday"/>"#, .invalidValue),
        (#"<attribute name="s" attributeType="String" regularExpressionString="(["/>"#, .invalidValue),
        (#"<attribute attributeType="String"/>"#, .missingValue),
        (#"<relationship name="r" maxCount="1" deletionRule="Explode" destinationEntity="Item"/>"#, .invalidValue),
        (#"<relationship name="r" maxCount="1" deletionRule="Nullify" destinationEntity="Ghost"/>"#, .danglingReference),
        (#"<relationship name="r" maxCount="1" deletionRule="Nullify" destinationEntity="Item" inverseName="ghost"/>"#, .danglingReference),
        (#"<attribute name="a" attributeType="String"/><attribute name="a" attributeType="String"/>"#, .inconsistentModel),
    ])
    func brokenDeclarationsThrowWithTheirLine(element: String, code: ModelLoadingError.Code) throws {
        let workspace = try FixtureWorkspace()
        let file = try workspace.write(Self.model("<entity name=\"Item\">\n\(element)\n</entity>"), to: "Bad.xcdatamodel/contents")
        let error = try #require(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: file) }
        #expect(error.code == code, "\(error)")
        #expect(error.line == 4, "\(error)")
    }

    @Test func danglingParentsConfigurationsAndCurrentVersionsThrow() throws {
        let workspace = try FixtureWorkspace()
        let parent = try workspace.write(Self.model(#"<entity name="A" parentEntity="Ghost"/>"#), to: "P.xcdatamodel/contents")
        #expect(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: parent) }
        let cycle = try workspace.write(Self.model(#"<entity name="A" parentEntity="B"/><entity name="B" parentEntity="A"/>"#), to: "C.xcdatamodel/contents")
        #expect(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: cycle) }
        let configuration = try workspace.write(Self.model(#"<entity name="A"/><configuration name="X"><memberEntity name="Ghost"/></configuration>"#), to: "K.xcdatamodel/contents")
        #expect(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: configuration) }

        try workspace.write(Self.model(#"<entity name="A"/>"#), to: "V.xcdatamodeld/V.xcdatamodel/contents")
        try workspace.write(#"<?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict><key>_XCCurrentVersionName</key><string>V 9.xcdatamodel</string></dict></plist>"#,
                            to: "V.xcdatamodeld/.xccurrentversion")
        let error = try #require(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: workspace.url.appendingPathComponent("V.xcdatamodeld")) }
        #expect(error.code == .danglingReference && error.description.contains("V 9.xcdatamodel"))
    }

    @Test func unknownElementsAndXMLAttributesAreWarnedAboutNotMisread() throws {
        let workspace = try FixtureWorkspace()
        let file = try workspace.write(Self.model("""
                <entity name="Item" sparkle="YES">
                    <attribute name="when" attributeType="Date" defaultDateTimeInterval="3600" minValueString="0"/>
                    <attribute name="name" attributeType="String" minValueString="1" maxValueString="8" defaultValueString="x"/>
                    <hologram name="h"/>
                </entity>
                <fetchRequest name="All" entity="Item" predicateString="name != nil"/>
            """), to: "W.xcdatamodel/contents")
        let loaded = try XcodeModelLoader.load(file)
        #expect(loaded.warnings.contains { $0.hasSuffix("contents:3: entity Item: the XML attribute sparkle=\"YES\" is not understood and was ignored") })
        #expect(loaded.warnings.contains { $0.contains("<hologram>") })
        #expect(loaded.fetchRequestTemplates.map(\.predicateFormat) == ["name != nil"])
        let item = try #require(loaded.model.entitiesByName["Item"])
        #expect(item.attributesByName["when"]?.defaultValue == .date(Date(timeIntervalSinceReferenceDate: 3600)))
        #expect(item.attributesByName["when"]?.minimumValue == .date(Date(timeIntervalSinceReferenceDate: 0)))
        #expect(item.attributesByName["name"]?.minimumLength == 1 && item.attributesByName["name"]?.maximumLength == 8)
        #expect(item.attributesByName["name"]?.defaultValue == .string("x"))
    }

    @Test func aFileThatIsNotAModelThrows() throws {
        let workspace = try FixtureWorkspace()
        let plist = try workspace.write(#"<?xml version="1.0"?><plist version="1.0"><dict/></plist>"#, to: "NotModel.xcdatamodel/contents")
        #expect(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: plist) }
        let empty = try workspace.write("", to: "Empty.xcdatamodel/contents")
        #expect(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: empty) }
        try workspace.write("hello", to: "Folder/readme.txt")
        let folder = try #require(throws: ModelLoadingError.self) { try ManagedObjectModel(contentsOf: workspace.url.appendingPathComponent("Folder")) }
        #expect(folder.code == .notAModel)
    }

    /// A `contents` file around `body`; the body starts on line 3.
    private static func model(_ body: String) -> String {
        """
        <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
        <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0" userDefinedModelVersionIdentifier="">
        \(body)
        </model>
        """
    }
}
