import Foundation
@testable import ObjectGraph
import Testing
import DataStackSQLite
@testable import DataStackStores

/// A model inferred from a store's schema alone
/// (``ManagedObjectModel/init(inferredFromSchemaOfStoreAt:)``) opens the
/// store read-only and reads back what SQLite holds: every entity's rows,
/// every non-NULL value of every column, to-ones to the row their key names,
/// and join tables' members.
@Suite struct InferredSchemaModelTests {
    /// kik (framework ≤ 519) has neither a model file nor `Z_MODELCACHE`.
    static let kik = "plaso-apple-stores/stores/ios-kik.sqlite"
    /// kik, plus a store with ordered relationships (`Z_FOK_PARENT`, an ordered
    /// reflexive many-to-many) and one with clashing columns (`ZACCOUNT1…5`)
    /// and entity columns in a shared table.
    static let stores = [kik, "ddg-bookmarks/stores/Bookmarks_V5.sqlite", "plaso-apple-stores/stores/ios-NoteStore.sqlite"]

    /// A copy of a store opened read-only with its inferred model, and a direct SQLite reader.
    struct Opened {
        let workspace: FixtureWorkspace
        let url: URL
        let model: ManagedObjectModel
        let coordinator: PersistentStoreCoordinator
        let context: ManagedObjectContext
        let reference: FixtureSQLite

        init(_ path: String) throws {
            workspace = try FixtureWorkspace()
            url = try workspace.copyStore(path)
            model = try ManagedObjectModel(inferredFromSchemaOfStoreAt: url)
            var options = StoreOptions()
            options.isReadOnly = true
            coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
            context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            reference = try FixtureSQLite(path: url.path, model: model)
        }

        /// The objects of exactly `entity` (no subentities), by primary key.
        func objects(of entity: EntityDescription) throws -> [Int64: ManagedObject] {
            var request = FetchRequest<ManagedObject>(entityName: entity.name)
            request.includesSubentities = false
            let objects = try context.fetch(request)
            return Dictionary(uniqueKeysWithValues: objects.map { ($0.objectID.primaryKey ?? 0, $0) })
        }
    }

    @Test(arguments: stores) func everyEntityFetchesAsManyObjectsAsItHasRows(_ path: String) throws {
        let opened = try Opened(path)
        let raw = try SQLiteReference(opened.url)
        try opened.context.performAndWait {
            for entity in opened.model.entities {
                let number = try #require(opened.reference.entityNumbers[entity.name])
                let table = "Z" + entity.rootEntity.name.uppercased()
                let count = try raw.rows("SELECT count(*) FROM \(table) WHERE Z_ENT = \(number)")
                #expect(try [[String(opened.objects(of: entity).count)]] == count, "\(entity.name)")
            }
        }
    }

    /// Every non-NULL value of every row is read by a property of the row's
    /// entity: an attribute or to-one named as the column, the to-one an
    /// entity column belongs to, or the ordered to-many a `Z_FOK_` rank serves.
    @Test(arguments: stores) func everyNonNullColumnValueIsReadByAPropertyOfItsEntity(_ path: String) throws {
        let opened = try Opened(path)
        var checked = 0
        let problems = try opened.context.performAndWait { () -> [String] in
            var problems: [String] = []
            for entity in opened.model.entities {
                let objects = try opened.objects(of: entity)
                for (key, row) in try opened.reference.rows(of: entity) {
                    let object = try #require(objects[key], "\(entity.name) p\(key) was not fetched")
                    for (column, stored) in row where stored != .null && !["Z_PK", "Z_ENT", "Z_OPT"].contains(column) {
                        if let problem = try Self.problem(reading: column, stored, of: object, opened.reference) {
                            problems.append("\(entity.name) p\(key).\(column): \(problem)")
                        }
                        checked += 1
                    }
                }
            }
            return problems
        }
        #expect(problems.isEmpty, "\(problems.count) values not read, first: \(problems.prefix(5).joined(separator: "; "))")
        #expect(checked > 0)
    }

    /// Why `column`'s value `stored` is not what `object` reads, or nil when it is.
    static func problem(reading column: String, _ stored: FixtureSQLite.Value, of object: ManagedObject,
                        _ reference: FixtureSQLite) throws -> String? {
        let entity = object.entity
        if column.hasPrefix("Z_FOK_") {
            let toOne = entity.relationshipsByName[String(column.dropFirst("Z_FOK_".count)).lowercased()]
            return toOne?.inverseRelationship?.isOrdered == true ? nil : "no to-one whose ordered inverse ranks by it"
        }
        if let (number, key) = InferredSchema.TableReader.entityColumn(column) {
            guard let toOne = entity.relationshipsByName[key.lowercased()], !toOne.isToMany else { return "no to-one \(key.lowercased())" }
            guard let id = try object.objectIDs(for: toOne).first else { return "the to-one is nil" }
            let declared = reference.model.entities.first { reference.entityNumbers[$0.name] == number }
            guard declared.map(id.entity.isKind(of:)) == true else { return "the to-one points at \(id.entity.name), not a kind of entity \(number)" }
            return FixtureSQLite.Value.integerOrNil(stored) == reference.entityNumbers[id.entity.name] ? nil : "the destination is \(id.entity.name)"
        }
        let name = String(column.dropFirst()).lowercased()
        switch entity.propertiesByName[name] {
        case let attribute as AttributeDescription:
            let value = try object.value(forKey: name)
            return FixtureSQLite.Value.matches(value, stored, type: attribute.type) ? nil : "read \(String(describing: value)), stored \(stored)"
        case let toOne as RelationshipDescription where !toOne.isToMany:
            let key = try object.objectIDs(for: toOne).first?.primaryKey
            return key == FixtureSQLite.Value.integerOrNil(stored) ? nil : "the to-one reads p\(key.map(String.init) ?? "nil"), stored \(stored)"
        default:
            return "no property \(name)"
        }
    }

    @Test func kikStringAttributesReadAsTheirColumns() throws {
        let opened = try Opened(Self.kik)
        let raw = try SQLiteReference(opened.url)
        var compared = 0
        try opened.context.performAndWait {
            for entity in opened.model.entities {
                let number = try #require(opened.reference.entityNumbers[entity.name])
                let objects = try opened.objects(of: entity)
                for attribute in entity.attributesByName.values where attribute.type == .string {
                    let column = "Z" + attribute.name.uppercased()
                    let rows = try raw.rows("SELECT Z_PK, \(column) FROM Z\(entity.name.uppercased()) WHERE Z_ENT = \(number) ORDER BY Z_PK")
                    let read = try objects.keys.sorted().map { key -> [String?] in
                        [String(key), try objects[key]?.value(forKey: attribute.name) as? String]
                    }
                    #expect(read == rows, "\(entity.name).\(attribute.name)")
                    compared += rows.filter { $0[1] != nil }.count
                }
            }
        }
        #expect(compared > 100)
    }

    /// The destinations the name rules give kik's keys (none is left to a stand-in).
    @Test func kikToOnesPointAtTheEntitiesTheirNamesSuggest() throws {
        let workspace = try FixtureWorkspace()
        let model = try ManagedObjectModel(inferredFromSchemaOfStoreAt: workspace.copyStore(Self.kik))
        var destinations: [String: String] = [:]
        for entity in model.entities {
            for case let relationship as RelationshipDescription in entity.properties where !relationship.isToMany {
                destinations["\(entity.name).\(relationship.name)"] = relationship.destinationEntityName
                #expect(relationship.userInfo[ManagedObjectModel.inferredDestinationUserInfoKey] == "column name")
            }
        }
        #expect(destinations == [
            "KikAttachment.extra": "KikAttachmentExtra", "KikAttachment.message": "KikMessage",
            "KikAttachmentExtra.attachment": "KikAttachment",
            "KikChat.draftmessage": "KikMessage", "KikChat.extra": "KikChatExtra", "KikChat.lastmessage": "KikMessage",
            "KikChat.user": "KikUser",
            "KikChatExtra.chat": "KikChat", "KikChatExtra.lastseenmessage": "KikMessage",
            "KikMessage.chatextra": "KikChatExtra", "KikMessage.draftmessagechat": "KikChat",
            "KikMessage.lastmessagechat": "KikChat", "KikMessage.lastmessageuser": "KikUser", "KikMessage.user": "KikUser",
            "KikUser.chatuser": "KikChat", "KikUser.extra": "KikUserExtra", "KikUser.lastmessage": "KikMessage",
            "KikUserExtra.user": "KikUser",
        ])
        // Indexed integer attributes of this old store stay attributes.
        #expect(model.entitiesByName["KikMessage"]?.attributesByName["internalid"]?.type == .integer64)
        #expect(model.entitiesByName["KikUser"]?.attributesByName["jid"]?.type == .string)
    }

    /// A to-one reads the object of its destination whose primary key the
    /// column holds, and that object's row is the one the key names.
    @Test func kikToOnesResolveToTheRowTheirKeyNames() throws {
        let opened = try Opened(Self.kik)
        var resolved = 0
        try opened.context.performAndWait {
            for entity in opened.model.entities {
                let rows = try opened.reference.rows(of: entity)
                for case let toOne as RelationshipDescription in entity.properties where !toOne.isToMany {
                    let destination = try #require(toOne.destinationEntity)
                    let destinationRows = try opened.reference.rows(of: destination)
                    for (key, object) in try opened.objects(of: entity) {
                        guard let stored = rows[key]?["Z" + toOne.name.uppercased()].flatMap(FixtureSQLite.Value.integerOrNil) else { continue }
                        let id = try #require(try object.objectIDs(for: toOne).first)
                        #expect(id.primaryKey == stored && id.entity === destination)
                        // A key whose row is gone (kik's chat extras name message 124 of 60) stays a dangling ID.
                        guard let row = destinationRows[stored] else { continue }
                        let target = opened.context.object(with: id)
                        try target.loadValues()
                        let attribute = try #require(destination.attributesByName.values.min { $0.name < $1.name })
                        #expect(FixtureSQLite.Value.matches(try target.value(forKey: attribute.name), row["Z" + attribute.name.uppercased()] ?? .null,
                                                            type: attribute.type))
                        resolved += 1
                    }
                }
            }
        }
        #expect(resolved > 100)
    }

    /// Join-table to-manys hold the join table's members, and inferred
    /// inverses of to-ones hold the rows whose key names the object.
    @Test func kikToManysHoldWhatTheFileRecords() throws {
        let opened = try Opened(Self.kik)
        let raw = try SQLiteReference(opened.url)
        var joinRelationships: Set<String> = []
        var members = 0
        try opened.context.performAndWait {
            for entity in opened.model.entities {
                for case let toMany as RelationshipDescription in entity.properties where toMany.isToMany {
                    if toMany.inverseRelationship?.isToMany == true { joinRelationships.insert("\(entity.name).\(toMany.name)") }
                    for (key, object) in try opened.objects(of: entity) {
                        let expected = try Self.destinationKeys(of: toMany, primaryKey: key, opened.reference, raw)
                        let read = try object.objectIDs(for: toMany).compactMap(\.primaryKey)
                        #expect(Set(read) == Set(expected), "\(entity.name) p\(key).\(toMany.name)")
                        members += read.count
                    }
                }
            }
        }
        #expect(joinRelationships == ["KikChat.messages", "KikMessage.chat", "KikUser.bans", "KikUser.bansinverse",
                                      "KikUser.admins", "KikUser.adminsinverse", "KikUser.members", "KikUser.membersinverse"])
        #expect(members > 100)
    }

    /// The primary keys the file records for a to-many of the object `primaryKey`:
    /// the rows whose key names it for an inverse of a to-one; for a many-to-many,
    /// the join table `Z_<n><NAME>`, named from either side, read in the column
    /// `Z_<destination><NAME>` where the other column `Z_<owner><INVERSE>` is the object.
    static func destinationKeys(of toMany: RelationshipDescription, primaryKey: Int64, _ reference: FixtureSQLite,
                                _ raw: SQLiteReference) throws -> [Int64] {
        let inverse = try #require(toMany.inverseRelationship)
        let owner = try #require(toMany.entity)
        let destination = try #require(toMany.destinationEntity)
        let sql: String
        if !inverse.isToMany {
            let family = destination.selfAndDescendants.compactMap { reference.entityNumbers[$0.name] }.map(String.init).joined(separator: ",")
            sql = "SELECT Z_PK FROM \(reference.table(for: destination)) WHERE Z\(inverse.name.uppercased()) = \(primaryKey) AND Z_ENT IN (\(family))"
        } else {
            let own = try #require(reference.entityNumbers[owner.name])
            let other = try #require(reference.entityNumbers[destination.name])
            let tables = ["Z_\(own)\(toMany.name.uppercased())", "Z_\(other)\(inverse.name.uppercased())"]
            let table = try #require(try tables.first { try raw.rows("SELECT count(*) FROM sqlite_master WHERE name = '\($0)'") == [["1"]] })
            sql = "SELECT Z_\(other)\(toMany.name.uppercased()) FROM \(table) WHERE Z_\(own)\(inverse.name.uppercased()) = \(primaryKey)"
        }
        return try raw.rows(sql).compactMap { $0[0].flatMap { Int64($0) } }
    }

    // MARK: - Bad inputs

    @Test func aMissingFileThrowsCannotOpenNamingIt() throws {
        let url = try FixtureWorkspace().url.appendingPathComponent("missing.sqlite")
        let error = #expect(throws: PersistentStoreError.self) { try ManagedObjectModel(inferredFromSchemaOfStoreAt: url) }
        #expect(error?.code == .cannotOpen)
        #expect(error?.description.contains(url.path) == true)
    }

    @Test func aTextFileThrowsNotAStoreNamingIt() throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.write(String(repeating: "not a database\n", count: 100), to: "notes.sqlite")
        let error = #expect(throws: PersistentStoreError.self) { try ManagedObjectModel(inferredFromSchemaOfStoreAt: url) }
        #expect(error?.code == .notAStore)
        #expect(error?.description.contains(url.path) == true)
    }

    @Test func aSQLiteFileWithoutCoreDataTablesThrowsNotAStoreNamingIt() throws {
        let workspace = try FixtureWorkspace()
        let other = workspace.url.appendingPathComponent("other.sqlite")
        try Connection(path: other.path).execute("CREATE TABLE ZTHING (Z_PK INTEGER PRIMARY KEY, ZNAME VARCHAR)")
        let error = #expect(throws: PersistentStoreError.self) { try ManagedObjectModel(inferredFromSchemaOfStoreAt: other) }
        #expect(error?.code == .notAStore)
        #expect(error?.message.contains("Z_METADATA") == true)
        #expect(error?.description.contains(other.path) == true)

        // Metadata but no entity table: nothing to infer from.
        let half = workspace.url.appendingPathComponent("half.sqlite")
        try Connection(path: half.path).execute("CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB)")
        let noKeys = #expect(throws: PersistentStoreError.self) { try ManagedObjectModel(inferredFromSchemaOfStoreAt: half) }
        #expect(noKeys?.code == .notAStore)
        #expect(noKeys?.message.contains("Z_PRIMARYKEY") == true)
        #expect(noKeys?.description.contains(half.path) == true)
    }
}
