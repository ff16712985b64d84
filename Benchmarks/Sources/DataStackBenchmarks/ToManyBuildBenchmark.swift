import DataStack
import Foundation

/// Task `tomany-build` (issue #18): one company's to-many of n updates built
/// through the inverse, `update.company = company` n times in one context,
/// for n, 2n and 4n; then the save. Linear work shows as a time ratio of
/// about 2 from one size to the next (each setting of the inverse used to
/// copy and scan the company's whole list: a ratio of about 4).
///
/// Two owners: a company inserted in the same context, and a saved company
/// fetched and its `updates` read first (the to-many loaded from the store).
enum ToManyBuildBenchmark {
    struct Row: Sendable {
        var owner: String
        var updates: Int
        var build: Duration
        var save: Duration
    }

    static func run(sizes: [Int], repetitions: Int) throws -> [Row] {
        var rows: [Row] = []
        for fetchedOwner in [false, true] {
            for size in sizes {
                var best = Row(owner: fetchedOwner ? "fetched company, updates read" : "new company", updates: size,
                               build: .seconds(1_000_000), save: .seconds(1_000_000))
                for _ in 0..<repetitions {
                    let (build, save) = try measure(size, fetchedOwner: fetchedOwner)
                    best.build = min(best.build, build)
                    best.save = min(best.save, save)
                }
                rows.append(best)
            }
        }
        return rows
    }

    /// The time to relate `count` new updates to one company, and to save them.
    private static func measure(_ count: Int, fetchedOwner: Bool) throws -> (build: Duration, save: Duration) {
        let directory = ScratchDirectory("tomany-build")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: ToManyPredicateBenchmark.model())
        try coordinator.addPersistentStore(type: .sqlite, at: directory.file("ToManyBuild.sqlite"))
        guard let companyEntity = coordinator.managedObjectModel.entitiesByName["Company"],
              let updateEntity = coordinator.managedObjectModel.entitiesByName["Update"] else {
            throw BenchError("tomany-build: the model lacks Company or Update")
        }
        var companyID: ObjectID?
        if fetchedOwner {
            let seeding = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            companyID = try seeding.performAndWait {
                let company = ManagedObject(entity: companyEntity, insertInto: seeding)
                try company.setValue("ACME", forKey: "symbol")
                try seeding.save()
                return company.objectID
            }
        }
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        return try context.performAndWait {
            let company: ManagedObject
            if let companyID {
                company = try context.existingObject(with: companyID)
                guard let updates = try company.value(forKey: "updates") as? Set<ManagedObject>, updates.isEmpty else {
                    throw BenchError("tomany-build: the fetched company's updates did not read as an empty set")
                }
            } else {
                company = ManagedObject(entity: companyEntity, insertInto: context)
                try company.setValue("ACME", forKey: "symbol")
            }
            let start = ContinuousClock.now
            for number in 0..<count {
                let update = ManagedObject(entity: updateEntity, insertInto: context)
                try update.setValue(Double(number), forKey: "price")
                try update.setValue(company, forKey: "company")
            }
            let built = ContinuousClock.now
            guard let members = try company.value(forKey: "updates") as? Set<ManagedObject>, members.count == count else {
                throw BenchError("tomany-build: the company does not hold the \(count) updates")
            }
            let saving = ContinuousClock.now
            try context.save()
            return (built - start, ContinuousClock.now - saving)
        }
    }
}
