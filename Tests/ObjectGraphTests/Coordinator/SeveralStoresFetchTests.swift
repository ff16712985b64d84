import Foundation
import Testing
import ObjectGraph
import DataStackStores

/// A coordinator whose stores each hold an entity runs a fetch on every one
/// and concatenates their answers; answers of two kinds cannot be combined,
/// and keeping one of them would drop the other's rows.
@Suite struct SeveralStoresFetchTests {
    /// An in-memory store that answers every fetch of objects with a count:
    /// a custom store's bug, made on purpose.
    final class CountingAnswerStore: PersistentStore {
        static let storeType = StoreType(rawValue: "CountingAnswer") { CountingAnswerStore(inner: InMemoryStore(configuration: $0)) }
        let inner: InMemoryStore
        init(inner: InMemoryStore) { self.inner = inner }

        var url: URL? { inner.url }
        var identifier: String { inner.identifier }
        var type: StoreType { Self.storeType }
        var configurationName: String? { inner.configurationName }
        var isReadOnly: Bool { inner.isReadOnly }
        var metadata: StoreMetadata { inner.metadata }
        func setMetadata(_ metadata: StoreMetadata) throws { try inner.setMetadata(metadata) }
        func loadMetadata() throws { try inner.loadMetadata() }
        func execute(_ request: StoreRequest, in context: ManagedObjectContext?) throws -> StoreResult {
            let result = try inner.execute(request, in: context)
            if case .nodes(let nodes) = result { return .count(nodes.count) }
            return result
        }
        func newValues(forObjectWith objectID: ObjectID, in context: ManagedObjectContext?) throws -> IncrementalStoreNode {
            try inner.newValues(forObjectWith: objectID, in: context)
        }
        func newValue(forRelationship relationship: RelationshipDescription, forObjectWith objectID: ObjectID,
                      in context: ManagedObjectContext?) throws -> PropertyValue {
            try inner.newValue(forRelationship: relationship, forObjectWith: objectID, in: context)
        }
        func obtainPermanentIDs(for objectIDs: [ObjectID]) throws -> [ObjectID] { try inner.obtainPermanentIDs(for: objectIDs) }
    }

    @Test func storesAnsweringTwoKindsOfResultFailTheFetchNamingBoth() throws {
        StoreType.register(CountingAnswerStore.storeType)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        // New objects go to the first store that holds their entity: this one.
        _ = try coordinator.addPersistentStore(type: .inMemory, at: nil)
        _ = try coordinator.addPersistentStore(type: CountingAnswerStore.storeType, at: nil)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "ACME"
            try context.save()
            #expect {
                try context.fetch(FetchRequest<ManagedObject>(entityName: "Company"))
            } throws: { error in
                guard let error = error as? PersistentStoreError else { return false }
                return error.code == .ioFailure && "\(error)".contains("a count") && "\(error)".contains("1 rows")
            }
            // A count is one kind from both: it adds up.
            #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Company")) == 1)
        }
    }
}
