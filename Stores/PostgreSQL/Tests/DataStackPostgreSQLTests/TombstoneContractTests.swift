import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Testing

/// History tombstones (`preservesValueInHistoryOnDeletion`) on the SQLite
/// store and the PostgreSQL store alike: a deleted object's preserved values
/// come back with its delete change — after a save, a batch delete by
/// condition, and a batch delete by its rules.
@Suite("Tombstone contract", .serialized)
struct TombstoneContractTests {
    /// Tickets whose code, price, day, stamp and payload are preserved; a note that is not;
    /// a venue whose delete cascades to its tickets (a ticket's own relationship has no rule).
    static func model() -> ManagedObjectModel {
        func preserved(_ name: String, _ type: AttributeType) -> AttributeDescription {
            let attribute = AttributeDescription(name: name, type: type)
            attribute.preservesValueInHistoryOnDeletion = true
            return attribute
        }
        let ticket = EntityDescription(name: "Ticket", properties: [
            preserved("code", .string), preserved("price", .double), preserved("seat", .integer32), preserved("day", .date),
            preserved("stamp", .uuid), preserved("payload", .binaryData), preserved("vip", .boolean),
            AttributeDescription(name: "note", type: .string),
            RelationshipDescription(name: "venue", destination: "Venue", inverse: "tickets", deleteRule: .noAction),
        ])
        let venue = EntityDescription(name: "Venue", properties: [
            preserved("name", .string),
            RelationshipDescription(name: "tickets", destination: "Ticket", inverse: "venue", isToMany: true, deleteRule: .cascade),
        ])
        let plain = EntityDescription(name: "Plain", properties: [AttributeDescription(name: "label", type: .string)])
        return ManagedObjectModel(entities: [ticket, venue, plain])
    }

    static let stamp = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!

    private struct Fixture {
        let coordinator: PersistentStoreCoordinator
        let model: ManagedObjectModel

        func context() -> ManagedObjectContext { ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator) }

        /// The tombstones of the delete changes after `token`, by the deleted object.
        func tombstones(after token: PersistentHistoryToken?) throws -> [ObjectID: [String: PropertyValue]?] {
            var result: [ObjectID: [String: PropertyValue]?] = [:]
            for change in try coordinator.fetchHistory(.fetchHistory(after: token)).flatMap({ $0.changes ?? [] })
            where change.changeType == .delete {
                result[change.changedObjectID] = change.tombstone
            }
            return result
        }
    }

    /// Two tickets (one with every preserved value, one with none), a venue holding the first, a plain row.
    private func fixture(_ kind: StoreKind) throws -> (Fixture, full: ObjectID, empty: ObjectID, venue: ObjectID, plain: ObjectID) {
        var options = StoreOptions()
        options.persistentHistoryTracking = true
        let model = Self.model()
        let fixture = Fixture(coordinator: try kind.coordinator(model, at: try kind.makeLocation(), options: options), model: model)
        let context = fixture.context()
        let ids = try context.performAndWait {
            let entities = model.entitiesByName
            let full = ManagedObject(entity: try #require(entities["Ticket"]), insertInto: context)
            for (key, value) in [("code", "A-1 \"quoted\" \\ ü" as any Sendable), ("price", 12.5), ("seat", 42),
                                 ("day", Date(timeIntervalSinceReferenceDate: 86_400.25)), ("stamp", Self.stamp),
                                 ("payload", Data([0, 1, 0xfe, 0xff])), ("vip", true), ("note", "not kept")] {
                try full.setValue(value, forKey: key)
            }
            let empty = ManagedObject(entity: try #require(entities["Ticket"]), insertInto: context)
            let venue = ManagedObject(entity: try #require(entities["Venue"]), insertInto: context)
            try venue.setValue("Hall", forKey: "name")
            try full.setValue(venue, forKey: "venue")
            let plain = ManagedObject(entity: try #require(entities["Plain"]), insertInto: context)
            try plain.setValue("x", forKey: "label")
            try context.save()
            return (full.objectID, empty.objectID, venue.objectID, plain.objectID)
        }
        return (fixture, ids.0, ids.1, ids.2, ids.3)
    }

    static let fullTombstone: [String: PropertyValue] = [
        "code": .string("A-1 \"quoted\" \\ ü"), "price": .double(12.5), "seat": .integer(42),
        "day": .date(Date(timeIntervalSinceReferenceDate: 86_400.25)), "stamp": .uuid(stamp),
        "payload": .data(Data([0, 1, 0xfe, 0xff])), "vip": .bool(true),
    ]
    static let emptyTombstone: [String: PropertyValue] = [
        "code": .null, "price": .null, "seat": .null, "day": .null, "stamp": .null, "payload": .null, "vip": .null,
    ]

    @Test("a save's delete records the preserved values; an entity without any records none", arguments: StoreKind.allCases)
    func saveRecordsTombstones(_ kind: StoreKind) throws {
        let (fixture, full, empty, _, plain) = try fixture(kind)
        let token = try fixture.coordinator.currentPersistentHistoryToken()
        let context = fixture.context()
        try context.performAndWait {
            for id in [full, empty, plain] { context.delete(try context.existingObject(with: id)) }
            try context.save()
        }
        let tombstones = try fixture.tombstones(after: token)
        #expect(tombstones[full] == Self.fullTombstone)
        #expect(tombstones[empty] == Self.emptyTombstone)
        #expect(tombstones[plain] == .some(nil), "no preserved attribute: no tombstone")
    }

    @Test("a batch delete by condition records the preserved values of every row", arguments: StoreKind.allCases)
    func batchDeleteRecordsTombstones(_ kind: StoreKind) throws {
        let (fixture, full, empty, _, _) = try fixture(kind)
        // A ticket's relationship has no rule: the rows go by their condition, their values copied by the DELETE's RETURNING.
        let token = try fixture.coordinator.currentPersistentHistoryToken()
        let context = fixture.context()
        try context.performAndWait {
            _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Ticket")))
        }
        let tombstones = try fixture.tombstones(after: token)
        #expect(tombstones[full] == Self.fullTombstone)
        #expect(tombstones[empty] == Self.emptyTombstone)
    }

    @Test("a batch delete by its rules records the cascaded rows' preserved values", arguments: StoreKind.allCases)
    func cascadeRecordsTombstones(_ kind: StoreKind) throws {
        let (fixture, full, _, venue, _) = try fixture(kind)
        let token = try fixture.coordinator.currentPersistentHistoryToken()
        let context = fixture.context()
        try context.performAndWait { _ = try context.execute(BatchDeleteRequest(objectIDs: [venue])) }
        let tombstones = try fixture.tombstones(after: token)
        #expect(tombstones[venue] == ["name": .string("Hall")])
        #expect(tombstones[full] == Self.fullTombstone)
    }
}
