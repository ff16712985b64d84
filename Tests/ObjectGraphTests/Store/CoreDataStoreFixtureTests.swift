import Foundation
import Testing
import ObjectGraph
import DataStackStores

/// Real stores written by Apple's Core Data, opened with the model version that
/// wrote them (loaded from Xcode's source), read back object by object and compared
/// with what SQLite itself holds, then edited and saved in place.
///
/// Each store is checked in four steps. A step that fails because of a known engine
/// limitation is listed in ``knownIssues`` with its cause; remove the entry once the
/// engine handles it (the test then reports the known issue as no longer occurring).
@Suite struct CoreDataStoreFixtureTests {
    enum Step: String, Sendable {
        /// `addPersistentStore` accepts the file with the model.
        case open
        /// Row counts per entity and every attribute value of every row.
        case rows
        /// To-one keys and to-many contents, including join tables.
        case relationships
        /// One object edited and saved; the file stays a valid Core Data store.
        case save
    }

    /// Engine limitations found with these stores, by store and step. Empty: every
    /// store reads, compares and saves. (SampleModel_V2 was one: Core Data left the
    /// old entity name ExpensiveSportCar in Z_PRIMARYKEY after renaming it LuxuryCar;
    /// the store now follows the entity's renaming identifier.)
    static let knownIssues: [String: [Step: String]] = [:]

    @Test(arguments: CoreDataFixtures.pairs)
    func storeReadsBackAsSQLiteHoldsItAndSavesInPlace(pair: CoreDataFixtures.Manifest.Pair) throws {
        let workspace = try FixtureWorkspace()
        let storeURL = try workspace.copyStore(pair.store)
        let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url(pair.model))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)

        var opened = false
        try check(.open, of: pair) {
            try coordinator.addPersistentStore(type: .sqlite, at: storeURL)
            opened = true
        }
        guard opened else { return }
        let reference = try FixtureSQLite(path: storeURL.path, model: model)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)

        try check(.rows, of: pair) {
            let mismatches = try context.performAndWait { try StoreReadback.attributeMismatches(in: context, with: reference) }
            #expect(mismatches.isEmpty, "\(mismatches.count) differences, first: \(mismatches.prefix(8).joined(separator: "; "))")
        }
        try check(.relationships, of: pair) {
            let mismatches = try context.performAndWait { try StoreReadback.relationshipMismatches(in: context, with: reference) }
            #expect(mismatches.isEmpty, "\(mismatches.count) differences, first: \(mismatches.prefix(8).joined(separator: "; "))")
        }
        try check(.save, of: pair) {
            try editAndSave(in: ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator), reference: reference)
        }
    }

    /// Runs a step, as a known issue when ``knownIssues`` names it for this store.
    private func check(_ step: Step, of pair: CoreDataFixtures.Manifest.Pair, _ body: () throws -> Void) throws {
        if let cause = Self.knownIssues[pair.store]?[step] {
            withKnownIssue(Comment(rawValue: "\(step.rawValue): \(cause)")) { try body() }
        } else {
            try body()
        }
    }

    // MARK: - Saving

    /// Edits one attribute of one object (or inserts an object into an empty store),
    /// saves, and checks the file with SQLite: the row's `Z_OPT` went up by one,
    /// no other column of the row changed, `Z_PRIMARYKEY` and `Z_METADATA` are intact,
    /// and `PRAGMA integrity_check` passes.
    private func editAndSave(in context: ManagedObjectContext, reference: FixtureSQLite) throws {
        let keysBefore = try reference.primaryKeyTable()
        let metadataBefore = try reference.metadataRow()

        let target: (entity: EntityDescription, pk: Int64, row: [String: FixtureSQLite.Value])? = try {
            for entity in reference.model.entities.sorted(by: { $0.name < $1.name }) {
                if let (pk, row) = try reference.rows(of: entity).min(by: { $0.key < $1.key }) { return (entity, pk, row) }
            }
            return nil
        }()
        guard let target else {
            try insertIntoEmptyStore(context: context, reference: reference, keysBefore: keysBefore)
            return
        }
        let edit = try #require(FixtureEdit(entity: target.entity, row: target.row, reference: reference),
                                "no attribute of \(target.entity.name) to edit")
        try context.performAndWait {
            var request = FetchRequest<ManagedObject>(entityName: target.entity.name)
            request.includesSubentities = false
            let object = try #require(try context.fetch(request).first { $0.objectID.primaryKey == target.pk })
            try object.setValue(edit.newValue, forKey: edit.attribute.name)
            try context.save()
        }

        let after = try #require(try reference.row(of: target.entity, primaryKey: target.pk))
        let optBefore = FixtureSQLite.Value.integerOrNil(target.row["Z_OPT"] ?? .null) ?? 0
        #expect(FixtureSQLite.Value.integerOrNil(after["Z_OPT"] ?? .null) == optBefore + 1)
        #expect(FixtureSQLite.Value.matches(edit.newValue, after[edit.column] ?? .null, type: edit.attribute.type),
                "\(edit.column) is \(after[edit.column] ?? .null) after the save")
        for (column, old) in target.row where column != "Z_OPT" && column != edit.column {
            #expect(FixtureSQLite.Value.sameStoredValue(old, after[column] ?? .null), "\(column) changed from \(old) to \(after[column] ?? .null)")
        }
        #expect(try reference.primaryKeyTable() == keysBefore)
        try expectMetadataIntact(reference: reference, before: metadataBefore)
    }

    private func insertIntoEmptyStore(context: ManagedObjectContext, reference: FixtureSQLite,
                                      keysBefore: [FixtureSQLite.PrimaryKeyRow]) throws {
        let entity = try #require(reference.model.entities.sorted(by: { $0.name < $1.name }).first { !$0.isAbstract })
        try context.performAndWait {
            let object = ManagedObject(entity: entity, insertInto: context)
            for (name, attribute) in entity.attributesByName where !attribute.isOptional && attribute.defaultValue.isNull {
                try object.setValue(FixtureEdit.sample(for: attribute.type), forKey: name)
            }
            try context.save()
        }
        let rows = try reference.rows(of: entity)
        #expect(rows.count == 1)
        #expect(rows.values.first.flatMap { FixtureSQLite.Value.integerOrNil($0["Z_OPT"] ?? .null) } == 1)
        let keysAfter = try reference.primaryKeyTable()
        let number = try #require(reference.entityNumbers[entity.name])
        for (old, new) in zip(keysBefore, keysAfter) {
            #expect(old.entity == new.entity && old.name == new.name && old.superEntity == new.superEntity)
            #expect(new.max == (old.entity == number ? old.max + 1 : old.max), "Z_MAX of \(new.name)")
        }
        #expect(keysAfter.count == keysBefore.count)
        try expectMetadataIntact(reference: reference, before: try reference.metadataRow())
    }

    private func expectMetadataIntact(reference: FixtureSQLite, before: FixtureSQLite.MetadataRow) throws {
        let after = try reference.metadataRow()
        #expect(after.count == 1)
        #expect(after.version == before.version && after.uuid == before.uuid)
        let plist = try #require(after.plist, "Z_METADATA.Z_PLIST is NULL")
        let decoded = try PropertyListSerialization.propertyList(from: plist, format: nil) as? [String: Any]
        #expect(decoded?["NSStoreType"] as? String == "SQLite")
        #expect(decoded?["NSStoreModelVersionHashes"] != nil)
        #expect(try reference.integrityCheck() == ["ok"])
    }
}
