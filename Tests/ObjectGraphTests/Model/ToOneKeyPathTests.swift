import Foundation
@testable import ObjectGraph
import Testing

/// Key paths through to-one relationships: checked once against the model,
/// then followed alike in SQL, over unsaved objects, and in the in-memory store.
@Suite struct ToOneKeyPathTests {
    private let model = GraphTestModel.make()

    @Test func aPathResolvesThroughAnInheritedToOneToTheDestinationsProperty() throws {
        let car = try #require(model.entitiesByName["Car"])
        let path = try ToOneKeyPath(["garage", "name"], from: car)
        #expect(path.properties.map(\.name) == ["garage", "name"])
        #expect(path.entities.map(\.name) == ["Car", "Garage"])
        #expect(path.property.name == "name")
        #expect(path.key == "garage.name")
    }

    @Test(arguments: [
        ([String](), "", "Permit"),
        (["vehicle", "colour"], "colour", "Vehicle"),
        (["nope"], "nope", "Permit"),
        (["number", "plate"], "number.plate", "Permit"),
    ])
    func aPathThatLeadsNowhereIsRefusedNamingWhereItStops(keyPath: [String], named: String, on entityName: String) throws {
        let permit = try #require(model.entitiesByName["Permit"])
        let error = #expect(throws: ObjectGraphError.self) { try ToOneKeyPath(keyPath, from: permit) }
        #expect(error?.code == .unknownKey, "\(String(describing: error))")
        #expect(error?.key == named)
        #expect(error?.entityName == entityName)
    }

    @Test func aPathThroughAToManyIsRefusedNamingTheWholePath() throws {
        let garage = try #require(model.entitiesByName["Garage"])
        let error = #expect(throws: ObjectGraphError.self) { try ToOneKeyPath(["vehicles", "plate"], from: garage) }
        #expect(error == .unknownKey("vehicles.plate", entity: "Garage"))
    }

    /// Saved permits are sorted by SQL; with an unsaved one the context sorts
    /// them all in memory. Both orders must be the same, through vehicles of
    /// two subentities and a permit without a vehicle.
    @Test(arguments: allStoreTypes)
    func aSortThroughAToOneOrdersTheSameInSQLAndOverUnsavedObjects(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        try context.performAndWait {
            for (number, plate) in [(1, "M"), (2, "B"), (3, nil), (4, "X")] as [(Int, String?)] {
                let permit = Permit(context: context)
                permit.number = number
                if let plate {
                    let vehicle: Vehicle = number.isMultiple(of: 2) ? Car(context: context) : Truck(context: context)
                    vehicle.plate = plate
                    permit.vehicle = vehicle
                }
            }
            try context.save()
            var request = FetchRequest<Permit>(entityName: "Permit")
            request.sortDescriptors = [FetchSort(key: "vehicle.plate", ascending: false)]
            #expect(try context.fetch(request).map(\.number) == [4, 1, 2, 3])

            let pending = Permit(context: context)
            pending.number = 5
            let truck = Truck(context: context)
            truck.plate = "P"
            pending.vehicle = truck
            #expect(try context.fetch(request).map(\.number) == [4, 5, 1, 2, 3])
            request.sortDescriptors = [FetchSort(key: "vehicle.plate")]
            request.fetchLimit = 2
            #expect(try context.fetch(request).map(\.number) == [3, 2], "nil first, then B")

            request.sortDescriptors = [FetchSort(key: "vehicle.colour")]
            #expect(throws: ObjectGraphError.self) { try context.fetch(request) }
        }
    }
}
