import Testing
import DataStack

@Test func dataStackReexportsObjectGraph() {
    let model = ManagedObjectModel(entities: [EntityDescription(name: "Thing")])
    #expect(model.entitiesByName["Thing"] != nil)
}
