import DataStack
import DataStackPostgreSQL
import Foundation
import ObjectGraph

/// DataStack on PostgreSQL as an import loop uses it: a coordinator with a
/// ``PostgreSQLStore``, a private-queue context, plain ``ManagedObject``s read
/// and written by key (`value(forKey:)`, `setValue(_:forKey:)`).
struct DataStackContender {
    let coordinator: PersistentStoreCoordinator
    let context: ManagedObjectContext

    /// The stack's defaults: history tracked, other writers' commits watched.
    static let historyOn = StoreOptions.stackDefaults

    /// Neither history nor watching.
    static var historyOff: StoreOptions {
        var options = StoreOptions.stackDefaults
        options.persistentHistoryTracking = false
        options.remoteChangeNotifications = false
        return options
    }

    /// A new coordinator (its own connection, an empty row cache) and a private-queue context on `url`.
    init(url: URL, options: StoreOptions = historyOn) throws {
        coordinator = PersistentStoreCoordinator(managedObjectModel: CompanyModel.make())
        try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url, options: options)
        context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
    }

    /// Removes the store, closing its connections (and its listener's).
    func close() throws {
        for store in coordinator.persistentStores { try coordinator.remove(store) }
    }

    private var entity: EntityDescription {
        get throws {
            guard let entity = coordinator.managedObjectModel.entitiesByName[CompanyModel.entityName] else {
                throw BenchError("the model has no \(CompanyModel.entityName)")
            }
            return entity
        }
    }

    /// Inserts the rows, saving and resetting the context after every `chunkSize` of them.
    func insert(_ rows: [CompanyValues], chunkSize: Int) throws {
        let entity = try entity
        try context.performAndWait {
            for start in stride(from: 0, to: rows.count, by: chunkSize) {
                for row in rows[start..<min(start + chunkSize, rows.count)] {
                    let company = ManagedObject(entity: entity, insertInto: context)
                    try company.setValue(row.symbol, forKey: "symbol")
                    try company.setValue(row.name, forKey: "name")
                    try company.setValue(row.employees, forKey: "employees")
                    try company.setValue(row.founded, forKey: "founded")
                    try company.setValue(row.price, forKey: "price")
                }
                try context.save()
                context.reset()
            }
        }
    }

    /// Every object fetched filled, its price raised by 1, saved every
    /// `chunkSize` objects (each save checks every row's version).
    func raiseEveryPrice(chunkSize: Int) throws {
        try context.performAndWait {
            var request = FetchRequest<ManagedObject>(entityName: CompanyModel.entityName)
            request.returnsObjectsAsFaults = false
            let companies = try context.fetch(request)
            for start in stride(from: 0, to: companies.count, by: chunkSize) {
                for company in companies[start..<min(start + chunkSize, companies.count)] {
                    guard let price = try company.value(forKey: "price") as? Double else { throw BenchError("a company without a price") }
                    try company.setValue(price + 1, forKey: "price")
                }
                try context.save()
            }
            context.reset()
        }
    }

    /// Every object, fetched filled (`returnsObjectsAsFaults = false`), every attribute read.
    func fetchAll() throws -> Checksum {
        try context.performAndWait {
            var request = FetchRequest<ManagedObject>(entityName: CompanyModel.entityName)
            request.returnsObjectsAsFaults = false
            var checksum = Checksum()
            for company in try context.fetch(request) { try Self.read(company, into: &checksum) }
            return checksum
        }
    }

    /// Every object as a fault, then every `stride`-th fired. With
    /// `includesPropertyValues` (the default) the fetch reads every row into the
    /// coordinator's row cache and faults fire from it; without, it reads IDs
    /// only and each fired fault is a query.
    func fetchFaultsThenFire(every stride: Int, includesPropertyValues: Bool) throws -> Checksum {
        try context.performAndWait {
            var request = FetchRequest<ManagedObject>(entityName: CompanyModel.entityName)
            request.includesPropertyValues = includesPropertyValues
            let companies = try context.fetch(request)
            var checksum = Checksum()
            for index in Swift.stride(from: 0, to: companies.count, by: stride) {
                try Self.read(companies[index], into: &checksum)
            }
            return checksum
        }
    }

    static func read(_ company: ManagedObject, into checksum: inout Checksum) throws {
        guard let symbol = try company.value(forKey: "symbol") as? String,
              let employees = integer(try company.value(forKey: "employees")),
              let price = try company.value(forKey: "price") as? Double else {
            throw BenchError("a company read back without its symbol, employees or price")
        }
        checksum.add(symbol: symbol, name: try company.value(forKey: "name") as? String, employees: employees,
                     founded: try company.value(forKey: "founded") as? Date, price: price)
    }

    /// An integer attribute's value, whichever integer type it comes back as.
    static func integer(_ value: Any?) -> Int? {
        switch value {
        case let value as Int: value
        case let value as Int64: Int(value)
        case let value as Int32: Int(value)
        default: nil
        }
    }
}
