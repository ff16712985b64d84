import DataStack
import DataStackSync
import Foundation
import Testing

/// Replicas in one process: each a stack on its own SQLite file, syncing
/// through one in-memory hub; each cycle run with `syncNow()`, so every test
/// says exactly which replica has pushed and pulled what.
@Suite("Sync engine")
struct SyncEngineTests {
    /// - Parameter unique: whether companies have a unique `symbol`.
    static func model(unique: Bool = false) -> ManagedObjectModel {
        let hubWins = AttributeDescription(name: "motto", type: .string)
        hubWins.userInfo[SyncMergePolicy.userInfoKey] = "hubWins"
        let company = EntityDescription(name: "Company", properties: [
                AttributeDescription(name: "name", type: .string),
                AttributeDescription(name: "employees", type: .integer64, isOptional: false, defaultValue: .integer(0)),
                hubWins,
                RelationshipDescription(name: "tags", destination: "Tag", inverse: "companies", isToMany: true),
                RelationshipDescription(name: "staff", destination: "Person", inverse: "employer", isToMany: true, deleteRule: .cascade),
            ] + (unique ? [AttributeDescription(name: "symbol", type: .string)] : []))
        if unique { company.uniquenessConstraints = [["symbol"]] }
        return ManagedObjectModel(entities: [
            company,
            EntityDescription(name: "Tag", properties: [
                AttributeDescription(name: "label", type: .string),
                RelationshipDescription(name: "companies", destination: "Company", inverse: "tags", isToMany: true),
            ]),
            EntityDescription(name: "Person", properties: [
                AttributeDescription(name: "name", type: .string),
                RelationshipDescription(name: "employer", destination: "Company", inverse: "staff"),
            ]),
        ])
    }

    /// Two replicas of one hub that both have a company of this name.
    static func twoReplicas(sharing company: String) async throws -> (InMemorySyncHub, Replica, Replica) {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub)
        let b = try await Replica(hub: hub)
        try a.insertCompany(company)
        try a.engine.syncNow()
        try b.engine.syncNow()
        return (hub, a, b)
    }

    /// A new object of `entity` in `context`.
    static func insert(_ entity: String, into context: ManagedObjectContext) throws -> ManagedObject {
        let description = try #require(context.persistentStoreCoordinator?.managedObjectModel.entitiesByName[entity])
        return ManagedObject(entity: description, insertInto: context)
    }

    static func integer(_ value: Any?) -> Int64? {
        (value as? any BinaryInteger).map { Int64($0) }
    }

    /// A replica: a stack on a file of its own, and its engine.
    final class Replica: Sendable {
        let folder: URL
        let stack: StackManager
        let engine: SyncEngine

        init(hub: any SyncHub, folder: URL? = nil, unique: Bool = false, pullInterval: Duration = .seconds(1),
             chunkSize: Int = 500) async throws {
            let folder = folder ?? FileManager.default.temporaryDirectory.appendingPathComponent("SyncEngineTests-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            self.folder = folder
            stack = StackManager()
            try await stack.setup(model: SyncEngineTests.model(unique: unique), storeURL: folder.appendingPathComponent("Replica.sqlite"))
            var options = SyncOptions(hub: hub)
            options.pullInterval = pullInterval
            options.chunkSize = chunkSize
            engine = try SyncEngine(stack: stack, options: options)
        }

        /// Saves through an importer context, as an app's import would.
        func save(_ body: @escaping (ManagedObjectContext) throws -> Void) throws {
            let context = stack.importerContext()
            try context.performAndWait {
                try body(context)
                try context.save()
            }
        }

        /// Every object as `Entity name-or-label: sorted values`, to compare replicas.
        func dump() throws -> [String] {
            let context = stack.importerContext()
            return try context.performAndWait {
                var lines: [String] = []
                for entity in ["Company", "Tag", "Person"] {
                    for object in try context.fetch(FetchRequest<ManagedObject>(entityName: entity)) {
                        lines.append(try Self.describe(object))
                    }
                }
                return lines.sorted()
            }
        }

        static func describe(_ object: ManagedObject) throws -> String {
            func key(_ object: ManagedObject) throws -> String {
                "\(object.entity.name):\((try object.value(forKey: object.entity.name == "Tag" ? "label" : "name") as? String) ?? "-")"
            }
            var parts: [String] = []
            for name in object.entity.propertiesByName.keys.sorted() {
                let value = try object.value(forKey: name)
                switch value {
                case let related as ManagedObject: parts.append("\(name)=\(try key(related))")
                case let set as Set<ManagedObject>: parts.append("\(name)=[\(try set.map(key).sorted().joined(separator: ","))]")
                case nil: parts.append("\(name)=nil")
                case let some?: parts.append("\(name)=\(some)")
                }
            }
            return "\(try key(object)) \(parts.joined(separator: " "))"
        }

        /// Saves a new company with this name (and unique symbol, on a model that has one).
        func insertCompany(_ name: String, symbol: String? = nil) throws {
            try save { context in
                let company = try SyncEngineTests.insert("Company", into: context)
                try company.setValue(name, forKey: "name")
                if let symbol { try company.setValue(symbol, forKey: "symbol") }
            }
        }

        func object(_ entity: String, named name: String, in context: ManagedObjectContext) throws -> ManagedObject {
            let request = FetchRequest<ManagedObject>(entityName: entity, predicate: try FetchPredicate(format: entity == "Tag" ? "label == %@" : "name == %@", name))
            return try #require(try context.fetch(request).first, "\(entity) \(name) is not on this replica")
        }

        func update(_ entity: String, named name: String, _ body: @escaping (ManagedObject) throws -> Void) throws {
            try save { context in try body(try self.object(entity, named: name, in: context)) }
        }
    }

    @Test("an insert on one replica reaches the other with its values and relationships, by global ID")
    func insertTravels() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub)
        let b = try await Replica(hub: hub)
        try a.save { context in
            let company = try SyncEngineTests.insert("Company", into: context)
            try company.setValue("ACME", forKey: "name")
            try company.setValue(Int64(12), forKey: "employees")
            let tag = try SyncEngineTests.insert("Tag", into: context)
            try tag.setValue("rockets", forKey: "label")
            try company.setValue(Set([tag]), forKey: "tags")
            let person = try SyncEngineTests.insert("Person", into: context)
            try person.setValue("Wile", forKey: "name")
            try person.setValue(company, forKey: "employer")
        }
        try a.engine.syncNow()
        try b.engine.syncNow()
        #expect(try b.dump() == a.dump())
        #expect(try b.dump().contains("Company:ACME employees=12 motto=nil name=ACME staff=[Person:Wile] tags=[Tag:rockets]"))
        // Nothing new: a second cycle on both changes nothing and pushes nothing back.
        try b.engine.syncNow()
        try a.engine.syncNow()
        #expect(try b.dump() == a.dump())
        #expect(try hub.pull(after: 0, limit: 1000).allSatisfy { $0.change.replica == a.engine.replica })
    }

    @Test("concurrent edits of different attributes both survive; the same attribute goes to the last writer")
    func fieldByField() async throws {
        let (hub, a, b) = try await Self.twoReplicas(sharing: "ACME")
        // Offline on both: A changes employees, B the motto; both change the name, B later.
        try a.update("Company", named: "ACME") { try $0.setValue(Int64(40), forKey: "employees") }
        try b.update("Company", named: "ACME") { try $0.setValue("Beep", forKey: "motto") }
        try a.update("Company", named: "ACME") { try $0.setValue("ACME Corp", forKey: "name") }
        try b.update("Company", named: "ACME") { try $0.setValue("ACME Inc", forKey: "name") }
        try a.engine.syncNow()
        try b.engine.syncNow()
        try a.engine.syncNow()
        let dump = try a.dump()
        #expect(try b.dump() == dump)
        // The name goes to whichever change has the greater hybrid timestamp, as on every replica.
        let names = try hub.pull(after: 0, limit: 100).map(\.change).filter { $0.values["name"] != nil && $0.kind == .update }
        let winner = try #require(names.max { $0.timestamp < $1.timestamp }?.values["name"])
        #expect(names.count == 2)
        #expect(dump.contains { $0.hasPrefix("Company:\(winner == .string("ACME Inc") ? "ACME Inc" : "ACME Corp") employees=40 motto=Beep") }, "\(dump)")
    }

    @Test("a hub-wins attribute keeps the value the hub held first; many-to-many adds and removes merge")
    func hubWinsAndMembers() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub)
        let b = try await Replica(hub: hub)
        try a.save { context in
            let company = try SyncEngineTests.insert("Company", into: context)
            try company.setValue("ACME", forKey: "name")
            var tags = Set<ManagedObject>()
            for label in ["x", "y", "z"] {
                let tag = try SyncEngineTests.insert("Tag", into: context)
                try tag.setValue(label, forKey: "label")
                if label != "z" { tags.insert(tag) }
            }
            try company.setValue(tags, forKey: "tags")
        }
        try a.engine.syncNow()
        try b.engine.syncNow()
        try a.update("Company", named: "ACME") { company in
            try company.setValue("from A", forKey: "motto")
            let tags = try #require(company.value(forKey: "tags") as? Set<ManagedObject>)
            try company.setValue(tags.filter { (try? $0.value(forKey: "label") as? String) != "x" }, forKey: "tags")
        }
        try b.save { context in
            let company = try b.object("Company", named: "ACME", in: context)
            try company.setValue("from B", forKey: "motto")
            let tags = try #require(company.value(forKey: "tags") as? Set<ManagedObject>)
            try company.setValue(tags.union([try b.object("Tag", named: "z", in: context)]), forKey: "tags")
        }
        try a.engine.syncNow()   // A's motto reaches the hub first
        try b.engine.syncNow()
        try a.engine.syncNow()
        let dump = try a.dump()
        #expect(try b.dump() == dump)
        #expect(dump.contains { $0.hasPrefix("Company:ACME employees=0 motto=from A name=ACME staff=[] tags=[Tag:y,Tag:z]") }, "\(dump)")
    }

    @Test("with the hub unreachable saves go on and the status says offline; once it is back the replicas converge")
    func offlineThenConverge() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub)
        let b = try await Replica(hub: hub)
        hub.isReachable = false
        try a.insertCompany("Offline Co")
        #expect(throws: SyncError.self) { try a.engine.syncNow() }
        guard case .offline(let error) = a.engine.status else {
            Issue.record("status is \(a.engine.status), not offline")
            return
        }
        #expect(error.code == .offline)
        hub.isReachable = true
        try a.engine.syncNow()
        try b.engine.syncNow()
        #expect(a.engine.status == .idle)
        #expect(try b.dump() == a.dump())
        #expect(try b.dump().contains { $0.hasPrefix("Company:Offline Co") })
    }

    @Test("a delete reaches the other replica; an edit made there concurrently does not bring the object back")
    func deleteWins() async throws {
        let (_, a, b) = try await Self.twoReplicas(sharing: "Gone")
        try a.save { context in context.delete(try a.object("Company", named: "Gone", in: context)) }
        try b.update("Company", named: "Gone") { try $0.setValue(Int64(7), forKey: "employees") }
        try a.engine.syncNow()
        try b.engine.syncNow()
        try a.engine.syncNow()
        #expect(try a.dump() == b.dump())
        #expect(try a.dump().isEmpty)
    }

    @Test("the engine reopened on the same store keeps its replica ID and pushes nothing twice")
    func reopen() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub)
        try a.insertCompany("Once")
        try a.engine.syncNow()
        let again = try SyncEngine(stack: a.stack, options: SyncOptions(hub: hub))
        #expect(again.replica == a.engine.replica)
        try again.syncNow()
        #expect(try hub.pull(after: 0, limit: 100).count == 1)
    }

    @Test("two replicas inserting the same unique key offline converge to one object, fields merged, relationships moved to it")
    func uniqueKeyTwins() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub, unique: true)
        let b = try await Replica(hub: hub, unique: true)
        let c = try await Replica(hub: hub, unique: true)
        func insert(_ replica: Replica, name: String, employees: Int64, person: String) throws {
            try replica.save { context in
                    let company = try SyncEngineTests.insert("Company", into: context)
                try company.setValue("ACME", forKey: "symbol")
                try company.setValue(name, forKey: "name")
                try company.setValue(employees, forKey: "employees")
                let staff = try SyncEngineTests.insert("Person", into: context)
                try staff.setValue(person, forKey: "name")
                try staff.setValue(company, forKey: "employer")
            }
        }
        try insert(a, name: "ACME from A", employees: 1, person: "Ann")
        try insert(b, name: "ACME from B", employees: 2, person: "Bob")
        try a.engine.syncNow()   // A's insert is first on the hub: it survives
        try b.engine.syncNow()   // B finds its own twin, not yet on the hub, and merges it into A's
        try a.engine.syncNow()
        try c.engine.syncNow()   // C sees both inserts in hub order and merges the second into the first
        try b.engine.syncNow()
        let dump = try a.dump()
        #expect(try b.dump() == dump)
        #expect(try c.dump() == dump)
        let companies = dump.filter { $0.hasPrefix("Company:") }
        #expect(companies.count == 1, "\(dump)")
        // Both people now work for the one company; its fields are the last writer's (B saved last).
        #expect(companies.first?.contains("staff=[Person:Ann,Person:Bob]") == true, "\(dump)")
        #expect(companies.first?.contains("symbol=ACME") == true)
        // The twin's later edits, made on B before it learnt of the merge, reach the survivor everywhere.
        try b.update("Company", named: try #require(companies.first?.contains("from B") == true ? "ACME from B" : "ACME from A")) {
            try $0.setValue(Int64(99), forKey: "employees")
        }
        try b.engine.syncNow()
        try a.engine.syncNow()
        try c.engine.syncNow()
        #expect(try a.dump() == b.dump())
        #expect(try c.dump() == a.dump())
        #expect(try a.dump().contains { $0.contains("employees=99") })
    }

    @Test("a local save between the engine's scan and its apply (here: the same unique key) makes it read that save and apply again")
    func saveDuringTheCycle() async throws {
        let shared = InMemorySyncHub()
        let hooked = HookedHub(shared)
        let a = try await Replica(hub: shared, unique: true)
        let b = try await Replica(hub: shared, unique: true)
        let bHooked = try SyncEngine(stack: b.stack, options: SyncOptions(hub: hooked))
        try a.insertCompany("from A", symbol: "ZZZ")
        try a.engine.syncNow()
        // B's engine has scanned and pushed (nothing) when it pulls A's insert; that pull saves B's own twin first.
        hooked.beforeFirstPull { try b.insertCompany("from B", symbol: "ZZZ") }
        try bHooked.syncNow()
        #expect(hooked.pulls >= 3, "the apply was tried again after reading the save (first pull, the pull again, the last empty one)")
        try a.engine.syncNow()
        let dump = try a.dump()
        #expect(try b.dump() == dump)
        #expect(dump.filter { $0.hasPrefix("Company:") }.count == 1, "\(dump)")
    }

    @Test("history the engine has not read is kept from the stack's purge; history another process purged is made up by sending every object again")
    func historyPurges() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub)
        let b = try await Replica(hub: hub)
        try a.insertCompany("Kept")
        try a.engine.syncNow()
        try a.update("Company", named: "Kept") { try $0.setValue(Int64(5), forKey: "employees") }
        #expect(try a.stack.purgeHistory(olderThan: .zero) >= 0)
        try a.engine.syncNow()
        let log = try hub.pull(after: 0, limit: 100).map(\.change)
        #expect(log.count == 2 && log.last?.kind == .update && log.last?.values == ["employees": .integer(5)],
                "the save after the last scan was kept and pushed as it was: \(log)")

        // Purged behind the stack's back (as another process would): every object goes again.
        try a.update("Company", named: "Kept") { try $0.setValue(Int64(6), forKey: "employees") }
        try a.update("Company", named: "Kept") { try $0.setValue("Still kept", forKey: "name") }
        let deleted = try a.stack.writerCoordinator.deleteHistory(.deleteHistory(before: Date().addingTimeInterval(1)))
        #expect(deleted >= 2)
        try a.engine.syncNow()
        try b.engine.syncNow()
        let dump = try b.dump()
        #expect(try a.dump() == dump)
        #expect(dump.contains { $0.hasPrefix("Company:Still kept employees=6") }, "\(dump)")
    }

    @Test("a replica whose model is not the hub's is refused, naming both versions; its saves stay and nothing is pushed")
    func modelVersionMismatch() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub)
        try a.engine.syncNow()
        let b = try await Replica(hub: hub, unique: true)
        try b.insertCompany("Other model")
        #expect {
            try b.engine.syncNow()
        } throws: { error in
            guard let error = error as? SyncError, error.code == .modelVersionMismatch else { return false }
            return error.message.contains(SyncEngineTests.model().versionChecksum) && error.message.contains(SyncEngineTests.model(unique: true).versionChecksum)
        }
        guard case .error(let error) = b.engine.status else {
            Issue.record("status is \(b.engine.status)")
            return
        }
        #expect(error.code == .modelVersionMismatch)
        #expect(try hub.pull(after: 0, limit: 10).isEmpty)
        #expect(try b.dump().contains { $0.hasPrefix("Company:Other model") })
    }

    @Test("started engines bring a save on one replica to the other's main context, which refreshes only the objects it shows")
    @MainActor
    func backgroundLoop() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub, pullInterval: .milliseconds(20))
        let b = try await Replica(hub: hub, pullInterval: .milliseconds(20))
        try a.save { context in
            for index in 0..<20 {
                let company = try SyncEngineTests.insert("Company", into: context)
                try company.setValue("C\(index)", forKey: "name")
            }
        }
        try a.engine.syncNow()
        try b.engine.syncNow()
        // B's screen shows one company (held, as a screen holds what it shows: a context keeps objects weakly).
        let shownObject = try b.object("Company", named: "C3", in: b.stack.mainContext)
        let shown = shownObject.objectID
        let importer = b.stack.importerContext()
        let hidden = try importer.performAndWait { try b.object("Company", named: "C5", in: importer).objectID }
        let (merges, arrivals) = AsyncStream<StackDidMerge>.makeStream()
        let observer = NotificationCenter.default.addObserver(forName: StackManager.didMergeNotification, object: b.stack, queue: nil) { notification in
            if let merge = try? StackDidMerge(notification) { arrivals.yield(merge) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        // The deadline: a merge that never comes fails the test rather than hanging it.
        let deadline = Task {
            try? await Task.sleep(for: .seconds(20))
            arrivals.finish()
        }
        defer { deadline.cancel() }
        a.engine.start()
        b.engine.start()
        defer {
            a.engine.stop()
            b.engine.stop()
        }
        // The hidden one first: by the time the merge that refreshes C3 arrives, C5's has been merged too.
        try a.update("Company", named: "C5") { try $0.setValue(Int64(55), forKey: "employees") }
        try a.update("Company", named: "C3") { try $0.setValue(Int64(77), forKey: "employees") }
        var refreshed = Set<ObjectID>()
        var seen: [String] = []
        for await merge in merges {
            seen.append("\(merge.source) inserted \(merge.save.insertedObjectIDs.count) updated \(merge.save.updatedObjectIDs.count) refreshed \(merge.refreshedObjectIDs.count)")
            refreshed.formUnion(merge.refreshedObjectIDs)
            // A merge's notification may arrive after the next merge already changed the object: wait for the one that refreshed it.
            if refreshed.contains(shown), Self.integer(try shownObject.value(forKey: "employees")) == 77 { break }
        }
        #expect(Self.integer(try shownObject.value(forKey: "employees")) == 77, "the main context of B shows A's save")
        #expect(refreshed.contains(shown), "merges: \(seen)")
        #expect(!refreshed.contains(hidden), "an object B's main context does not show is not refreshed")
        #expect(b.engine.status == .idle || b.engine.status == .pulling || b.engine.status == .pushing)
    }

    @Test("a delete that cascades, on the replica applying it, to an object only it had yet, is sent on: both replicas lose it")
    func cascadedDeletesTravel() async throws {
        let (_, a, b) = try await Self.twoReplicas(sharing: "Doomed")
        // Offline: A deletes the company; B hires someone into it.
        try a.save { context in context.delete(try a.object("Company", named: "Doomed", in: context)) }
        try b.save { context in
            let person = try SyncEngineTests.insert("Person", into: context)
            try person.setValue("Late hire", forKey: "name")
            try person.setValue(try b.object("Company", named: "Doomed", in: context), forKey: "employer")
        }
        try a.engine.syncNow()
        try b.engine.syncNow()   // pushes the hire, applies the delete: the cascade takes the hire here
        try a.engine.syncNow()   // the hire arrives without its company
        try b.engine.syncNow()   // B's next cycle reads the cascade in its own apply and sends the delete
        try a.engine.syncNow()
        let dump = try a.dump()
        #expect(try b.dump() == dump)
        #expect(dump.isEmpty, "\(dump)")
    }

    @Test("a fresh replica pulling, in one chunk, an object's insert, its delete and a reference to it made elsewhere meanwhile ends as the others do")
    func referenceToAnObjectDeletedInTheSameChunk() async throws {
        let (hub, a, b) = try await Self.twoReplicas(sharing: "Short-lived")
        try a.save { context in try SyncEngineTests.insert("Tag", into: context).setValue("t", forKey: "label") }
        try a.engine.syncNow()
        try b.engine.syncNow()
        // Offline: A deletes the company; B tags it.
        try a.save { context in context.delete(try a.object("Company", named: "Short-lived", in: context)) }
        try b.save { context in
            let company = try b.object("Company", named: "Short-lived", in: context)
            try company.setValue(Set([try b.object("Tag", named: "t", in: context)]), forKey: "tags")
        }
        try a.engine.syncNow()
        try b.engine.syncNow()
        try a.engine.syncNow()
        let c = try await Replica(hub: hub)
        try c.engine.syncNow()   // insert, delete and the tagging, all in one chunk
        let dump = try a.dump()
        #expect(try b.dump() == dump)
        #expect(try c.dump() == dump)
        #expect(dump == ["Tag:t companies=[] label=t"], "\(dump)")
        let summary = try #require(try SyncReplicaSummary.read(storeAt: c.folder.appendingPathComponent("Replica.sqlite")))
        #expect(summary.objects == 2 && summary.objectsWithoutRow == 1, "the deleted company has no row on C: \(summary)")
    }

    @Test("a unique key freed by a delete and taken again elsewhere is a new object, also for a replica pulling both in one chunk")
    func uniqueKeyTakenAgainAfterADelete() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub, unique: true)
        let b = try await Replica(hub: hub, unique: true)
        try a.insertCompany("first", symbol: "KEY")
        try a.engine.syncNow()
        try b.engine.syncNow()
        try a.save { context in context.delete(try a.object("Company", named: "first", in: context)) }
        try a.engine.syncNow()
        try b.engine.syncNow()
        try b.insertCompany("second", symbol: "KEY")
        try b.engine.syncNow()
        try a.engine.syncNow()
        let c = try await Replica(hub: hub, unique: true)
        try c.engine.syncNow()   // insert, delete and the second insert in one chunk
        let dump = try a.dump()
        #expect(try b.dump() == dump)
        #expect(try c.dump() == dump)
        #expect(dump.count == 1 && dump.first?.hasPrefix("Company:second") == true, "\(dump)")
    }

    @Test("a save of more changes than one ledger transaction records is recorded in parts and arrives whole, each change once")
    func largeTransaction() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub)
        let b = try await Replica(hub: hub)
        let count = SyncEngine.changesPerLedgerTransaction * 2 + 50
        try a.save { context in
            for index in 0..<count { try SyncEngineTests.insert("Tag", into: context).setValue("tag \(index)", forKey: "label") }
        }
        try a.engine.syncNow()
        try b.engine.syncNow()
        let log = try hub.pull(after: 0, limit: 10_000)
        #expect(log.count == count)
        #expect(Set(log.map(\.change.objectID)).count == count)
        #expect(try b.dump().count == count)
        let summary = try #require(try SyncReplicaSummary.read(storeAt: a.folder.appendingPathComponent("Replica.sqlite")))
        #expect(summary.recordedChanges == Int64(count) && summary.pendingChanges == 0)
    }

    @Test("a unique key's holder is decided in the hub's order: a local delete not yet pushed does not free it")
    func uniqueKeyHeldUntilTheDeleteReachesTheHub() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub, unique: true)
        let c = try await Replica(hub: hub, unique: true)
        try a.insertCompany("first", symbol: "KEY")
        try a.engine.syncNow()
        try a.save { context in context.delete(try a.object("Company", named: "first", in: context)) }   // not pushed yet
        try c.insertCompany("second", symbol: "KEY")
        try c.engine.syncNow()   // "second" reaches the hub after "first", and merges into it
        try a.engine.syncNow()   // A's delete goes out; "second" merges into "first" here too
        try c.engine.syncNow()
        let fresh = try await Replica(hub: hub, unique: true)
        try fresh.engine.syncNow()
        let dump = try a.dump()
        #expect(try c.dump() == dump)
        #expect(try fresh.dump() == dump)
        #expect(dump.isEmpty, "\(dump)")
    }
}

/// A hub that runs a test's code once, inside the engine's cycle, just before its first pull.
final class HookedHub: SyncHub, @unchecked Sendable {
    // @unchecked Sendable: `hook` and `pullCount` are guarded by `lock`.
    private let hub: InMemorySyncHub
    private let lock = NSLock()
    private var hook: (() throws -> Void)?
    private var pullCount = 0

    init(_ hub: InMemorySyncHub) { self.hub = hub }

    func beforeFirstPull(_ body: @escaping () throws -> Void) { lock.withLock { hook = body } }
    var pulls: Int { lock.withLock { pullCount } }

    func register(replica: UUID, modelVersion: String) throws -> SyncRegistration { try hub.register(replica: replica, modelVersion: modelVersion) }
    func push(_ changes: [SyncChange]) throws -> [Int64] { try hub.push(changes) }
    func acknowledge(replica: UUID, through sequence: Int64) throws { try hub.acknowledge(replica: replica, through: sequence) }
    func pull(after sequence: Int64, limit: Int) throws -> [SequencedChange] {
        let hook = lock.withLock { () -> (() throws -> Void)? in
            pullCount += 1
            defer { self.hook = nil }
            return self.hook
        }
        try hook?()
        return try hub.pull(after: sequence, limit: limit)
    }
}
