import Foundation
import Testing
@_spi(StoreImplementation) @testable import ObjectGraph

/// An ID is a scope (its entity and store, shared) and a key: the scopes are
/// shared as they should be, and they keep an entity exactly as long as an ID
/// needs it.
@Suite struct ObjectIDScopeTests {
    private let store = StoreIdentity.named("scope-tests")
    private let otherStore = StoreIdentity.named("scope-tests-other")

    @Test func oneScopePerEntityAndStore() throws {
        let model = TestModel.make()
        let company = try #require(model.entitiesByName["Company"])
        let update = try #require(model.entitiesByName["StockUpdate"])
        #expect(company.idScope(in: store) === company.idScope(in: store))
        #expect(company.idScope(in: store) !== company.idScope(in: otherStore))
        #expect(company.idScope(in: store) !== update.idScope(in: store))
        // IDs made either way share the scope, and are equal only with the same store, entity and key.
        let viaEntity = ObjectID(entity: company, store: store, primaryKey: 7)
        let viaScope = ObjectID(scope: company.idScope(in: store), primaryKey: 7)
        #expect(viaEntity == viaScope && viaEntity.hashValue == viaScope.hashValue)
        #expect(viaEntity != ObjectID(entity: company, store: otherStore, primaryKey: 7))
        #expect(viaEntity != ObjectID(entity: update, store: store, primaryKey: 7))
        #expect(viaEntity != ObjectID(entity: company, store: store, primaryKey: 8))
        #expect(viaEntity.entity === company && viaEntity.store === store && viaEntity.primaryKey == 7)
        // A temporary ID's scope has no store: never equal to a permanent ID with the same bits.
        let temporary = ObjectID.temporary(for: company)
        #expect(temporary.isTemporaryID && temporary.store == nil && temporary.primaryKey == nil)
        #expect(temporary != ObjectID(entity: company, store: store, primaryKey: Int64(bitPattern: temporary.rawKey)))
    }

    /// A store's cache gives each entity's one scope, whichever entity came last.
    @Test func theCacheOfAStoreGivesEachEntitysOneScope() throws {
        let model = TestModel.make()
        let company = try #require(model.entitiesByName["Company"])
        let update = try #require(model.entitiesByName["StockUpdate"])
        var cache = ObjectIDScopeCache(store: store)
        for entity in [company, company, update, company, update, update] {
            #expect(cache.scope(of: entity) === entity.idScope(in: store))
        }
        #expect(cache.objectID(of: update, primaryKey: 9) == ObjectID(entity: update, store: store, primaryKey: 9))
    }

    @Test func anIDKeepsItsEntityAfterTheModelGoesAndTheLastIDLetsItGo() throws {
        weak var weakEntity: EntityDescription?
        weak var weakModel: ManagedObjectModel?
        var ids: [ObjectID] = []
        do {
            let model = TestModel.make()
            weakModel = model
            let company = try #require(model.entitiesByName["Company"])
            weakEntity = company
            ids = [ObjectID(entity: company, store: store, primaryKey: 1), .temporary(for: company)]
        }
        #expect(weakModel == nil)
        // The IDs still name their entity, by the same name as before.
        #expect(ids.allSatisfy { $0.entity.name == "Company" })
        #expect(weakEntity != nil)
        // A copy of an ID made after the model went is still equal to it.
        let again = ObjectID(entity: ids[0].entity, store: store, primaryKey: 1)
        #expect(again == ids[0] && again.hashValue == ids[0].hashValue)
    }

    @Test func theEntityIsFreedWithTheLastIDThatNamesIt() throws {
        weak var weakEntity: EntityDescription?
        do {
            var ids: [ObjectID] = []
            do {
                let model = TestModel.make()
                let company = try #require(model.entitiesByName["Company"])
                weakEntity = company
                ids = [ObjectID(entity: company, store: store, primaryKey: 1), .temporary(for: company)]
            }
            #expect(weakEntity != nil)
            ids.removeAll()
        }
        #expect(weakEntity == nil, "an entity and its scopes hold each other only while the model lives")
    }
}
