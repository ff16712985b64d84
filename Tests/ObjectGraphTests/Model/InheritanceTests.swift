import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Entity inheritance: abstract entities, subclass instances for subentities,
/// fetches with and without subentities, relationships into a hierarchy, and
/// the shared root table with `Z_ENT`.
@Suite struct InheritanceTests {
    private func seedVehicles(_ graph: GraphStack) throws -> (garage: ObjectID, cars: [ObjectID], truck: ObjectID) {
        let context = graph.context()
        return try context.performAndWait {
            let garage = Garage(context: context)
            garage.name = "north"
            let cars = ["C1", "C2"].map { plate -> Car in
                let car = Car(context: context)
                car.plate = plate
                car.seats = 2
                car.garage = garage
                return car
            }
            let truck = Truck(context: context)
            truck.plate = "T1"
            truck.load = 7.5
            truck.garage = garage
            try context.save()
            return (garage.objectID, cars.map(\.objectID), truck.objectID)
        }
    }

    @Test(arguments: allStoreTypes)
    func insertingAnAbstractEntityFailsTheSaveClearly(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        try context.performAndWait {
            let vehicle = Vehicle(context: context)
            vehicle.plate = "X"
            let error = #expect(throws: ObjectGraphError.self) { try context.save() }
            guard error?.code == .validationFailed, let problems = error?.validationErrors else {
                Issue.record("expected a validation failure, got \(String(describing: error))")
                return
            }
            #expect(problems.count == 1)
            #expect(problems.first?.objectID == vehicle.objectID)
            #expect(problems.first?.reason == "entity Vehicle is abstract: insert an object of Car or Truck instead")
            context.delete(vehicle)
            let car = Car(context: context)
            car.plate = "Y"
            try context.save()
        }
        #expect(try count("Vehicle", in: graph) == 1)
    }

    /// A typed fetch hands back the fetched objects themselves, whether they
    /// are of one class (the array is reinterpreted) or of several (each is
    /// cast); an object that is not of the requested class throws, also when
    /// the first ones are.
    @Test(arguments: allStoreTypes)
    func typedResultsOfOneClassOrOfSeveralAreTheObjectsAndAWrongClassThrows(type: StoreType) throws {
        let graph = try GraphStack(type)
        _ = try seedVehicles(graph)
        let context = graph.context()
        try context.performAndWait {
            var untyped = FetchRequest<ManagedObject>(entityName: "Vehicle")
            untyped.sortDescriptors = [FetchSort(key: "plate")]
            let objects = try context.fetch(untyped)
            #expect(objects.count == 3)

            var vehicles = FetchRequest<Vehicle>(entityName: "Vehicle")
            vehicles.sortDescriptors = untyped.sortDescriptors
            let mixed = try context.fetch(vehicles)
            #expect(zip(mixed, objects).allSatisfy { $0 === $1 } && mixed.count == 3)

            var cars = FetchRequest<Car>()
            cars.sortDescriptors = untyped.sortDescriptors
            var typed = try context.fetch(cars)
            #expect(typed.map(\.plate) == ["C1", "C2"])
            #expect(zip(typed, objects).allSatisfy { $0 === $1 })
            // The reinterpreted array is an array of cars like any other.
            typed.append(Car(context: context))
            typed.removeFirst()
            #expect(typed.map(\.seats) == [2, 4], "the second car, then the new one with its default")
            #expect(typed.allSatisfy { Swift.type(of: $0) == Car.self })
            context.rollback()

            // Cars first (sorted by plate), then a truck: not all of them are `Car`s.
            var wrong = FetchRequest<Car>(entityName: "Vehicle")
            wrong.sortDescriptors = untyped.sortDescriptors
            let error = #expect(throws: ObjectGraphError.self) { try context.fetch(wrong) }
            #expect(error?.code == .wrongResultType, "\(String(describing: error))")
            #expect(error?.message.contains("Truck") == true && error?.message.hasSuffix(", not Car") == true)
        }
    }

    @Test(arguments: allStoreTypes)
    func fetchesReturnSubclassInstancesWithOrWithoutSubentities(type: StoreType) throws {
        let graph = try GraphStack(type)
        let ids = try seedVehicles(graph)
        let context = graph.context()
        try context.performAndWait {
            var request = FetchRequest<Vehicle>(entityName: "Vehicle")
            request.sortDescriptors = [FetchSort(key: "plate")]
            let all = try context.fetch(request)
            #expect(all.map(\.plate) == ["C1", "C2", "T1"])
            #expect(all[0] is Car && all[1] is Car && all[2] is Truck)
            #expect((all[2] as? Truck)?.load == 7.5)
            #expect(all.map(\.objectID.entityName) == ["Car", "Car", "Truck"])

            request.includesSubentities = false
            #expect(try context.fetch(request).isEmpty, "the abstract entity has no objects of its own")
            var cars = FetchRequest<Car>()
            cars.includesSubentities = false
            #expect(try context.fetch(cars).count == 2)

            // Unsaved objects count with the same rules.
            let truck = Truck(context: context)
            truck.plate = "T2"
            #expect(try context.count(for: FetchRequest<Vehicle>(entityName: "Vehicle")) == 4)
            #expect(try context.count(for: FetchRequest<Truck>()) == 2)
            #expect(try context.count(for: cars) == 2)
            context.rollback()

            let garage = try #require(context.existingObject(with: ids.garage) as? Garage)
            let vehicles = garage.vehicles.sorted { $0.plate < $1.plate }
            #expect(vehicles.map { String(describing: Swift.type(of: $0)) } == ["Car", "Car", "Truck"])
            #expect(vehicles.allSatisfy { $0.garage === garage })
        }
    }

    @Test(arguments: allStoreTypes)
    func aToOneIntoAHierarchyKeepsTheSubentity(type: StoreType) throws {
        let graph = try GraphStack(type)
        let ids = try seedVehicles(graph)
        let context = graph.context()
        let permitID = try context.performAndWait {
            let permit = Permit(context: context)
            permit.number = 9
            permit.vehicle = try #require(context.existingObject(with: ids.truck) as? Vehicle)
            try context.save()
            return permit.objectID
        }
        let reader = graph.context()
        try reader.performAndWait {
            let permit = try #require(reader.existingObject(with: permitID) as? Permit)
            let vehicle = try #require(permit.vehicle)
            #expect(vehicle is Truck, "the fault has the subentity's class before it fires")
            #expect(vehicle.isFault)
            #expect(vehicle.plate == "T1")
        }
        if type == .sqlite {
            // ZVEHICLE plus Z<n>_VEHICLE, n = Vehicle's Z_ENT (20), holding Truck's Z_ENT (22).
            #expect(try RawStore.texts(graph.storeURL, "SELECT ZVEHICLE || ':' || Z20_VEHICLE FROM ZPERMIT") == ["\(ids.truck.primaryKey!):22"])
        }
    }

    @Test func subentitiesShareTheRootTableAndItsPrimaryKeys() throws {
        let graph = try GraphStack()
        let ids = try seedVehicles(graph)
        let url = graph.storeURL
        #expect(try RawStore.texts(url, "SELECT Z_ENT || ':' || Z_NAME || ':' || Z_SUPER FROM Z_PRIMARYKEY WHERE Z_ENT >= 20 ORDER BY Z_ENT")
                == ["20:Vehicle:0", "21:Car:20", "22:Truck:20"])
        #expect(try RawStore.texts(url, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT >= 20 ORDER BY Z_ENT") == ["3", "0", "0"])
        #expect(try RawStore.texts(url, "SELECT Z_ENT FROM ZVEHICLE ORDER BY ZPLATE") == ["21", "21", "22"])
        #expect(try RawStore.text(url, "SELECT name FROM sqlite_master WHERE name = 'ZVEHICLE_Z_ENT_INDEX'") == "ZVEHICLE_Z_ENT_INDEX")
        #expect(Set((ids.cars + [ids.truck]).compactMap(\.primaryKey)) == [1, 2, 3])
        #expect(try RawStore.text(url, "SELECT name FROM sqlite_master WHERE name = 'ZCAR'") == nil)
    }

    @Test(arguments: allStoreTypes)
    func deletingThroughTheAbstractEntitysRelationshipReachesEverySubentity(type: StoreType) throws {
        let graph = try GraphStack(type)
        let ids = try seedVehicles(graph)
        let context = graph.context()
        try context.performAndWait {
            let garage = try #require(context.existingObject(with: ids.garage) as? Garage)
            let truck = try #require(context.existingObject(with: ids.truck) as? Truck)
            context.delete(truck)
            #expect(garage.vehicles.count == 2)
            try context.save()
        }
        #expect(try count("Truck", in: graph) == 0)
        #expect(try count("Vehicle", in: graph) == 2)
    }

    private func count(_ entity: String, in graph: GraphStack) throws -> Int {
        let context = graph.context()
        return try context.performAndWait { try context.count(for: FetchRequest<ManagedObject>(entityName: entity)) }
    }

    // MARK: - Fixture

    /// CoreDataPlus's SampleModel: Car ← SportCar ← ExpensiveSportCar in one table
    /// (`ZCAR`, Z_ENT 1…3), and Person.cars into the hierarchy. Each car comes back
    /// as its own entity, and each person's cars are what SQLite holds.
    @Test func coreDataPlusThreeLevelHierarchyReadsAsSQLiteHoldsIt() throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("coredataplus-samplemodel/stores/SampleModel_V1.sqlite")
        let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url("coredataplus-samplemodel/SampleModel.xcdatamodeld/SampleModel.xcdatamodel"))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let names = ["1": "Car", "2": "SportCar", "3": "ExpensiveSportCar"]
        try context.performAndWait {
            for (entity, alone, all) in [("Car", 115, 125), ("SportCar", 5, 10), ("ExpensiveSportCar", 5, 5)] {
                var request = FetchRequest<ManagedObject>(entityName: entity)
                #expect(try context.count(for: request) == all, "\(entity) with subentities")
                request.includesSubentities = false
                #expect(try context.count(for: request) == alone, "\(entity) alone")
            }
            let people = try context.fetch(FetchRequest<ManagedObject>(entityName: "Person"))
            #expect(people.count > 0)
            var seen = 0
            for person in people {
                let cars = try #require(try person.value(forKey: "cars") as? Set<ManagedObject>)
                let expected = try RawStore.texts(url, "SELECT Z_PK || ':' || Z_ENT FROM ZCAR WHERE ZOWNER = \(person.objectID.primaryKey!)")
                    .map { row -> String in
                        let parts = row.split(separator: ":")
                        return "\(parts[0]):\(names[String(parts[1])] ?? "?")"
                    }
                #expect(cars.map { "\($0.objectID.primaryKey!):\($0.entity.name)" }.sorted() == expected.sorted())
                for car in cars { #expect(try car.value(forKey: "owner") as? ManagedObject === person) }
                seen += cars.count
            }
            #expect(seen == Int(try RawStore.int(url, "SELECT count(*) FROM ZCAR WHERE ZOWNER IS NOT NULL") ?? -1))
        }
    }
}
