import Foundation
import Testing
@testable import ObjectGraph
@testable import DataStackStores

/// Transformable attributes with Core Data's keyed-archive transformers: Swift
/// values are stored as the `NSKeyedArchiver` archive Core Data writes and read
/// back as Swift values; `Data`, `Encodable` values and custom transformers keep
/// their bytes; an archive that does not unarchive throws.
@Suite struct TransformableArchiveTests {
    static func model() -> ManagedObjectModel {
        let secure = AttributeDescription(name: "secure", type: .transformable)
        secure.valueTransformerName = "NSSecureUnarchiveFromDataTransformerName"
        let color = AttributeDescription(name: "color", type: .transformable)
        color.valueTransformerName = "ColorTransformer"
        let note = EntityDescription(name: "Note", managedObjectClass: ManagedObject.self, properties: [
            AttributeDescription(name: "title", type: .string),
            AttributeDescription(name: "tags", type: .transformable),
            secure, color,
        ])
        return ManagedObjectModel(entities: [note])
    }

    @Test(arguments: allStoreTypes)
    func foundationValuesAreArchivedAndReadBack(type: StoreType) throws {
        let stack = try TestStack(type: type, model: Self.model())
        let date = Date(timeIntervalSinceReferenceDate: 700_000_000.25)
        let url = URL(string: "https://example.com/notes?id=7")!
        let context = stack.newContext()
        let id = try context.performAndWait { () throws -> ObjectID in
            let note = ManagedObject(entity: stack.model.entitiesByName["Note"]!, insertInto: context)
            try note.setValue(["a", "b"], forKey: "tags")
            try note.setValue(["when": date, "where": url, "count": 3] as [String: Any], forKey: "secure")
            #expect(try note.value(forKey: "tags") as? [String] == ["a", "b"])
            try context.save()
            return note.objectID
        }
        let reader = stack.newContext()
        try reader.performAndWait {
            let note = try reader.existingObject(with: id)
            #expect(try note.value(forKey: "tags") as? [String] == ["a", "b"])
            let secure = try #require(try note.value(forKey: "secure") as? [String: Any])
            #expect(secure["when"] as? Date == date)
            #expect(secure["where"] as? URL == url)
            #expect(secure["count"] as? Int == 3)
        }
        if type == .sqlite {
            let bytes = try #require(try RawStore.data(stack.storeURL, "SELECT ZTAGS FROM ZNOTE"))
            #expect(try ArchivedValue.unarchive(bytes) == .array([.string("a"), .string("b")]))
            #expect(bytes == ArchivedValue.array([.string("a"), .string("b")]).archived())
        }
    }

    /// A batch insert converts values as key-value coding does: one conversion for both.
    @Test(arguments: allStoreTypes)
    func batchInsertsArchiveFoundationValuesAsKeyValueCodingDoes(type: StoreType) throws {
        let stack = try TestStack(type: type, model: Self.model())
        let context = stack.newContext()
        try context.performAndWait {
            _ = try context.execute(BatchInsertRequest(entityName: "Note", objects: [
                ["title": "one", "tags": ["a", "b"], "secure": ["n": 1] as [String: Int]],
                ["title": "two", "tags": NSNull()],
            ]))
            let notes = try context.fetch(FetchRequest<ManagedObject>(entityName: "Note", predicate: nil, sortDescriptors: [FetchSort(key: "title")]))
            let note = try #require(notes.first)
            #expect(try note.value(forKey: "tags") as? [String] == ["a", "b"])
            #expect((try note.value(forKey: "secure") as? [String: Any])?["n"] as? Int == 1)
            // NSNull is no value, in a batch as through key-value coding: not an archive of NSNull.
            #expect(try notes.last?.value(forKey: "tags") == nil)
        }
        if type == .sqlite {
            let bytes = try #require(try RawStore.data(stack.storeURL, "SELECT ZTAGS FROM ZNOTE WHERE ZTITLE = 'one'"))
            #expect(bytes == ArchivedValue.array([.string("a"), .string("b")]).archived())
            #expect(try RawStore.int(stack.storeURL, "SELECT COUNT(*) FROM ZNOTE WHERE ZTITLE = 'two' AND ZTAGS IS NULL") == 1)
        }
    }

    @Test func dataAndEncodableValuesKeepTheirBytes() throws {
        let stack = try TestStack(type: .sqlite, model: Self.model())
        let context = stack.newContext()
        try context.performAndWait {
            let note = ManagedObject(entity: stack.model.entitiesByName["Note"]!, insertInto: context)
            try note.setValue(Data([1, 2, 3]), forKey: "tags")
            #expect(try note.value(forKey: "tags") as? Data == Data([1, 2, 3]))
            try note.setValue(Tags(names: ["x"]), forKey: "secure")   // Encodable, not a Foundation value
            let encoded = try #require(try note.value(forKey: "secure") as? Data)
            #expect(try TransformableCoding.decode(Tags.self, from: encoded) == Tags(names: ["x"]))
            try note.setValue(["red"], forKey: "color")                // a custom transformer: no archive
            let color = try #require(try note.value(forKey: "color") as? Data)
            #expect(try TransformableCoding.decode([String].self, from: color) == ["red"])
            try context.save()
        }
        #expect(try RawStore.data(stack.storeURL, "SELECT ZTAGS FROM ZNOTE") == Data([1, 2, 3]))
    }

    @Test func customTransformerGivesTheStoredArchiveAsData() throws {
        let stack = try TestStack(type: .sqlite, model: Self.model())
        let archive = ArchivedValue.string("blue").archived()
        try insertNote(in: stack)
        try RawStore.execute(stack.storeURL, "UPDATE ZNOTE SET ZCOLOR = X'\(hex(archive))', ZTAGS = X'\(hex(archive))'")
        let context = stack.newContext()
        try context.performAndWait {
            let note = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Note")).first)
            #expect(try note.value(forKey: "color") as? Data == archive)
            #expect(try note.value(forKey: "tags") as? String == "blue")
        }
    }

    @Test func archiveThatDoesNotUnarchiveThrowsNamingTheObjectAndKey() throws {
        let stack = try TestStack(type: .sqlite, model: Self.model())
        // An app class (as CoreDataPlus stores it), and a keyed archive cut short.
        let appClass = BinaryPropertyList.encode(.dictionary([
            "$archiver": .string("NSKeyedArchiver"), "$version": .integer(100_000), "$top": .dictionary(["root": .uid(1)]),
            "$objects": .array([.string("$null"), .dictionary(["$class": .uid(2), "text": .string("x")]),
                                .dictionary(["$classname": .string("Content"), "$classes": .array([.string("Content"), .string("NSObject")])])]),
        ]))
        let cut = ArchivedValue.array([.string("a")]).archived().prefix(60)
        let id = try insertNote(in: stack)
        try RawStore.execute(stack.storeURL, "UPDATE ZNOTE SET ZTAGS = X'\(hex(appClass))', ZSECURE = X'\(hex(cut))'")
        let context = stack.newContext()
        try context.performAndWait {
            let note = try context.existingObject(with: id)
            let error = try #require(throws: TransformedValueError.self) { try note.value(forKey: "tags") }
            #expect(error.key == "tags" && error.objectID == id)
            #expect(error.transformerName == "NSKeyedUnarchiveFromData")
            #expect(error.underlying.code == .unsupportedClass)
            #expect(error.description.contains("\"Content\""))
            let cutError = try #require(throws: TransformedValueError.self) { try note.value(forKey: "secure") }
            #expect(cutError.underlying.code == .invalidPropertyList)
            #expect(cutError.transformerName == "NSSecureUnarchiveFromDataTransformerName")
            // The bytes stay: saving another change writes them back unchanged.
            try note.setValue("edited", forKey: "title")
            try context.save()
        }
        #expect(try RawStore.data(stack.storeURL, "SELECT ZTAGS FROM ZNOTE") == appClass)
    }

    /// The fixture store Apple wrote: `Book.fileURL` with the default transformer.
    @Test func appleWrittenDefaultTransformerValuesRead() throws {
        let workspace = try FixtureWorkspace()
        let store = try workspace.copyStore("hwaxxer-bookmigration/stores/Model1.sqlite")
        let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url("hwaxxer-bookmigration/Model.xcdatamodeld/Model1.xcdatamodel"))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: store)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let names = try context.performAndWait {
            try context.fetch(FetchRequest<ManagedObject>(entityName: "Book")).compactMap { try $0.value(forKey: "fileURL") as? String }
        }
        #expect(Set(names).isSuperset(of: ["The Trial.file", "Cosmos.file", "Metamorphosis.file"]))
    }

    // MARK: - Helpers

    @discardableResult
    private func insertNote(in stack: TestStack) throws -> ObjectID {
        let context = stack.newContext()
        return try context.performAndWait {
            let note = ManagedObject(entity: stack.model.entitiesByName["Note"]!, insertInto: context)
            try note.setValue("n", forKey: "title")
            try context.save()
            return note.objectID
        }
    }

    private func hex(_ data: Data) -> String { data.map { String(format: "%02X", $0) }.joined() }
}
