import Foundation
import Testing
import DataStack

/// Version 1 of a model declared by its classes.
final class DeclaredNoteV1: ManagedObject {
    @Managed(.unique) var title: String
    @Managed var text: String?
    override class var entityDeclaration: EntityDeclaration { EntityDeclaration(name: "Note") }
}

/// Version 2: `text` renamed `body`, a new attribute with a default, an index.
final class DeclaredNoteV2: ManagedObject {
    @Managed(.unique) var title: String
    @Managed(originalName: "text") var body: String?
    @Managed var pinned: Bool = false
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(name: "Note", indexes: [[\DeclaredNoteV2.pinned, \DeclaredNoteV2.title]])
    }
}

/// The stack set up with classes (`setup(classes:)`): a class-declared version
/// N+1 migrates a store of version N at setup.
@Suite struct StackClassDeclaredModelTests {
    @Test func aClassDeclaredVersionMigratesTheStoreOfTheVersionBefore() async throws {
        let directory = StackDirectory()
        let first = StackManager()
        try await first.setup(classes: [DeclaredNoteV1.self], storeURL: directory.storeURL)
        let importer = first.importerContext()
        try await importer.perform {
            for index in 0..<3 {
                let note = DeclaredNoteV1(context: importer)
                note.title = "N\(index)"
                note.text = "text \(index)"
            }
            try importer.save()
        }
        await first.close()

        let v1 = try ManagedObjectModel(classes: [DeclaredNoteV1.self])
        let v2 = try ManagedObjectModel(classes: [DeclaredNoteV2.self])
        #expect(v1.entityVersionHashesByName != v2.entityVersionHashesByName)

        let second = StackManager()
        try await second.setup(classes: [DeclaredNoteV2.self], storeURL: directory.storeURL)
        let main = second.mainContext
        let notes = try await main.perform {
            var request = FetchRequest<DeclaredNoteV2>()
            request.sortDescriptors = [FetchSort(key: "title")]
            return try main.fetch(request).map { [$0.title, $0.body ?? "nil", String($0.pinned)] }
        }
        #expect(notes == [["N0", "text 0", "false"], ["N1", "text 1", "false"], ["N2", "text 2", "false"]])
        await second.close()
    }

    /// The store caches the derived model (`Z_MODELCACHE`) as it caches any: a
    /// tool that opens the file with no classes (`datastack inspect`) reads the
    /// same entities, properties and version hashes back.
    @Test func theStoreCachesTheClassDeclaredModel() async throws {
        let directory = StackDirectory()
        let stack = StackManager()
        try await stack.setup(classes: [DeclaredNoteV2.self], storeURL: directory.storeURL)
        await stack.close()
        let declared = try ManagedObjectModel(classes: [DeclaredNoteV2.self])
        let cached = try ManagedObjectModel(cachedInStoreAt: directory.storeURL)
        #expect(cached.entityVersionHashesByName == declared.entityVersionHashesByName)
        let note = try #require(cached.entitiesByName["Note"])
        #expect(note.uniquenessConstraints == [["title"]])
        #expect(note.indexes.map(\.propertyNames) == [["pinned", "title"]])
        #expect(note.propertiesByName["body"]?.renamingIdentifier == "text")
        #expect((note.propertiesByName["pinned"] as? AttributeDescription)?.defaultValue == .bool(false))
    }

    @Test func setupWithClassesThrowsForABadDeclarationNamingClassAndProperty() async throws {
        let directory = StackDirectory()
        let stack = StackManager()
        await #expect {
            try await stack.setup(classes: [DeclaredLonelyNote.self], storeURL: directory.storeURL)
        } throws: { error in
            let error = error as? ModelDeclarationError
            return error?.code == .unresolvedInverse && error?.className == "DeclaredLonelyNote" && error?.propertyName == "tags"
        }
    }
}

final class DeclaredLonelyNote: ManagedObject {
    @Managed var tags: Set<DeclaredNoteV1>
}
