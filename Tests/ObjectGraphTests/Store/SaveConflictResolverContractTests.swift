import Foundation
import DataStackSQLite
import ObjectGraph
import Testing
import DataStackStores

/// The store side of the `SaveConflictResolver` contract, run against every
/// store here — SQLite, in-memory, and a store written against the public API
/// only (`JSONFileStore`): a store hands the conflicts it meets to the
/// request's resolver, inside its write transaction, with the rows as they are
/// now, and writes what the resolver answers, or nothing when it throws.
/// (The PostgreSQL package runs the same checks against its store.)
@Suite struct SaveConflictResolverContractTests {
    static let stores: [StoreType] = allStoreTypes + [JSONFileStore.storeType]

    /// A resolver that keeps what it was given and answers as the test says.
    final class RecordingResolver: SaveConflictResolver, @unchecked Sendable {
        // @unchecked Sendable: a store calls it on the thread of the save the
        // test runs, before that save returns; the test reads it after.
        private(set) var received: [SaveConflicts] = []
        private let answer: (SaveConflicts) throws -> SaveChangesRequest

        init(_ answer: @escaping (SaveConflicts) throws -> SaveChangesRequest) { self.answer = answer }

        func resolve(_ conflicts: SaveConflicts) throws -> SaveChangesRequest {
            received.append(conflicts)
            return try answer(conflicts)
        }
    }

    struct Refusal: Error, Equatable {}

    /// A store holding listing ACME at price 1, and the row as read then (version 1).
    private func storeWithAListing(_ type: StoreType) throws -> (graph: GraphStack, store: any PersistentStore, read: IncrementalStoreNode) {
        let graph = try GraphStack(type)
        let id = try graph.saveListings([("ACME", 1)])[0]
        let store = try #require(graph.coordinator.persistentStores.first)
        return (graph, store, try store.newValues(forObjectWith: id, in: nil))
    }

    /// Another writer changes the listing's price: its row goes to version 2.
    private func movePrice(of id: ObjectID, to price: Double, in graph: GraphStack) throws {
        let other = graph.context()
        try other.performAndWait {
            try #require(try other.existingObject(with: id) as? Listing).price = price
            try other.save()
        }
    }

    private func slot(_ key: String, of node: IncrementalStoreNode) throws -> Int {
        try #require(node.objectID.entity.propertiesByName[key]).index
    }

    /// A new listing's row, as a context would send it.
    private func newListing(_ symbol: String, price: Double, like node: IncrementalStoreNode) throws -> IncrementalStoreNode {
        var values = ContiguousArray(repeating: PropertyValue.null, count: node.values.count)
        values[try slot("symbol", of: node)] = .string(symbol)
        values[try slot("price", of: node)] = .double(price)
        return IncrementalStoreNode(objectID: .temporary(for: node.objectID.entity), values: values, version: 0)
    }

    @Test(arguments: stores)
    func aStaleUpdateGoesToTheResolverWithTheStoresRowAndItsAnswerIsWritten(type: StoreType) throws {
        let (graph, store, read) = try storeWithAListing(type)
        let id = read.objectID
        try movePrice(of: id, to: 2, in: graph)
        var mine = read
        mine.values[try slot("name", of: read)] = .string("mine")
        let newcomer = try newListing("NEW", price: 5, like: read)
        let resolver = RecordingResolver { conflicts in
            // Merged by hand: this save's name over the store's row as it is now.
            var merged = try #require(conflicts.currentRows[id])
            merged.values[try slot("name", of: merged)] = .string("mine")
            return SaveChangesRequest(insertedObjects: [newcomer], updatedObjects: [merged])
        }
        let request = SaveChangesRequest(insertedObjects: [newcomer], updatedObjects: [mine], conflictResolver: resolver)
        guard case .saved(let result) = try store.execute(.save(request), in: nil) else {
            Issue.record("a save answers with its result")
            return
        }

        #expect(resolver.received.count == 1)
        let received = try #require(resolver.received.first)
        #expect(received.versionConflicts == [MergeConflict(objectID: id, objectSnapshotVersion: 1, persistedSnapshotVersion: 2)])
        #expect(received.uniquenessConflicts.isEmpty)
        #expect(received.currentRows[id]?.version == 2)
        #expect(received.currentRows[id]?.values[try slot("price", of: read)] == .double(2), "the other writer's price")
        let stored = try store.newValues(forObjectWith: id, in: nil)
        #expect(stored.version == 3)
        #expect(stored.values[try slot("name", of: read)] == .string("mine"))
        #expect(stored.values[try slot("price", of: read)] == .double(2))
        #expect(result.permanentIDs[newcomer.objectID] != nil, "the inserted object of the answer got its ID")
        #expect(try graph.prices() == ["ACME": 2, "NEW": 5])
    }

    @Test(arguments: stores)
    func aResolverThatThrowsLeavesTheStoreAsItWas(type: StoreType) throws {
        let (graph, store, read) = try storeWithAListing(type)
        try movePrice(of: read.objectID, to: 2, in: graph)
        let before = try graph.rows()
        let resolver = RecordingResolver { _ in throw Refusal() }
        let request = SaveChangesRequest(insertedObjects: [try newListing("NEW", price: 5, like: read)], updatedObjects: [read],
                                         conflictResolver: resolver)
        #expect(throws: Refusal()) { try store.execute(.save(request), in: nil) }
        #expect(resolver.received.count == 1)
        #expect(try graph.rows() == before, "neither the insert nor the update was written")
    }

    @Test(arguments: stores)
    func withoutAResolverTheConflictIsTheSavesError(type: StoreType) throws {
        let (graph, store, read) = try storeWithAListing(type)
        try movePrice(of: read.objectID, to: 2, in: graph)
        let before = try graph.rows()
        let request = SaveChangesRequest(insertedObjects: [try newListing("NEW", price: 5, like: read)], updatedObjects: [read])
        #expect(throws: ObjectGraphError.mergeConflict([MergeConflict(objectID: read.objectID, objectSnapshotVersion: 1, persistedSnapshotVersion: 2)])) {
            try store.execute(.save(request), in: nil)
        }
        #expect(try graph.rows() == before)
    }

    @Test(arguments: stores)
    func aRowDeletedElsewhereIsMissingFromTheCurrentRows(type: StoreType) throws {
        let (graph, store, read) = try storeWithAListing(type)
        let other = graph.context()
        try other.performAndWait {
            other.delete(try other.existingObject(with: read.objectID))
            try other.save()
        }
        let resolver = RecordingResolver { _ in SaveChangesRequest() }
        _ = try store.execute(.save(SaveChangesRequest(deletedObjects: [read], conflictResolver: resolver)), in: nil)
        let received = try #require(resolver.received.first)
        #expect(received.versionConflicts.map(\.persistedSnapshotVersion) == [nil])
        #expect(received.currentRows.isEmpty)
        #expect(try graph.count("Listing") == 0)
    }

    /// Stores that keep uniqueness constraints themselves (a unique index) refuse a duplicate row.
    @Test(arguments: allStoreTypes)
    func aRowAUniquenessConstraintRefusesGoesToTheResolver(type: StoreType) throws {
        let (graph, store, read) = try storeWithAListing(type)
        let resolver = RecordingResolver { _ in
            // The newcomer merged into the stored row, as object trump would.
            var merged = try store.newValues(forObjectWith: read.objectID, in: nil)
            merged.values[try slot("price", of: merged)] = .double(9)
            return SaveChangesRequest(updatedObjects: [merged])
        }
        let duplicate = try newListing("ACME", price: 9, like: read)
        _ = try store.execute(.save(SaveChangesRequest(insertedObjects: [duplicate], conflictResolver: resolver)), in: nil)
        let received = try #require(resolver.received.first)
        #expect(received.versionConflicts.isEmpty)
        #expect(received.uniquenessConflicts.map(\.entityName) == ["Listing"])
        #expect(received.uniquenessConflicts.first?.constraint == ["symbol"])
        #expect(try graph.prices() == ["ACME": 9], "one row per key, with the answer's price")
    }

    /// The resolver runs inside the write transaction: no other connection can
    /// start writing until the save that called it ends.
    @Test func theSQLiteStoreCallsTheResolverInsideItsWriteTransaction() throws {
        let (graph, store, read) = try storeWithAListing(.sqlite)
        try movePrice(of: read.objectID, to: 2, in: graph)
        var configuration = Connection.Configuration()
        configuration.busyMode = .immediateError
        let other = try Connection(path: graph.storeURL.path, configuration: configuration)
        let resolver = RecordingResolver { conflicts in
            #expect(throws: SQLiteError.self, "the save holds the write lock") { try other.execute("BEGIN IMMEDIATE") }
            return SaveChangesRequest(updatedObjects: Array(conflicts.currentRows.values))
        }
        _ = try store.execute(.save(SaveChangesRequest(updatedObjects: [read], conflictResolver: resolver)), in: nil)
        #expect(resolver.received.count == 1)
        try other.execute("BEGIN IMMEDIATE; COMMIT")
    }
}
