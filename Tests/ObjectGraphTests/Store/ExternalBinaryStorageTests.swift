import Foundation
import Testing
@testable import ObjectGraph
@testable import DataStackStorage
@testable import DataStackStores

/// Attributes with external binary storage in a SQLite store: the tagged column
/// Core Data writes, the file beside the store for a large value, its removal
/// after the commit that replaced or deleted it, and a thrown error naming a
/// file that is missing.
@Suite struct ExternalBinaryStorageTests {
    static func model() -> ManagedObjectModel {
        let image = AttributeDescription(name: "image", type: .binaryData)
        image.allowsExternalBinaryDataStorage = true
        let photo = EntityDescription(name: "Photo", managedObjectClass: ManagedObject.self, properties: [
            AttributeDescription(name: "title", type: .string),
            image,
            AttributeDescription(name: "thumbnail", type: .binaryData),
        ])
        return ManagedObjectModel(entities: [photo])
    }

    static let large = Data((0..<(ExternalBinaryStorage.threshold + 1)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    static let otherLarge = Data(repeating: 0xAB, count: 300_000)

    @Test func smallValueIsStoredInlineAfterATag() throws {
        let stack = try TestStack(model: Self.model())
        let id = try save(in: stack) { photo in
            try photo.setValue(Data([0, 1, 2]), forKey: "image")
            try photo.setValue(Data([0, 1, 2]), forKey: "thumbnail")
        }
        #expect(try column(stack) == Data([0x01, 0, 1, 2]))
        #expect(try RawStore.data(stack.storeURL, "SELECT ZTHUMBNAIL FROM ZPHOTO") == Data([0, 1, 2]), "no tag without the flag")
        #expect(try read(id, "image", in: stack) == Data([0, 1, 2]))
        #expect(try files(stack).isEmpty)
    }

    @Test func largeValueGoesToAFileNamedInTheColumn() throws {
        let stack = try TestStack(model: Self.model())
        let id = try save(in: stack) { try $0.setValue(Self.large, forKey: "image") }
        let bytes = try #require(try column(stack))
        #expect(bytes.count == 38 && bytes.first == 0x02 && bytes.last == 0)
        let name = try #require(String(bytes: bytes.dropFirst().dropLast(), encoding: .ascii))
        #expect(UUID(uuidString: name)?.uuidString == name)
        let folder = stack.directory.url.appendingPathComponent(".Test_SUPPORT/_EXTERNAL_DATA")
        #expect(try Data(contentsOf: folder.appendingPathComponent(name)) == Self.large)
        #expect(try files(stack) == [name])
        #expect(try read(id, "image", in: stack) == Self.large)
        // A value of exactly the threshold stays inline.
        let exact = Data(repeating: 1, count: ExternalBinaryStorage.threshold)
        _ = try save(in: stack) { try $0.setValue(exact, forKey: "image") }
        #expect(try RawStore.int(stack.storeURL, "SELECT COUNT(*) FROM ZPHOTO WHERE substr(ZIMAGE, 1, 1) = X'01'") == 1)
    }

    @Test func updatesReplaceAndRemoveFilesOnlyAfterTheCommit() throws {
        let stack = try TestStack(model: Self.model())
        let id = try save(in: stack) { try $0.setValue(Self.large, forKey: "image") }
        let first = try files(stack)
        // Another attribute changes: the value keeps its file.
        try update(id, in: stack) { try $0.setValue("renamed", forKey: "title") }
        #expect(try files(stack) == first)
        // Another large value: a new file, the old one gone.
        try update(id, in: stack) { try $0.setValue(Self.otherLarge, forKey: "image") }
        let second = try files(stack)
        #expect(second.count == 1 && second != first)
        #expect(try read(id, "image", in: stack) == Self.otherLarge)
        // A small value: inline, and no file left.
        try update(id, in: stack) { try $0.setValue(Data([9]), forKey: "image") }
        #expect(try files(stack).isEmpty)
        #expect(try column(stack) == Data([0x01, 9]))
        // Large again, then nil.
        try update(id, in: stack) { try $0.setValue(Self.large, forKey: "image") }
        #expect(try files(stack).count == 1)
        try update(id, in: stack) { try $0.setValue(nil, forKey: "image") }
        #expect(try files(stack).isEmpty)
        #expect(try column(stack) == nil)
    }

    @Test func deletingTheObjectRemovesItsFile() throws {
        let stack = try TestStack(model: Self.model())
        let id = try save(in: stack) { try $0.setValue(Self.large, forKey: "image") }
        #expect(try files(stack).count == 1)
        let context = stack.newContext()
        try context.performAndWait {
            context.delete(try context.existingObject(with: id))
            try context.save()
        }
        #expect(try files(stack).isEmpty)
    }

    @Test func aSaveThatFailsRemovesTheFilesItWrote() throws {
        let stack = try TestStack(model: Self.model())
        let id = try save(in: stack) { try $0.setValue("v1", forKey: "title") }
        let stale = stack.newContext()
        try stale.performAndWait { _ = try stale.existingObject(with: id).value(forKey: "title") }
        try update(id, in: stack) { try $0.setValue("v2", forKey: "title") }
        // The stale context's save conflicts (merge policy .error): nothing is written, and no file stays.
        let failed = stale.performAndWait { () -> (any Error)? in
            do {
                try stale.existingObject(with: id).setValue(Self.large, forKey: "image")
                try stale.save()
                return nil
            } catch {
                return error
            }
        }
        #expect(failed != nil)
        #expect(try files(stack).isEmpty)
        #expect(try column(stack) == nil)
    }

    @Test func missingFileIsAnErrorNamingTheFile() throws {
        let stack = try TestStack(model: Self.model())
        let id = try save(in: stack) { try $0.setValue(Self.large, forKey: "image") }
        let name = try #require(try files(stack).first)
        try FileManager.default.removeItem(at: stack.directory.url.appendingPathComponent(".Test_SUPPORT/_EXTERNAL_DATA/\(name)"))
        let context = stack.newContext()
        try context.performAndWait {
            let object = context.object(with: id)
            let error = try #require(throws: FaultFulfillmentError.self) { try object.value(forKey: "image") }
            #expect(error.description.contains(name) && error.description.contains("is missing"))
            #expect(error.description.contains("Photo.image of row"))
            let fetchError = try #require(throws: PersistentStoreError.self) {
                try context.fetch(FetchRequest<ManagedObject>(entityName: "Photo"))
            }
            #expect(fetchError.code == .ioFailure && fetchError.url?.lastPathComponent == name)
        }
    }

    @Test func columnsInEveryFormRead() throws {
        let stack = try TestStack(model: Self.model())
        let id = try save(in: stack) { try $0.setValue("x", forKey: "title") }
        let folder = stack.directory.url.appendingPathComponent(".Test_SUPPORT/_EXTERNAL_DATA")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let name = "0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9"
        try Data("from a file".utf8).write(to: folder.appendingPathComponent(name))
        let withoutNul = "02" + Data(name.utf8).map { String(format: "%02X", $0) }.joined()
        let cases: [(sql: String, expected: Data)] = [
            ("X'01414243'", Data("ABC".utf8)),            // inline
            ("X'\(withoutNul)'", Data("from a file".utf8)),  // a file, no NUL after the name
            ("X'\(withoutNul)00'", Data("from a file".utf8)), // a file, NUL-terminated
            ("X'414243'", Data("ABC".utf8)),               // untagged: as it is
            ("X'0203'", Data([2, 3])),                     // a 0x02 that names no file: as it is
            ("X''", Data()),
        ]
        for (sql, expected) in cases {
            try RawStore.execute(stack.storeURL, "UPDATE ZPHOTO SET ZIMAGE = \(sql)")
            #expect(try read(id, "image", in: stack) == expected, "\(sql)")
        }
    }

    @Test func dictionaryFetchesReadTheFile() throws {
        let stack = try TestStack(model: Self.model())
        _ = try save(in: stack) { try $0.setValue(Self.large, forKey: "image") }
        let context = stack.newContext()
        let rows = try context.performAndWait {
            var request = FetchRequest<[String: Any]>(entityName: "Photo")
            request.resultType = .dictionary
            request.propertiesToFetch = ["image"]
            return try context.fetch(request)
        }
        #expect(rows.first?["image"] as? Data == Self.large)

        // The computed form of the same fetch (grouped): the same values.
        let grouped = try context.performAndWait {
            var request = FetchRequest<[String: Any]>(entityName: "Photo")
            request.resultType = .dictionary
            request.propertiesToFetch = ["title", "image"]
            request.propertiesToGroupBy = ["title", "image"]
            return try context.fetch(request)
        }
        #expect(grouped.count == 1)
        #expect(grouped.first?["image"] as? Data == Self.large)
    }

    @Test func batchInsertAndUpdateTagTheirValuesInline() throws {
        let stack = try TestStack(model: Self.model())
        let bytes = Data([0, 1, 0, 2, 0])
        let context = stack.newContext()
        try context.performAndWait {
            _ = try context.execute(BatchInsertRequest(entityName: "Photo", objects: [["title": "b", "image": bytes]]))
        }
        #expect(try column(stack) == Data([0x01]) + bytes)
        try context.performAndWait {
            _ = try context.execute(BatchUpdateRequest(entityName: "Photo", propertiesToUpdate: ["image": .constant(.data(Data([0, 0, 7])))]))
        }
        #expect(try column(stack) == Data([0x01, 0, 0, 7]))
        let id = try context.performAndWait { try context.fetch(FetchRequest<ManagedObject>(entityName: "Photo")).first!.objectID }
        #expect(try read(id, "image", in: stack) == Data([0, 0, 7]))
    }

    @Test func batchesRemoveTheFilesOfValuesTheyOverwriteOrDelete() throws {
        let stack = try TestStack(model: Self.model())
        let context = stack.newContext()
        _ = try save(in: stack) { try $0.setValue(Self.large, forKey: "image") }
        try context.performAndWait {
            _ = try context.execute(BatchUpdateRequest(entityName: "Photo", propertiesToUpdate: ["image": .constant(.data(Data([5])))]))
        }
        #expect(try files(stack).isEmpty)
        #expect(try column(stack) == Data([0x01, 5]))
        _ = try save(in: stack) { try $0.setValue(Self.large, forKey: "image") }
        #expect(try files(stack).count == 1)
        try context.performAndWait { _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Photo"))) }
        #expect(try files(stack).isEmpty)
        #expect(try RawStore.int(stack.storeURL, "SELECT COUNT(*) FROM ZPHOTO") == 0)
    }

    @Test func externallyStoredAttributesAreNeverTombstoned() {
        let image = AttributeDescription(name: "image", type: .binaryData)
        image.allowsExternalBinaryDataStorage = true
        image.preservesValueInHistoryOnDeletion = true
        let key = AttributeDescription(name: "key", type: .string)
        key.preservesValueInHistoryOnDeletion = true
        let entity = EntityDescription(name: "Photo", managedObjectClass: ManagedObject.self, properties: [image, key])
        _ = ManagedObjectModel(entities: [entity])
        let layout = HistoryLayout.EntityLayout(entity: entity, number: 1)
        #expect(layout.tombstoneSlots == [key.index])
    }

    @Test func xcodeModelFlagLoads() throws {
        let workspace = try FixtureWorkspace()
        let file = try workspace.write("""
            <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
                <entity name="Item">
                    <attribute name="image" optional="YES" attributeType="Binary" allowsExternalBinaryDataStorage="YES"/>
                    <attribute name="name" optional="YES" attributeType="String" allowsExternalBinaryDataStorage="YES"/>
                </entity>
            </model>
            """, to: "E.xcdatamodel/contents")
        let loaded = try XcodeModelLoader.load(file)
        let item = try #require(loaded.model.entitiesByName["Item"])
        #expect(item.attributesByName["image"]?.allowsExternalBinaryDataStorage == true)
        #expect(!loaded.warnings.contains { $0.contains("Item.image") })
        #expect(loaded.warnings.contains { $0.contains("Item.name allows external binary storage") })
    }

    // MARK: - Helpers

    /// Inserts a photo, lets `body` set it, saves; returns its ID.
    private func save(in stack: TestStack, _ body: (ManagedObject) throws -> Void) throws -> ObjectID {
        let context = stack.newContext()
        return try context.performAndWait {
            let photo = ManagedObject(entity: stack.model.entitiesByName["Photo"]!, insertInto: context)
            try body(photo)
            try context.save()
            return photo.objectID
        }
    }

    private func update(_ id: ObjectID, in stack: TestStack, _ body: (ManagedObject) throws -> Void) throws {
        let context = stack.newContext()
        try context.performAndWait {
            try body(try context.existingObject(with: id))
            try context.save()
        }
    }

    /// The value as a new context reads it.
    private func read(_ id: ObjectID, _ key: String, in stack: TestStack) throws -> Data? {
        let context = stack.newContext()
        return try context.performAndWait { try context.existingObject(with: id).value(forKey: key) as? Data }
    }

    /// The image column of the last row.
    private func column(_ stack: TestStack) throws -> Data? {
        try RawStore.data(stack.storeURL, "SELECT ZIMAGE FROM ZPHOTO ORDER BY Z_PK DESC LIMIT 1")
    }

    /// The names in the store's `_EXTERNAL_DATA` folder.
    private func files(_ stack: TestStack) throws -> [String] {
        let folder = stack.directory.url.appendingPathComponent(".Test_SUPPORT/_EXTERNAL_DATA")
        guard FileManager.default.fileExists(atPath: folder.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
    }
}
